//! Time-driven work: the resequencer's hold timer, path liveness (and how a path's turn up or
//! down is applied, [`crate::path::Turn`]), handshakes, keepalives and receiver reports.

use std::time::Duration;

use mpt_core::wire::{self, HEADER_LEN};
use mpt_core::{PathId, Time};
use mpt_reseq::PathStats;

use crate::liveness::LinkState;
use crate::path::Turn;
use crate::path::BIG_FOR;
use crate::pending::Pending;
use crate::ticks::next_tick;
use crate::{Connection, DownReason, Event};

/// A slow path whose clock has shown it busy this long is probed busy: it may never be idle.
pub const SATURATED: Duration = Duration::from_secs(1);

/// How often the pacer is asked whether a report is due.
pub const REPORT_TICK: Duration = Duration::from_millis(10);
/// A path gone quiet this much longer than the last one heard from is passed over for reports.
pub const REPORT_QUIET: Duration = Duration::from_millis(5);

impl<P> Connection<P> {
    /// Path `path` turns at `now` as its liveness says ([`Turn`]).
    pub(crate) fn turn(&mut self, now: Time, path: PathId, turn: Turn) {
        let (on, event) = match turn {
            Turn::Up { again } => (true, Some(Event::PathUp { path, again })),
            Turn::Unheard(reason) => (false, Some(Event::PathDown { path, reason })),
            Turn::Unused => (false, None),
            Turn::Down(reason) => {
                self.paths[path.index()].down_reason = Some(reason);
                // what waits to match the other paths goes on: this one no longer needs
                // matching; the resequencer stops waiting for it
                self.rx.release_equalised(now, true, Some(path.index()));
                let out = &mut self.rx.released;
                self.rx.reseq.path_down(now, path, &mut |p| out.push(p));
                (false, Some(Event::PathDown { path, reason }))
            }
        };
        self.tx.sched.on_path_state(now, path, on);
        self.events.extend(event);
    }

    /// Something valid arrived on `path` at `now`.
    pub(crate) fn heard(&mut self, now: Time, path: PathId) {
        self.crypto.last_heard = Some(now);
        let (turn, tell) = self.paths[path.index()].heard(now, self.cfg.keepalive);
        if tell {
            self.outbox.pending.push_back(Pending::Keepalive(path));
        }
        if let Some(t) = turn {
            self.turn(now, path, t);
        }
    }

    /// A keepalive on `path` says whether the peer hears us there ([`PathState::peer_view`]).
    pub(crate) fn peer_view(&mut self, now: Time, path: PathId, silent: bool) {
        if let Some(t) = self.paths[path.index()].peer_view(silent) {
            self.turn(now, path, t);
        }
    }

    /// The peer said goodbye: every path is down at once.
    pub(crate) fn peer_closed(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if self.paths[i].live.peer_closed() {
                self.turn(now, PathId(i as u8), Turn::Down(DownReason::PeerClosed));
            }
        }
    }

    /// A new peer session: paths its predecessor closed with a goodbye are used again.
    pub(crate) fn reopen_closed(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if self.paths[i].live.reopen() {
                self.turn(now, PathId(i as u8), Turn::Up { again: true });
            }
        }
    }

    /// Our uplink for `path` cannot carry anything (`Some`: why), or can again (`None`). The
    /// driver watches its interfaces: a path whose interface is absent or whose link is down
    /// goes down at once, rather than after `dead` of silence, and sends nothing; when the
    /// uplink is back, a keepalive goes at once so that the peer (and a NAT) hears us, and the
    /// path comes up as the peer is heard on it.
    pub fn set_uplink(&mut self, now: Time, path: PathId, down: Option<crate::UplinkDown>) {
        let has_session = self.session.theirs.is_some();
        let Some(p) = self.paths.get_mut(path.index()) else {
            return;
        };
        let (turn, tell) = p.set_uplink(now, down, has_session);
        if tell {
            self.outbox.pending.push_back(Pending::Keepalive(path));
        }
        if let Some(t) = turn {
            self.turn(now, path, t);
        }
    }

    /// The driver carries `path`'s datagrams by `transport` from now on. A change starts the
    /// path's MTU afresh (a stream's is its ceiling, found; a datagram path searches again
    /// from the base size) and its parity.
    pub fn set_path_transport(&mut self, now: Time, path: PathId, transport: crate::Transport) {
        let stream = transport == crate::Transport::Stream;
        let ceiling = self.cfg.datagram_ceiling(path.index());
        let Some(p) = self.paths.get_mut(path.index()) else {
            return;
        };
        if p.stream == stream {
            return;
        }
        p.stream = stream;
        let outer = p.pmtu.outer;
        p.pmtu = if stream {
            crate::pmtu::Pmtu::fixed(now, ceiling, outer)
        } else {
            crate::pmtu::Pmtu::new(now, ceiling, outer)
        };
        p.fec_tx = Default::default();
        p.keep_until = None;
    }

    /// How `path`'s datagrams travel ([`Connection::set_path_transport`]).
    pub fn path_transport(&self, path: PathId) -> crate::Transport {
        match self.paths.get(path.index()) {
            Some(p) if p.stream => crate::Transport::Stream,
            _ => crate::Transport::Datagram,
        }
    }

    /// When [`Connection::handle_timeout`] should next be called: the periodic jobs always have
    /// a next time.
    pub fn poll_timeout(&self) -> Time {
        let t = &self.timers;
        let next = t.keepalive.min(t.report).min(t.liveness);
        let next = crate::bundling::bundle_due(&self.paths).map_or(next, |b| next.min(b));
        let next = self.rx.equal.next_ready().map_or(next, |e| next.min(e));
        let next = self
            .rx
            .released
            .next_deadline()
            .map_or(next, |w| next.min(w));
        self.rx.reseq.poll_timeout().map_or(next, |r| next.min(r))
    }

    /// Do what is due at `now`. A driver that is busy receiving calls this between batches
    /// when [`Connection::poll_timeout`] has passed, so that keepalives, reports and liveness
    /// never wait for the sockets to fall quiet.
    pub fn handle_timeout(&mut self, now: Time) {
        self.rx.released.tick(now);
        if crate::bundling::bundle_due(&self.paths).is_some_and(|t| t <= now) {
            self.sending().bundle_tick(now);
        }
        if self.rx.equal.next_ready().is_some_and(|t| t <= now) {
            self.rx.release_equalised(now, false, None);
        }
        if self.rx.reseq.poll_timeout().is_some_and(|t| t <= now) {
            let out = &mut self.rx.released;
            self.rx.reseq.handle_timeout(now, &mut |p| out.push(p));
        }
        if self.timers.liveness <= now {
            self.timers.liveness = next_tick(self.timers.liveness, now, self.liveness_tick());
            self.check_liveness(now);
            self.handshake_tick(now);
            self.pmtu_tick(now);
            let expired = self
                .rx
                .assembled
                .pieces
                .expire(now, self.reassembly_timeout());
            self.counts
                .drops
                .add(crate::DropReason::FragmentExpired, expired);
        }
        if self.timers.keepalive <= now {
            self.timers.keepalive = next_tick(self.timers.keepalive, now, self.keepalive());
            self.keepalive_tick(now);
        }
        if self.timers.report <= now {
            self.timers.report = next_tick(self.timers.report, now, REPORT_TICK);
            self.report_tick(now);
            self.equalise_lags();
        }
    }

    /// Path MTU probes due at `now`, on datagram paths that are up and whose peer answers
    /// them.
    fn pmtu_tick(&mut self, now: Time) {
        if self.session.theirs.is_none() || !self.session.peer.pieces {
            return;
        }
        for i in 0..self.paths.len() {
            let up = self.paths[i].state() == LinkState::Up;
            // an idle path's size is confirmed when data wakes it; a stream's is its ceiling
            let p = &self.paths[i];
            if !up || p.remote.is_none() || p.idle(now, &self.cfg) || p.stream {
                continue;
            }
            let rate =
                crate::sending::path_rate(self.tx.sched.as_ref(), &self.cfg, PathId(i as u8));
            // a probe takes a slow path long to carry, delaying what waits behind it: those
            // are probed only for the packets sent lately that need more than the base
            // datagram: searched while such packets need more than the size that passes,
            // confirmed while they need the size found (packets below it do not confirm it,
            // and a confirmation of a size nothing needs delayed them by up to a probe's time,
            // 183 ms on a 64 kbit/s line, every 9 to 18 s), and confirmed at once when the
            // peer's reports say data went missing; one at a time, so that the others carry
            // the stream meanwhile (probed all at once, every line is held for a probe's time
            // and the stream waits); and while the line is idle, unless it has not been for
            // [`SATURATED`] (sent behind a packet, a probe can put the next beyond what a slow
            // line's queue holds; a line that is never idle is probed as it is)
            let big = self
                .tx
                .big
                .filter(|&(t, _)| now.saturating_since(t) < BIG_FOR)
                .map(|(_, len)| len);
            let pmtu = &self.paths[i].pmtu;
            // (a probe out is followed to its end: answered, sent again or given up)
            let needed = pmtu.in_flight()
                || pmtu.suspected()
                || big.is_some_and(|len| {
                    if pmtu.found() {
                        len >= pmtu.size
                    } else {
                        len > pmtu.size
                    }
                });
            if crate::sending::slow_path(self.tx.sched.as_ref(), &self.cfg, i) {
                let idle = self.tx.sched.backlog(now, PathId(i as u8)).is_zero();
                if idle {
                    self.paths[i].idle_at = now;
                }
                let busy = !idle && now.saturating_since(self.paths[i].idle_at) < SATURATED;
                let other = (0..self.paths.len()).any(|j| {
                    j != i
                        && self.paths[j].pmtu.in_flight()
                        && crate::sending::slow_path(self.tx.sched.as_ref(), &self.cfg, j)
                });
                let in_flight = self.paths[i].pmtu.in_flight();
                let probe = if needed {
                    in_flight || !(other || busy)
                } else {
                    // a search not yet needed goes on while the line is idle (all such at
                    // once): a fresh tunnel knows its sizes before a stream starts, whose
                    // packets a probe would otherwise delay on a line `wrr` sends to regardless
                    !self.paths[i].pmtu.found() && (idle || in_flight)
                };
                if !probe {
                    continue;
                }
            }
            let gap = self.reports.gap;
            let p = &mut self.paths[i];
            p.pmtu.watch_silence(now, p.seen(), gap);
            let p = &mut self.paths[i];
            let timeout = p
                .pmtu
                .probe_timeout(p.srtt_us.map(Duration::from_micros), rate);
            let confirm = p.pmtu.confirm_interval(rate);
            let overflowing = p.fec_tx.queue_full;
            if let Some(size) = p.pmtu.poll(now, timeout, confirm, overflowing) {
                // data held on the path (the last piece of a packet waiting for the packets
                // after it) leaves first: behind a probe it would wait the probe's time on the
                // link too, 94 ms on a 128 kbit/s line
                if let Some(open) = p.bundle.as_mut() {
                    open.due = open.due.min(now);
                    self.sending().bundle_tick(now);
                }
                self.outbox.pending.push_back(Pending::Probe {
                    path: PathId(i as u8),
                    size,
                });
            }
        }
    }

    /// Each path's lag to match the farthest path ([`crate::equalise::lags`]) from what the
    /// resequencer measured: a least one-way delay is measured on some packet, and its time on
    /// the line is part of it; where the rate is configured (the link's; a learned one is what
    /// we sent), that time is taken out. On slow lines a full datagram's time on the line is
    /// tens of milliseconds (more than its size at the rate gives: the line's framing), so a
    /// path whose least came from a full datagram would look that much farther than identical
    /// lines whose least came from small ones, and their packets would wait for nothing. Only
    /// a configured rate counts for a datagram's time to carry: the receiver of a transfer
    /// sends little, and its learned rates are that little. Backup tiers are left out.
    fn equalise_lags(&mut self) {
        // every report tick, every peer: no allocation
        let on = self.cfg.equalise && self.cfg.reorder_window > 0;
        let top = self.cfg.paths.iter().map(crate::PathSettings::tier).min();
        let stats = &self.rx.reseq.stats().paths;
        let datagram = self.overhead().datagram();
        let max_datagram = self.max_datagram();
        let mut delays = [crate::equalise::PathDelay::default(); mpt_core::MAX_PATHS];
        for (i, (p, d)) in self.paths.iter().zip(delays.iter_mut()).enumerate() {
            let cfg = &self.cfg.paths[i];
            *d = crate::equalise::PathDelay {
                up: on
                    && p.remote.is_some()
                    && p.live.state != LinkState::Down
                    && Some(cfg.tier()) == top,
                owd_us: None,
                half_rtt_us: p.srtt_us.map(|r| (r / 2) as i64),
                carry: crate::pmtu::airtime(max_datagram, cfg.rate_bps),
                rate_bps: cfg.rate_bps,
                framing: datagram + cfg.overhead,
            };
            d.owd_us = stats.get(i).and_then(|s| d.least(s));
        }
        self.rx.equal.set_lags(&delays[..self.paths.len()]);
    }

    /// How long a packet's pieces wait for the rest: twice the resequencer's hold, within
    /// 100 ms and 2 s.
    pub(crate) fn reassembly_timeout(&self) -> Duration {
        (self.cfg.reorder_timeout * 2).clamp(Duration::from_millis(100), Duration::from_secs(2))
    }

    /// How often liveness is checked.
    fn liveness_tick(&self) -> Duration {
        (self.keepalive() / 4).clamp(Duration::from_millis(5), Duration::from_millis(50))
    }

    /// Mark paths down that have been silent for `dead`. Not before the first session: there
    /// is nothing to hear before it (the peer may not have started yet).
    fn check_liveness(&mut self, now: Time) {
        if self.session.theirs.is_none() {
            return;
        }
        for i in 0..self.paths.len() {
            let limit = self.paths[i].silence_limit(now, &self.cfg);
            let from = self.paths[i].woken_at;
            let Some(silent) = self.paths[i].live.check(now, limit, from) else {
                continue;
            };
            self.paths[i].woken_at = None;
            self.turn(now, PathId(i as u8), Turn::Down(DownReason::Silent(silent)));
        }
    }

    /// A keepalive on every path that carried no data since the last tick, carrying our
    /// fences. A path that carries data needs none: the data keeps the path alive at the peer
    /// (and through NATs) and advances its resequencer, reports bring the RTT, and the
    /// keepalive after the data stops fences its tail. On MPT's 64 kbit/s lines a keepalive
    /// and its answer every 100 ms took a fifth of each line. An idle path that is up gets
    /// one every idle keepalive interval, unless we answered one of the peer's meanwhile
    /// (the peer heard that). Nothing before there is a session, nor on a path whose remote
    /// is unknown.
    fn keepalive_tick(&mut self, now: Time) {
        if self.session.theirs.is_none() {
            return;
        }
        for i in 0..self.paths.len() {
            let idle = self.paths[i].idle(now, &self.cfg);
            let p = &mut self.paths[i];
            // counted at every tick, also while the uplink is down: the data sent before it
            // went down must not count as sent since the first tick after it is back
            let carried = std::mem::replace(&mut p.data_at_tick, p.data_sent) != p.data_sent;
            if p.remote.is_none() || p.live.uplink_down || carried {
                continue;
            }
            if let Some(every) = self.cfg.idle_keepalive.filter(|_| idle) {
                let down = p.live.state == LinkState::Down;
                if !down && now.saturating_since(p.idle_sent_at) < every {
                    continue;
                }
            }
            self.outbox
                .pending
                .push_back(Pending::Keepalive(PathId(i as u8)));
        }
    }

    /// A receiver report, when the pacer says one is due (a share of the received
    /// bandwidth, at least one a second while data arrives, at once when a queue grows), on
    /// [`Connection::report_path`].
    fn report_tick(&mut self, now: Time) {
        let n = self.paths.len();
        let stats = self.rx.reseq.stats();
        let rx_bytes = stats.total.bytes;
        // Counted as `report_bytes` counts them: outer headers and framing included.
        let outer = self.cfg.paths.iter().map(|p| p.overhead).max().unwrap_or(0);
        let report_bytes = wire::report_len(n) - HEADER_LEN + self.overhead().datagram() + outer;
        // The queue building on each path: a growing one is reported at once.
        let r = &mut self.reports.scratch;
        r.queues.clear();
        r.queues
            .extend(stats.paths.iter().take(n).map(PathStats::queue_us));
        if !self
            .reports
            .pacer
            .urgent(now, rx_bytes, report_bytes, &r.queues)
            && !self.reports.pacer.due(now, rx_bytes, report_bytes)
        {
            return;
        }
        r.entries.clear();
        r.counts.clear();
        for (i, ps) in stats.paths.iter().enumerate().take(n) {
            let up = self.paths[i].live.state == LinkState::Up;
            r.entries.push(ps.report_entry(PathId(i as u8), now, up));
            r.counts.push((ps.packets, ps.lost));
        }
        self.reports
            .pacer
            .sent(now, rx_bytes, report_bytes, &r.counts, &r.queues);
        if let Some(path) = self.report_path() {
            // (one report waits at a time: it is built from the newest entries)
            let waiting = self
                .outbox
                .pending
                .iter()
                .any(|p| matches!(p, Pending::Report { .. }));
            if !waiting {
                self.outbox.pending.push_back(Pending::Report { path });
            }
        }
    }

    /// The path a report goes on: the one with the lowest RTT among those that are up and
    /// were heard from lately — within [`REPORT_QUIET`] of the last path heard from. A path
    /// that stopped delivering a moment ago (an outage `dead` has not yet confirmed) would
    /// lose the very report that tells the sender, and a sender whose TCP flow stalls with it
    /// has nothing more to report for a while.
    pub(crate) fn report_path(&self) -> Option<PathId> {
        pick_report_path(self.paths.iter().map(|p| {
            let heard_if_up = p.live.last_heard.filter(|_| p.live.state == LinkState::Up);
            (heard_if_up, p.srtt_us.unwrap_or(u64::MAX))
        }))
        .map(|i| PathId(i as u8))
    }
}

/// [`Connection::report_path`]'s rule over (when heard from, if up; RTT) per path.
fn pick_report_path(paths: impl Iterator<Item = (Option<Time>, u64)> + Clone) -> Option<usize> {
    let latest = paths.clone().filter_map(|(heard, _)| heard).max()?;
    paths
        .enumerate()
        .filter(|(_, (heard, _))| heard.is_some_and(|h| latest - h <= REPORT_QUIET))
        .min_by_key(|(_, (_, rtt))| *rtt)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_go_on_the_fastest_path_heard_from_lately() {
        let at = Time::from_millis;
        let pick = |p: &[(Option<Time>, u64)]| pick_report_path(p.iter().copied());
        // Both heard from within 5 ms: the lower RTT.
        assert_eq!(pick(&[(Some(at(100)), 900), (Some(at(97)), 300)]), Some(1));
        // Path 1 has been quiet for 20 ms while path 0 delivers: path 0, though slower.
        assert_eq!(pick(&[(Some(at(100)), 900), (Some(at(80)), 300)]), Some(0));
        // Path 1 is down: never it.
        assert_eq!(pick(&[(Some(at(100)), 900), (None, 300)]), Some(0));
        assert_eq!(pick(&[(None, 900), (None, 300)]), None);
    }
}
