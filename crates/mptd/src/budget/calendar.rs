//! The calendar of a data budget's periods: given the time (Unix seconds) and the local
//! offset from UTC, the period it falls in, from its reset to the next. Pure: the caller passes
//! the time in. Days are counted with Howard Hinnant's civil-date algorithms, which are exact
//! over the proleptic Gregorian calendar (leap years: every fourth, but not centuries that
//! are not a multiple of 400).

const DAY: i64 = 86_400;

/// How long a budget's period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// From one reset day of the month to the same day of the next (a day the month lacks,
    /// such as the 31st in April, is the month's last).
    Month,
    /// From one reset weekday (1 Monday to 7 Sunday) to the next.
    Week,
    /// From one local midnight to the next.
    Day,
}

impl Period {
    /// The period a setting names (`month`, `week`, `day`).
    pub fn parse(s: &str) -> Option<Period> {
        match s {
            "month" => Some(Period::Month),
            "week" => Some(Period::Week),
            "day" => Some(Period::Day),
            _ => None,
        }
    }

    /// Its name, as the setting writes it.
    pub fn name(self) -> &'static str {
        match self {
            Period::Month => "month",
            Period::Week => "week",
            Period::Day => "day",
        }
    }
}

/// A period of a budget: from `start` to `end` (Unix seconds, `end` not included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: i64,
    pub end: i64,
}

impl Window {
    /// Whether `t` (Unix seconds) lies in the window.
    pub fn contains(&self, t: i64) -> bool {
        (self.start..self.end).contains(&t)
    }
}

/// When a budget's periods reset: every `period`, on day `day` (of the month, 1 to 31; of the
/// week, 1 Monday to 7 Sunday; ignored for a daily period), at local midnight, the local time
/// being UTC plus `utc_offset` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reset {
    pub period: Period,
    pub day: u8,
    pub utc_offset: i32,
}

/// The period of `reset` that the time `now` (Unix seconds) falls in.
pub fn window(now: i64, reset: Reset) -> Window {
    let offset = i64::from(reset.utc_offset);
    // local days since 1970-01-01, and local midnight's Unix time for a local day
    let today = (now + offset).div_euclid(DAY);
    let midnight = |day: i64| day * DAY - offset;
    match reset.period {
        Period::Day => Window {
            start: midnight(today),
            end: midnight(today + 1),
        },
        Period::Week => {
            // 1970-01-01 was a Thursday: weekday 4 when Monday is 1
            let weekday = (today + 3).rem_euclid(7) + 1;
            let back = (weekday - i64::from(reset.day.clamp(1, 7))).rem_euclid(7);
            let start = today - back;
            Window {
                start: midnight(start),
                end: midnight(start + 7),
            }
        }
        Period::Month => {
            let (y, m, d) = civil_from_days(today);
            let day = u32::from(reset.day.clamp(1, 31));
            let this = reset_in(y, m, day);
            let (start, end) = if d >= day.min(days_in_month(y, m)) {
                let (ny, nm) = next_month(y, m);
                (this, reset_in(ny, nm, day))
            } else {
                let (py, pm) = previous_month(y, m);
                (reset_in(py, pm, day), this)
            };
            Window {
                start: midnight(start),
                end: midnight(end),
            }
        }
    }
}

/// The local day (days since 1970-01-01) of the reset in month `m` of year `y`: day `day`, or
/// the month's last if it is shorter.
fn reset_in(y: i64, m: u32, day: u32) -> i64 {
    days_from_civil(y, m, day.min(days_in_month(y, m)))
}

fn next_month(y: i64, m: u32) -> (i64, u32) {
    if m == 12 {
        (y + 1, 1)
    } else {
        (y, m + 1)
    }
}

fn previous_month(y: i64, m: u32) -> (i64, u32) {
    if m == 1 {
        (y - 1, 12)
    } else {
        (y, m - 1)
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// `unix` (seconds) as local time at `utc_offset` seconds from UTC: "2027-01-01 00:00".
pub fn local_minute(unix: i64, utc_offset: i32) -> String {
    let local = unix + i64::from(utc_offset);
    let (y, m, d) = civil_from_days(local.div_euclid(DAY));
    let secs = local.rem_euclid(DAY);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        secs / 60 % 60
    )
}

/// Days in month `m` (1 to 12) of year `y`.
pub fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of the date `y`-`m`-`d` (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month, day) of the day `z` days since 1970-01-01 (Hinnant's
/// `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix seconds of `y`-`m`-`d` `h`:00 UTC.
    fn at(y: i64, m: u32, d: u32, h: i64) -> i64 {
        days_from_civil(y, m, d) * DAY + h * 3600
    }

    fn monthly(day: u8) -> Reset {
        Reset {
            period: Period::Month,
            day,
            utc_offset: 0,
        }
    }

    #[test]
    fn days_and_dates_agree_both_ways_across_four_centuries() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        for z in (days_from_civil(1900, 1, 1)..days_from_civil(2300, 1, 1)).step_by(7) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z, "{y}-{m}-{d}");
            assert!(d >= 1 && d <= days_in_month(y, m));
        }
    }

    #[test]
    fn leap_years_are_every_fourth_but_not_centuries_unless_by_400() {
        assert_eq!(days_in_month(2028, 2), 29);
        assert_eq!(days_in_month(2027, 2), 28);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
    }

    #[test]
    fn a_month_runs_from_its_reset_day_to_the_next_months() {
        let w = window(at(2026, 12, 6, 12), monthly(1));
        assert_eq!((w.start, w.end), (at(2026, 12, 1, 0), at(2027, 1, 1, 0)));
        // before the reset day: the period that began last month
        let w = window(at(2026, 12, 6, 12), monthly(15));
        assert_eq!((w.start, w.end), (at(2026, 11, 15, 0), at(2026, 12, 15, 0)));
        // on the reset day, from its midnight
        let w = window(at(2026, 12, 15, 0), monthly(15));
        assert_eq!(w.start, at(2026, 12, 15, 0));
        // the last second before it belongs to the period before
        let w = window(at(2026, 12, 15, 0) - 1, monthly(15));
        assert_eq!(w.end, at(2026, 12, 15, 0));
    }

    #[test]
    fn a_reset_on_the_31st_falls_on_a_shorter_months_last_day() {
        // February 2027 has 28 days, 2028's 29
        let w = window(at(2027, 2, 20, 0), monthly(31));
        assert_eq!((w.start, w.end), (at(2027, 1, 31, 0), at(2027, 2, 28, 0)));
        let w = window(at(2027, 2, 28, 6), monthly(31));
        assert_eq!((w.start, w.end), (at(2027, 2, 28, 0), at(2027, 3, 31, 0)));
        let w = window(at(2028, 2, 28, 6), monthly(31));
        assert_eq!((w.start, w.end), (at(2028, 1, 31, 0), at(2028, 2, 29, 0)));
        let w = window(at(2028, 2, 29, 6), monthly(30));
        assert_eq!((w.start, w.end), (at(2028, 2, 29, 0), at(2028, 3, 30, 0)));
        // April has 30 days
        let w = window(at(2027, 4, 30, 1), monthly(31));
        assert_eq!((w.start, w.end), (at(2027, 4, 30, 0), at(2027, 5, 31, 0)));
    }

    #[test]
    fn a_month_crosses_the_year_end() {
        let w = window(at(2026, 12, 31, 23), monthly(20));
        assert_eq!((w.start, w.end), (at(2026, 12, 20, 0), at(2027, 1, 20, 0)));
        let w = window(at(2027, 1, 5, 0), monthly(20));
        assert_eq!((w.start, w.end), (at(2026, 12, 20, 0), at(2027, 1, 20, 0)));
    }

    #[test]
    fn weeks_start_on_their_weekday_across_a_year_end() {
        let weekly = |day| Reset {
            period: Period::Week,
            day,
            utc_offset: 0,
        };
        // 2026-12-31 is a Thursday; the Monday before is the 28th
        let w = window(at(2026, 12, 31, 9), weekly(1));
        assert_eq!((w.start, w.end), (at(2026, 12, 28, 0), at(2027, 1, 4, 0)));
        // Sunday's week: from Sunday 2026-12-27
        let w = window(at(2026, 12, 31, 9), weekly(7));
        assert_eq!((w.start, w.end), (at(2026, 12, 27, 0), at(2027, 1, 3, 0)));
        // on its weekday, from its midnight
        let w = window(at(2026, 12, 31, 0), weekly(4));
        assert_eq!(w.start, at(2026, 12, 31, 0));
    }

    #[test]
    fn local_midnight_is_the_offset_away_from_utcs() {
        let daily = |utc_offset| Reset {
            period: Period::Day,
            day: 1,
            utc_offset,
        };
        // UTC+2: 2026-12-06 23:30 UTC is already the 7th locally
        let w = window(at(2026, 12, 6, 23) + 1800, daily(7200));
        assert_eq!((w.start, w.end), (at(2026, 12, 6, 22), at(2026, 12, 7, 22)));
        // UTC-5: 2026-12-07 03:00 UTC is still the 6th locally
        let w = window(at(2026, 12, 7, 3), daily(-18_000));
        assert_eq!((w.start, w.end), (at(2026, 12, 6, 5), at(2026, 12, 7, 5)));
        // a month's reset at local midnight too
        let reset = Reset {
            period: Period::Month,
            day: 1,
            utc_offset: 3600,
        };
        let w = window(at(2026, 12, 31, 23) + 1, reset);
        assert_eq!(w.start, at(2026, 12, 31, 23));
    }

    #[test]
    fn every_time_lies_in_its_own_window_and_windows_meet() {
        let resets = [
            monthly(1),
            monthly(29),
            monthly(31),
            Reset {
                period: Period::Week,
                day: 3,
                utc_offset: -3600,
            },
            Reset {
                period: Period::Day,
                day: 1,
                utc_offset: 19_800,
            },
        ];
        for reset in resets {
            let mut t = at(2027, 12, 1, 0);
            let end = at(2029, 3, 1, 0);
            while t < end {
                let w = window(t, reset);
                assert!(w.contains(t), "{t} not in {w:?} for {reset:?}");
                assert_eq!(window(w.end, reset).start, w.end, "{reset:?}");
                assert_eq!(window(w.start, reset), w);
                t += 7 * 3600 + 13;
            }
        }
    }
}
