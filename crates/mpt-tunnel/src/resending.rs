//! Resending as the sender does it ([`crate::resend`]): the peer asks for packets, and each
//! one still kept goes again, once, on the path where it arrives soonest; what is sent is kept
//! for that.

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::{PathId, Time};

use crate::out::Built;
use crate::pending::Pending;
use crate::sending::Sending;

/// The sender's half of resending.
impl Sending<'_> {
    /// The sender's half: the peer asks for the packets `ranges` name. Each one still kept
    /// goes again, once, on the path where it arrives soonest.
    pub(crate) fn take_nack(
        &mut self,
        now: Time,
        ranges: impl Iterator<Item = mpt_core::wire::NackRange>,
    ) {
        let Some(session) = self.session.theirs else {
            return;
        };
        for r in ranges {
            let lost = r.path.index();
            if lost >= self.paths.len() {
                continue;
            }
            self.paths[lost].keep_until = Some(now + crate::resend::KEEP_AFTER_LOSS);
            for k in 0..u16::from(r.count) {
                self.resend_one(now, session, r.path, r.first.wrapping_add(k));
            }
        }
    }

    /// The peer asks for the flows' references `references` names by their global sequence
    /// numbers: it got packets compressed against them, and not them. Each is forgotten (the
    /// flow's next packet goes whole as its new one), and goes again if it is still kept
    /// ([`crate::hc::AWAIT_FOR`]), as a reference asked for by its path sequence does.
    pub(crate) fn take_reference_nack(&mut self, now: Time, references: impl Iterator<Item = u32>) {
        let Some(session) = self.session.theirs else {
            return;
        };
        for seq in references {
            self.tx.hc.forget(seq);
            if let Some((path, path_seq)) = self.resend.buffer.reference_sent(seq) {
                if path.index() < self.paths.len() {
                    self.resend_one(now, session, path, path_seq);
                }
            }
        }
    }

    /// The packet sent on `path` as `path_seq` was asked for: it goes again, once, on the
    /// path where it arrives soonest, if it is still kept.
    fn resend_one(&mut self, now: Time, session: u32, path: PathId, path_seq: u16) {
        let max_age = crate::resend::MaxAge {
            packet: self.cfg.reorder_timeout,
            reference: crate::hc::AWAIT_FOR,
        };
        let n = self.paths.len();
        let lost = path.index();
        // not on the path light traffic keeps short, while another path is up: a burst of
        // resends there is a queue the light stream waits behind
        let kept = self.tx.classes.kept_path(now);
        self.resend.counts_mut(lost, n).requested += 1;
        // a reference asked for is forgotten: the flow's next packet goes whole as its new
        // one, so that what the flow sends from now on does not hang on this one's resend
        // coming (a slow flow, as TCP's retransmissions after a timeout, would send its next
        // 63 packets against it)
        if let Some(seq) = self.resend.buffer.seq_of(path, path_seq) {
            self.tx.hc.forget(seq);
        }
        let prefix = self.prefix();
        let Some((seq, reference, buf)) = self
            .resend
            .buffer
            .take(path, path_seq, now, max_age)
            .map(|(seq, reference, packet)| {
                let mut buf = Vec::with_capacity(prefix + packet.len() + mpt_core::seal::TAG_LEN);
                buf.resize(prefix, 0);
                buf.extend_from_slice(packet);
                (seq, reference, buf)
            })
        else {
            self.resend.counts_mut(lost, n).missed += 1;
            return;
        };
        // on a path the packet fits whole (one first sent in pieces may not); a datagram
        // larger than every path surely carries, lost on its path, may have met a black hole
        // there (a path MTU that dropped, not noticed yet): on another path, if one fits it,
        // or it is lost again, and with it every packet compressed against it
        let len = buf.len() - prefix;
        let fits = |p: PathId| self.body_cap(p.index()) >= len;
        let big = len + self.cfg.overhead().datagram() > crate::BASE_DATAGRAM;
        let elsewhere = |p: PathId| !big || p != path;
        let Some(via) = self
            .soonest_where(now, |p| Some(p) != kept && fits(p) && elsewhere(p))
            .or_else(|| self.soonest_where(now, |p| fits(p) && elsewhere(p)))
            .or_else(|| self.soonest_where(now, |p| Some(p) != kept && fits(p)))
            .or_else(|| self.soonest_where(now, fits))
        else {
            self.resend.counts_mut(lost, n).missed += 1;
            return;
        };
        // a reference goes again on two paths: the packets compressed against it wait for it,
        // and a resend lost is not asked for again (where one path's queue overflowed, the
        // others' often do too)
        let copy = if reference {
            self.soonest_where(now, |p| p != via && fits(p))
                .map(|other| (other, buf.clone()))
        } else {
            None
        };
        let r = Resent { session, seq, lost };
        self.send_resent(now, via, r, buf);
        if let Some((other, buf)) = copy {
            self.send_resent(now, other, r, buf);
        }
    }

    /// Send packet `r.seq` again on `via`, as resent data: `buf` holds it after
    /// [`Connection::prefix`] bytes of room. Counted for path `r.lost`, which lost it.
    fn send_resent(&mut self, now: Time, via: PathId, r: Resent, buf: Vec<u8>) {
        let Resent { session, seq, lost } = r;
        let prefix = self.prefix();
        let header = HeaderRepr {
            kind: Kind::Resent,
            path: via,
            // not a number of the path's: its next, not taken
            path_seq: self.paths[via.index()].path_seq,
            session,
            seq,
            timestamp: now.wire_micros(),
        };
        let body = buf.len() - prefix;
        let Some(Built { datagram, cost }) = self.out().send(now, &header, buf, body) else {
            return;
        };
        let n = self.paths.len();
        let c = self.resend.counts_mut(lost, n);
        c.resent += 1;
        c.resent_bytes += cost as u64;
        self.outbox.pending.push_back(Pending::Raw(datagram));
    }

    /// Keep the whole packets of a data, bundle or continued datagram with `header` and plain
    /// `body` for resending (not a continuation or a head piece: a packet in pieces is kept
    /// whole where it is cut, in [`Sending::bundle_packet`]); on a path that lost nothing
    /// lately, the flows' references among them only.
    pub(crate) fn keep_bundled(&mut self, now: Time, header: &HeaderRepr, body: &[u8]) {
        let all = self.keeps(header.path.index(), now);
        if !all && !self.compressing() {
            return;
        }
        let path = header.path;
        let hc = &self.tx.hc;
        let buffer = &mut self.resend.buffer;
        crate::resend::whole_packets(header, body, |path_seq, seq, packet| {
            // references on every path, as in [`Connection::number_batch`]
            let reference = hc.is_reference(seq, packet);
            if all || reference {
                buffer.keep(path, path_seq, seq, now, packet, reference)
            }
        });
    }
}

/// A packet sent again: in which session, its global sequence, and the path that lost it.
#[derive(Debug, Clone, Copy)]
struct Resent {
    session: u32,
    seq: u32,
    lost: usize,
}
