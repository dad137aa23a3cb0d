use mpt_core::PathId;

use crate::PathSpec;

/// Which paths are up and which of them may be used now, as bit masks (≤ 64 paths).
#[derive(Debug, Clone)]
pub struct PathSet {
    len: usize,
    up: u64,
    backup: u64,
}

impl PathSet {
    /// All paths start up.
    ///
    /// # Panics
    /// With more than [`mpt_core::MAX_PATHS`] paths (the config refuses them).
    pub fn new(paths: &[PathSpec]) -> Self {
        assert!(paths.len() <= mpt_core::MAX_PATHS, "at most 64 paths");
        let backup = paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.backup)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        let up = if paths.len() == 64 {
            u64::MAX
        } else {
            (1u64 << paths.len()) - 1
        };
        PathSet {
            len: paths.len(),
            up,
            backup,
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

    /// Whether path `i` is a backup.
    pub fn is_backup(&self, i: usize) -> bool {
        i < 64 && self.backup & (1 << i) != 0
    }

    /// The paths that may carry traffic now: the regular paths that are up, or, when there
    /// are none, the backup paths that are up.
    pub fn eligible(&self) -> u64 {
        let regular = self.up & !self.backup;
        if regular != 0 {
            regular
        } else {
            self.up & self.backup
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
