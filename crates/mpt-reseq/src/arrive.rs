//! Arrivals: every data packet goes through [`Resequencer::admit`] (expiry, measurement,
//! duplicates, reordering) and is then placed: in order, held, late or dropped. Bulk, express
//! and resent packets differ only in how they are placed; the repair wait and the path
//! sequence gaps for resend requests are set and taken here too.

use std::time::Duration;

use mpt_core::Time;

use crate::{Gap, PacketMeta, Resequencer};

impl<P> Resequencer<P> {
    /// A data packet arrived at `now`. Packets that become deliverable (possibly including
    /// this one) are passed to `deliver` in order. Held packets whose deadline is not after
    /// `now` are released first.
    pub fn push(&mut self, now: Time, meta: PacketMeta, payload: P, deliver: &mut impl FnMut(P)) {
        self.push_keeping(now, meta, payload, |p| p, deliver);
    }

    /// [`push`](Self::push) for a payload that may borrow the caller's short-lived storage
    /// (a receive buffer about to be reused): `keep` is called on it exactly when this packet
    /// is held, and must return a payload that owns its bytes. A packet delivered or dropped
    /// within this call is never kept, so in-order packets need no copy of their own.
    pub fn push_keeping(
        &mut self,
        now: Time,
        meta: PacketMeta,
        payload: P,
        keep: impl FnOnce(P) -> P,
        deliver: &mut impl FnMut(P),
    ) {
        if let Some((p, ext)) = self.admit(now, &meta, false, deliver) {
            self.place(now, p, ext, payload, keep, deliver);
        }
        self.stats.total.occupancy.record(self.held());
    }

    /// A new (non-duplicate) packet of path `p`, extended seq `ext`: delivered at once, held
    /// or dropped as the window says, and what it makes deliverable follows.
    fn place(
        &mut self,
        now: Time,
        p: usize,
        ext: u64,
        payload: P,
        keep: impl FnOnce(P) -> P,
        deliver: &mut impl FnMut(P),
    ) {
        if self.window == 0 {
            self.passthrough(now, p, ext, payload, deliver);
        } else {
            self.resequence(now, p, ext, payload, keep, deliver);
            if self.held > 0 {
                self.progress_check(now, deliver);
            }
        }
    }

    /// An express packet arrived at `now` ([`mpt_core::wire::Kind::Express`]): delivered at
    /// once unless it is a duplicate (or too old to tell from one), ahead of any gap before
    /// it. Its seq counts as received: the release point passes it without waiting, and a
    /// copy that comes later is a duplicate. Held packets it makes deliverable follow it.
    pub fn push_express(
        &mut self,
        now: Time,
        meta: PacketMeta,
        payload: P,
        deliver: &mut impl FnMut(P),
    ) {
        self.push_express_overtaking(now, meta, payload, (false, Duration::ZERO), deliver);
    }

    /// [`push_express`](Self::push_express); with `overtakes`, the packet overtook packets of
    /// its own path that the caller still holds, sent before it: its path's progress stays
    /// where it was, so that their gaps are not given up as lost (a path's datagrams are
    /// otherwise taken in the order it carried them). `grace`: how long the caller holds the
    /// data of the packet's path before it comes here (delay equalisation: the packets sent
    /// before it on farther paths arrive that much later than it did); the gaps before it
    /// wait the hold time from `now + grace`, as they would behind a packet that waited.
    pub fn push_express_overtaking(
        &mut self,
        now: Time,
        meta: PacketMeta,
        payload: P,
        (overtakes, grace): (bool, Duration),
        deliver: &mut impl FnMut(P),
    ) {
        let p = meta.path.index();
        let before = self.paths.get(p).map(|s| s.progress);
        let admitted = self.admit(now, &meta, false, deliver);
        if let (true, Some(progress)) = (overtakes, before) {
            self.paths[p].progress = progress;
        }
        if let Some((p, ext)) = admitted {
            self.place_express((now, grace), p, ext, payload, deliver);
        }
        self.stats.total.occupancy.record(self.held());
    }

    /// A data packet arrived at `now`, to be pushed later ([`push_measured`](Self::push_measured)):
    /// its path's measurement (counters, loss, delay, jitter, what the receiver reports) takes
    /// it now, as it arrived.
    pub fn measure(&mut self, now: Time, meta: &PacketMeta) {
        let p = meta.path.index();
        if p < self.paths.len() {
            self.measure.arrival(now, p, meta, &mut self.stats);
        }
    }

    /// [`push_keeping`](Self::push_keeping) (or, with `express`,
    /// [`push_express`](Self::push_express)) at `now` of a packet [`measure`](Self::measure)d
    /// when it arrived, earlier: the caller kept it meanwhile.
    pub fn push_measured(
        &mut self,
        now: Time,
        meta: PacketMeta,
        payload: P,
        express: bool,
        deliver: &mut impl FnMut(P),
    ) {
        if let Some((p, ext)) = self.admit(now, &meta, true, deliver) {
            if express {
                self.place_express((now, Duration::ZERO), p, ext, payload, deliver);
            } else {
                self.place(now, p, ext, payload, |p| p, deliver);
            }
        }
        self.stats.total.occupancy.record(self.held());
    }

    /// A new express packet of path `p`, extended seq `ext`: delivered at once, its slot
    /// marked if it is ahead of the release point (its gaps' hold counted from `now + grace`).
    fn place_express(
        &mut self,
        (now, grace): (Time, Duration),
        p: usize,
        ext: u64,
        payload: P,
        deliver: &mut impl FnMut(P),
    ) {
        if self.window == 0 {
            self.passthrough(now, p, ext, payload, deliver);
        } else if ext <= self.head {
            // in order, or late: as any packet
            self.resequence(now, p, ext, payload, |p| p, deliver);
        } else {
            self.mark_express((now, grace), p, ext, payload, deliver);
            self.progress_check(now, deliver);
        }
    }

    /// A packet the sender sent again because we named its path sequence in a resend
    /// request ([`mpt_core::wire::Kind::Resent`]), arrived at `now` on `meta.path`: it fills
    /// its gap like any packet, but says nothing of the path it came on (no measurement, no
    /// progress: it was numbered before what the path carried since). Returns whether it
    /// filled a gap not given up yet (a loss recovered, [`crate::Totals::recovered`]).
    pub fn push_resent(
        &mut self,
        now: Time,
        meta: PacketMeta,
        payload: P,
        keep: impl FnOnce(P) -> P,
        deliver: &mut impl FnMut(P),
    ) -> bool {
        self.stats.total.resent += 1;
        let p = meta.path.index();
        if p >= self.paths.len() || !self.started {
            self.stats.total.invalid_path += u64::from(p >= self.paths.len());
            return false;
        }
        if self.held > 0 {
            self.expire(now, deliver);
        }
        self.maybe_rebase();
        let ext = self.extend(meta.seq);
        if self.duplicate(p, ext) {
            return false;
        }
        let in_time = ext >= self.head;
        self.place(now, p, ext, payload, keep, deliver);
        self.stats.total.recovered += u64::from(in_time);
        self.stats.total.occupancy.record(self.held());
        in_time
    }

    /// Resending on (`Some`) or off: a gap the progress rule finds lost (every path has
    /// carried something sent after it) still waits `wait` for its packet to come again,
    /// never past the hold time (zero: not at all, the packet is delivered late when it
    /// comes). Path sequence gaps are kept for [`take_gaps`](Self::take_gaps) while it is on.
    pub fn set_repair(&mut self, wait: Option<Duration>) {
        self.repair = wait;
        self.measure.keep_gaps = wait.is_some();
    }

    /// The global sequence numbers the progress rule gave up since the last call, while
    /// resending is on ([`Resequencer::set_repair`]), appended to `out`: their packets may
    /// still come, resent, and are then delivered late. The caller may hold packets that must
    /// not overtake them (a stream that does not back off) until they come, or for as long as
    /// it likes. At most [`crate::MAX_GIVEN_UP`] are kept between calls (the first ones).
    pub fn take_given_up(&mut self, out: &mut Vec<u32>) {
        out.append(&mut self.given_up);
    }

    /// The path sequence gaps seen since the last call (at most [`crate::MAX_GAPS`]; while
    /// resending is on).
    pub fn take_gaps(&mut self, out: &mut Vec<Gap>) {
        self.measure.take_gaps(out);
    }

    /// Whether extended seq `ext`, arrived on path `p`, was received before (counted).
    fn duplicate(&mut self, p: usize, ext: u64) -> bool {
        let dup = self.is_duplicate(ext);
        if dup {
            self.stats.total.duplicates += 1;
            self.stats.paths[p].duplicates += 1;
        }
        dup
    }

    /// What every arriving data packet goes through: expiry of held packets, measurement,
    /// the seq extended and the path's progress. `None` for a packet of no path, or a
    /// duplicate (counted); else its path and extended seq.
    fn admit(
        &mut self,
        now: Time,
        meta: &PacketMeta,
        measured: bool,
        deliver: &mut impl FnMut(P),
    ) -> Option<(usize, u64)> {
        let p = meta.path.index();
        if p >= self.paths.len() {
            self.stats.total.invalid_path += 1;
            return None;
        }
        if self.held > 0 {
            self.expire(now, deliver);
        }
        if !measured {
            self.measure.arrival(now, p, meta, &mut self.stats);
        }
        self.counting |= 1u64 << p;
        if !self.started {
            self.start(meta.seq);
        }
        self.maybe_rebase();
        let ext = self.extend(meta.seq);
        let progress = &mut self.paths[p].progress;
        if ext >= *progress {
            *progress = ext + 1;
        }
        if self.duplicate(p, ext) {
            return None;
        }
        if let Some(extent) = self.reorder.observe(ext) {
            let t = &mut self.stats.total;
            t.reordered += 1;
            t.reorder_extent_sum += extent;
            t.reorder_extent_max = t.reorder_extent_max.max(extent);
            let s = &mut self.stats.paths[p];
            s.reordered += 1;
            s.reorder_extent_sum += extent;
            s.reorder_extent_max = s.reorder_extent_max.max(extent);
        }
        Some((p, ext))
    }
}
