//! Data budgets per path (`docs/config.md`, `budget`): the bytes a path's uplink carries in a
//! period, both ways, headers included (what a carrier bills), against a limit. Pure: the
//! caller passes the time and the bytes in; the daemon's task counts, keeps the state and
//! acts on the crossings.

pub mod calendar;
pub mod ledger;
pub mod store;

use calendar::{Reset, Window};

/// A budget's setting: at most `limit` bytes per period of `reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub limit: u64,
    pub reset: Reset,
}

/// A line the count crossed, or a period that began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crossing {
    /// A new period began (the count starts again from 0).
    NewPeriod,
    /// The count reached 80 % of the limit.
    Warn,
    /// The count reached the limit.
    Exhausted,
}

/// The count of one path's budget in its period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Bytes counted in the period.
    pub used: u64,
    pub window: Window,
    /// Whether the period's 80 % and 100 % were crossed already.
    pub warned: bool,
    pub exhausted: bool,
}

impl Count {
    /// A count from 0 for the period `now` falls in.
    pub fn new(now: i64, budget: &Budget) -> Count {
        Count {
            used: 0,
            window: calendar::window(now, budget.reset),
            warned: false,
            exhausted: false,
        }
    }

    /// `bytes` more at `now`, and the lines crossed, in order (at most three). A time past
    /// the period's end begins the one `now` falls in. A time before its start (a clock set
    /// back: a router without a real-time clock boots in the past until NTP answers) keeps
    /// the period and its count: a clock that jumps back cannot give a budget back.
    pub fn add(&mut self, now: i64, bytes: u64, budget: &Budget) -> Crossings {
        let mut out = Crossings::default();
        if now >= self.window.end {
            *self = Count::new(now, budget);
            out.push(Crossing::NewPeriod);
        }
        self.used = self.used.saturating_add(bytes);
        if !self.warned && self.used.saturating_mul(5) >= budget.limit.saturating_mul(4) {
            self.warned = true;
            out.push(Crossing::Warn);
        }
        if !self.exhausted && self.used >= budget.limit {
            self.exhausted = true;
            out.push(Crossing::Exhausted);
        }
        out
    }

    /// The count under a changed `budget` at `now` (a reload, or a count read back at start):
    /// a changed calendar moves the period to the one `now` falls in, the count kept (unless
    /// the clock is before the period: a clock set back keeps it); a line no longer reached
    /// (a limit raised) is uncrossed, and one reached now is crossed.
    pub fn rebase(&mut self, now: i64, budget: &Budget) -> Crossings {
        let w = calendar::window(now, budget.reset);
        if self.window.contains(now) && w != self.window {
            self.window = w;
        }
        self.warned &= self.used.saturating_mul(5) >= budget.limit.saturating_mul(4);
        self.exhausted &= self.used >= budget.limit;
        self.add(now, 0, budget)
    }

    /// Bytes left in the period.
    pub fn left(&self, budget: &Budget) -> u64 {
        budget.limit.saturating_sub(self.used)
    }
}

/// The lines one [`Count::add`] crossed, in order, without allocating.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Crossings {
    list: [Option<Crossing>; 3],
}

impl Crossings {
    fn push(&mut self, c: Crossing) {
        if let Some(slot) = self.list.iter_mut().find(|s| s.is_none()) {
            *slot = Some(c);
        }
    }

    /// The crossings, in order.
    pub fn iter(&self) -> impl Iterator<Item = Crossing> + '_ {
        self.list.iter().flatten().copied()
    }
}

/// A monthly budget of `limit` bytes from the 1st, at UTC (the tests').
#[cfg(test)]
pub(crate) fn monthly(limit: u64) -> Budget {
    Budget {
        limit,
        reset: Reset {
            period: calendar::Period::Month,
            day: 1,
            utc_offset: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::calendar::days_from_civil;
    use super::*;

    fn at(y: i64, m: u32, d: u32, h: i64) -> i64 {
        days_from_civil(y, m, d) * 86_400 + h * 3600
    }

    fn crossed(c: Crossings) -> Vec<Crossing> {
        c.iter().collect()
    }

    #[test]
    fn eighty_percent_and_the_limit_are_crossed_once_each() {
        let b = super::monthly(1000);
        let now = at(2026, 12, 6, 12);
        let mut c = Count::new(now, &b);
        assert_eq!(crossed(c.add(now, 799, &b)), []);
        assert_eq!(crossed(c.add(now, 1, &b)), [Crossing::Warn]);
        assert_eq!(crossed(c.add(now, 100, &b)), []);
        assert_eq!(crossed(c.add(now, 100, &b)), [Crossing::Exhausted]);
        assert_eq!(crossed(c.add(now, 5000, &b)), []);
        assert_eq!((c.used, c.left(&b)), (6000, 0));
    }

    #[test]
    fn one_step_over_both_lines_crosses_both_in_order() {
        let b = super::monthly(1000);
        let now = at(2026, 12, 6, 12);
        let mut c = Count::new(now, &b);
        assert_eq!(
            crossed(c.add(now, 2000, &b)),
            [Crossing::Warn, Crossing::Exhausted]
        );
    }

    #[test]
    fn a_new_period_starts_the_count_again() {
        let b = super::monthly(1000);
        let mut c = Count::new(at(2026, 12, 6, 12), &b);
        c.add(at(2026, 12, 20, 0), 1000, &b);
        assert!(c.exhausted);
        let next = at(2027, 1, 1, 0);
        assert_eq!(
            crossed(c.add(next, 900, &b)),
            [Crossing::NewPeriod, Crossing::Warn]
        );
        assert_eq!(c.used, 900);
        assert!(!c.exhausted);
        assert_eq!(c.window.start, next);
        // a period skipped altogether (the router was off): the one now falls in
        let later = at(2027, 3, 15, 0);
        assert_eq!(crossed(c.add(later, 1, &b)), [Crossing::NewPeriod]);
        assert_eq!(c.window.start, at(2027, 3, 1, 0));
    }

    #[test]
    fn a_raised_limit_uncrosses_and_a_lowered_one_crosses() {
        let now = at(2026, 12, 6, 12);
        let mut c = Count::new(now, &super::monthly(1000));
        c.add(now, 1000, &super::monthly(1000));
        assert!(c.exhausted && c.warned);
        assert_eq!(crossed(c.rebase(now, &super::monthly(2000))), []);
        assert!(!c.exhausted && !c.warned);
        assert_eq!(
            crossed(c.rebase(now, &super::monthly(900))),
            [Crossing::Warn, Crossing::Exhausted]
        );
        assert_eq!(c.used, 1000);
    }

    #[test]
    fn a_clock_set_back_keeps_the_period_and_its_count() {
        let b = super::monthly(1000);
        let mut c = Count::new(at(2026, 12, 6, 12), &b);
        c.add(at(2026, 12, 6, 12), 500, &b);
        let window = c.window;
        // booted without a real-time clock: 1970 until NTP answers
        assert_eq!(crossed(c.add(0, 100, &b)), []);
        assert_eq!((c.used, c.window), (600, window));
        // and forward again, within the period
        assert_eq!(
            crossed(c.add(at(2026, 12, 7, 0), 250, &b)),
            [Crossing::Warn]
        );
        assert_eq!(c.window, window);
    }
}
