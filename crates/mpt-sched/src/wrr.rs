use mpt_core::{PathId, Time};

use crate::{PathSet, PathSpec, Scheduler};
use mpt_core::bits;

/// Smooth weighted round-robin: each path gets a share of packets exactly proportional to its
/// weight, interleaved as evenly as possible (weights 2:1:1 give A B A C A B A C …).
///
/// This is WF²Q+ with every path always backlogged: each path has a virtual start and finish
/// time (finish = start + 1/weight); the system virtual time advances by 1/Σweights per packet;
/// among the paths whose start is not after the virtual time, the one with the earliest finish
/// wins, ties to the lowest index. Deterministic; a path that comes back up starts at the
/// current virtual time (no burst to "catch up").
#[derive(Debug, Clone)]
pub struct WeightedRoundRobin {
    paths: PathSet,
    /// The queues of paths with a configured rate ([`Scheduler::backlog`]).
    clock: crate::LinkClock,
    /// Per path: virtual time per packet, `SCALE / weight`.
    stride: Vec<u128>,
    start: Vec<u128>,
    /// System virtual time.
    now_v: u128,
    /// Σ weights of the eligible paths.
    weight_sum: u128,
}

/// Fixed-point unit of virtual time: one packet at weight 1.
const SCALE: u128 = 1 << 40;

impl WeightedRoundRobin {
    pub fn new(paths: &[PathSpec]) -> Self {
        let mut s = WeightedRoundRobin {
            paths: PathSet::new(paths),
            clock: crate::LinkClock::new(paths),
            stride: paths
                .iter()
                .map(|p| SCALE / u128::from(p.weight.max(1)))
                .collect(),
            start: vec![0; paths.len()],
            now_v: 0,
            weight_sum: 0,
        };
        s.update_weight_sum();
        s
    }

    fn update_weight_sum(&mut self) {
        self.weight_sum = bits(self.paths.eligible())
            .map(|i| SCALE / self.stride[i])
            .sum();
    }
}

impl Scheduler for WeightedRoundRobin {
    fn name(&self) -> &'static str {
        "wrr"
    }

    fn select(&mut self, _now: Time, _len: usize) -> Option<PathId> {
        let eligible = self.paths.eligible();
        if eligible == 0 {
            return None;
        }
        // One pass: the best path whose start has come, and the two smallest starts (so the
        // minimum after the winner moves on is known without a second pass).
        let mut best: Option<(usize, u128)> = None;
        let (mut min1, mut min1_at, mut min2) = (u128::MAX, 0, u128::MAX);
        for i in bits(eligible) {
            let s = self.start[i];
            if s < min1 {
                (min2, min1, min1_at) = (min1, s, i);
            } else if s < min2 {
                min2 = s;
            }
            if s <= self.now_v {
                let finish = s + self.stride[i];
                if best.is_none_or(|(_, f)| finish < f) {
                    best = Some((i, finish));
                }
            }
        }
        // No start has come (only right after state changes): jump to the earliest one.
        let (i, finish) = best.unwrap_or_else(|| {
            self.now_v = min1;
            (min1_at, min1 + self.stride[min1_at])
        });
        self.start[i] = finish;
        let next_min = if i == min1_at { min2.min(finish) } else { min1 };
        self.now_v = (self.now_v + SCALE / self.weight_sum.max(1)).max(next_min);
        Some(PathId(i as u8))
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
        if up && !self.paths.is_up(path) {
            if let Some(s) = self.start.get_mut(path.index()) {
                *s = (*s).max(self.now_v);
            }
        }
        self.paths.set_up(path, up);
        self.update_weight_sum();
    }

    fn is_up(&self, path: PathId) -> bool {
        self.paths.is_up(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    fn wrr(weights: &[u32]) -> WeightedRoundRobin {
        let specs: Vec<_> = weights
            .iter()
            .map(|&w| PathSpec::new(w, None, false))
            .collect();
        WeightedRoundRobin::new(&specs)
    }

    fn sequence(s: &mut WeightedRoundRobin, n: usize) -> String {
        (0..n)
            .map(|_| (b'A' + s.select(Time::ZERO, 100).unwrap().0) as char)
            .collect()
    }

    #[test]
    fn two_one_one_interleaves() {
        assert_eq!(sequence(&mut wrr(&[2, 1, 1]), 12), "ABACABACABAC");
    }

    #[test]
    fn five_one_one_spreads_the_heavy_path() {
        let seq = sequence(&mut wrr(&[5, 1, 1]), 14);
        assert_eq!(seq.matches('A').count(), 10);
        assert!(!seq.contains("AAAA"), "{seq}");
    }

    #[test]
    fn shares_exact_over_100k() {
        for weights in [
            vec![2u32, 1, 1],
            vec![1, 2, 1, 2],
            vec![7, 3],
            vec![100, 1, 10, 1000],
        ] {
            let mut s = wrr(&weights);
            let c = shares(&mut s, weights.len(), 100_000, 1000);
            let w: Vec<f64> = weights.iter().map(|&w| f64::from(w)).collect();
            assert_shares(&c, &w, 0.01);
        }
    }

    #[test]
    fn shares_with_64_paths() {
        let weights: Vec<u32> = (1..=64).collect();
        let mut s = wrr(&weights);
        let c = shares(&mut s, 64, 100_000, 1000);
        let w: Vec<f64> = weights.iter().map(|&w| f64::from(w)).collect();
        // The lightest path gets ~48 packets here; allow one packet of rounding.
        for (i, (&n, &wi)) in c.iter().zip(&w).enumerate() {
            let want = 100_000.0 * wi / w.iter().sum::<f64>();
            assert!(
                (n as f64 - want).abs() <= (want * 0.01).max(1.0),
                "path {i}: {n} vs {want}"
            );
        }
    }

    #[test]
    fn returning_path_does_not_burst() {
        let mut s = wrr(&[1, 1]);
        s.on_path_state(Time::ZERO, PathId(1), false);
        assert_eq!(sequence(&mut s, 50), "A".repeat(50));
        s.on_path_state(Time::ZERO, PathId(1), true);
        assert_eq!(sequence(&mut s, 6), "ABABAB");
    }

    #[test]
    fn state_rules() {
        check_state_rules(|p| Box::new(WeightedRoundRobin::new(p)));
    }
}
