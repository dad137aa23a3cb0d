//! Pacing ([`Scheduler::pace`](crate::Scheduler::pace)): a second clock per path, at the
//! rate the path is paced at, that says when every path a bonded packet may take is full, so
//! that it waits in the sender instead of in a link's queue.
//!
//! A path is paced only at a rate known to be near its capacity: configured (`rate`), or,
//! for `adaptive`, a little above the most the path has delivered once a queue showed it
//! full. A path whose capacity is not known yet is never full: pacing it at a rate guessed
//! too low would keep it from showing more, and it would never learn its capacity.

use mpt_core::Time;

use crate::clock::ns_per_byte;

/// A paced sender that found every path full waits until one has this much room: the packets
/// it then sends leave together (in one GSO send), and timers fire at most every millisecond.
pub const PACE_QUANTUM: std::time::Duration = std::time::Duration::from_millis(2);

/// The largest datagram a path is paced for, bytes on the wire (an MTU of 1500).
const LARGEST_DATAGRAM: usize = 1500;

/// The pacing clocks of a scheduler's paths.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    /// A path is full once its clock runs this far ahead of now, nanoseconds.
    limit: u64,
    /// Per path: the pacing clock, nanoseconds.
    busy: Vec<u64>,
    /// Per path: serialisation time per byte at the pacing rate (16.16 fixed point); zero for
    /// a path not paced.
    ns_per_byte: Vec<u64>,
}

impl Pacer {
    /// Pacing `paths` paths with `limit`, at the rates of `rates` (`None`: not paced).
    pub(crate) fn new(limit: std::time::Duration, rates: &[Option<u64>]) -> Pacer {
        Pacer {
            limit: limit.as_nanos() as u64,
            busy: vec![0; rates.len()],
            ns_per_byte: rates.iter().map(|r| r.map_or(0, ns_per_byte)).collect(),
        }
    }

    /// Pace path `i` at `rate_bps`, or not at all.
    pub(crate) fn set_rate(&mut self, i: usize, rate_bps: Option<u64>) {
        if let Some(n) = self.ns_per_byte.get_mut(i) {
            *n = rate_bps.map_or(0, ns_per_byte);
        }
    }

    fn serialisation(&self, i: usize, len: usize) -> u64 {
        (len as u64).saturating_mul(self.ns_per_byte[i]) >> 16
    }

    /// How long `len` bytes take on the fastest paced path (`None`: none is paced).
    pub(crate) fn granule(&self, len: usize) -> Option<std::time::Duration> {
        (0..self.busy.len())
            .filter(|&i| self.ns_per_byte[i] > 0)
            .map(|i| self.serialisation(i, len))
            .min()
            .map(std::time::Duration::from_nanos)
    }

    /// `len` bytes went on path `i` at `now`.
    pub(crate) fn on_sent(&mut self, now: u64, i: usize, len: usize) {
        if i < self.busy.len() {
            self.busy[i] = self.busy[i].max(now) + self.serialisation(i, len);
        }
    }

    /// `len` bytes given to [`Pacer::on_sent`] never left.
    pub(crate) fn on_unsent(&mut self, now: u64, i: usize, len: usize) {
        if i < self.busy.len() {
            self.busy[i] = self.busy[i]
                .saturating_sub(self.serialisation(i, len))
                .max(now);
        }
    }

    /// The receiver saw `queue` waiting on path `i`: its clock runs at least that far ahead
    /// of `now`. A path paced a little above what it carries builds a queue slowly, which the
    /// clock alone would not show.
    pub(crate) fn hold_queue(&mut self, now: u64, i: usize, queue: std::time::Duration) {
        if let Some(b) = self.busy.get_mut(i) {
            *b = (*b).max(now + queue.as_nanos() as u64);
        }
    }

    /// How far path `i`'s clock may run ahead before it is full: the limit, or on a line so
    /// slow that a largest datagram takes longer, that datagram's time, so that its link
    /// always has the next datagram (and small packets gather in bundles as long as an
    /// unpaced link's queue would hold them).
    fn limit(&self, i: usize) -> u64 {
        self.limit.max(self.serialisation(i, LARGEST_DATAGRAM))
    }

    /// The paths full at `now`, one bit each.
    pub(crate) fn full(&self, now: u64) -> u64 {
        (0..self.busy.len())
            .filter(|&i| self.busy[i] > now + self.limit(i))
            .fold(0, |m, i| m | 1 << i)
    }

    /// When every path of `candidates` is full at `now`: the time the soonest of them has
    /// [`PACE_QUANTUM`] of room; `None` when one has room now.
    pub(crate) fn until(&self, now: u64, candidates: u64) -> Option<Time> {
        if candidates & !self.full(now) != 0 {
            return None;
        }
        let quantum = PACE_QUANTUM.as_nanos() as u64;
        let soonest = mpt_core::bits(candidates)
            .map(|i| self.busy[i] - self.limit(i).saturating_sub(quantum))
            .min()?;
        Some(Time::from_nanos(soonest))
    }
}

#[cfg(test)]
mod tests {
    use mpt_core::PathId;

    use crate::{PathSpec, RateScheduler, Scheduler, PACE_QUANTUM};

    const MS: u64 = 1_000_000;

    /// Two paths of 10 Mbit/s (configured), paced with a 20 ms limit.
    fn paced() -> RateScheduler {
        let spec = PathSpec::new(1, Some(10_000_000), false).with_overhead(0);
        let mut s = RateScheduler::new(&[spec, spec]);
        s.pace(Some(std::time::Duration::from_millis(20)));
        s
    }

    /// Send `n` datagrams of `len` bytes at `now` where the scheduler says.
    fn send(s: &mut RateScheduler, now: mpt_core::Time, n: usize, len: usize) {
        for _ in 0..n {
            let p = s.select(now, len).expect("a path");
            s.on_sent(now, p, len);
        }
    }

    #[test]
    fn bonded_traffic_waits_once_every_path_holds_the_limit() {
        let mut s = paced();
        let t0 = mpt_core::Time::from_nanos(MS);
        // 1250 bytes take 1 ms at 10 Mbit/s: 20 on each path fill them to the limit
        send(&mut s, t0, 40, 1250);
        assert_eq!(s.paced_until(t0), None);
        send(&mut s, t0, 2, 1250);
        // both paths 21 ms ahead: offered again when one has the quantum of room
        let until = s.paced_until(t0).expect("held");
        let room = 20 * MS - PACE_QUANTUM.as_nanos() as u64;
        assert_eq!(until.as_nanos(), t0.as_nanos() + 21 * MS - room);
        assert_eq!(s.paced_until(until), None);
    }

    #[test]
    fn a_line_slower_than_a_datagram_in_the_limit_is_full_only_beyond_a_datagram() {
        // 1500 bytes take 187.5 ms at 64 kbit/s, far beyond the 20 ms limit: were the path
        // full after any datagram, its link would idle between them and small packets would
        // not gather in bundles (table2 17s lost 1.6-2 % to the pacing queue's CoDel)
        let spec = PathSpec::new(1, Some(64_000), false).with_overhead(0);
        let mut s = RateScheduler::new(&[spec]);
        s.pace(Some(std::time::Duration::from_millis(20)));
        let t0 = mpt_core::Time::from_nanos(MS);
        send(&mut s, t0, 1, 1500);
        assert_eq!(s.paced_until(t0), None, "one datagram queued");
        send(&mut s, t0, 1, 200);
        // 212.5 ms ahead: offered again once it is a datagram's time less the quantum ahead
        let until = s.paced_until(t0).expect("held");
        let ahead = 187_500_000 + 25_000_000;
        let room = 187_500_000 - PACE_QUANTUM.as_nanos() as u64;
        assert_eq!(until.as_nanos(), t0.as_nanos() + ahead - room);
    }

    #[test]
    fn the_granule_is_a_datagram_on_the_fastest_paced_path() {
        let spec = |r| PathSpec::new(1, Some(r), false).with_overhead(0);
        let mut s = RateScheduler::new(&[spec(64_000), spec(128_000), spec(64_000)]);
        assert_eq!(s.pace_granule(1500), None);
        s.pace(Some(std::time::Duration::from_millis(20)));
        // 1500 bytes at 128 kbit/s: 93.75 ms
        let g = s.pace_granule(1500).expect("paced");
        assert!(
            g.abs_diff(std::time::Duration::from_micros(93_750))
                < std::time::Duration::from_micros(10),
            "{g:?}"
        );
        s.set_pace_rate(PathId(1), None);
        let g = s.pace_granule(1500).expect("paced");
        assert!(
            g.abs_diff(std::time::Duration::from_micros(187_500))
                < std::time::Duration::from_micros(10),
            "{g:?}"
        );
    }

    #[test]
    fn a_path_whose_capacity_is_not_known_is_never_full() {
        let mut s = paced();
        s.set_pace_rate(PathId(1), None);
        let t0 = mpt_core::Time::from_nanos(MS);
        send(&mut s, t0, 500, 1250);
        assert_eq!(s.paced_until(t0), None);
    }

    #[test]
    fn a_queue_the_receiver_saw_holds_the_path_full() {
        let mut s = paced();
        let t0 = mpt_core::Time::from_nanos(MS);
        s.hold_queue(t0, PathId(0), std::time::Duration::from_millis(30));
        s.hold_queue(t0, PathId(1), std::time::Duration::from_millis(25));
        let until = s.paced_until(t0).expect("held");
        assert_eq!(until.as_nanos(), t0.as_nanos() + 25 * MS - 18 * MS);
    }
}
