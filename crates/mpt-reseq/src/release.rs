//! The resequencer's inner workings: extended sequence numbers, holding and releasing packets,
//! the progress (fence) rule and the rebase that keeps numbers bounded.

use mpt_core::wire::seq_diff;
use mpt_core::Time;

use super::*;

/// Most gaps waiting for repair at once.
const MAX_REPAIRS: usize = 256;

impl<P> Resequencer<P> {
    /// Anchors the extended seq space on the first seq of a session: start from 0 if the seq is
    /// small (a fresh sender, earlier packets may still be in flight), else resync to it.
    pub(crate) fn start(&mut self, seq: u32) {
        self.started = true;
        self.reorder.reserve();
        let small = self.window.max(MIN_HISTORY) as u64;
        let first = u64::from(seq);
        self.head = EXT_OFFSET + if first < small { 0 } else { first };
    }

    /// The extended seq nearest to the release point with these low 32 bits.
    #[inline]
    pub(crate) fn extend(&self, seq: u32) -> u64 {
        self.head
            .wrapping_add_signed(i64::from(seq_diff(seq, self.head as u32)))
    }

    #[inline]
    pub(crate) fn is_duplicate(&self, ext: u64) -> bool {
        let h = self.received.half();
        ext + h >= self.head && ext < self.head + h && self.received.get(ext)
    }

    /// Window 0: deliver at once unless too old to tell from a duplicate.
    pub(crate) fn passthrough(
        &mut self,
        now: Time,
        p: usize,
        ext: u64,
        payload: P,
        deliver: &mut impl FnMut(P),
    ) {
        if ext >= self.head {
            self.set_head(ext + 1);
        } else if !self.behind(p, ext) {
            return;
        }
        self.received.set(ext);
        self.emit(now, now, payload, deliver);
    }

    /// A packet below the release point that is no duplicate: whether it is recent enough to
    /// be told from one (then it is delivered out of order, and counted so), or is dropped as
    /// too old.
    pub(crate) fn behind(&mut self, p: usize, ext: u64) -> bool {
        if ext + self.received.half() < self.head {
            self.stats.total.too_old += 1;
            self.stats.paths[p].too_old += 1;
            return false;
        }
        self.stats.total.delivered_out_of_order += 1;
        true
    }

    /// Window > 0: deliver, hold or drop one new (non-duplicate) packet.
    pub(crate) fn resequence(
        &mut self,
        now: Time,
        p: usize,
        ext: u64,
        payload: P,
        keep: impl FnOnce(P) -> P,
        deliver: &mut impl FnMut(P),
    ) {
        if ext < self.head {
            // Its gap was given up: late, delivered now unless too old to tell.
            if self.behind(p, ext) {
                self.stats.total.late += 1;
                self.stats.paths[p].late += 1;
                self.received.set(ext);
                self.emit(now, now, payload, deliver);
            }
            return;
        }
        self.make_room(now, ext, deliver);
        self.received.set(ext);
        if ext == self.head {
            self.set_head(ext + 1);
            self.emit(now, now, payload, deliver);
            if self.held > 0 {
                self.deliver_consecutive(now, deliver);
            }
        } else {
            self.hold(now, ext, Some(keep(payload)), now + self.timeout);
        }
    }

    /// Before `ext` (ahead of the release point) takes a slot: a packet beyond the ring
    /// flushes what lies too far back, and a full window gives up its oldest gap.
    fn make_room(&mut self, now: Time, ext: u64, deliver: &mut impl FnMut(P)) {
        if ext > self.head {
            if ext - self.head >= self.cap {
                // beyond the ring: flush (in order) what lies too far back, O(cap)
                self.release_to(now, ext - self.cap + 1, Cause::Overflow, deliver);
            }
            if ext > self.head && self.held >= self.window {
                // full: give up the oldest gap (or the gap before this packet, if earlier)
                let first = self.first_held().unwrap_or(ext);
                self.release_to(now, first.min(ext), Cause::Overflow, deliver);
            }
        }
    }

    /// Put `payload` (`None`: the mark of an express packet delivered already) in `ext`'s
    /// slot, ahead of the release point, with its deadline.
    /// Hold `payload` (`None`: an express packet's mark) in `ext`'s slot, arrived at `now`,
    /// until `deadline` at the latest.
    fn hold(&mut self, now: Time, ext: u64, payload: Option<P>, deadline: Time) {
        let slot = (ext & self.mask) as usize;
        if self.ring.is_empty() {
            self.ring.resize_with(self.cap as usize, || None);
            self.deadlines.reserve(2 * self.cap as usize + 1);
        }
        let mark = payload.is_none();
        if let Some(s) = self.ring.get_mut(slot) {
            if let Some(old) = s.replace(Entry {
                payload,
                arrival: now,
            }) {
                // (a slot is taken once per seq: duplicates never reach here)
                self.marks -= usize::from(old.payload.is_none());
            } else {
                self.held += 1;
            }
            self.marks += usize::from(mark);
        }
        self.add_deadline(ext, deadline, mark);
    }

    /// Window > 0: an express packet ahead of the release point is delivered now; its slot
    /// keeps a mark, so that the release point passes it when the gaps before it are filled
    /// or given up, as if it had been held. The gaps before it wait the hold time from
    /// `now + grace` ([`Resequencer::push_express_overtaking`]).
    pub(crate) fn mark_express(
        &mut self,
        (now, grace): (Time, Duration),
        p: usize,
        ext: u64,
        payload: P,
        deliver: &mut impl FnMut(P),
    ) {
        self.make_room(now, ext, deliver);
        if ext == self.head {
            // making room gave up every gap before it: it is in order now
            self.resequence(now, p, ext, payload, |p| p, deliver);
            return;
        }
        self.received.set(ext);
        self.emit(now, now, payload, deliver);
        self.hold(now, ext, None, now + grace + self.timeout);
    }

    /// Hand over a slot's entry taken at the release point: its packet, unless it is the
    /// mark of an express packet delivered already.
    fn release_entry(&mut self, now: Time, entry: Entry<P>, deliver: &mut impl FnMut(P)) {
        self.held -= 1;
        match entry.payload {
            Some(payload) => self.emit(now, entry.arrival, payload, deliver),
            None => self.marks -= 1,
        }
    }

    /// Hands one packet to the caller.
    #[inline]
    pub(crate) fn emit(
        &mut self,
        now: Time,
        arrival: Time,
        payload: P,
        deliver: &mut impl FnMut(P),
    ) {
        let t = &mut self.stats.total;
        t.delivered += 1;
        t.hold_time_ns
            .record(now.as_nanos().saturating_sub(arrival.as_nanos()));
        deliver(payload);
    }

    /// Moves the release point forward, keeping the received-bitmap in step.
    #[inline]
    pub(crate) fn set_head(&mut self, new: u64) {
        self.received.advance(self.head, new);
        self.head = new;
    }

    /// Lowers every extended seq by a multiple of 2^32 (ring and bitmap indices unchanged)
    /// once the release point has gone far. Called only at the start of an operation, when no
    /// extended seq is held in a local. One operation moves the head by less than 2^32, so
    /// nothing overflows in between.
    #[inline]
    pub(crate) fn maybe_rebase(&mut self) {
        if self.head < self.rebase_at {
            return;
        }
        let delta = ((self.head - EXT_OFFSET) >> 32) << 32;
        if delta == 0 {
            return;
        }
        self.head -= delta;
        for ps in self.paths.iter_mut() {
            ps.progress = ps.progress.saturating_sub(delta);
        }
        for d in self
            .deadlines
            .iter_mut()
            .chain(self.mark_deadlines.iter_mut())
        {
            d.0 = d.0.saturating_sub(delta);
        }
        for r in self.repairs.iter_mut() {
            r.0 = r.0.saturating_sub(delta);
        }
        self.reorder.rebase(delta);
    }

    /// Delivers the held packets from the head on while there is no gap.
    pub(crate) fn deliver_consecutive(&mut self, now: Time, deliver: &mut impl FnMut(P)) {
        while self.held > 0 {
            let slot = (self.head & self.mask) as usize;
            let Some(entry) = self.ring.get_mut(slot).and_then(Option::take) else {
                break;
            };
            self.set_head(self.head + 1);
            self.release_entry(now, entry, deliver);
        }
        self.tidy_deadlines();
    }

    /// Gives up every missing seq below `target`: delivers the held packets below it in order,
    /// moves the head to `target`, then delivers what follows without a gap.
    /// O(min(target - head, cap)).
    pub(crate) fn release_to(
        &mut self,
        now: Time,
        target: u64,
        cause: Cause,
        deliver: &mut impl FnMut(P),
    ) {
        if target <= self.head {
            return;
        }
        let span = target - self.head;
        if self.repair.is_some() && cause == Cause::Fence {
            self.keep_given_up(span);
        }
        let mut delivered = 0u64;
        if self.held > 0 {
            // Held packets all lie in [head, head + cap): when span >= cap, all are below target.
            for k in 0..span.min(self.cap) {
                let slot = ((self.head + k) & self.mask) as usize;
                if let Some(entry) = self.ring.get_mut(slot).and_then(Option::take) {
                    delivered += 1;
                    self.release_entry(now, entry, deliver);
                }
            }
        }
        let skipped = span - delivered;
        if skipped > 0 {
            self.stats.total.skipped += skipped;
            let t = &mut self.stats.total;
            match cause {
                Cause::Timeout => t.released_by_timeout += 1,
                Cause::Fence => t.released_by_fence += 1,
                Cause::Overflow => t.released_by_overflow += 1,
            }
        }
        self.set_head(target);
        self.deliver_consecutive(now, deliver);
    }

    /// The progress rule gives up the `span` seqs from the release point on, with resending
    /// on: those never received may come again, resent. Kept for
    /// [`Resequencer::take_given_up`], at most [`MAX_GIVEN_UP`] (the first ones); none of a
    /// span beyond the duplicate history (an outage). (Those given up at the hold time are
    /// not: most often a path went silent, and a packet that waited for them would wait out
    /// the hold time once more.)
    fn keep_given_up(&mut self, span: u64) {
        if span > self.received.half() {
            return;
        }
        for ext in self.head..self.head + span {
            if self.given_up.len() >= MAX_GIVEN_UP {
                return;
            }
            if !self.received.get(ext) {
                self.given_up.push(ext as u32);
            }
        }
    }

    /// The lowest held extended seq.
    pub(crate) fn first_held(&self) -> Option<u64> {
        if self.held == 0 {
            return None;
        }
        (0..self.cap)
            .map(|k| self.head + k)
            .find(|&s| matches!(self.ring.get((s & self.mask) as usize), Some(Some(_))))
    }

    /// The highest held extended seq.
    pub(crate) fn last_held(&self) -> Option<u64> {
        if self.held == 0 {
            return None;
        }
        (0..self.cap)
            .rev()
            .map(|k| self.head + k)
            .find(|&s| matches!(self.ring.get((s & self.mask) as usize), Some(Some(_))))
    }

    /// The progress rule: a missing seq below the progress of every counting path can no
    /// longer arrive, so give it up. With no counting path at all, nothing can arrive: release
    /// everything held.
    pub(crate) fn progress_check(&mut self, now: Time, deliver: &mut impl FnMut(P)) {
        if self.held == 0 {
            return;
        }
        let target = if self.counting == 0 {
            match self.last_held() {
                Some(last) => last + 1,
                None => return,
            }
        } else {
            match self.slowest() {
                Some((_, progress)) => progress,
                None => return,
            }
        };
        if target <= self.head || target == u64::MAX {
            return;
        }
        match self.repair {
            // the gap's packet may come again (a gap was asked for within the wait; not a
            // queue that overflowed): it waits for it (not past the hold time)
            Some(wait)
                if !wait.is_zero()
                    && self.counting != 0
                    && self
                        .measure
                        .gap_kept_at
                        .is_some_and(|at| now.saturating_since(at) <= wait) =>
            {
                // (bounded: past that, a gap waits for its packets' hold time)
                if self.repairs.len() < MAX_REPAIRS
                    && self.repairs.back().is_none_or(|&(t, _)| t < target)
                {
                    self.repairs.push_back((target, now + wait));
                }
            }
            _ => self.release_to(now, target, Cause::Fence, deliver),
        }
    }
}
