//! Bundling as packets are numbered ([`crate::bundle`]): a small packet waits for a busy
//! path in its open bundle, a packet too large goes in pieces, and bundles are sealed and
//! released as they fill or fall due.

use std::time::Duration;

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::wire::{BUNDLE_ENTRY_LEN, CONTINUATION_LEN};
use mpt_core::{PathId, Time};

use crate::bundle::{Closed, How, OpenBundle, Room, Times};
use crate::bundle::{BUNDLE_MARGIN, BUNDLE_MAX_HOLD, BUNDLE_MIN_WAIT};
use crate::path::PathState;
use crate::pending::Pending;
use crate::sending::Sending;
use crate::{Datagram, DropReason, TransmitKind};

/// The paths a batch being numbered uses, one bit each: all of them (`used`: their fences
/// hold until it has left), those with datagrams in the batch's own buffers (`inbuf`), and
/// those where something numbered in the batch leaves after it (`tail`: a bundle the batch
/// closed after the path had datagrams in it), so that what is numbered next on them leaves
/// after it too and each path's datagrams leave in the order of their path sequences.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BatchPaths {
    pub(crate) used: u64,
    pub(crate) inbuf: u64,
    pub(crate) tail: u64,
}

/// Bundling ([`crate::bundle`]): small packets wait for a busy path, and a packet too large
/// goes in pieces.
impl Sending<'_> {
    /// Bundle the inner packet `packet`, which the scheduler put on `path`, if its path is
    /// busy (or a bundle is open there already), or put it in pieces if it is larger than a
    /// datagram on the path carries: numbered, accounted and held. `used` is the batch's
    /// paths, which a full bundle joins to leave with the batch. Returns whether the packet
    /// was taken.
    ///
    /// A packet in pieces fills the path's open bundle (or a new one) with its head piece;
    /// each full datagram leaves with the batch, and the last piece opens the next, which the
    /// packets after it fill up. That last datagram is held as a bundle would be while the
    /// path is busy, and leaves with the batch when it is not.
    pub(crate) fn bundle_packet(
        &mut self,
        now: Time,
        path: PathId,
        packet: &[u8],
        b: &mut BatchPaths,
    ) -> bool {
        let i = path.index();
        let cap = self.body_cap(i);
        let pieces = packet.len() > cap && self.session.peer.pieces;
        if !pieces
            && (!self.cfg.bundle
                || !self.session.peer.express
                || packet.len() + BUNDLE_ENTRY_LEN > cap)
        {
            return false;
        }
        let wait = self.bundle_wait(now, path);
        let seq = self.tx.seq;
        let prefix = self.prefix();
        // a UDP packet like the one before it in the bundle goes without its headers
        let how = How {
            pieces,
            compress: self.session.caps.compresses_bundled_udp(),
        };
        let room = Room { prefix, cap };
        let mut entry = Default::default();
        if let Some(open) = &self.paths[i].bundle {
            match open.fits(seq, packet, how, room) {
                Some(e) => entry = e,
                None => self.close_riding(now, i, b),
            }
        }
        if self.paths[i].bundle.is_none() {
            if wait < BUNDLE_MIN_WAIT && !pieces {
                return false;
            }
            // pieces on an idle path leave with the batch
            let hold = match wait.checked_sub(BUNDLE_MARGIN) {
                Some(h) if wait >= BUNDLE_MIN_WAIT => h.min(BUNDLE_MAX_HOLD),
                _ => Duration::ZERO,
            };
            let stamp = self.bundle_stamp(i, packet, now);
            self.open_bundle(
                i,
                Times {
                    stamp,
                    due: now + hold,
                },
                None,
            );
        }
        let overhead = self.cfg.overhead().datagram() + self.cfg.paths[i].overhead;
        let Some(open) = self.paths[i].bundle.as_mut() else {
            return false;
        };
        let Some(pushed) = open.push(seq, packet, entry, room) else {
            return false;
        };
        if pushed.squeezed {
            self.counts.compressed_packets += 1;
        }
        // the first packet pays for the datagram; the others only for their entries
        let mut cost = pushed.bytes + if pushed.first { overhead } else { 0 };
        let due = open.due;
        // the head piece's bundle is sealed next, in the loop below, and takes the path's next
        // sequences: the head piece's is its entry's among them
        let head = pushed.head;
        let head_path_seq = self.paths[i].path_seq.wrapping_add(pushed.index as u16);
        let mut offset = head;
        while offset < packet.len() {
            // this datagram is full: the rest goes in the next ones
            self.close_riding(now, i, b);
            let stamp = self.bundle_stamp(i, packet, now);
            self.open_bundle(i, Times { stamp, due }, Some(seq));
            let Some(open) = self.paths[i].bundle.as_mut() else {
                return true;
            };
            let n = open.push_rest(offset, &packet[offset..], cap);
            offset += n;
            cost += overhead + CONTINUATION_LEN + n;
        }
        self.tx.seq = self.tx.seq.wrapping_add(1);
        self.tx.sched.on_sent(now, path, cost);
        if head < packet.len() && self.keeps(i, now) {
            // a lost piece is asked for by the head piece's path sequence: the packet goes
            // again whole, on a path it fits
            self.resend
                .buffer
                .keep(path, head_path_seq, seq, now, packet, false);
        }
        if pieces {
            self.hold_last_piece(now, path);
        }
        self.counts.tx_packets += 1;
        self.counts.tx_bytes += packet.len() as u64;
        self.counts.held_packets += 1;
        true
    }

    /// The last piece of a packet just put in pieces on `path` at `now` waits for the packets
    /// after it while the path still carries what went before (never past the time it would
    /// have left the link's queue).
    fn hold_last_piece(&mut self, now: Time, path: PathId) {
        let wait = self.bundle_wait(now, path);
        let hold = match wait.checked_sub(BUNDLE_MARGIN) {
            Some(h) if wait >= BUNDLE_MIN_WAIT => h,
            _ => wait,
        };
        if let Some(open) = self.paths[path.index()].bundle.as_mut() {
            open.due = open.due.max(now + hold.min(BUNDLE_MAX_HOLD));
        }
    }

    /// How long a datagram sent on `path` at `now` would wait behind what the path carries,
    /// as bundling may count on: [`Sending::queue_seen`], or nothing without a report.
    pub(crate) fn bundle_wait(&self, now: Time, path: PathId) -> Duration {
        self.queue_seen(now, path).unwrap_or(Duration::ZERO)
    }

    /// The queue a datagram sent on `path` at `now` would wait behind, as far as we know it
    /// ([`crate::path::PathState::queue_seen`]).
    pub(crate) fn queue_seen(&self, now: Time, path: PathId) -> Option<Duration> {
        let clock = self.tx.sched.backlog(now, path);
        let i = path.index();
        self.paths[i].queue_seen(now, clock, self.cfg.paths[i].rate_bps.is_some())
    }

    /// The send timestamp of a bundle of path `i` that `packet` opens at `now`, if it is fixed
    /// now: where the path's rate is configured (and the scheduler is not `adaptive`) and the
    /// packet is not TCP, when its first entry was taken, so that the time its packets wait in
    /// it counts in their one-way delay as the link's queue would have. The receiver holds a
    /// steady stream's packets on such paths until the farthest line's time
    /// (`crate::equalise`), and without that wait it would take a packet that waited in a
    /// bundle for one that did not. Otherwise (`None`) when it leaves: TCP keeps its path's
    /// fixed wait at the receiver, and the RTT taken from the echo of a bundle's time, which
    /// decides whether a loss is resent, must not count a bundle's wait; and the adaptive
    /// scheduler learns from the time the peer echoes, which must be the time it sent.
    fn bundle_stamp(&self, i: usize, packet: &[u8], now: Time) -> Option<Time> {
        let linked = self.cfg.paths[i].rate_bps.is_some()
            && self.cfg.scheduler != mpt_sched::SchedulerKind::Adaptive;
        (linked && !mpt_core::hc::is_tcp(packet)).then_some(now)
    }

    /// Open a bundle on path `i`, leaving as `times` says: one that continues packet `continues` (its last pieces), or an empty one.
    fn open_bundle(&mut self, i: usize, times: Times, continues: Option<u32>) {
        let prefix = self.prefix();
        let cap = self.body_cap(i);
        let p = &mut self.paths[i];
        if p.unsent == 0 {
            p.fence_before = (self.tx.seq, p.path_seq);
        }
        p.unsent += 1;
        let room = Room { prefix, cap };
        p.bundle = Some(OpenBundle::new(room, self.tx.seq, continues, times));
    }

    /// Close `path`'s bundle, if one is open, to leave with a batch that uses the path: before
    /// it ([`crate::BatchOut::before`]), or after it ([`crate::BatchOut::after`]) when the
    /// batch has datagrams on the path already, which were numbered before the bundle. The
    /// batch's fences hold until it has left.
    pub(crate) fn close_riding(&mut self, now: Time, i: usize, b: &mut BatchPaths) {
        if self.paths[i].bundle.is_none() {
            return;
        }
        let p = &mut self.paths[i];
        if b.used & (1 << i) == 0 {
            b.used |= 1 << i;
            // the open bundle counts in `unsent`: the fence from before it holds
            p.unsent += 1;
        }
        p.unsent -= 1;
        p.data_unsent += 1;
        let mut parities = Vec::new();
        if let Some(t) = self.seal_bundle(now, i, &mut parities) {
            if b.inbuf & (1 << i) != 0 {
                b.tail |= 1 << i;
                self.outbox.after.push_back(t);
                self.outbox.after.extend(parities.drain(..));
            } else {
                self.outbox.ready.push_back(t);
                self.outbox.ready.extend(parities.drain(..));
            }
        }
    }

    /// Build and seal `path`'s open bundle; it takes the next path sequences. Parities its
    /// packets complete, to leave after it, go in `parities`.
    fn seal_bundle(
        &mut self,
        now: Time,
        i: usize,
        parities: &mut Vec<Datagram>,
    ) -> Option<Datagram> {
        let prefix = self.prefix();
        let Closed {
            kind,
            first_seq,
            count,
            buf,
            stamp,
        } = self.paths[i].bundle.take()?.close(prefix);
        let Some(session) = self.session.theirs else {
            self.counts.drops.add(DropReason::NoSession, count as u64);
            return None;
        };
        let path = PathId(i as u8);
        let p = &mut self.paths[i];
        let header = HeaderRepr {
            kind,
            path,
            path_seq: p.path_seq,
            session,
            seq: first_seq,
            timestamp: stamp.unwrap_or(now).wire_micros(),
        };
        p.path_seq = p.path_seq.wrapping_add(count as u16);
        let body = buf.len() - prefix;
        if count > 0 {
            let last = header.path_seq.wrapping_add(count as u16 - 1);
            self.pmtu_data_sent(i, body + self.cfg.overhead().datagram(), last);
        }
        self.keep_bundled(now, &header, &buf[prefix..]);
        if self.paths[i].parity_on() && self.parity() {
            self.parity_tx()
                .entries(now, &header, &buf[prefix..], parities);
        }
        let Some(buf) = self.session.seal_owned(&header, buf, body) else {
            self.counts.drops.add(DropReason::NoSession, count as u64);
            return None;
        };
        if count > 1 || (count == 1 && kind != Kind::Data) {
            self.counts.bundles_sent += 1;
            self.counts.bundled_packets += count as u64;
        }
        Some(Datagram {
            path,
            destination: self.remote(path)?,
            kind: TransmitKind::Data,
            contents: buf,
        })
    }

    /// Bundles due at `now` leave: first in the control queue, so that no fence polled after
    /// them overtakes them.
    pub(crate) fn bundle_tick(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if self.paths[i].bundle.as_ref().is_none_or(|b| b.due > now) {
                continue;
            }
            let p = &mut self.paths[i];
            p.unsent -= 1;
            p.data_sent += 1;
            let mut parities = Vec::new();
            if let Some(t) = self.seal_bundle(now, i, &mut parities) {
                // the bundle first, then its parities
                for p in parities.into_iter().rev() {
                    self.outbox.pending.push_front(Pending::Raw(p));
                }
                self.outbox.pending.push_front(Pending::Raw(t));
            }
        }
    }

    /// Whether a packet of `inner` bytes that goes in pieces on `path` would overflow the
    /// path's queue: a slow path (below [`crate::path::SLOW_PATH`], where a queue holds a
    /// few datagrams) whose rate is configured (its clock is the link's), and whose clock
    /// would run more than two full datagrams (or 50 ms, whichever is longer) ahead of `now`
    /// once the packet is on it. An overloaded link drops datagrams, and a packet in pieces is
    /// lost with any of them: on a line offered twice what it carries, almost every packet
    /// would lose a piece, where whole packets lose only the half the line cannot carry.
    pub(crate) fn queue_full(&self, now: Time, path: PathId, inner: usize) -> bool {
        let i = path.index();
        let Some(rate) = self.cfg.paths[i]
            .rate_bps
            .filter(|&r| r > 0 && r < crate::path::SLOW_PATH)
        else {
            return false;
        };
        let serialise = |bytes: usize| crate::pmtu::airtime(bytes, Some(rate));
        // two of the largest datagrams the tunnel sends there, not of the size found so far:
        // while the path's MTU is searched, data goes at 1200 bytes behind probes of up to
        // the largest, and a limit of two 1200-byte datagrams would drop the packet behind a
        // probe
        let datagram = self
            .cfg
            .max_datagram()
            .max(self.body_cap(i) + self.cfg.overhead().datagram())
            + self.cfg.paths[i].overhead;
        let limit = (2 * serialise(datagram)).max(mpt_sched::MAX_BACKLOG);
        self.tx.sched.backlog(now, path) + serialise(inner) > limit
    }
}

/// When the first open bundle of `paths` is due.
pub(crate) fn bundle_due(paths: &[PathState]) -> Option<Time> {
    paths
        .iter()
        .filter_map(|p| p.bundle.as_ref().map(|b| b.due))
        .min()
}
