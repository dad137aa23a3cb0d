//! What the sender learns about each path from the receiver's reports (sans-IO: every input
//! carries its time).
//!
//! * **Delivery rate**, as CMT-Rev estimates it: a sample is the link bytes delivered over a
//!   window of reports spanning at least 200 ms and 20 packets (or 1 s);
//!   `rate ← Φ·rate + (1−Φ)·sample` with Φ = ½, then a weighted mean over the last κ = 8
//!   values (weights 1,1,1,1,.8,.6,.4,.2, newest first). A sample of a path the sender gave
//!   less than [`BUSY`] of its rate counts only when it is the higher (BBR's rule for an
//!   application-limited sample): it measured the sender, not the path.
//! * **Reliability**, as MPMTP-AR: `R ← α·R + (1−α)·(delivered / sent)` with α = 0.8, where
//!   "sent" is the advance of the highest per-path sequence number between two reports (the
//!   number of data packets the sender put on the path), so the ratio is exact.
//! * **Queue**: the smoothed one-way delay above the path's floor, less the serialisation of
//!   the interval's packets beyond that of the packet that set the floor (the report names its
//!   length), at the rate the path has shown: on a 128 kbit/s line 400-byte datagrams stand
//!   20 ms above the TCP acknowledgement that set the floor, with nothing queued.
//! * **Congestion**: the queue standing above a threshold (10 ms or one packet's
//!   serialisation) and not draining (a quarter lower than at the last report: that queue was
//!   answered already), or loss in the interval where the queue is full (near the highest it
//!   has shown lately, [`QueuePeak`](mpt_core::queue::QueuePeak)) or that brings the path's loss, smoothed over about 100
//!   packets, to [`LOSS_CONGESTION`]: other losses are random, and the tunnel recovers them.
//! * **Sending rate** for the scheduler: on congestion the path's rate is halved (not below
//!   90 % of what it delivers, unless it delivered nothing, nor below 95 % of what it carried in
//!   the interval; straight to 95 % of the sample when it delivered under half its rate and
//!   clearly less than it was offered, and was full for the interval: its queues at the report
//!   before and now cover the interval, or it lost packets; set to 95 % of what it carried
//!   while its queue stood since an earlier report, or in an interval its queues cover — its
//!   capacity, up or down; not cut while the sender offers it less than 80 % of what it
//!   carries, its queue draining; once a round trip: a report on packets sent before the last
//!   cut moves the rate only to a capacity) and
//!   the difference is spread over the other paths in proportion to their rates (Common
//!   Source Decrease) — only to paths that carry traffic without congestion, each up to 10 %
//!   above the best rate it has delivered, so when every path is overdriven the total falls;
//!   a path that is busy (offered ≥ 80 % of its rate) and not congested probes upwards by
//!   10 % per delivery sample (50 % while it is below the best rate it has delivered, which a
//!   path passed over since a cut does too); one that shows no queue at all takes what it
//!   carried in a report interval of [`MIN_SAMPLE_PACKETS`] or more, and doubles per sample.
//!   Between delivery samples, what a path carried since it began to show a queue (at least
//!   four packets) stands in for a sample when judging how far it is over.
//! * **Cap**: the scheduler trusts a path with at most 25 % more than it carried lately (over
//!   the last reports that span four packets or more, or smoothed), none more while it is
//!   congested, and at least 64 kbit/s (or its configured rate): a light
//!   stream then spreads over paths it has not measured instead of all going to the one that
//!   looks nearest, and a path's share grows by a step per report as it proves it carries it.
//!   A path whose queue stands four packets deep (at least 2 ms) is full: it is trusted with
//!   what it carries, no more, and does not probe.

use mpt_core::wire::ReportEntry;
use mpt_core::{wire_micros_between, Time};

mod path;
mod phases;
mod sent;

use sent::SentLog;

pub use path::PathEstimate;

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
/// A path is busy (its clean reports say it has headroom) when it was offered this share of
/// its rate: below that, the link's capacity was not tested.
pub const BUSY: f64 = 0.8;
/// A path is paced this much above the most it has delivered
/// ([`PathEstimate::pace_rate_bps`]): a delivery rate is smoothed, and one just under the
/// link's would leave it idle at times.
pub const PACE_GAIN: f64 = 1.05;
/// Probing step per report for a busy, uncongested path.
pub const PROBE: f64 = 1.10;
/// Faster step while below the best delivery rate seen on the path.
pub const RECOVER: f64 = 1.50;
/// Step for a busy path that shows no queue at all (nothing says it is near full): doubling
/// per sample, as a TCP sender doubles per round trip before it sees congestion.
pub const UNQUEUED_PROBE: f64 = 2.0;
/// A delivery sample spans at least this long and this many packets (delivered or lost), or
/// [`MAX_SAMPLE_S`] on a path that carries fewer.
pub const MIN_SAMPLE_S: f64 = 0.2;
pub const MIN_SAMPLE_PACKETS: u32 = 20;
pub const MAX_SAMPLE_S: f64 = 1.0;
/// Packets a congested path must have carried since its queue appeared (or, on the first report
/// that shows it, in the last interval) for that rate to stand in for a delivery sample.
pub const SHORT_SAMPLE_PACKETS: u32 = 4;
/// A path is silent when a packet the sender put on it after the last one the receiver got
/// should have arrived before the report by this much (and by eight packets' time at the rate
/// the path carried lately) but did not: an outage that `dead_ms` has not yet confirmed. A TCP
/// flow that lost a window there stalls until its retransmission timeout, and nothing more is
/// reported until then; the retransmission must not go to the same dead path. (A sender that
/// simply stopped sending leaves nothing that should have arrived.)
pub const SILENT_MIN_US: f64 = 10_000.0;
/// Sends older than this (microseconds) no longer make a path silent: a path found silent is
/// sent nothing more, and must not stay silent for good on what it lost once.
const SILENT_MAX_AGE_US: i32 = 1_000_000;
/// The newest send times of a path's log (one a millisecond at most) that tell a silent path
/// from one that was not sent to.
const SEND_TIMES: usize = 64;
/// Reports remembered to measure what a path carried lately over enough packets.
const RECENT_REPORTS: usize = 8;
/// On congestion, the rate becomes this share of what the path delivered in the interval.
pub const CUT_TO_DELIVERED: f64 = 0.95;
/// The scheduler trusts a path with at most this much more than it carried lately (in the
/// last report interval, or smoothed)...
pub const CAP_GROWTH: f64 = 1.25;
/// ...and, when it carried less, with this (or its configured rate): what a path that has not
/// shown what it carries is trusted with. A stream lighter than every path's guessed rate
/// would otherwise all go to the path that looks nearest, however slow it really is.
pub const UNPROVEN_RATE: f64 = 64_000.0;
/// A path whose queue stands this many packets' serialisation high (and at least
/// [`SATURATED_MIN_US`]) is full: trusted with what it carries, not probed.
pub const SATURATED_PACKETS: f64 = 4.0;
pub const SATURATED_MIN_US: f64 = 2_000.0;
/// A queue below this (smoothed minus minimum one-way delay) is no queue: a busy path that
/// shows none probes with [`UNQUEUED_PROBE`]'s step.
pub const NO_QUEUE_US: f64 = 1_000.0;
/// How many times a path's jitter (the peer's RFC 3550 figure) of its smoothed delay above the
/// least is its delay varying by itself, not a queue: a wire that delays datagrams 32 to 38 ms
/// shows 3 ms above the least and a jitter of 2 ms: that is no standing queue, and taken for
/// one it would hold the path's rate down.
pub const JITTER_NOT_QUEUE: f64 = 2.0;
/// Queueing delay (smoothed minus minimum one-way delay) that counts as congestion, at least.
pub const QUEUE_THRESHOLD_US: f64 = 10_000.0;
/// A loss is congestion when the path's queue is full ([`QueuePeak`](mpt_core::queue::QueuePeak)), or when the path loses
/// this share of its packets or more, smoothed over about [`LOSS_SPAN_PACKETS`]: a link that
/// drops without queueing (a policer, a shallow buffer). Below that, with the queue short of
/// full, a loss is random: the tunnel recovers it, and cutting the rate for each one would
/// hold a path with 1 % random loss to a small part of its rate.
pub const LOSS_CONGESTION: f64 = 0.05;
pub const LOSS_SPAN_PACKETS: f64 = 100.0;

/// Microseconds `bytes` take to serialise at `bps`.
fn serial_us(bytes: f64, bps: f64) -> f64 {
    bytes * 8.0 / bps * 1e6
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

    /// Bytes path `i` adds to each inner packet, so that delivery (the receiver counts inner
    /// bytes) is measured in link bytes like the rates.
    pub fn set_overhead(&mut self, i: usize, bytes: usize) {
        if let Some(p) = self.paths.get_mut(i) {
            p.overhead = bytes;
        }
    }

    pub fn path(&self, i: usize) -> Option<&PathEstimate> {
        self.paths.get(i)
    }

    pub fn paths(&self) -> &[PathEstimate] {
        &self.paths
    }

    /// `len` bytes were sent on path `i` at `now`.
    pub fn on_sent(&mut self, now: Time, i: usize, len: usize) {
        if let Some(p) = self.paths.get_mut(i) {
            p.sent_bytes += len as u64;
            p.sent.on_sent(now, len);
        }
    }

    /// Path `i` came back up after it was found dead: what was sent on it before is lost, and
    /// says nothing about whether it is silent now.
    pub fn on_path_up(&mut self, i: usize) {
        if let Some(p) = self.paths.get_mut(i) {
            p.sent.clear();
            p.silent = false;
        }
    }

    /// The queue path `i` holds at `now`, from the last report's (taken at `now`, naming the
    /// newest packet that arrived by its send time `echo`): that packet waited the reported
    /// queue, and what was sent after it waits behind it, at the most the path has delivered
    /// or the rate it is sent at, when higher (a capacity measured while a start filled it,
    /// above a delivery rate smoothed over that start).
    /// A report's queue is a round trip old: held as it stands, it would keep a path that has
    /// drained since (the sender, holding it full, sent it little) idle for that long. Never
    /// more than the report shows: the most a path has delivered is its capacity only once it
    /// was full, and below that what was sent since would count for too long a queue.
    /// `None` before the path has delivered anything, or when the packet is older than the
    /// send log reaches.
    pub fn queue_now(&self, now: Time, i: usize, echo: u32) -> Option<std::time::Duration> {
        let p = self.paths.get(i)?;
        if p.best_delivery_bps <= 0.0 {
            return None;
        }
        let age_us = wire_micros_between(echo, now.wire_micros());
        if age_us <= 0 {
            return None;
        }
        let drains_bps = p.best_delivery_bps.max(p.send_rate_bps());
        let behind_us = serial_us(p.sent.since(echo)? as f64, drains_bps);
        let left_us = (p.queue_seen_us + behind_us - f64::from(age_us)).min(p.queue_seen_us);
        Some(std::time::Duration::from_micros(left_us.max(0.0) as u64))
    }

    /// A report on path `i` arrived at `now`. `active` tells which paths may receive the
    /// share a congested path gives up. Returns whether any rate changed.
    ///
    /// In phases: what the interval since the previous report says (`PathEstimate::interval`),
    /// a delivery-rate sample, reliability, the queue, congestion, and the rate.
    pub fn on_report(&mut self, now: Time, i: usize, r: &ReportEntry, active: u64) -> bool {
        let Some(p) = self.paths.get_mut(i) else {
            return false;
        };
        let Some(iv) = p.interval(now, r) else {
            return false;
        };
        let sample = p.sample(now, r, &iv);
        p.reliability(&iv);
        let q = p.queue(now, r, &iv);
        p.congestion(now, r, &iv, &q);
        if p.congested {
            let seen = phases::Seen {
                r,
                iv: &iv,
                q: &q,
                sample,
            };
            self.cut(i, now, seen, active)
        } else {
            // A path that carried more than it is believed to, with no queue, in an interval
            // of enough packets to measure: it carries that at least. (A 20 Mbit/s path would
            // otherwise wait for its first 200 ms sample while TCP's start overran the paths
            // already learned.)
            let shown = q.unqueued && iv.got_packets >= f64::from(MIN_SAMPLE_PACKETS);
            let raised = shown && iv.carried > p.rate_bps;
            if raised {
                p.rate_bps = iv.carried;
            }
            self.probe(i, sample, iv.busy, iv.passed_over, q.unqueued) || raised
        }
    }

    /// Probing, once per delivery `sample`, of path `i` that showed no congestion.
    fn probe(
        &mut self,
        i: usize,
        sample: Option<f64>,
        busy: bool,
        passed_over: bool,
        unqueued: bool,
    ) -> bool {
        let p = &mut self.paths[i];
        if sample.is_some()
            && !p.saturated
            && (busy || (passed_over && p.rate_bps < 0.9 * p.best_delivery_bps))
        {
            // A clean path below what it has delivered before climbs back fast; so does one
            // the scheduler passes over altogether since its rate was cut, which must get
            // traffic again to show its headroom. Once per delivery sample, not per report:
            // reports come every 20 ms on fast paths, and +10 % each would double a rate in
            // 150 ms.
            // So does a busy one that shows no queue at all: nothing says it is near full, and
            // the step goes from what it carried, when that was more than it was believed to
            // carry. (Not on a path with a queue: a line the scheduler overdrives because
            // every path is short carries its capacity, and a step above that builds a queue.)
            if unqueued {
                p.rate_bps = p.rate_bps.max(sample.unwrap_or(0.0));
            }
            let step = if unqueued {
                UNQUEUED_PROBE
            } else if p.rate_bps < 0.9 * p.best_delivery_bps {
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

    /// Common Source Decrease: give `freed` to the other active paths that carry traffic
    /// without congestion, in proportion to their rates, each up to 10 % above the best rate
    /// it has delivered. A path the scheduler passes over has shown no headroom and takes
    /// nothing; what no path can take is dropped, so the total falls when every path is
    /// overdriven.
    fn spread(&mut self, from: usize, freed: f64, active: u64) {
        let takers = |j: usize, p: &PathEstimate| {
            j != from && active & (1 << j) != 0 && !p.congested && p.busy
        };
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
                // Never past what the path has shown it carries (plus a probe step): the
                // traffic moves to the other paths anyway as this one's rate falls, and a slow
                // line given a faster one's freed share would be overdriven.
                let room = (PROBE * p.best_delivery_bps - p.rate_bps).max(0.0);
                p.rate_bps += (freed * p.rate_bps / total).min(room);
            }
        }
    }
}

#[cfg(test)]
mod tests;
