//! Path schedulers for mptd: which path carries the next packet.
//!
//! Every algorithm implements [`Scheduler`]. The caller asks [`Scheduler::select`] for a path
//! for each packet, then reports every datagram it actually sent: data with
//! [`Scheduler::on_sent`], control (keepalives, their answers, reports) with
//! [`Scheduler::on_control_sent`]; path liveness changes arrive through
//! [`Scheduler::on_path_state`] and receiver feedback through [`Scheduler::on_report`].
//! Nothing here reads the clock: `now` is always an argument.
//!
//! Rules shared by all algorithms (implemented once in [`PathSet`]): a path that is down is
//! never chosen; backup paths are chosen only while no regular path is up; with no path up,
//! `select` returns `None` and the caller drops (and counts) the packet.
#![forbid(unsafe_code)]

mod adaptive;
mod estimator;
mod paths;
mod rate;
mod rr;
mod wrr;

use mpt_core::config::SchedulerKind;
use mpt_core::wire::ReportEntry;
use mpt_core::{PathId, Time};

pub use adaptive::AdaptiveScheduler;
pub use estimator::{Estimator, PathEstimate};
pub use paths::PathSet;
pub use rate::RateScheduler;
pub use rr::RoundRobin;
pub use wrr::WeightedRoundRobin;

/// What a scheduler knows about a path from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    /// Share for `wrr` (≥ 1).
    pub weight: u32,
    /// Sending rate for `rate`, bits per second.
    pub rate_bps: Option<u64>,
    /// Used only while no regular path is up.
    pub backup: bool,
    /// Bytes a datagram costs on the link beyond its inner packet: the mptd header (and the
    /// counter and tag when sealing), outer IP/UDP and link framing. Used to take a packet's
    /// serialisation out of a reported delay.
    pub overhead: usize,
}

/// [`PathSpec::overhead`] of a plain datagram over IPv4 and Ethernet framing.
pub const DEFAULT_OVERHEAD: usize = mpt_core::wire::HEADER_LEN + 28 + 14;

impl PathSpec {
    pub fn new(weight: u32, rate_bps: Option<u64>, backup: bool) -> Self {
        PathSpec {
            weight,
            rate_bps,
            backup,
            overhead: DEFAULT_OVERHEAD,
        }
    }

    /// The same path with another per-datagram overhead.
    pub fn with_overhead(self, overhead: usize) -> Self {
        PathSpec { overhead, ..self }
    }
}

/// A path scheduler. See the crate documentation for the contract.
pub trait Scheduler: Send + std::fmt::Debug {
    /// The algorithm's config name.
    fn name(&self) -> &'static str;

    /// The path for a packet of `len` bytes to be sent at `now`; `None` when no path is up.
    fn select(&mut self, now: Time, len: usize) -> Option<PathId>;

    /// A data datagram of `len` bytes (outer payload) was sent on `path` at `now`.
    fn on_sent(&mut self, _now: Time, _path: PathId, _len: usize) {}

    /// A control datagram (keepalive, keepalive answer, report) of `len` bytes was sent on `path`
    /// at `now`: it takes the link's time like data, but the receiver does not count it as data.
    fn on_control_sent(&mut self, now: Time, path: PathId, len: usize) {
        self.on_sent(now, path, len);
    }

    /// `path` went up (`true`) or down (`false`).
    fn on_path_state(&mut self, now: Time, path: PathId, up: bool);

    /// The receiver reported on `path` (cumulative counters and delay figures, see
    /// `docs/protocol.md`).
    fn on_report(&mut self, _now: Time, _path: PathId, _report: &ReportEntry) {}

    /// Whether `path` is up as far as the scheduler knows.
    fn is_up(&self, path: PathId) -> bool;

    /// The rate the scheduler currently assumes for `path`, when it learns rates.
    fn learned_rate(&self, _path: PathId) -> Option<u64> {
        None
    }
}

/// Build the scheduler named in the config for `paths` (all initially up).
///
/// For `rate`, a path without a configured rate counts as `weight` Mbit/s (the config loader
/// refuses that combination, so this only matters for programmatic use).
pub fn build(kind: SchedulerKind, paths: &[PathSpec]) -> Box<dyn Scheduler> {
    match kind {
        SchedulerKind::RoundRobin => Box::new(RoundRobin::new(paths)),
        SchedulerKind::WeightedRoundRobin => Box::new(WeightedRoundRobin::new(paths)),
        SchedulerKind::Rate => Box::new(RateScheduler::new(paths)),
        SchedulerKind::Adaptive => Box::new(AdaptiveScheduler::new(paths)),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    /// Pick `n` packets of `len` bytes at a fixed `now`, reporting each send; count per path.
    pub fn shares(s: &mut dyn Scheduler, paths: usize, n: usize, len: usize) -> Vec<usize> {
        let mut count = vec![0; paths];
        for _ in 0..n {
            let p = s.select(Time::ZERO, len).expect("a path is up");
            s.on_sent(Time::ZERO, p, len);
            count[p.index()] += 1;
        }
        count
    }

    /// Assert that `counts` are within `tolerance` (fraction) of `weights`' shares.
    pub fn assert_shares(counts: &[usize], weights: &[f64], tolerance: f64) {
        let total: usize = counts.iter().sum();
        let wsum: f64 = weights.iter().sum();
        for (i, (&c, &w)) in counts.iter().zip(weights).enumerate() {
            let got = c as f64 / total as f64;
            let want = w / wsum;
            assert!(
                (got - want).abs() <= want * tolerance,
                "path {i}: share {got:.5}, want {want:.5} (counts {counts:?})"
            );
        }
    }

    /// The rules every algorithm obeys: down paths never, backups only alone, none → None.
    pub fn check_state_rules(mut make: impl FnMut(&[PathSpec]) -> Box<dyn Scheduler>) {
        let specs = [
            PathSpec::new(1, Some(1_000_000), false),
            PathSpec::new(2, Some(2_000_000), false),
            PathSpec::new(1, Some(1_000_000), true),
        ];
        let mut s = make(&specs);
        let t = Time::ZERO;
        let picks = shares(s.as_mut(), 3, 300, 100);
        assert_eq!(picks[2], 0, "backup used while regular paths are up");
        s.on_path_state(t, PathId(1), false);
        let picks = shares(s.as_mut(), 3, 300, 100);
        assert_eq!(picks, vec![300, 0, 0], "down path chosen");
        s.on_path_state(t, PathId(0), false);
        let picks = shares(s.as_mut(), 3, 300, 100);
        assert_eq!(picks, vec![0, 0, 300], "backup not used when alone");
        s.on_path_state(t, PathId(2), false);
        assert_eq!(s.select(t, 100), None);
        s.on_path_state(t, PathId(1), true);
        let picks = shares(s.as_mut(), 3, 300, 100);
        assert_eq!(
            picks,
            vec![0, 300, 0],
            "backup used although a regular path came back"
        );
        assert!(s.is_up(PathId(1)) && !s.is_up(PathId(0)));
    }
}
