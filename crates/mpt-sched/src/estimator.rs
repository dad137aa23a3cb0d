//! What the sender learns about each path from the receiver's reports (sans-IO: every input
//! carries its time).
//!
//! * **Delivery rate**, as CMT-Rev estimates it: each report gives a sample (bytes delivered
//!   since the previous report over the time between them); `rate ← Φ·rate + (1−Φ)·sample`
//!   with Φ = ½, then a weighted mean over the last κ = 8 values (weights 1,1,1,1,.8,.6,.4,.2,
//!   newest first).
//! * **Reliability**, as MPMTP-AR: `R ← α·R + (1−α)·(delivered / sent)` with α = 0.8, where
//!   "sent" is the advance of the highest per-path sequence number between two reports (the
//!   number of data packets the sender put on the path), so the ratio is exact.
//! * **Congestion**: loss in the interval, or the smoothed one-way delay standing above the
//!   path's floor by more than a threshold (a queue is building).
//! * **Sending rate** for the scheduler: on congestion the path's rate is halved (not below
//!   90 % of what it delivers) and the difference is spread over the other paths in proportion
//!   to their rates (Common Source Decrease); a path that is busy and not congested probes
//!   upwards by 10 % per report (50 % while it is below the best rate it has delivered).

use mpt_core::wire::{seq16_diff, ReportEntry};
use mpt_core::Time;

/// History length of the smoothed delivery rate (CMT-Rev's κ).
pub const KAPPA: usize = 8;
const HISTORY_WEIGHTS: [f64; KAPPA] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
/// CMT-Rev's Φ.
pub const PHI: f64 = 0.5;
/// MPMTP-AR's α.
pub const ALPHA: f64 = 0.8;
/// Rate a path starts from when the configuration gives none, bits per second.
pub const DEFAULT_START_RATE: f64 = 1_000_000.0;
/// Lowest rate the estimator ever assigns, bits per second.
pub const MIN_RATE: f64 = 8_000.0;
/// Probing step per report for a busy, uncongested path.
pub const PROBE: f64 = 1.10;
/// Faster step while below the best delivery rate seen on the path.
pub const RECOVER: f64 = 1.50;
/// Queueing delay (smoothed minus minimum one-way delay) that counts as congestion, at least.
pub const QUEUE_THRESHOLD_US: f64 = 10_000.0;

/// The sender's picture of one path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathEstimate {
    /// Rate the scheduler should assume, bits per second.
    pub rate_bps: f64,
    /// Smoothed delivery rate (CMT-Rev), bits per second; 0 until measured.
    pub delivery_bps: f64,
    /// Best delivery rate seen, bits per second.
    pub best_delivery_bps: f64,
    /// Reliability R (delivered / sent), 1 until measured.
    pub reliability: f64,
    /// Loss ratio of the last report interval.
    pub last_loss: f64,
    /// Queueing delay in the last report, microseconds.
    pub queue_us: f64,
    /// Whether the last report showed congestion.
    pub congested: bool,
    /// Delay offset above the fastest path, microseconds.
    pub owd_offset_us: u32,
    /// Reports taken.
    pub reports: u64,
    /// Times the rate was cut for congestion.
    pub cuts: u64,
    // Previous report's counters and time.
    last: Option<(Time, ReportEntry)>,
    ewma: f64,
    history: [f64; KAPPA],
    filled: usize,
    /// Bytes the sender put on the path since the last report (busy test).
    sent_bytes: u64,
}

impl PathEstimate {
    fn new(start_rate: Option<u64>) -> Self {
        PathEstimate {
            rate_bps: start_rate.map_or(DEFAULT_START_RATE, |r| r as f64),
            delivery_bps: 0.0,
            best_delivery_bps: 0.0,
            reliability: 1.0,
            last_loss: 0.0,
            queue_us: 0.0,
            congested: false,
            owd_offset_us: 0,
            reports: 0,
            cuts: 0,
            last: None,
            ewma: 0.0,
            history: [0.0; KAPPA],
            filled: 0,
            sent_bytes: 0,
        }
    }

    fn push_sample(&mut self, sample: f64) {
        self.ewma = if self.filled == 0 {
            sample
        } else {
            PHI * self.ewma + (1.0 - PHI) * sample
        };
        self.history.rotate_right(1);
        self.history[0] = self.ewma;
        self.filled = (self.filled + 1).min(KAPPA);
        let (mut num, mut den) = (0.0, 0.0);
        for (v, w) in self.history.iter().zip(HISTORY_WEIGHTS).take(self.filled) {
            num += v * w;
            den += w;
        }
        self.delivery_bps = num / den;
        self.best_delivery_bps = self.best_delivery_bps.max(self.delivery_bps);
    }
}

/// Per-path estimates from receiver reports.
#[derive(Debug, Clone)]
pub struct Estimator {
    paths: Vec<PathEstimate>,
}

impl Estimator {
    /// One estimate per path, starting from the configured rates where given.
    pub fn new(start_rates: &[Option<u64>]) -> Self {
        Estimator {
            paths: start_rates.iter().map(|&r| PathEstimate::new(r)).collect(),
        }
    }

    pub fn path(&self, i: usize) -> Option<&PathEstimate> {
        self.paths.get(i)
    }

    pub fn paths(&self) -> &[PathEstimate] {
        &self.paths
    }

    /// `len` bytes were sent on path `i`.
    pub fn on_sent(&mut self, i: usize, len: usize) {
        if let Some(p) = self.paths.get_mut(i) {
            p.sent_bytes += len as u64;
        }
    }

    /// A report on path `i` arrived at `now`. `active` tells which paths may receive the
    /// share a congested path gives up. Returns whether any rate changed.
    pub fn on_report(&mut self, now: Time, i: usize, r: &ReportEntry, active: u64) -> bool {
        let Some(p) = self.paths.get_mut(i) else {
            return false;
        };
        p.owd_offset_us = r.owd_min_us;
        p.queue_us = f64::from(r.owd_us.saturating_sub(r.owd_min_us));
        let Some((t0, prev)) = p.last.replace((now, *r)) else {
            p.sent_bytes = 0;
            return false;
        };
        let dt = (now - t0).as_secs_f64();
        if dt <= 0.0 {
            return false;
        }
        p.reports += 1;
        let sent_packets = i64::from(seq16_diff(r.path_seq, prev.path_seq)).max(0) as f64;
        let got_packets = f64::from(r.packets.wrapping_sub(prev.packets));
        let got_bytes = r.bytes.wrapping_sub(prev.bytes) as f64;
        let lost = f64::from(r.lost.wrapping_sub(prev.lost));
        let busy = p.sent_bytes as f64 * 8.0 / dt >= 0.5 * p.rate_bps;
        p.sent_bytes = 0;
        // A path that was sent to but delivered nothing delivered at rate 0.
        if got_bytes > 0.0 || sent_packets > 0.0 {
            p.push_sample(got_bytes * 8.0 / dt);
        }
        if sent_packets > 0.0 {
            let ratio = (got_packets / sent_packets).clamp(0.0, 1.0);
            p.reliability = ALPHA * p.reliability + (1.0 - ALPHA) * ratio;
            p.last_loss = (lost / sent_packets).clamp(0.0, 1.0);
        }
        // A queue is "building" when it holds more than the threshold or two full-size
        // packets' serialisation at the current rate (on slow links one packet is 100+ ms).
        let threshold = QUEUE_THRESHOLD_US
            .max(2.0 * 1500.0 * 8.0 / p.rate_bps * 1e6)
            .min(200_000.0);
        p.congested = p.last_loss > 0.005
            || p.queue_us > threshold
            || (sent_packets > 2.0 && got_packets == 0.0);
        if p.congested {
            p.cuts += 1;
            let floor = (0.9 * p.delivery_bps).max(MIN_RATE);
            let new = (p.rate_bps / 2.0).max(floor).min(p.rate_bps);
            let freed = p.rate_bps - new;
            p.rate_bps = new;
            self.spread(i, freed, active);
            true
        } else if busy {
            let step = if p.rate_bps < 0.9 * p.best_delivery_bps {
                RECOVER
            } else {
                PROBE
            };
            p.rate_bps *= step;
            true
        } else {
            false
        }
    }

    /// Common Source Decrease: give `freed` to the other active, uncongested paths in
    /// proportion to their rates.
    fn spread(&mut self, from: usize, freed: f64, active: u64) {
        let takers =
            |j: usize, p: &PathEstimate| j != from && active & (1 << j) != 0 && !p.congested;
        let total: f64 = self
            .paths
            .iter()
            .enumerate()
            .filter(|(j, p)| takers(*j, p))
            .map(|(_, p)| p.rate_bps)
            .sum();
        if total <= 0.0 || freed <= 0.0 {
            return;
        }
        for (j, p) in self.paths.iter_mut().enumerate() {
            if takers(j, p) {
                p.rate_bps += freed * p.rate_bps / total;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::PathId;

    fn report(
        path_seq: u16,
        packets: u32,
        bytes: u64,
        lost: u32,
        owd_min_us: u32,
        owd_us: u32,
    ) -> ReportEntry {
        ReportEntry {
            path: PathId(0),
            path_seq,
            packets,
            bytes,
            lost,
            owd_min_us,
            owd_us,
            ..Default::default()
        }
    }

    #[test]
    fn delivery_rate_is_smoothed_as_cmt_rev() {
        let mut e = Estimator::new(&[Some(1_000_000)]);
        e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
        // 125 000 bytes per second = 1 Mbit/s, then 2 Mbit/s.
        e.on_report(
            Time::from_secs(1),
            0,
            &report(100, 100, 125_000, 0, 0, 0),
            1,
        );
        assert_eq!(e.path(0).unwrap().delivery_bps, 1_000_000.0);
        e.on_report(
            Time::from_secs(2),
            0,
            &report(300, 300, 375_000, 0, 0, 0),
            1,
        );
        // EWMA: 0.5·1M + 0.5·2M = 1.5M; history [1.5M, 1M] with weights 1, 1.
        assert!((e.path(0).unwrap().delivery_bps - 1_250_000.0).abs() < 1.0);
    }

    #[test]
    fn reliability_follows_delivered_over_sent() {
        let mut e = Estimator::new(&[Some(1_000_000)]);
        e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
        // 100 sent, 90 delivered: R = 0.8·1 + 0.2·0.9 = 0.98.
        e.on_report(Time::from_secs(1), 0, &report(100, 90, 90_000, 10, 0, 0), 1);
        let p = e.path(0).unwrap();
        assert!((p.reliability - 0.98).abs() < 1e-9, "{}", p.reliability);
        assert!((p.last_loss - 0.1).abs() < 1e-9);
        assert!(p.congested);
    }

    #[test]
    fn congestion_halves_and_spreads_to_the_others() {
        let mut e = Estimator::new(&[Some(4_000_000), Some(1_000_000), Some(3_000_000)]);
        for i in 0..3 {
            e.on_report(Time::ZERO, i, &report(0, 0, 0, 0, 0, 0), 0b111);
        }
        // Path 0 shows a 50 ms queue; it delivered little so far (floor is low).
        e.on_report(
            Time::from_millis(100),
            0,
            &report(10, 10, 1_000, 0, 0, 50_000),
            0b111,
        );
        let r: Vec<f64> = e.paths().iter().map(|p| p.rate_bps).collect();
        assert_eq!(r[0], 2_000_000.0);
        // 2 Mbit/s freed, shared 1:3 by paths 1 and 2.
        assert!(
            (r[1] - 1_500_000.0).abs() < 1.0 && (r[2] - 4_500_000.0).abs() < 1.0,
            "{r:?}"
        );
        assert_eq!(r.iter().sum::<f64>(), 8_000_000.0);
    }

    #[test]
    fn a_busy_clean_path_probes_upwards() {
        let mut e = Estimator::new(&[Some(1_000_000)]);
        e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
        e.on_sent(0, 125_000); // 1 Mbit over the second: busy
        e.on_report(
            Time::from_secs(1),
            0,
            &report(100, 100, 125_000, 0, 0, 0),
            1,
        );
        assert!((e.path(0).unwrap().rate_bps - 1_100_000.0).abs() < 1.0);
        // Idle: no probing.
        e.on_report(
            Time::from_secs(2),
            0,
            &report(100, 100, 125_000, 0, 0, 0),
            1,
        );
        assert!((e.path(0).unwrap().rate_bps - 1_100_000.0).abs() < 1.0);
    }

    #[test]
    fn a_silent_path_is_congested_and_recovers_fast() {
        let mut e = Estimator::new(&[Some(8_000_000)]);
        e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
        e.on_sent(0, 1_000_000);
        e.on_report(
            Time::from_secs(1),
            0,
            &report(800, 800, 1_000_000, 0, 0, 0),
            1,
        );
        let before = e.path(0).unwrap().rate_bps;
        // Outage: 100 packets sent, none delivered.
        e.on_report(
            Time::from_millis(1100),
            0,
            &report(900, 800, 1_000_000, 0, 0, 0),
            1,
        );
        let cut = e.path(0).unwrap().rate_bps;
        assert!(cut < before, "{cut} vs {before}");
        // Back: busy and clean again, below the best delivery rate: ×1.5 per report.
        e.on_sent(0, 100_000);
        e.on_report(
            Time::from_millis(1200),
            0,
            &report(1000, 900, 1_100_000, 0, 0, 0),
            1,
        );
        assert!((e.path(0).unwrap().rate_bps - cut * RECOVER).abs() < 1.0);
    }
}
