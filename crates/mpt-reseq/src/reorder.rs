//! RFC 4737 reordering: the reordered singleton (§3) and the reordering extent (§4.2).

use std::collections::VecDeque;

/// How many prefix-maximum records are kept for the extent computation. Extents reaching
/// further back than the oldest record are reported as lower bounds.
pub const REORDER_HISTORY: usize = 4096;

/// Tracks `NextExp` and the arrivals that raised it.
///
/// Every arrival that sets a new maximum seq is recorded as (arrival position, seq); both
/// increase along the ring, so for a reordered packet the earliest arrival with a greater seq
/// (RFC 4737 §4.2.2's `j`) is found by binary search.
#[derive(Debug, Clone)]
pub(crate) struct ReorderTracker {
    /// Reserved (64 KiB, [`REORDER_HISTORY`] records) when a session's first packet comes
    /// ([`ReorderTracker::reserve`]): an idle peer's holds none.
    records: VecDeque<(u64, u64)>,
    next_exp: u64,
    position: u64,
}

impl ReorderTracker {
    pub(crate) fn new() -> Self {
        ReorderTracker {
            records: VecDeque::new(),
            next_exp: 0,
            position: 0,
        }
    }

    /// The history's room, reserved once, as the first packet of a session comes: whole, not
    /// grown (and copied) in steps.
    pub(crate) fn reserve(&mut self) {
        if self.records.capacity() == 0 {
            self.records.reserve_exact(REORDER_HISTORY);
        }
    }

    /// A packet with (extended) seq `seq` arrived. Returns its reordering extent if it is
    /// reordered (`seq < NextExp`), `None` if it is in order.
    #[inline]
    pub(crate) fn observe(&mut self, seq: u64) -> Option<u64> {
        let i = self.position;
        self.position += 1;
        if seq >= self.next_exp {
            self.next_exp = seq + 1;
            if self.records.len() >= REORDER_HISTORY {
                self.records.pop_front();
            }
            self.records.push_back((i, seq));
            None
        } else {
            let k = self.records.partition_point(|&(_, s)| s <= seq);
            let j = self.records.get(k).map_or(i, |&(pos, _)| pos);
            Some(i.saturating_sub(j))
        }
    }

    /// Forget the sequence history (new session); arrival positions keep counting.
    pub(crate) fn clear(&mut self) {
        self.records.clear();
        self.next_exp = 0;
    }

    /// All extended seqs were lowered by `delta`.
    pub(crate) fn rebase(&mut self, delta: u64) {
        self.next_exp = self.next_exp.saturating_sub(delta);
        for r in self.records.iter_mut() {
            r.1 = r.1.saturating_sub(delta);
        }
    }

    #[cfg(test)]
    pub(crate) fn records(&self) -> usize {
        self.records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: &[u64]) -> Vec<Option<u64>> {
        let mut t = ReorderTracker::new();
        seqs.iter().map(|&s| t.observe(s)).collect()
    }

    #[test]
    fn single_late_packet() {
        // arrival order 1,2,4,5,3: seq 3 arrives at position 5, the first greater seq (4) at
        // position 3, extent 2.
        assert_eq!(run(&[1, 2, 4, 5, 3]), [None, None, None, None, Some(2)]);
    }

    #[test]
    fn block_of_late_packets() {
        // 1,2,3,7,8,9,4,5,6,10: 4,5,6 are reordered; the earliest greater seq for each is 7 at
        // position 4, so the extents are 7-4, 8-4, 9-4.
        let r = run(&[1, 2, 3, 7, 8, 9, 4, 5, 6, 10]);
        assert_eq!(
            r,
            [
                None,
                None,
                None,
                None,
                None,
                None,
                Some(3),
                Some(4),
                Some(5),
                None
            ]
        );
    }

    #[test]
    fn early_packet_makes_followers_reordered() {
        // 1,4,2,3: 2 and 3 are reordered (4 arrived at position 2), extents 1 and 2.
        assert_eq!(run(&[1, 4, 2, 3]), [None, None, Some(1), Some(2)]);
        // extent refers to the *earliest* greater seq: 1,3,5,2 -> 2 is preceded by 3 at pos 2
        assert_eq!(run(&[1, 3, 5, 2]), [None, None, None, Some(2)]);
        // and 1,3,5,4: 4's earliest greater seq is 5 (pos 3): extent 1
        assert_eq!(run(&[1, 3, 5, 4]), [None, None, None, Some(1)]);
    }

    #[test]
    fn history_is_bounded() {
        let mut t = ReorderTracker::new();
        for s in 0..10 * REORDER_HISTORY as u64 {
            assert_eq!(t.observe(s + 10), None);
            assert!(t.records() <= REORDER_HISTORY);
        }
        // seq 0 precedes everything retained: extent measured to the oldest record (bound)
        let e = t.observe(0);
        assert_eq!(e, Some(REORDER_HISTORY as u64));
    }
}
