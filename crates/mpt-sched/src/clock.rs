//! What a scheduler that does not place packets by time still knows of its paths' queues when
//! their rates are configured: a virtual transmit clock per path ([`LinkClock`]). And
//! [`ns_per_byte`], the unit it and the crate's other virtual clocks (`rate`'s, pacing's) run
//! on.

use mpt_core::{PathId, Time};

use crate::PathSpec;

/// Per path with a configured rate: the time at which everything sent on it will have been
/// serialised. Paths without a rate have no clock (their backlog is unknown: zero).
#[derive(Debug, Clone)]
pub struct LinkClock {
    /// Per path: serialisation time per byte, nanoseconds in 16.16 fixed point.
    ns_per_byte: Vec<Option<u64>>,
    busy: Vec<u64>,
}

impl LinkClock {
    pub fn new(paths: &[PathSpec]) -> LinkClock {
        LinkClock {
            ns_per_byte: paths.iter().map(|p| p.rate_bps.map(ns_per_byte)).collect(),
            busy: vec![0; paths.len()],
        }
    }

    /// `len` bytes (on the link) were sent on `path` at `now`.
    pub fn on_sent(&mut self, now: Time, path: PathId, len: usize) {
        let i = path.index();
        if let (Some(Some(n)), Some(busy)) = (self.ns_per_byte.get(i), self.busy.get_mut(i)) {
            let ser = (len as u64).saturating_mul(*n) >> 16;
            *busy = (*busy).max(now.as_nanos()) + ser;
        }
    }

    /// `len` bytes given to [`on_sent`](Self::on_sent) on `path` never left: the clock
    /// runs back by their time (not before `now`).
    pub fn on_unsent(&mut self, now: Time, path: PathId, len: usize) {
        let i = path.index();
        if let (Some(Some(n)), Some(busy)) = (self.ns_per_byte.get(i), self.busy.get_mut(i)) {
            let ser = (len as u64).saturating_mul(*n) >> 16;
            *busy = busy.saturating_sub(ser).max(now.as_nanos());
        }
    }

    /// How long a datagram sent on `path` at `now` would wait.
    pub fn backlog(&self, now: Time, path: PathId) -> std::time::Duration {
        let busy = self.busy.get(path.index()).copied().unwrap_or(0);
        std::time::Duration::from_nanos(busy.saturating_sub(now.as_nanos()))
    }
}

/// Serialisation time per byte at `rate_bps` bits per second: nanoseconds in 16.16 fixed
/// point.
pub(crate) fn ns_per_byte(rate_bps: u64) -> u64 {
    // 8 bits per byte, 1e9 ns per second, 16 fractional bits.
    ((8_000_000_000u128 << 16) / u128::from(rate_bps.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rated_path_queues_what_it_was_given_and_an_unrated_one_nothing() {
        let paths = [
            PathSpec::new(1, Some(1_000_000), false),
            PathSpec::new(1, None, false),
        ];
        let mut c = LinkClock::new(&paths);
        let t = Time::from_millis(10);
        // 1250 bytes at 1 Mbit/s: 10 ms
        c.on_sent(t, PathId(0), 1250);
        c.on_sent(t, PathId(0), 1250);
        c.on_sent(t, PathId(1), 1250);
        assert_eq!(c.backlog(t, PathId(0)).as_millis(), 20);
        assert_eq!(
            c.backlog(t + std::time::Duration::from_millis(15), PathId(0))
                .as_millis(),
            5
        );
        assert_eq!(c.backlog(t, PathId(1)), std::time::Duration::ZERO);
        // idle since: a new packet starts now
        let later = Time::from_millis(100);
        c.on_sent(later, PathId(0), 1250);
        assert_eq!(c.backlog(later, PathId(0)).as_millis(), 10);
    }

    #[test]
    fn a_datagram_that_never_left_gives_its_time_back_but_not_more() {
        let paths = [PathSpec::new(1, Some(1_000_000), false)];
        let mut c = LinkClock::new(&paths);
        let t = Time::from_millis(10);
        c.on_sent(t, PathId(0), 1250);
        c.on_sent(t, PathId(0), 2500);
        c.on_unsent(t, PathId(0), 2500);
        assert_eq!(c.backlog(t, PathId(0)).as_millis(), 10);
        // given back after the line carried part of the rest: never behind now
        let later = t + std::time::Duration::from_millis(5);
        c.on_unsent(later, PathId(0), 2500);
        assert_eq!(c.backlog(later, PathId(0)), std::time::Duration::ZERO);
    }
}
