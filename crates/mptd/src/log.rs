//! Rate-limited logging: a repeated error is logged the first time and then every
//! [`EVERY`]th time, with its count, so that a flood neither fills the journal nor hides.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One log line per this many occurrences.
pub const EVERY: u64 = 1000;

/// Counts occurrences of one kind of event and says which of them to log.
#[derive(Debug, Default)]
pub struct RateLimit(AtomicU64);

impl RateLimit {
    /// One more occurrence: `Some(count so far)` when this one should be logged.
    pub fn hit(&self) -> Option<u64> {
        self.hit_n(1)
    }

    /// `n` more occurrences: `Some(count so far)` when they reach the first or a next
    /// [`EVERY`]th.
    pub fn hit_n(&self, n: u64) -> Option<u64> {
        let before = self.0.fetch_add(n, Relaxed);
        let after = before + n;
        (n > 0 && (before == 0 || (before - 1) / EVERY != (after - 1) / EVERY)).then_some(after)
    }

    /// Occurrences so far.
    pub fn count(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_and_every_thousandth() {
        let r = RateLimit::default();
        let logged: Vec<u64> = (0..2500).filter_map(|_| r.hit()).collect();
        assert_eq!(logged, [1, 1001, 2001]);
        assert_eq!(r.count(), 2500);
        let r = RateLimit::default();
        assert_eq!(r.hit_n(5), Some(5));
        assert_eq!(r.hit_n(990), None);
        assert_eq!(r.hit_n(10), Some(1005));
    }
}
