//! The resequencer's deadlines: when each held packet (or express mark) is given up on, and
//! the releases their expiry and the repair waits make.

use mpt_core::Time;

use super::*;

impl<P> Resequencer<P> {
    /// `ext` (a mark of an express packet, with `mark`) is given up on at `deadline`.
    pub(crate) fn add_deadline(&mut self, ext: u64, deadline: Time, mark: bool) {
        let head = self.head;
        let cap = 2 * self.cap as usize;
        if mark {
            // in deadline order: marks of paths of different graces interleave
            let q = &mut self.mark_deadlines;
            let at = q.len() - q.iter().rev().take_while(|&&(_, d)| d > deadline).count();
            q.insert(at, (ext, deadline));
            if q.len() > cap {
                q.retain(|&(e, _)| e >= head);
            }
        } else {
            self.deadlines.push_back((ext, deadline));
            if self.deadlines.len() > cap {
                self.deadlines.retain(|&(e, _)| e >= head);
            }
        }
    }

    /// Drops deadline entries of packets already delivered from the front of the queue.
    #[inline]
    pub(crate) fn tidy_deadlines(&mut self) {
        let head = self.head;
        for q in [&mut self.deadlines, &mut self.mark_deadlines] {
            while q.front().is_some_and(|&(e, _)| e < head) {
                q.pop_front();
            }
        }
    }

    /// The earliest deadline of a held packet or mark (after [`Self::tidy_deadlines`], one
    /// that is held).
    pub(crate) fn next_deadline(&self) -> Option<(u64, Time)> {
        match (self.deadlines.front(), self.mark_deadlines.front()) {
            (Some(&a), Some(&b)) => Some(if b.1 < a.1 { b } else { a }),
            (a, b) => a.or(b).copied(),
        }
    }

    /// Releases the held packets whose deadline is not after `now`, and the gaps whose wait
    /// for repair is over.
    pub(crate) fn expire(&mut self, now: Time, deliver: &mut impl FnMut(P)) {
        while let Some(&(target, at)) = self.repairs.front() {
            if at > now {
                break;
            }
            self.repairs.pop_front();
            self.release_to(now, target, Cause::Fence, deliver);
        }
        loop {
            self.tidy_deadlines();
            match self.next_deadline() {
                Some((ext, deadline)) if self.held > 0 && deadline <= now => {
                    self.release_to(now, ext + 1, Cause::Timeout, deliver);
                }
                _ => break,
            }
        }
    }
}
