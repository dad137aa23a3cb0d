use mpt_core::{PathId, Time};

use crate::{PathSet, PathSpec, Scheduler};

/// Round-robin over the eligible paths, one packet each in index order.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    paths: PathSet,
    /// The queues of paths with a configured rate ([`Scheduler::backlog`]).
    clock: crate::LinkClock,
    /// Index of the path chosen last.
    last: usize,
}

impl RoundRobin {
    pub fn new(paths: &[PathSpec]) -> Self {
        RoundRobin {
            paths: PathSet::new(paths),
            clock: crate::LinkClock::new(paths),
            last: 63,
        }
    }
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        "rr"
    }

    fn select(&mut self, _now: Time, _len: usize) -> Option<PathId> {
        let eligible = self.paths.eligible();
        if eligible == 0 {
            return None;
        }
        // The next eligible index after `last`, wrapping to the lowest one.
        let after = if self.last >= 63 {
            0
        } else {
            eligible & (u64::MAX << (self.last + 1))
        };
        let next = if after != 0 { after } else { eligible };
        self.last = next.trailing_zeros() as usize;
        Some(PathId(self.last as u8))
    }

    fn on_sent(&mut self, now: Time, path: PathId, len: usize) {
        self.clock.on_sent(now, path, len);
    }

    fn on_unsent(&mut self, now: Time, path: PathId, len: usize) {
        self.clock.on_unsent(now, path, len);
    }

    fn backlog(&self, now: Time, path: PathId) -> std::time::Duration {
        self.clock.backlog(now, path)
    }

    fn on_path_state(&mut self, _now: Time, path: PathId, up: bool) {
        self.paths.set_up(path, up);
    }

    fn is_up(&self, path: PathId) -> bool {
        self.paths.is_up(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn cycles_in_order() {
        let mut s = RoundRobin::new(&[PathSpec::new(1, None, false); 3]);
        let seq: Vec<u8> = (0..7)
            .map(|_| s.select(Time::ZERO, 100).unwrap().0)
            .collect();
        assert_eq!(seq, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn equal_shares_over_100k() {
        let mut s = RoundRobin::new(&[PathSpec::new(5, None, false); 4]);
        let c = shares(&mut s, 4, 100_000, 1000);
        assert_shares(&c, &[1.0; 4], 0.01);
    }

    #[test]
    fn skips_down_paths_and_uses_all_64() {
        let mut s = RoundRobin::new(&[PathSpec::new(1, None, false); 64]);
        let c = shares(&mut s, 64, 64 * 10, 100);
        assert!(c.iter().all(|&n| n == 10), "{c:?}");
        s.on_path_state(Time::ZERO, PathId(63), false);
        s.on_path_state(Time::ZERO, PathId(1), false);
        let c = shares(&mut s, 64, 62 * 10, 100);
        assert_eq!((c[1], c[63]), (0, 0));
        assert!(c
            .iter()
            .enumerate()
            .all(|(i, &n)| i == 1 || i == 63 || n == 10));
    }

    #[test]
    fn state_rules() {
        check_state_rules(|p| Box::new(RoundRobin::new(p)));
    }
}
