//! [`PathEstimate`]: what the sender knows of one path, and how it keeps its history of
//! reports and delivery samples.

use mpt_core::queue::QueuePeak;
use mpt_core::wire::ReportEntry;
use mpt_core::Time;

use super::*;

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
    /// Loss ratio smoothed over about `LOSS_SPAN_PACKETS` packets.
    pub loss: f64,
    /// The highest queue the reports have shown lately.
    pub(super) queue_peak: QueuePeak,
    /// Packets delivered in the last report interval.
    pub last_packets: u32,
    /// Queueing delay in the last report, microseconds: the smoothed delay above the least,
    /// less what the path's own jitter keeps it above (`JITTER_NOT_QUEUE`); what the rate
    /// is judged by.
    pub queue_us: f64,
    /// The same with the jitter left in: how much later than its least delay a packet sent
    /// now arrives; what the scheduler's clock and the light-traffic rule go by.
    pub queue_seen_us: f64,
    /// Whether the last report showed congestion.
    pub congested: bool,
    /// Whether the last report showed the path silent: the receiver has heard nothing on it
    /// for a while although the sender kept sending (see `SILENT_MIN_US`). The rate is left
    /// as it was (the scheduler sends nothing there meanwhile; a path that comes back carries
    /// what it carried before).
    pub silent: bool,
    /// Whether the last report showed a standing queue of a few packets: the link is full.
    pub saturated: bool,
    /// Whether the path carried at least half its rate in the last report interval: only
    /// then does a clean report say it has headroom.
    pub busy: bool,
    /// Delay offset above the fastest path, microseconds.
    pub owd_offset_us: u32,
    /// Reports taken.
    pub reports: u64,
    /// Times the rate was cut for congestion.
    pub cuts: u64,
    /// Most the scheduler may assume the path carries now, bits per second: `CAP_GROWTH`
    /// times what it carried lately, at least `UNPROVEN_RATE` (64 kbit/s) or the configured rate.
    pub cap_bps: f64,
    pub(super) floor_bps: f64,
    /// When the rate was last cut (the sender's wire clock, as reports echo it).
    pub(super) cut_at: Option<u32>,
    // Previous report's counters and time.
    pub(super) last: Option<(Time, ReportEntry)>,
    // Counters and time where the current delivery-rate window began.
    pub(super) window: Option<(Time, ReportEntry)>,
    // Counters and time of the first report in the current run of reports showing a queue.
    pub(super) queued_since: Option<(Time, ReportEntry)>,
    // Time, packets and bytes of the last few reports, newest first.
    pub(super) recent: Vec<(Time, u32, u64)>,
    pub(super) ewma: f64,
    pub(super) history: [f64; KAPPA],
    pub(super) filled: usize,
    /// Bytes the sender put on the path since the last report (busy test).
    pub(super) sent_bytes: u64,
    /// Bytes the path adds to each inner packet (headers, outer IP/UDP, framing).
    pub(super) overhead: usize,
    /// Send times (one a millisecond at most) and the bytes sent by each: the queue a report
    /// shows carried forward ([`Estimator::queue_now`]), and whether the path is silent.
    pub(super) sent: SentLog,
}

impl PathEstimate {
    pub(super) fn new(start_rate: Option<u64>) -> Self {
        PathEstimate {
            rate_bps: start_rate.map_or(DEFAULT_START_RATE, |r| r as f64),
            cap_bps: start_rate.map_or(UNPROVEN_RATE, |r| r as f64),
            floor_bps: start_rate.map_or(UNPROVEN_RATE, |r| r as f64),
            cut_at: None,
            delivery_bps: 0.0,
            best_delivery_bps: 0.0,
            reliability: 1.0,
            last_loss: 0.0,
            loss: 0.0,
            queue_peak: QueuePeak::default(),
            last_packets: 0,
            queue_us: 0.0,
            queue_seen_us: 0.0,
            congested: false,
            silent: false,
            saturated: false,
            busy: false,
            owd_offset_us: 0,
            reports: 0,
            cuts: 0,
            last: None,
            window: None,
            queued_since: None,
            recent: Vec::with_capacity(RECENT_REPORTS),
            ewma: 0.0,
            history: [0.0; KAPPA],
            filled: 0,
            sent_bytes: 0,
            overhead: 0,
            sent: SentLog::default(),
        }
    }

    /// Link bits per second of `packets` inner packets of `bytes` in all over `secs` (the
    /// receiver counts inner bytes; rates are link rates).
    pub(super) fn link_bps(&self, bytes: f64, packets: f64, secs: f64) -> f64 {
        (bytes + packets * self.overhead as f64) * 8.0 / secs
    }

    /// Link bits per second the path carried from the report `from` (its time and counters) to
    /// `r` at `now`; `None` over fewer than [`SHORT_SAMPLE_PACKETS`] packets.
    pub(super) fn carried_since(
        &self,
        from: (Time, ReportEntry),
        r: &ReportEntry,
        now: Time,
    ) -> Option<f64> {
        let (t0, r0) = from;
        (r.packets.wrapping_sub(r0.packets) >= SHORT_SAMPLE_PACKETS)
            .then(|| self.carried_from((t0, r0.packets, r0.bytes), r, now))
            .flatten()
    }

    /// Link bits per second from the counters `(time, packets, bytes)` of an earlier report
    /// to `r` at `now`; `None` if no time passed.
    pub(super) fn carried_from(
        &self,
        (t0, packets0, bytes0): (Time, u32, u64),
        r: &ReportEntry,
        now: Time,
    ) -> Option<f64> {
        let packets = r.packets.wrapping_sub(packets0);
        let bytes = r.bytes.wrapping_sub(bytes0) as f64;
        (now > t0).then(|| self.link_bps(bytes, f64::from(packets), (now - t0).as_secs_f64()))
    }

    /// Link bits per second over the shortest span of recent reports ending at `r` that holds
    /// [`SHORT_SAMPLE_PACKETS`] packets, or over all of them; `None` without a recent report.
    pub(super) fn carried_lately(&self, now: Time, r: &ReportEntry) -> Option<f64> {
        let &from = self
            .recent
            .iter()
            .find(|(_, packets, _)| r.packets.wrapping_sub(*packets) >= SHORT_SAMPLE_PACKETS)
            .or(self.recent.last())?;
        self.carried_from(from, r, now)
    }

    /// Keep report `r`'s counters for [`Self::carried_lately`], newest first.
    pub(super) fn remember(&mut self, now: Time, r: &ReportEntry) {
        self.recent.truncate(RECENT_REPORTS - 1);
        self.recent.insert(0, (now, r.packets, r.bytes));
    }

    /// The rate the scheduler should use: the learned rate, within what the path has shown.
    pub fn send_rate_bps(&self) -> f64 {
        self.rate_bps.min(self.cap_bps)
    }

    /// The rate to pace the path at: `PACE_GAIN` (5 %) above the most it has delivered (or the
    /// rate it is sent at, when higher), once it has been congested. `None` before: nothing
    /// says what it carries, and paced at a rate guessed low it would never show more.
    pub fn pace_rate_bps(&self) -> Option<f64> {
        (self.cuts > 0 && self.best_delivery_bps > 0.0)
            .then(|| PACE_GAIN * self.best_delivery_bps.max(self.send_rate_bps()))
    }

    pub(super) fn push_sample(&mut self, sample: f64) {
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
