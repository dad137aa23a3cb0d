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
mod build;
mod clock;
mod estimator;
mod kind;
mod pace;
mod paths;
mod rate;
mod rr;
mod scheduler;
mod wrr;

pub use adaptive::AdaptiveScheduler;
pub use build::build;
pub use clock::LinkClock;
pub use estimator::{Estimator, PathEstimate};
pub use kind::SchedulerKind;
pub use pace::PACE_QUANTUM;
pub use paths::PathSet;
pub use rate::{RateScheduler, MAX_BACKLOG};
pub use rr::RoundRobin;
pub use scheduler::{Learned, PathSpec, Scheduler, DEFAULT_OVERHEAD};
pub use wrr::WeightedRoundRobin;

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use mpt_core::{PathId, Time};

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
