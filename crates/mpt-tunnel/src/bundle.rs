//! Bundling: while a path is busy, small packets wait in a bundle for it rather than in the
//! link's queue, and leave together in one datagram (`docs/protocol.md`, "Bundle").
//!
//! A packet is bundled when the scheduler's virtual clock says a datagram sent on its path now
//! would wait at least [`BUNDLE_MIN_WAIT`] behind what the path already carries. The bundle
//! leaves when that wait is nearly over ([`BUNDLE_MARGIN`] before, at most [`BUNDLE_MAX_HOLD`]
//! after it opened), when the next packet does not fit it, or before a packet that goes on the
//! same path unbundled. Its packets therefore wait no longer than the link's queue would have
//! kept them, and share one header, seal and outer header instead of paying one each.

use std::time::Duration;

use mpt_core::seal::TAG_LEN;
use mpt_core::wire::{push_bundle_entry, HeaderRepr, Kind, BUNDLE_ENTRY_LEN, MAX_BUNDLE};
use mpt_core::{PathId, Time};

use crate::send::{BatchPaths, Pending};
use crate::{DropReason, Endpoint, Transmit};

/// A packet is bundled when its path's queue would hold it at least this long anyway.
pub const BUNDLE_MIN_WAIT: Duration = Duration::from_millis(4);
/// A bundle leaves this long before its path's queue is expected to run empty, so that the
/// link does not idle while the driver's timer is late.
pub const BUNDLE_MARGIN: Duration = Duration::from_millis(2);
/// Longest a bundle is held, however far the path's virtual clock runs ahead.
pub const BUNDLE_MAX_HOLD: Duration = Duration::from_millis(100);

/// Packets waiting for a busy path.
#[derive(Debug, Clone)]
pub(crate) struct OpenBundle {
    /// Room for the header (and counter), then the entries.
    buf: Vec<u8>,
    first_seq: u32,
    /// The last entry's global sequence number.
    last_seq: u32,
    count: usize,
    /// When it leaves at the latest.
    pub(crate) due: Time,
}

impl crate::endpoint::PathState {
    /// Packets waiting in the path's bundle.
    pub(crate) fn bundled_packets(&self) -> u64 {
        self.bundle.as_ref().map_or(0, |b| b.count as u64)
    }
}

impl<P> Endpoint<P> {
    /// Bundle the inner packet `packet`, which the scheduler put on `path`, if its path is
    /// busy (or a bundle is open there already): numbered, accounted and held. `used` is the
    /// batch's paths, which a full bundle joins to leave with the batch. Returns whether the
    /// packet was taken.
    pub(crate) fn bundle_packet(
        &mut self,
        now: Time,
        path: PathId,
        packet: &[u8],
        b: &mut BatchPaths,
    ) -> bool {
        let i = path.index();
        let mtu = usize::from(self.cfg.mtu);
        if !self.cfg.bundle || !self.peer_express || packet.len() + BUNDLE_ENTRY_LEN > mtu {
            return false;
        }
        let wait = self.sched.backlog(now, path);
        if let Some(open) = &self.paths[i].bundle {
            let gap = self.seq.wrapping_sub(open.last_seq).wrapping_sub(1);
            let fits = open.buf.len() - self.prefix() + BUNDLE_ENTRY_LEN + packet.len() <= mtu
                && open.count < MAX_BUNDLE
                && gap <= u32::from(u8::MAX);
            if !fits {
                self.close_riding(now, i, b);
            }
        }
        if self.paths[i].bundle.is_none() {
            if wait < BUNDLE_MIN_WAIT {
                return false;
            }
            let hold = (wait - BUNDLE_MARGIN).min(BUNDLE_MAX_HOLD);
            let prefix = self.prefix();
            let p = &mut self.paths[i];
            if p.unsent == 0 {
                p.fence_before = (self.seq, p.path_seq);
            }
            p.unsent += 1;
            let mut buf = Vec::with_capacity(prefix + mtu + TAG_LEN);
            buf.resize(prefix, 0);
            p.bundle = Some(OpenBundle {
                buf,
                first_seq: self.seq,
                last_seq: self.seq,
                count: 0,
                due: now + hold,
            });
        }
        let overhead = self.overhead().datagram() + self.cfg.paths[i].overhead;
        let Some(b) = self.paths[i].bundle.as_mut() else {
            return false;
        };
        let last = (b.count > 0).then_some(b.last_seq);
        if push_bundle_entry(&mut b.buf, last, self.seq, packet).is_none() {
            return false;
        }
        b.last_seq = self.seq;
        // the first packet pays for the datagram; the others only for their entries
        let cost = packet.len() + BUNDLE_ENTRY_LEN + if b.count == 0 { overhead } else { 0 };
        b.count += 1;
        self.seq = self.seq.wrapping_add(1);
        self.sched.on_sent(now, path, cost);
        self.counts.tx_packets += 1;
        self.counts.tx_bytes += packet.len() as u64;
        self.counts.held_packets += 1;
        true
    }

    /// Close `path`'s bundle, if one is open, to leave with a batch that uses the path: before
    /// it ([`Endpoint::take_bundles`]), or after it ([`Endpoint::take_after_batch`]) when the
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
        if let Some(t) = self.seal_bundle(now, i) {
            if b.inbuf & (1 << i) != 0 {
                b.tail |= 1 << i;
                self.after.push(t);
            } else {
                self.ready.push(t);
            }
        }
    }

    /// Build and seal `path`'s open bundle; it takes the next path sequences.
    fn seal_bundle(&mut self, now: Time, i: usize) -> Option<Transmit> {
        let b = self.paths[i].bundle.take()?;
        let count = b.count;
        let Some(session) = self.peer_session else {
            self.counts.drops.add(DropReason::NoSession, count as u64);
            return None;
        };
        let path = PathId(i as u8);
        let prefix = self.prefix();
        let mut buf = b.buf;
        // a bundle of one is sent as the data datagram it would have been (its gap byte out)
        let kind = if count == 1 {
            buf.remove(prefix);
            Kind::Data
        } else {
            Kind::Bundle
        };
        let p = &mut self.paths[i];
        let header = HeaderRepr {
            kind,
            path,
            path_seq: p.path_seq,
            session,
            seq: b.first_seq,
            timestamp: now.wire_micros(),
        };
        p.path_seq = p.path_seq.wrapping_add(count as u16);
        let body = buf.len() - prefix;
        let Some(buf) = self.seal_owned(&header, buf, body) else {
            self.counts.drops.add(DropReason::NoSession, count as u64);
            return None;
        };
        if count > 1 {
            self.counts.bundles_sent += 1;
            self.counts.bundled_packets += count as u64;
        }
        Some(Transmit {
            path,
            destination: self.remote(path)?,
            contents: buf,
        })
    }

    /// Seal a datagram built in a buffer of our own: `header` written into its prefix, then
    /// `body` bytes after it, sealed under the next counter. `None` while sealing has no key.
    pub(crate) fn seal_owned(
        &mut self,
        header: &HeaderRepr,
        mut buf: Vec<u8>,
        body: usize,
    ) -> Option<Vec<u8>> {
        let prefix = self.prefix();
        header.emit(&mut buf);
        let len = if self.sealing() {
            let key = self.seal.clone()?;
            buf.resize(prefix + body + TAG_LEN, 0);
            let counter = self.counter;
            self.counter += 1;
            key.seal(counter, &mut buf, body).ok()?
        } else {
            prefix + body
        };
        buf.truncate(len);
        Some(buf)
    }

    /// Bundles that must leave before the batch just numbered, in order: send them first on
    /// their paths. (Left here, they go with [`Endpoint::poll_transmit`].)
    pub fn take_bundles(&mut self, out: &mut Vec<Transmit>) {
        out.append(&mut self.ready);
    }

    /// When the first open bundle is due.
    pub(crate) fn bundle_due(&self) -> Option<Time> {
        self.paths
            .iter()
            .filter_map(|p| p.bundle.as_ref().map(|b| b.due))
            .min()
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
            if let Some(t) = self.seal_bundle(now, i) {
                self.pending.push_front(Pending::Raw {
                    path: t.path,
                    destination: t.destination,
                    contents: t.contents,
                });
            }
        }
    }
}
