//! Parity as packets are numbered ([`ParityTx`]): a packet joining its path's parity group
//! ([`crate::fec`]), and the parity that completes it, sealed to leave after it.

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::Time;

use crate::out::{Built, Out};
use crate::resend::Resend;
use crate::Datagram;

/// What a numbered packet's parity needs: the way out, and the resend counts its parities
/// are counted in.
pub(crate) struct ParityTx<'a> {
    pub(crate) out: Out<'a>,
    pub(crate) resend: &'a mut Resend,
}

impl ParityTx<'_> {
    /// A data datagram with `header` and inner `packet` was numbered on its path: it joins
    /// the path's parity group, and a group complete is summed into a parity, to leave after
    /// it.
    pub(crate) fn add(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        packet: &[u8],
    ) -> Option<Datagram> {
        let i = header.path.index();
        if self.out.paths[i].fec_tx.k == 0 {
            return None;
        }
        let crate::Group {
            first,
            k,
            seqs,
            lens,
            sum,
        } = self.out.paths[i]
            .fec_tx
            .add(now, header.path_seq, header.seq, packet)?;
        let session = &self.out.session;
        // a peer of version 4 takes the group's size alone
        let lens = if session.caps.parity_carries_lengths() {
            lens
        } else {
            0
        };
        let h = HeaderRepr {
            kind: Kind::Parity,
            path: header.path,
            path_seq: first,
            session: session.theirs?,
            seq: seqs,
            timestamp: k as u32 | u32::from(lens) << 16,
        };
        let mut buf = session.buffer(sum.len());
        buf.extend_from_slice(&sum);
        let Built { datagram, cost } = self.out.send(now, &h, buf, sum.len())?;
        let c = self.resend.counts_mut(i, self.out.paths.len());
        c.parity_sent += 1;
        c.parity_bytes += cost as u64;
        Some(datagram)
    }

    /// The whole packets of a data, bundle or continued datagram with `header` and plain
    /// `body` join the path's parity group (in the order of their path sequences); the
    /// parities they complete go in `out`, to leave after the datagram.
    pub(crate) fn entries(
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
            out.extend(self.add(now, &h, packet));
        });
    }
}
