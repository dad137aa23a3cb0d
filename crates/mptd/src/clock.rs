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

    /// The tokio instant corresponding to `t`.
    pub fn instant(&self, t: Time) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.start + std::time::Duration::from_nanos(t.as_nanos()))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
