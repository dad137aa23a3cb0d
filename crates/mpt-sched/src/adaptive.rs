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
        let est = Estimator::new(&paths.iter().map(|p| p.rate_bps).collect::<Vec<_>>());
        let start: Vec<PathSpec> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| PathSpec {
                rate_bps: est.path(i).map(|e| e.rate_bps as u64),
                ..*p
            })
            .collect();
        AdaptiveScheduler {
            inner: RateScheduler::new(&start),
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
        self.est.on_sent(path.index(), len);
    }

    fn on_path_state(&mut self, now: Time, path: PathId, up: bool) {
        self.inner.on_path_state(now, path, up);
    }

    fn on_report(&mut self, now: Time, path: PathId, report: &ReportEntry) {
        self.inner.take_delay_report(report);
        let active = (0..self.est.paths().len())
            .filter(|&i| self.inner.is_up(PathId(i as u8)))
            .fold(0u64, |m, i| m | 1 << i);
        if self.est.on_report(now, path.index(), report, active) {
            for (i, p) in self.est.paths().iter().enumerate() {
                // Expected goodput: the rate the path takes, scaled by how much of it arrives.
                self.inner.set_rate(
                    PathId(i as u8),
                    (p.rate_bps * p.reliability).max(1.0) as u64,
                );
            }
        }
    }

    fn is_up(&self, path: PathId) -> bool {
        self.inner.is_up(path)
    }

    fn learned_rate(&self, path: PathId) -> Option<u64> {
        self.est.path(path.index()).map(|p| p.rate_bps as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A closed loop on a simulated clock: FIFO links with rates the scheduler does not know,
    /// a receiver that reports every 100 ms, a sender offering more than the paths carry.
    /// Returns the bytes each path delivered in the last `tail` seconds.
    fn closed_loop(
        rates_bps: &[u64],
        secs: u64,
        tail: u64,
        mut change: impl FnMut(u64, &mut Vec<u64>),
    ) -> Vec<u64> {
        let n = rates_bps.len();
        let mut rates = rates_bps.to_vec();
        let mut s = AdaptiveScheduler::new(&vec![PathSpec::new(1, None, false); n]);
        let len = 1200usize;
        let queue_limit_ns = 50_000_000u64;
        let mut link_free = vec![0u64; n];
        // (arrival time, path, path_seq) of packets in flight
        let mut inflight: std::collections::VecDeque<(u64, usize, u16)> = Default::default();
        let mut sent_seq = vec![0u16; n];
        let mut rx = vec![ReportEntry::default(); n];
        let mut tail_bytes = vec![0u64; n];
        let total: u64 = rates.iter().sum();
        let interval = (len as u64 * 8 * 1_000_000_000) / (total + total / 5); // offer 120 %
        let mut next_report = 100_000_000u64;
        let mut t = 0u64;
        while t < secs * 1_000_000_000 {
            change(t, &mut rates);
            let now = Time::from_nanos(t);
            if let Some(p) = s.select(now, len) {
                let i = p.index();
                s.on_sent(now, p, len);
                let start = link_free[i].max(t);
                if start - t <= queue_limit_ns {
                    link_free[i] = start + len as u64 * 8 * 1_000_000_000 / rates[i];
                    inflight.push_back((link_free[i] + 10_000_000, i, sent_seq[i]));
                } // else: tail drop, the receiver sees a gap
                sent_seq[i] = sent_seq[i].wrapping_add(1);
            }
            // Deliver what has arrived (a min-scan is fine for a test).
            inflight.make_contiguous().sort_by_key(|x| x.0);
            while inflight.front().is_some_and(|x| x.0 <= t) {
                let (at, i, ps) = inflight.pop_front().unwrap();
                let e = &mut rx[i];
                let gap = ps.wrapping_sub(e.path_seq.wrapping_add(1));
                if e.packets > 0 && gap > 0 && gap < 30_000 {
                    e.lost += u32::from(gap);
                }
                e.path_seq = ps;
                e.packets += 1;
                e.bytes += len as u64;
                // queueing delay: arrival minus (serialisation + propagation) when idle
                let base = len as u64 * 8 * 1_000_000_000 / rates[i] + 10_000_000;
                let q = ((at - base.min(at)) / 1_000) as u32;
                e.owd_us = (e.owd_us * 15 + q) / 16;
                if t >= (secs - tail) * 1_000_000_000 {
                    tail_bytes[i] += len as u64;
                }
            }
            if t >= next_report {
                for (i, e) in rx.iter().enumerate() {
                    let mut e = *e;
                    e.path = PathId(i as u8);
                    s.on_report(now, PathId(i as u8), &e);
                }
                next_report += 100_000_000;
            }
            t += interval;
        }
        tail_bytes
    }

    #[test]
    fn learns_unequal_rates_without_configuration() {
        let rates = [2_000_000, 1_000_000, 1_000_000, 1_000_000];
        let got = closed_loop(&rates, 30, 10, |_, _| {});
        let sum: u64 = got.iter().sum();
        let capacity: u64 = rates.iter().sum::<u64>() * 10 / 8;
        let eff = sum as f64 / capacity as f64;
        assert!(eff >= 0.95, "delivered {eff:.3} of capacity: {got:?}");
        // Shares follow the rates: path 0 carries about twice each other path.
        let share0 = got[0] as f64 / sum as f64;
        assert!((share0 - 0.4).abs() < 0.05, "path 0 share {share0:.3}");
    }

    #[test]
    fn follows_a_rate_cut_within_two_seconds() {
        let rates = [4_000_000, 4_000_000];
        // Path 1 is halved at t = 10 s; measure the 2 s that follow the first 2 s after it.
        let got = closed_loop(&rates, 14, 2, |t, r| {
            if t >= 10_000_000_000 {
                r[1] = 2_000_000;
            }
        });
        let sum: u64 = got.iter().sum();
        let capacity = (4_000_000u64 + 2_000_000) * 2 / 8;
        let eff = sum as f64 / capacity as f64;
        assert!(
            eff >= 0.95,
            "after the cut: {eff:.3} of the new capacity ({got:?})"
        );
    }
}
