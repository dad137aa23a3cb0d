//! The replay window: which counters of a session were seen.

use std::fmt;

/// Counters accepted behind the highest one seen (a multiple of 64, one word below the bitmap).
pub const REPLAY_WINDOW: u64 = (REPLAY_WORDS as u64 - 1) * 64;
const REPLAY_WORDS: usize = 1024;

/// Why a counter was refused by the replay window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Seen before.
    Duplicate,
    /// More than [`REPLAY_WINDOW`] behind the highest counter seen.
    TooOld,
}

/// Sliding bitmap of the counters seen in one session (RFC 6479's layout: one spare word, so
/// the window moves by clearing whole words). [`check`](Self::check) before opening,
/// [`mark`](Self::mark) only after the datagram authenticated: forged counters move nothing.
#[derive(Clone)]
pub struct ReplayWindow {
    highest: Option<u64>,
    bits: Box<[u64]>,
}

impl fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("highest", &self.highest)
            .finish_non_exhaustive()
    }
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            highest: None,
            bits: vec![0; REPLAY_WORDS].into_boxed_slice(),
        }
    }
}

impl ReplayWindow {
    fn slot(c: u64) -> (usize, u64) {
        (((c / 64) % REPLAY_WORDS as u64) as usize, 1u64 << (c % 64))
    }

    /// The full counter of a datagram whose low 32 bits are `low` ([`super::expand_counter`]).
    pub fn expand(&self, low: u32) -> u64 {
        super::expand_counter(self.highest, low)
    }

    /// Whether `counter` may still be accepted.
    pub fn check(&self, counter: u64) -> Result<(), Replay> {
        let Some(h) = self.highest else {
            return Ok(());
        };
        if counter > h {
            return Ok(());
        }
        if h - counter >= REPLAY_WINDOW {
            return Err(Replay::TooOld);
        }
        let (w, bit) = Self::slot(counter);
        if self.bits[w] & bit != 0 {
            Err(Replay::Duplicate)
        } else {
            Ok(())
        }
    }

    /// Record an authenticated `counter` (which passed [`check`](Self::check)).
    pub fn mark(&mut self, counter: u64) {
        match self.highest {
            Some(h) if counter <= h => {}
            Some(h) => {
                // the words the window moves into start empty
                let (from, to) = (h / 64 + 1, counter / 64);
                if to.saturating_sub(from) + 1 >= REPLAY_WORDS as u64 {
                    self.bits.fill(0);
                } else {
                    for w in from..=to {
                        self.bits[(w % REPLAY_WORDS as u64) as usize] = 0;
                    }
                }
                self.highest = Some(counter);
            }
            None => self.highest = Some(counter),
        }
        let (w, bit) = Self::slot(counter);
        self.bits[w] |= bit;
    }

    /// The highest authenticated counter so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn replay_window() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.check(0), Ok(()));
        w.mark(0);
        assert_eq!(w.check(0), Err(Replay::Duplicate));
        w.mark(5);
        assert_eq!(w.check(3), Ok(()));
        w.mark(3);
        assert_eq!(w.check(3), Err(Replay::Duplicate));
        assert_eq!(w.check(4), Ok(()));
        // a big step: the old ones fall out of the window
        w.mark(5 + REPLAY_WINDOW);
        assert_eq!(w.check(4), Err(Replay::TooOld));
        assert_eq!(w.check(5), Err(Replay::TooOld));
        assert_eq!(w.check(6), Ok(()));
        assert_eq!(w.check(5 + REPLAY_WINDOW), Err(Replay::Duplicate));
        // a huge step clears everything
        w.mark(u64::MAX - 1);
        assert_eq!(w.check(u64::MAX - 2), Ok(()));
        assert_eq!(w.check(u64::MAX), Ok(()));
        assert_eq!(w.highest(), Some(u64::MAX - 1));
    }

    proptest! {
        #[test]
        fn replay_window_accepts_each_counter_once(ops in proptest::collection::vec(0u64..200_000, 1..400)) {
            let mut w = ReplayWindow::default();
            let mut seen = std::collections::HashSet::new();
            let mut highest: Option<u64> = None;
            for c in ops {
                let expect = if seen.contains(&c) {
                    Err(Replay::Duplicate)
                } else if highest.is_some_and(|h| c < h && h - c >= REPLAY_WINDOW) {
                    Err(Replay::TooOld)
                } else {
                    Ok(())
                };
                let got = w.check(c);
                // a duplicate that is also too old may be reported either way
                if !(expect == Err(Replay::Duplicate) && got == Err(Replay::TooOld)) {
                    prop_assert_eq!(got, expect, "counter {}", c);
                }
                if got.is_ok() {
                    w.mark(c);
                    seen.insert(c);
                    highest = Some(highest.map_or(c, |h| h.max(c)));
                }
            }
        }
    }
}
