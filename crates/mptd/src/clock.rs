//! The one place the daemon reads the clock.

use std::time::Instant;

use mpt_core::Time;

/// Monotonic time since the daemon started, as the core crates' [`Time`].
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    #[allow(clippy::disallowed_methods)] // the daemon is where time comes from
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    #[allow(clippy::disallowed_methods)]
    pub fn now(&self) -> Time {
        Time::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// Nanoseconds since the Unix epoch at `Time::ZERO` (the wall clock, read once).
    #[allow(clippy::disallowed_methods)]
    pub fn unix_nanos_at_zero(&self) -> u64 {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        unix.saturating_sub(self.now().as_nanos())
    }

    /// The wall clock now: Unix seconds, and the local time's offset from UTC in seconds
    /// (`localtime_r`'s, as the TZ setting has it; 0 where it cannot be read). For the data
    /// budgets' calendar, which follows the local date.
    #[allow(clippy::disallowed_methods)]
    pub fn wall(&self) -> (i64, i32) {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        (unix, utc_offset(unix))
    }

    /// The tokio instant corresponding to `t`.
    pub fn instant(&self, t: Time) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.start + std::time::Duration::from_nanos(t.as_nanos()))
    }
}

/// The local time's offset from UTC at `unix` (seconds), as `localtime_r` has it (the TZ
/// setting); 0 where it cannot be read.
pub fn utc_offset(unix: i64) -> i32 {
    // the C library's time_t (64 bits on every target built; musl's alias is deprecated by name)
    let t = unix as _;
    // SAFETY: a zeroed `tm` is a valid value, and localtime_r writes only the `tm` it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals for the call's duration.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    if ok {
        tm.tm_gmtoff as i32
    } else {
        0
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
