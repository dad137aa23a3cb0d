//! The connection's side of parity: a numbered packet joining its path's group (and the
//! parity that completes it), and on arrival the packets kept and a parity that makes one
//! again.

use mpt_core::seal::TAG_LEN;
use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::Time;
use mpt_reseq::PacketMeta;

use crate::{Connection, Datagram, DropReason, Incoming, TransmitKind};

/// Parity as packets are numbered.
impl<P> Connection<P> {
    /// A data datagram with `header` and inner `packet` was numbered on its path: it joins
    /// the path's parity group, and a group complete is summed into a parity, to leave after
    /// it.
    pub(crate) fn parity_add(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        packet: &[u8],
    ) -> Option<Datagram> {
        let i = header.path.index();
        if self.paths[i].fec_tx.k == 0 || !self.parity() {
            return None;
        }
        let crate::Group {
            first,
            k,
            seqs,
            lens,
            sum,
        } = self.paths[i]
            .fec_tx
            .add(now, header.path_seq, header.seq, packet)?;
        let session = self.peer_session?;
        // a peer of version 4 takes the group's size alone
        let lens = if self.caps.parity_carries_lengths() {
            lens
        } else {
            0
        };
        let h = HeaderRepr {
            kind: Kind::Parity,
            path: header.path,
            path_seq: first,
            session,
            seq: seqs,
            timestamp: k as u32 | u32::from(lens) << 16,
        };
        let prefix = self.prefix();
        let mut buf = Vec::with_capacity(prefix + sum.len() + TAG_LEN);
        buf.resize(prefix, 0);
        buf.extend_from_slice(&sum);
        let contents = self.seal_owned(&h, buf, sum.len())?;
        let destination = self.remote(header.path)?;
        let cost = contents.len() + self.cfg.paths[i].overhead;
        self.sched.on_control_sent(now, header.path, cost);
        let c = self.resend.counts_mut(i, self.paths.len());
        c.parity_sent += 1;
        c.parity_bytes += cost as u64;
        Some(Datagram {
            path: header.path,
            destination,
            kind: TransmitKind::Data,
            contents,
        })
    }

    /// The whole packets of a data, bundle or continued datagram with `header` and plain
    /// `body` join the path's parity group (in the order of their path sequences); the
    /// parities they complete go in `out`, to leave after the datagram.
    pub(crate) fn parity_entries(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        body: &[u8],
        out: &mut Vec<Datagram>,
    ) {
        // a head piece is not a whole packet: the group it falls in has no parity
        crate::resend::whole_packets(header, body, |path_seq, seq, packet| {
            let h = HeaderRepr {
                path_seq,
                seq,
                ..*header
            };
            out.extend(self.parity_add(now, &h, packet));
        });
    }
}

/// Parity on arrival: packets kept while their path carries parity, and a parity that
/// makes one again.
impl<P> Connection<P> {
    /// A data or express datagram arrived on `path`: kept while the path carries parity.
    pub(crate) fn parity_keep(&mut self, now: Time, meta: &PacketMeta, packet: &[u8]) {
        let rx = &mut self.paths[meta.path.index()].fec_rx;
        if rx.active(now) {
            rx.keep(meta.path_seq, meta.seq, packet);
        }
    }

    /// A parity over `k` packets arrived with `header`, their XOR `body`: a packet it makes
    /// again goes to the resequencer, and its gap, if the resequencer has not seen it yet
    /// (the group's last packet), is not asked for.
    pub(crate) fn take_parity(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        body: &[u8],
        k: usize,
    ) -> Result<(), DropReason> {
        if !self.parity() {
            return Err(self.count(DropReason::Unexpected));
        }
        let rx = &mut self.paths[header.path.index()].fec_rx;
        let Some((seq, path_seq, packet)) = rx.take_parity(
            now,
            (header, k, self.caps.parity_carries_lengths()),
            body,
            &mut self.counts.parity,
        ) else {
            return Ok(());
        };
        let meta = PacketMeta {
            path: header.path,
            seq,
            path_seq,
            sent_us: now.wire_micros(),
            len: packet.len(),
        };
        let incoming = Incoming {
            meta,
            packet: 0..packet.len(),
            express: false,
            resent: true,
            opens: false,
            pieces: false,
        };
        self.assembled.push_back((incoming, packet));
        Ok(())
    }
}
