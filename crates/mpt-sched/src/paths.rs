use mpt_core::PathId;

use crate::PathSpec;

/// Which paths are up and which of them may be used now, as bit masks (≤ 64 paths).
#[derive(Debug, Clone)]
pub struct PathSet {
    len: usize,
    up: u64,
    /// The paths of each tier ([`PathSpec::tier`]), highest (lowest number) first.
    tiers: Vec<(u8, u64)>,
}

impl PathSet {
    /// All paths start up.
    ///
    /// # Panics
    /// With more than [`mpt_core::MAX_PATHS`] paths (the config refuses them).
    pub fn new(paths: &[PathSpec]) -> Self {
        assert!(paths.len() <= mpt_core::MAX_PATHS, "at most 64 paths");
        let mut tiers: Vec<(u8, u64)> = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            match tiers.iter_mut().find(|(t, _)| *t == p.tier()) {
                Some((_, mask)) => *mask |= 1 << i,
                None => tiers.push((p.tier(), 1 << i)),
            }
        }
        tiers.sort_unstable_by_key(|&(t, _)| t);
        let up = if paths.len() == 64 {
            u64::MAX
        } else {
            (1u64 << paths.len()) - 1
        };
        PathSet {
            len: paths.len(),
            up,
            tiers,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Record a state change; ids beyond the set are ignored.
    pub fn set_up(&mut self, path: PathId, up: bool) {
        if path.index() >= self.len {
            return;
        }
        let bit = 1u64 << path.index();
        if up {
            self.up |= bit;
        } else {
            self.up &= !bit;
        }
    }

    pub fn is_up(&self, path: PathId) -> bool {
        path.index() < self.len && self.up & (1 << path.index()) != 0
    }

    /// Whether path `i` is a backup of others: outside the highest tier configured.
    pub fn is_backup(&self, i: usize) -> bool {
        i < 64 && self.tiers.iter().skip(1).any(|&(_, m)| m & (1 << i) != 0)
    }

    /// The paths that may carry traffic now: those up in the highest tier that has a path up.
    pub fn eligible(&self) -> u64 {
        self.eligible_overflowing(0)
    }

    /// The paths that may carry traffic now when those of `full` have no room: the highest
    /// tier that has a path up, and the next tier's too while every path taken so far is
    /// full (overflow), and so on; backups only while nothing else is up.
    pub fn eligible_overflowing(&self, full: u64) -> u64 {
        let mut taken = 0u64;
        for &(tier, mask) in &self.tiers {
            if tier == u8::MAX && taken != 0 {
                break;
            }
            taken |= self.up & mask;
            if taken & !full != 0 {
                break;
            }
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_are_used_in_order_and_overflow_into_the_next_when_full() {
        let spec = |p: u8| PathSpec::new(1, None, false).with_priority(p);
        let mut s = PathSet::new(&[spec(2), spec(1), spec(3), PathSpec::new(1, None, true)]);
        assert_eq!(s.eligible(), 0b0010);
        assert!(!s.is_backup(1) && s.is_backup(0) && s.is_backup(3));
        // the first tier full: the second overflows in; both full: the third
        assert_eq!(s.eligible_overflowing(0b0010), 0b0011);
        assert_eq!(s.eligible_overflowing(0b0011), 0b0111);
        assert_eq!(
            s.eligible_overflowing(0b0111),
            0b0111,
            "a backup takes no overflow"
        );
        // the first tier down: the second, then the third, then the backup
        s.set_up(PathId(1), false);
        assert_eq!(s.eligible(), 0b0001);
        s.set_up(PathId(0), false);
        assert_eq!(s.eligible(), 0b0100);
        s.set_up(PathId(2), false);
        assert_eq!(s.eligible(), 0b1000);
        s.set_up(PathId(1), true);
        assert_eq!(s.eligible(), 0b0010);
    }

    #[test]
    fn eligible_prefers_regular_paths() {
        let mut s = PathSet::new(&[
            PathSpec::new(1, None, false),
            PathSpec::new(1, None, true),
            PathSpec::new(1, None, false),
        ]);
        assert_eq!(s.eligible(), 0b101);
        s.set_up(PathId(0), false);
        s.set_up(PathId(2), false);
        assert_eq!(s.eligible(), 0b010);
        s.set_up(PathId(1), false);
        assert_eq!(s.eligible(), 0);
        s.set_up(PathId(9), true);
        assert_eq!(s.eligible(), 0);
    }

    #[test]
    fn sixty_four_paths() {
        let s = PathSet::new(&[PathSpec::new(1, None, false); 64]);
        assert_eq!(s.eligible(), u64::MAX);
        assert!(s.is_up(PathId(63)));
    }
}
