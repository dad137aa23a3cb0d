use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time: nanoseconds since an arbitrary epoch chosen by the caller.
///
/// The daemon measures it from its own start; tests start a simulated clock at zero. The core
/// crates only ever compare and subtract `Time`s, so the epoch does not matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The epoch itself.
    pub const ZERO: Time = Time(0);

    pub const fn from_nanos(ns: u64) -> Self {
        Time(ns)
    }

    pub const fn from_micros(us: u64) -> Self {
        Time(us.saturating_mul(1_000))
    }

    pub const fn from_secs(s: u64) -> Self {
        Time(s.saturating_mul(1_000_000_000))
    }

    pub const fn from_millis(ms: u64) -> Self {
        Time(ms.saturating_mul(1_000_000))
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }

    /// The low 32 bits of the time in microseconds: the send timestamp carried on the wire.
    /// It wraps every ~71.6 minutes; receivers only use differences of nearby values.
    pub const fn wire_micros(self) -> u32 {
        (self.0 / 1_000) as u32
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// Microseconds from `earlier` to `later` on the wire clock ([`Time::wire_micros`]), negative
/// when `later` is the earlier one: serial-number arithmetic (RFC 1982), right for times
/// within about 35 minutes of each other.
pub const fn wire_micros_between(earlier: u32, later: u32) -> i32 {
    later.wrapping_sub(earlier) as i32
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturating difference.
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(5);
        assert_eq!(t + Duration::from_micros(1), Time::from_nanos(5_001_000));
        assert_eq!(Time::ZERO - t, Duration::ZERO);
        assert_eq!(t - Time::from_millis(2), Duration::from_millis(3));
        assert_eq!(
            Time::from_nanos(u64::MAX) + Duration::from_secs(1),
            Time::from_nanos(u64::MAX)
        );
    }

    #[test]
    fn wire_micros_wraps() {
        assert_eq!(Time::from_micros(u64::from(u32::MAX) + 5).wire_micros(), 4);
    }

    #[test]
    fn wire_times_compare_across_the_wrap() {
        let before = Time::from_micros(u64::from(u32::MAX) - 9).wire_micros();
        let after = Time::from_micros(u64::from(u32::MAX) + 11).wire_micros();
        assert_eq!(wire_micros_between(before, after), 20);
        assert_eq!(wire_micros_between(after, before), -20);
        assert_eq!(wire_micros_between(after, after), 0);
    }
}
