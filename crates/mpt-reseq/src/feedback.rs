//! When the receiver sends its next report: within a share of the bandwidth it receives,
//! adapting that share to how steady the paths are (MPMTP-AR's feedback rule).
//!
//! A report is due once the data received since the previous one is large enough that the
//! report costs at most `fraction` of it (1–5 %, starting at 2.5 %), but never sooner than
//! [`MIN_INTERVAL`] and, while data flows, never later than [`MAX_INTERVAL`] (so every path is
//! reported at least once a second). Nothing is sent while nothing arrives. Every third report
//! the fraction shrinks by 7 % if every path's delivery ratio moved by at most 0.05 since the
//! last adjustment, and grows by 7 % otherwise. Over the whole run, reports never cost more
//! than [`DEFAULT_FRACTION`] of what was received: the share rises above it only on what a
//! steadier stretch saved (apart from the once-a-second floor, which on a very slow tunnel
//! may cost more).
//!
//! A queue building on a path cannot wait for the budget: on a 64 kbit/s line a report is due
//! only every 300 ms, and a path overdriven that long holds packets for longer than the
//! resequencer waits. So a report is also sent (no sooner than [`URGENT_INTERVAL`] after the
//! previous one) when a path's smoothed one-way delay stands [`URGENT_QUEUE_US`] above its
//! minimum and has grown by half, plus [`URGENT_RISE_US`], since the last report (on a slow
//! line a lone packet's serialisation makes a "queue" of 10–20 ms that comes and goes). Such a
//! report comes early, not on top: it is sent only while the reports so far are within the
//! long-run budget, itself included (overdrawing by [`URGENT_START_SLACK`] reports only during
//! the first [`URGENT_START_REPORTS`], when too little has been received to pay for any), and
//! the next ones wait for it.

use std::time::Duration;

use mpt_core::wire::ReportEntry;
use mpt_core::{PathId, Time};

use crate::PathStats;

pub const DEFAULT_FRACTION: f64 = 0.025;
pub const MIN_FRACTION: f64 = 0.01;
pub const MAX_FRACTION: f64 = 0.05;
pub const MIN_INTERVAL: Duration = Duration::from_millis(20);
pub const MAX_INTERVAL: Duration = Duration::from_secs(1);
/// Reports between adjustments of the fraction.
pub const ADJUST_EVERY: u32 = 3;
/// Queueing delay (smoothed minus minimum one-way delay) that makes a report urgent...
pub const URGENT_QUEUE_US: f64 = 10_000.0;
/// ...if it has grown by half and this much since the last report.
pub const URGENT_RISE_US: f64 = 5_000.0;
/// Shortest time between two reports when one is urgent.
pub const URGENT_INTERVAL: Duration = Duration::from_millis(40);
/// Urgent reports among a tunnel's first [`URGENT_START_REPORTS`] may overdraw the long-run
/// budget by this many reports (the start, when rates are still unknown, is when queues grow).
pub const URGENT_START_SLACK: u64 = 4;
pub const URGENT_START_REPORTS: u32 = 10;
/// Change of a path's delivery ratio that counts as "changing".
pub const STEADY_DELTA: f64 = 0.05;

impl PathStats {
    /// What a receiver report says at `now` about this path, `path`, from these statistics;
    /// `up` is whether the receiver has the path up.
    pub fn report_entry(&self, path: PathId, now: Time, up: bool) -> ReportEntry {
        let clamp = |v: i64| v.clamp(0, i64::from(u32::MAX)) as u32;
        ReportEntry {
            path,
            flags: if up { ReportEntry::FLAG_UP } else { 0 },
            path_seq: self.highest_path_seq.unwrap_or(0),
            packets: self.packets as u32,
            bytes: self.bytes,
            lost: self.lost as u32,
            owd_min_us: clamp(self.owd_min_us.unwrap_or(0)),
            jitter_us: self.jitter_us.max(0.0) as u32,
            owd_us: clamp(self.owd_us.unwrap_or(0.0) as i64),
            echo: self.last_sent_us.unwrap_or(0),
            echo_age_us: self
                .last_arrival
                .map_or(0, |a| (now - a).as_micros() as u32),
            owd_min_len: self.owd_min_len.unwrap_or(0).min(usize::from(u16::MAX)) as u16,
        }
    }
}

/// Paces receiver reports (sans-IO).
#[derive(Debug, Clone)]
pub struct ReportPacer {
    fraction: f64,
    last_at: Option<Time>,
    bytes_at_last: u64,
    /// Report bytes sent since the start.
    spent: u64,
    reports: u32,
    /// Per path: the queue at the last report, microseconds.
    queue_at_last: Vec<f64>,
    /// Per path: (packets, lost) at the last adjustment, and the delivery ratio then.
    at_adjust: Vec<(u64, u64, f64)>,
}

impl Default for ReportPacer {
    fn default() -> Self {
        ReportPacer {
            fraction: DEFAULT_FRACTION,
            last_at: None,
            bytes_at_last: 0,
            spent: 0,
            reports: 0,
            queue_at_last: Vec::new(),
            at_adjust: Vec::new(),
        }
    }
}

impl ReportPacer {
    /// The current share of received bandwidth spent on reports.
    pub fn fraction(&self) -> f64 {
        self.fraction
    }

    /// Whether all report bytes so far plus one more report of `report_bytes` stay within the
    /// long-run budget of the `rx_bytes` received, give or take `slack` reports.
    fn affords(&self, rx_bytes: u64, report_bytes: usize, slack: u64) -> bool {
        let report = report_bytes as u64;
        (self.spent + report) as f64 <= DEFAULT_FRACTION * rx_bytes as f64 + (slack * report) as f64
    }

    /// Whether a report is urgent at `now` because the queue on some path has grown (see the
    /// module documentation); `queues` are the paths' queues, microseconds (each judged on its
    /// own: a path that stopped carrying traffic keeps showing the queue its last packets saw).
    pub fn urgent(&self, now: Time, rx_bytes: u64, report_bytes: usize, queues: &[f64]) -> bool {
        let Some(last) = self.last_at else {
            return false;
        };
        // After the start an urgent report must fit the budget whole: they come when a queue
        // keeps growing, and one overdrawing report each time adds up.
        let slack = if self.reports < URGENT_START_REPORTS {
            URGENT_START_SLACK
        } else {
            0
        };
        let grown = queues.iter().enumerate().any(|(i, &q)| {
            let before = self.queue_at_last.get(i).copied().unwrap_or(0.0);
            q >= URGENT_QUEUE_US && q >= 1.5 * before + URGENT_RISE_US
        });
        grown
            && now - last >= URGENT_INTERVAL
            && rx_bytes > self.bytes_at_last
            && self.affords(rx_bytes, report_bytes, slack)
    }

    /// Whether a report of `report_bytes` (on the wire) is due at `now`, `rx_bytes` having been
    /// received in all since the start.
    pub fn due(&self, now: Time, rx_bytes: u64, report_bytes: usize) -> bool {
        let new = rx_bytes.saturating_sub(self.bytes_at_last);
        if new == 0 {
            return false;
        }
        let Some(last) = self.last_at else {
            return true;
        };
        let dt = now - last;
        if dt < MIN_INTERVAL {
            return false;
        }
        if dt >= MAX_INTERVAL {
            return true;
        }
        // What was spent so far, this report included, is within the long-run budget (only
        // the first report and the once-a-second floor may overdraw it).
        self.affords(rx_bytes, report_bytes, 0) && new as f64 * self.fraction >= report_bytes as f64
    }

    /// A report of `report_bytes` went out at `now`; `paths` are the cumulative (packets
    /// received, packets lost) per path, `queues` the queue on each path.
    pub fn sent(
        &mut self,
        now: Time,
        rx_bytes: u64,
        report_bytes: usize,
        paths: &[(u64, u64)],
        queues: &[f64],
    ) {
        self.last_at = Some(now);
        self.queue_at_last.clear();
        self.queue_at_last.extend_from_slice(queues);
        self.bytes_at_last = rx_bytes;
        self.spent += report_bytes as u64;
        self.reports += 1;
        if self.at_adjust.len() != paths.len() {
            self.at_adjust = paths.iter().map(|&(p, l)| (p, l, 1.0)).collect();
            return;
        }
        if self.reports % ADJUST_EVERY != 0 {
            return;
        }
        let mut changing = false;
        for (slot, &(p, l)) in self.at_adjust.iter_mut().zip(paths) {
            let (dp, dl) = (p.saturating_sub(slot.0), l.saturating_sub(slot.1));
            if dp + dl == 0 {
                continue; // nothing on this path: no evidence either way
            }
            let ratio = dp as f64 / (dp + dl) as f64;
            changing |= (ratio - slot.2).abs() > STEADY_DELTA;
            *slot = (p, l, ratio);
        }
        let step = if changing { 1.07 } else { 0.93 };
        self.fraction = (self.fraction * step).clamp(MIN_FRACTION, MAX_FRACTION);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_entry_says_what_the_statistics_say() {
        let st = PathStats {
            packets: 10,
            bytes: 12_000,
            lost: 2,
            highest_path_seq: Some(11),
            jitter_us: 150.7,
            owd_us: Some(2_500.9),
            owd_min_us: Some(-5), // never below the fastest path: clamped to 0
            owd_min_len: Some(70_000),
            last_sent_us: Some(9_000),
            last_arrival: Some(Time::from_millis(100)),
            ..PathStats::default()
        };
        let e = st.report_entry(PathId(3), Time::from_millis(130), true);
        assert_eq!(e.path, PathId(3));
        assert_eq!(e.flags, ReportEntry::FLAG_UP);
        assert_eq!(
            (e.packets, e.bytes, e.lost, e.path_seq),
            (10, 12_000, 2, 11)
        );
        assert_eq!((e.jitter_us, e.owd_us, e.owd_min_us), (150, 2_500, 0));
        assert_eq!(e.owd_min_len, u16::MAX);
        // the echo of the last packet's timestamp, and how long ago it arrived
        assert_eq!((e.echo, e.echo_age_us), (9_000, 30_000));
        assert_eq!(st.report_entry(PathId(0), Time::ZERO, false).flags, 0);
    }

    #[test]
    fn spends_the_budget_and_no_more() {
        let mut p = ReportPacer::default();
        assert!(
            !p.due(Time::ZERO, 0, 200),
            "nothing received, nothing to report"
        );
        assert!(p.due(Time::ZERO, 1, 200), "the first data is reported");
        p.sent(Time::ZERO, 1, 200, &[(1, 0)], &[]);
        // 200-byte reports at 2.5 %: one per 8000 bytes received, once the first (sent on
        // credit) is paid for.
        assert!(!p.due(Time::from_millis(30), 8_001, 200));
        assert!(!p.due(Time::from_millis(30), 15_999, 200));
        assert!(p.due(Time::from_millis(30), 16_000, 200));
        // Never sooner than 20 ms, however much arrives.
        assert!(!p.due(Time::from_millis(10), 1_000_000, 200));
        // At least once a second while data flows, never while it does not.
        assert!(p.due(Time::from_millis(1000), 2, 200));
        assert!(!p.due(Time::from_secs(5), 1, 200));
    }

    #[test]
    fn changing_paths_never_push_the_long_run_cost_past_the_default_share() {
        let mut p = ReportPacer::default();
        let (mut rx, mut t, mut lost, mut spent) = (0u64, 0u64, 0u64, 0u64);
        let (mut reports, mut packets_before) = (0u64, 0u64);
        for _ in 0..20_000 {
            t += 5;
            rx += 300;
            let now = Time::from_millis(t);
            if p.due(now, rx, 150) {
                // the delivery ratio swings between 1/2 and 1 every three reports: "changing"
                let packets = rx / 300;
                if reports % 6 < 3 {
                    lost += packets - packets_before;
                }
                (reports, packets_before) = (reports + 1, packets);
                p.sent(now, rx, 150, &[(packets, lost)], &[]);
                spent += 150;
            }
        }
        assert!(p.fraction() > DEFAULT_FRACTION, "{}", p.fraction());
        let share = spent as f64 / rx as f64;
        assert!(share <= DEFAULT_FRACTION + 150.0 / rx as f64, "{share}");
        assert!(
            share > 0.9 * DEFAULT_FRACTION,
            "the budget is used: {share}"
        );
    }

    #[test]
    fn a_growing_queue_is_reported_at_once_within_a_bound() {
        let mut p = ReportPacer::default();
        // A 200 kbit/s tunnel: 25 000 bytes a second, 200-byte reports due every 320 ms.
        let mut rx = 0u64;
        p.sent(Time::ZERO, 1, 200, &[(1, 0)], &[]);
        let mut urgent_at = Vec::new();
        let mut spent = 200u64;
        for ms in (10..=3000u64).step_by(10) {
            rx += 250;
            let now = Time::from_millis(ms);
            // The queue grows 50 ms per 100 ms for the first second, then stands still.
            let queue = ms.min(1000) as f64 * 500.0;
            // Path 1 stopped carrying traffic long ago and still shows a bigger queue.
            let queues = [queue, 800_000.0];
            let urgent = p.urgent(now, rx, 200, &queues);
            if urgent || p.due(now, rx, 200) {
                if urgent {
                    urgent_at.push(ms);
                }
                p.sent(now, rx, 200, &[(rx / 250, 0), (5, 0)], &queues);
                spent += 200;
            }
        }
        eprintln!("urgent reports at {urgent_at:?} ms");
        // Not while the queue is below 10 ms (20 ms in), then while it grows by half, 40 ms
        // apart at least, within the budget; once more at most after it stops growing (for
        // what it grew since the last report).
        assert_eq!(urgent_at.first(), Some(&40), "{urgent_at:?}");
        assert!(
            urgent_at.windows(2).all(|w| w[1] - w[0] >= 40),
            "{urgent_at:?}"
        );
        assert!(
            urgent_at.iter().filter(|&&t| t > 1000).count() <= 1,
            "{urgent_at:?}"
        );
        // At 2.5 % of 25 000 bytes a second, three 200-byte reports a second fit the budget:
        // while the queue grows they come early instead of on the usual schedule.
        assert!(urgent_at.len() >= 4, "{urgent_at:?}");
        assert!(
            spent as f64 <= DEFAULT_FRACTION * rx as f64 + (URGENT_START_SLACK + 1) as f64 * 200.0,
            "spent {spent} of {rx}"
        );
        // A standing queue is no news; nor is one that already was reported.
        assert!(!p.urgent(Time::from_millis(3100), rx + 1000, 200, &[500_000.0, 0.0]));
        // Nor is a small one that comes and goes (a slow line's serialisation).
        let mut p = ReportPacer::default();
        p.sent(Time::ZERO, 1, 200, &[(1, 0)], &[17_000.0]);
        for k in 1..100u64 {
            let q = if k % 2 == 0 { 17_000.0 } else { 25_000.0 };
            let now = Time::from_millis(50 * k);
            assert!(!p.urgent(now, 100_000 * k, 200, &[q]), "{k}");
            p.sent(now, 100_000 * k, 200, &[(k, 0)], &[q]);
        }
    }

    #[test]
    fn steady_paths_shrink_the_share_changing_ones_grow_it() {
        let mut p = ReportPacer::default();
        p.sent(Time::ZERO, 0, 0, &[(0, 0)], &[]);
        let mut t = 0;
        let mut packets = 0;
        // 0.025 · 0.93^n reaches 0.01 after 13 adjustments, i.e. 39 reports.
        for _ in 0..45 {
            t += 100;
            packets += 100;
            p.sent(Time::from_millis(t), packets, 0, &[(packets, 0)], &[]);
        }
        assert_eq!(p.fraction(), MIN_FRACTION);
        let mut lost = 0;
        for k in 0..30 {
            t += 100;
            packets += 100;
            lost += if k % 6 < 3 { 50 } else { 0 }; // delivery ratio swings between 2/3 and 1
            p.sent(Time::from_millis(t), packets, 0, &[(packets, lost)], &[]);
        }
        assert!(p.fraction() > MIN_FRACTION * 1.5, "{}", p.fraction());
        assert!(p.fraction() <= MAX_FRACTION);
    }
}
