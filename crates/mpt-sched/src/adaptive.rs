use mpt_core::wire::ReportEntry;
use mpt_core::{PathId, Time};

use crate::{Estimator, PathSpec, RateScheduler, Scheduler};

/// The `rate` scheduler's earliest-delivery rule, fed with rates and one-way-delay offsets
/// learned from the receiver's reports ([`Estimator`]) instead of configured ones. Configured
/// `rate`s are only starting points; without them every path starts at 1 Mbit/s.
#[derive(Debug, Clone)]
pub struct AdaptiveScheduler {
    inner: RateScheduler,
    est: Estimator,
}

impl AdaptiveScheduler {
    pub fn new(paths: &[PathSpec]) -> Self {
        let mut est = Estimator::new(&paths.iter().map(|p| p.rate_bps).collect::<Vec<_>>());
        for (i, p) in paths.iter().enumerate() {
            est.set_overhead(i, p.overhead);
        }
        let start: Vec<PathSpec> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| PathSpec {
                rate_bps: est.path(i).map(|e| e.send_rate_bps() as u64),
                ..*p
            })
            .collect();
        AdaptiveScheduler {
            inner: RateScheduler::new(&start).learning(),
            est,
        }
    }

    /// What has been learned so far.
    pub fn estimator(&self) -> &Estimator {
        &self.est
    }
}

impl Scheduler for AdaptiveScheduler {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn select(&mut self, now: Time, len: usize) -> Option<PathId> {
        self.inner.select(now, len)
    }

    fn on_sent(&mut self, now: Time, path: PathId, len: usize) {
        self.inner.on_sent(now, path, len);
        self.est.on_sent(now, path.index(), len);
    }

    /// The link's time only: the estimator compares what it sent with the data the receiver
    /// counts, and a keepalive on a path found silent would keep it silent for good.
    fn on_control_sent(&mut self, now: Time, path: PathId, len: usize) {
        self.inner.on_control_sent(now, path, len);
    }

    fn on_unsent(&mut self, now: Time, path: PathId, len: usize) {
        self.inner.on_unsent(now, path, len);
    }

    fn on_path_state(&mut self, now: Time, path: PathId, up: bool) {
        self.inner.on_path_state(now, path, up);
        if up {
            self.est.on_path_up(path.index());
            self.inner.avoid(path, false);
        }
    }

    fn on_report(&mut self, now: Time, path: PathId, report: &ReportEntry) {
        self.inner.take_delay_report(report);
        let active = (0..self.est.paths().len())
            .filter(|&i| self.inner.is_up(PathId(i as u8)))
            .fold(0u64, |m, i| m | 1 << i);
        self.est.on_report(now, path.index(), report, active);
        // Every report moves the caps, so every report sets the rates: the expected goodput,
        // the rate the path may take scaled by how much of it arrives. A silent path is passed
        // over until a report clears it (or it comes back up after it was found dead): new
        // packets go elsewhere — a TCP flow's retransmission after its timeout included.
        for (i, p) in self.est.paths().iter().enumerate() {
            let rate = p.send_rate_bps() * p.reliability;
            self.inner.set_rate(PathId(i as u8), rate.max(1.0) as u64);
            let pace = p.pace_rate_bps().map(|r| r as u64);
            self.inner.set_pace_rate(PathId(i as u8), pace);
            self.inner.avoid(PathId(i as u8), p.silent);
        }
        // The queue the receiver saw on a path that carried packets in the interval stands in
        // its virtual clock: while every path is overdriven (a stream faster than the rates
        // learned so far), new packets go where the real queues are shortest, so they arrive
        // in order, instead of in proportion to rates that the queues show are wrong. The
        // queue is carried forward from the packet the report names to now
        // ([`Estimator::queue_now`]): held as the report shows it, a round trip old, it kept a
        // far path that had drained idle while bonded packets waited for room.
        if let Some(p) = self.est.path(path.index()).filter(|p| p.last_packets > 0) {
            let seen = std::time::Duration::from_micros(p.queue_seen_us as u64);
            let queue = self
                .est
                .queue_now(now, path.index(), report.echo)
                .unwrap_or(seen);
            self.inner.hold_queue(now, path, queue);
            self.inner.short_queued(path, seen);
        }
    }

    fn is_up(&self, path: PathId) -> bool {
        self.inner.is_up(path)
    }

    fn backlog(&self, now: Time, path: PathId) -> std::time::Duration {
        self.inner.backlog(now, path)
    }

    fn equalised(&mut self, most: std::time::Duration) {
        self.inner.equalised(most);
    }

    fn local_queue(&mut self, now: Time, path: PathId, queue: std::time::Duration) {
        self.inner.local_queue(now, path, queue);
    }

    fn keep_short(&mut self, path: Option<PathId>, limit: std::time::Duration) {
        self.inner.keep_short(path, limit);
    }

    /// Each path paced once its capacity is known ([`crate::PathEstimate::pace_rate_bps`]).
    fn pace(&mut self, limit: Option<std::time::Duration>) {
        self.inner.pace(limit);
        for (i, p) in self.est.paths().iter().enumerate() {
            let rate = p.pace_rate_bps().map(|r| r as u64);
            self.inner.set_pace_rate(PathId(i as u8), rate);
        }
    }

    fn paced_until(&self, now: Time) -> Option<Time> {
        self.inner.paced_until(now)
    }

    fn pace_granule(&self, len: usize) -> Option<std::time::Duration> {
        self.inner.pace_granule(len)
    }

    fn learned(&self, now: Time, path: PathId) -> Option<crate::Learned> {
        self.est.path(path.index()).map(|p| crate::Learned {
            rate_bps: p.rate_bps as u64,
            cap_bps: p.cap_bps as u64,
            delivery_bps: p.delivery_bps as u64,
            best_delivery_bps: p.best_delivery_bps as u64,
            queue_us: p.queue_us as u64,
            silent: p.silent,
            congested: p.congested,
            saturated: p.saturated,
            busy: p.busy,
            reports: p.reports,
            cuts: p.cuts,
            backlog_us: self.inner.backlog(now, path).as_micros() as u64,
        })
    }

    fn learned_rate(&self, path: PathId) -> Option<u64> {
        self.est
            .path(path.index())
            .map(|p| p.send_rate_bps() as u64)
    }
}

#[cfg(test)]
#[path = "adaptive_tests.rs"]
mod tests;
