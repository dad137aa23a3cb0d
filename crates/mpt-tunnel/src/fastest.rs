//! The fastest way: the path where a datagram sent now arrives soonest, which light traffic
//! takes ([`crate::Mode::Fastest`]), and the copies of duplicate classes and of packets on a
//! woken path, which go on the next soonest path.

use std::time::Duration;

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::{PathId, Time};

use crate::Connection;

impl<P> Connection<P> {
    /// The path where a datagram sent at `now` arrives soonest, other than `not`: its delay
    /// plus its queue ([`Connection::queue_seen`], or the scheduler's clock). The delay is the
    /// path's smallest one-way delay above the nearest path's, as the peer's last report (within
    /// a second) gives it, or else half its smoothed round-trip time (which a report's way back
    /// and the queue of the packet it answers are part of). Only paths the scheduler may
    /// use, and backup paths only while no regular one is usable.
    pub(crate) fn soonest(&self, now: Time, not: Option<PathId>) -> Option<PathId> {
        self.soonest_where(now, |p| Some(p) != not)
    }

    /// [`Connection::soonest`] among the paths `allowed` admits.
    pub(crate) fn soonest_where(
        &self,
        now: Time,
        allowed: impl Fn(PathId) -> bool + Copy,
    ) -> Option<PathId> {
        let usable = || {
            (0..self.paths.len())
                .map(|i| PathId(i as u8))
                .filter(move |&p| allowed(p) && self.usable(p))
        };
        // the highest tier that has a usable path
        let tier = |p: PathId| self.cfg.paths[p.index()].tier();
        let top = usable().map(tier).min()?;
        let arrival = |p: PathId| {
            let path = &self.paths[p.index()];
            let delay = match path.peer_report {
                Some((at, e)) if now.saturating_since(at) <= Duration::from_secs(1) => {
                    Duration::from_micros(u64::from(e.owd_min_us))
                }
                _ => {
                    path.srtt_us
                        .map_or(crate::class::UNMEASURED_RTT, Duration::from_micros)
                        / 2
                }
            };
            let queue = self
                .queue_seen(now, p)
                .unwrap_or_else(|| self.sched.backlog(now, p));
            (delay, delay + queue)
        };
        let candidates = || usable().filter(move |&p| tier(p) == top);
        let soonest = candidates().map(|p| arrival(p).1).min()?;
        // Bulk spread by earliest delivery queues on the near paths until they are no sooner
        // than the far ones, so the paths that carry it tie. Of those, the nearest: the
        // stream keeps its path short, and there the queue drains, where on a farther path
        // every packet after would pay the difference in delay.
        candidates()
            .map(|p| (arrival(p), p))
            .filter(|&((_, at), _)| at <= soonest + crate::class::SOONEST_TIE)
            .min_by_key(|&(key, _)| key)
            .map(|(_, p)| p)
    }

    /// Send a copy of `packet` (as `c` says) on the next soonest path, numbered after the
    /// batch's packets there and leaving after them
    /// ([`crate::BatchOut::after`]), so that each path's datagrams stay in order. `used` is the
    /// batch's set of paths: the copy's path joins it, and its fences hold until the batch
    /// and the copy have left.
    pub(crate) fn send_copy(
        &mut self,
        now: Time,
        c: crate::class::CopyOf,
        packet: &[u8],
        used: &mut u64,
    ) {
        let crate::class::CopyOf {
            class,
            seq,
            first,
            express,
        } = c;
        let Some(session) = self.peer_session else {
            return;
        };
        let Some(path) = self.soonest(now, Some(first)) else {
            return;
        };
        let i = path.index();
        // a copy goes whole or not at all
        if self.remote(path).is_none() || packet.len() > self.body_cap(i) {
            return;
        }
        self.data_on(i, now);
        self.join_batch(i, used);
        let p = &mut self.paths[i];
        let header = HeaderRepr {
            kind: if express && self.peer.express {
                Kind::Express
            } else {
                Kind::Data
            },
            path,
            path_seq: p.path_seq,
            session,
            seq,
            timestamp: now.wire_micros(),
        };
        p.path_seq = p.path_seq.wrapping_add(1);
        p.data_unsent += 1;
        let Some(t) = self.owned_datagram(&header, packet) else {
            return;
        };
        let cost = t.contents.len() + self.cfg.paths[i].overhead;
        self.sched.on_sent(now, path, cost);
        self.classes.copy_sent();
        self.classes.count(self.cfg.classes.len(), class, path);
        self.after.push_back(t);
    }
}
