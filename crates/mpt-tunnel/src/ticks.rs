//! When each periodic job is next due ([`Timers`]), on its grid ([`next_tick`]).

use std::time::Duration;

use mpt_core::Time;

/// When each periodic job is next due.
#[derive(Debug, Clone)]
pub(crate) struct Timers {
    pub(crate) keepalive: Time,
    pub(crate) report: Time,
    pub(crate) liveness: Time,
}

impl Timers {
    /// Every job due at `now`.
    pub(crate) fn new(now: Time) -> Timers {
        Timers {
            keepalive: now,
            report: now,
            liveness: now,
        }
    }
}

/// A periodic job that was due at `due` and runs at `now`: next due one `period` later, on its
/// grid, unless it ran more than [`LATE`] late (then one `period` from now), as tokio's
/// intervals with `MissedTickBehavior::Delay` do.
pub(crate) fn next_tick(due: Time, now: Time, period: Duration) -> Time {
    if now > due + LATE {
        now + period
    } else {
        due + period
    }
}

/// How late a periodic job may run and stay on its grid.
const LATE: Duration = Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_jobs_stay_on_their_grid_unless_far_late() {
        let at = Time::from_millis;
        let p = Duration::from_millis(10);
        assert_eq!(next_tick(at(100), at(101), p), at(110));
        assert_eq!(next_tick(at(100), at(105), p), at(110));
        assert_eq!(next_tick(at(100), at(106), p), at(116));
    }
}
