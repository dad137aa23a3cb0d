//! [`Estimator::on_report`] in phases: what the interval since the previous report says,
//! a delivery-rate sample, reliability, the queue, congestion, and the cut of a congested
//! path's rate.

use mpt_core::wire::{seq16_diff, ReportEntry};
use mpt_core::Time;

use super::*;

/// What one report says about the interval since the previous one (phase 1 of
/// [`Estimator::on_report`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Interval {
    /// The previous report and when it came.
    pub(super) prev: (Time, ReportEntry),
    /// The queue the previous report showed, microseconds.
    pub(super) prev_queue_us: f64,
    /// Packets sent on the path in the interval (from the reported `path_seq`).
    pub(super) sent_packets: f64,
    /// Packets delivered, and lost, in the interval.
    pub(super) got_packets: f64,
    pub(super) lost: f64,
    /// Link bits per second the sender offered the path, and what it carried.
    pub(super) offered: f64,
    pub(super) carried: f64,
    /// Offered at least [`BUSY`] of its rate; offered less than a tenth of it.
    pub(super) busy: bool,
    pub(super) passed_over: bool,
    /// Link bytes of the interval's average packet (1500 when none arrived).
    pub(super) packet: f64,
}

/// The queue on a path (phase 4 of [`Estimator::on_report`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Queue {
    /// Queueing delay above which the path is congested, microseconds.
    pub(super) threshold: f64,
    /// The queue shrank by a quarter since the previous report.
    pub(super) draining: bool,
    /// The report where the current run of queued reports began, before this one.
    pub(super) queued_since: Option<(Time, ReportEntry)>,
    /// Busy, with no queue now or at the previous report.
    pub(super) unqueued: bool,
}

impl PathEstimate {
    /// Phase 1: take report `r`, arrived at `now`, and say what happened on the path since
    /// the previous one; `None` for a first report, or when the counters went backwards (the
    /// peer restarted), which start the measurement afresh.
    pub(super) fn interval(&mut self, now: Time, r: &ReportEntry) -> Option<Interval> {
        self.owd_offset_us = r.owd_min_us;
        let prev_queue_us = self.queue_us;
        // A delay that varies by itself (radio, a jittery wire) keeps the smoothed delay above
        // the least the path has shown with no queue at all: half the spread of its delays,
        // about 1.5 times its RFC 3550 jitter where they spread evenly. Up to
        // [`JITTER_NOT_QUEUE`] jitters of it are not queue.
        let above_least = f64::from(r.owd_us.saturating_sub(r.owd_min_us));
        self.queue_us = (above_least - JITTER_NOT_QUEUE * f64::from(r.jitter_us)).max(0.0);
        self.queue_seen_us = above_least;
        let Some((t0, prev)) = self.last else {
            self.last = Some((now, *r));
            self.sent_bytes = 0;
            self.remember(now, r);
            return None;
        };
        let dt = (now - t0).as_secs_f64();
        if dt <= 0.0 {
            return None;
        }
        self.last = Some((now, *r));
        if r.bytes < prev.bytes || r.packets.wrapping_sub(prev.packets) > u32::MAX / 2 {
            // The counters went backwards: the peer restarted and counts from zero again.
            // Measure afresh from this report.
            self.window = None;
            self.sent_bytes = 0;
            self.recent.clear();
            self.remember(now, r);
            return None;
        }
        self.reports += 1;
        let sent_packets = i64::from(seq16_diff(r.path_seq, prev.path_seq)).max(0) as f64;
        self.last_packets = r.packets.wrapping_sub(prev.packets);
        let got_packets = f64::from(self.last_packets);
        let got_bytes = r.bytes.wrapping_sub(prev.bytes) as f64;
        let offered = self.sent_bytes as f64 * 8.0 / dt;
        let busy = offered >= BUSY * self.rate_bps;
        self.busy = busy;
        self.sent_bytes = 0;
        let carried = self.link_bps(got_bytes, got_packets, dt);
        Some(Interval {
            prev: (t0, prev),
            prev_queue_us,
            sent_packets,
            got_packets,
            lost: f64::from(r.lost.wrapping_sub(prev.lost)),
            offered,
            busy,
            passed_over: offered < 0.1 * self.rate_bps,
            carried,
            packet: if got_packets > 0.0 {
                got_bytes / got_packets + self.overhead as f64
            } else {
                1500.0
            },
        })
    }

    /// Phase 2: a delivery-rate sample, when the window since the last one is long enough.
    /// What the link carried (the report counts inner bytes; the scheduler's rates are link
    /// rates), measured over a window of at least MIN_SAMPLE_S and MIN_SAMPLE_PACKETS: on a
    /// slow line one packet more or less in a 20 ms report interval doubles the rate, and in
    /// 200 ms still moves it by 15 %. A path that was sent to but delivered nothing
    /// delivered at rate 0.
    pub(super) fn sample(&mut self, now: Time, r: &ReportEntry, iv: &Interval) -> Option<f64> {
        let (w0, wprev) = *self.window.get_or_insert(iv.prev);
        let wdt = (now - w0).as_secs_f64();
        let w_sent = seq16_diff(r.path_seq, wprev.path_seq).max(0) as u32;
        let w_packets = r.packets.wrapping_sub(wprev.packets);
        let counted = w_packets
            .saturating_add(r.lost.wrapping_sub(wprev.lost))
            .max(w_sent);
        let mut sample = None;
        if (wdt >= MIN_SAMPLE_S && counted >= MIN_SAMPLE_PACKETS) || wdt >= MAX_SAMPLE_S {
            let w_bytes = r.bytes.wrapping_sub(wprev.bytes) as f64;
            let s = self.link_bps(w_bytes, f64::from(w_packets), wdt);
            // A path the sender gave less than it could carry (the scheduler preferred
            // another) measured the sender, not the path: such a sample counts only when it
            // is the higher (as BBR treats an application-limited one). Taken as it came, a
            // satellite path passed over for a second after a handover fell from 40 Mbit/s to
            // what its keepalives carry, and was trusted with no more.
            let limited = !iv.busy && s < self.delivery_bps;
            if (w_bytes > 0.0 || w_sent > 0) && !limited {
                self.push_sample(s);
                sample = Some(s);
            }
            self.window = Some((now, *r));
        }
        sample
    }

    /// Phase 3: reliability (delivered over sent) and the interval's loss.
    pub(super) fn reliability(&mut self, iv: &Interval) {
        if iv.sent_packets > 0.0 {
            let ratio = (iv.got_packets / iv.sent_packets).clamp(0.0, 1.0);
            self.reliability = ALPHA * self.reliability + (1.0 - ALPHA) * ratio;
            self.last_loss = (iv.lost / iv.sent_packets).clamp(0.0, 1.0);
            let weight = (iv.sent_packets / LOSS_SPAN_PACKETS).min(1.0);
            self.loss += weight * (self.last_loss - self.loss);
        } else {
            self.last_loss = 0.0;
        }
    }

    /// Phase 4: the queue on the path, and whether it stands.
    pub(super) fn queue(&mut self, now: Time, r: &ReportEntry, iv: &Interval) -> Queue {
        // The minimum delay was seen by a packet of `owd_min_len` bytes and the smoothed delay
        // by packets of the interval's size: on a line that serialises at its rate the
        // difference is no queue (a 128 kbit/s line shows 400-byte datagrams 20 ms above the
        // 40-byte TCP acknowledgement that set its minimum). It is taken out at the rate the
        // path has shown, which is at most its capacity: at worst less than one packet's worth
        // of real queue goes unseen.
        if r.owd_min_len > 0 {
            let shown = iv
                .carried
                .max(self.delivery_bps)
                .max(self.best_delivery_bps)
                .max(MIN_RATE);
            let excess = iv.packet - (f64::from(r.owd_min_len) + self.overhead as f64);
            let serial = serial_us(excess.max(0.0), shown);
            self.queue_us = (self.queue_us - serial).max(0.0);
            self.queue_seen_us = (self.queue_seen_us - serial).max(0.0);
        }
        // A link that holds a standing queue of a few packets is full: it carries what it can,
        // and trusting it with more only lengthens its queue (on a fast path that is a
        // millisecond or two, far below the congestion threshold, which slow lines set).
        let packet_us = serial_us(iv.packet, iv.carried.max(self.delivery_bps).max(MIN_RATE));
        self.saturated = iv.got_packets > 0.0
            && self.queue_us > (SATURATED_PACKETS * packet_us).max(SATURATED_MIN_US);
        // A queue is "building" when it holds more than the threshold or one packet's
        // serialisation at the current rate (on slow links one full-size packet is 100+ ms),
        // packets as large as those of the interval (small datagrams queue in less time).
        let threshold = QUEUE_THRESHOLD_US
            .max(serial_us(iv.packet, self.rate_bps))
            .min(200_000.0);
        // The smoothed delay only moves when packets arrive: a path that carried nothing in
        // the interval shows the queue of its last packets, which says nothing about now.
        // A queue that is draining (a quarter less than at the last report) was already
        // answered: cutting again while it drains would take the rate far below capacity.
        let draining = self.queue_us < 0.75 * iv.prev_queue_us;
        let queued_since = self.queued_since;
        self.queued_since = if iv.got_packets > 0.0 && self.queue_us > threshold {
            queued_since.or(Some((now, *r)))
        } else {
            None
        };
        Queue {
            threshold,
            draining,
            queued_since,
            unqueued: iv.busy && self.queue_us < NO_QUEUE_US && iv.prev_queue_us < NO_QUEUE_US,
        }
    }

    /// Phase 5: whether the path is silent or congested, and what the scheduler may trust it
    /// with until the next report.
    pub(super) fn congestion(&mut self, now: Time, r: &ReportEntry, iv: &Interval, q: &Queue) {
        // Silent: a packet sent after the last one that arrived (the echo is that one's send
        // time) would have arrived by the margin before this report, had the path kept its
        // delay.
        let lately = self.carried_lately(now, r).unwrap_or(iv.carried);
        let lately_packet_us = serial_us(iv.packet, lately.max(self.delivery_bps).max(MIN_RATE));
        let margin = SILENT_MIN_US.max(8.0 * lately_packet_us);
        let overdue = f64::from(r.echo_age_us) - margin;
        self.silent = r.packets > 0
            && overdue > 0.0
            && self.sent.newest_times(SEND_TIMES).any(|s| {
                let after = wire_micros_between(r.echo, s);
                let age = wire_micros_between(s, now.wire_micros());
                after > 0 && f64::from(after) <= overdue && age <= SILENT_MAX_AGE_US
            });
        // A loss is congestion where the queue overflowed, or where the path drops more than
        // random loss would; other losses the tunnel recovers.
        let full = self.queue_peak.full(now, self.queue_us as i64);
        let lossy = self.last_loss > 0.005 && (full || self.loss >= LOSS_CONGESTION);
        self.congested = lossy
            || (iv.got_packets > 0.0 && self.queue_us > q.threshold && !q.draining)
            || (iv.sent_packets > 2.0 && iv.got_packets == 0.0);
        // What the scheduler may trust the path with until the next report: a step above what
        // it carried lately, measured over a few packets (a 64 kbit/s line carries one or two
        // 400-byte datagrams per 100 ms report, 39 or 78 kbit/s), and no step on a path that
        // is full or congested.
        let growth = if self.saturated || self.congested {
            1.0
        } else {
            CAP_GROWTH
        };
        self.cap_bps = (growth * lately.max(self.delivery_bps)).max(self.floor_bps);
        self.remember(now, r);
    }
}

/// What the phases before the rate's saw of a report ([`Estimator::cut`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen<'a> {
    pub r: &'a ReportEntry,
    pub iv: &'a Interval,
    pub q: &'a Queue,
    /// A delivery-rate sample, if the interval gave one.
    pub sample: Option<f64>,
}

impl Estimator {
    /// The rate phase of a congested path `i`: cut, and spread what it gives up. Returns
    /// whether it did (not on a report of the round trip after a cut).
    pub(super) fn cut(&mut self, i: usize, now: Time, seen: Seen<'_>, active: u64) -> bool {
        let Seen { r, iv, q, sample } = seen;
        let p = &mut self.paths[i];
        // A congested link that was offered clearly more than it delivered, and delivered
        // less than half its rate, and was full for the interval (below): what it carried is
        // its capacity, so the rate goes just below that at once (on a 64 kbit/s line started
        // at 1 Mbit/s and offered a 128 kbit/s stream, halving took four samples of
        // overload, 300 ms queues and late drops for eight seconds). A silent one is
        // halved. Otherwise (a little overdriven, or offered little) the rate is halved,
        // not below 90 % of what it delivered before (a TCP flow that just backed off
        // delivers less than the link carries), nor below what it carried in the interval.
        // Between delivery samples: a link that has held a queue since an earlier report
        // was busy ever since, so what it carried since then is its capacity too.
        let measured =
            sample.or_else(|| p.carried_since(q.queued_since.unwrap_or(iv.prev), r, now));
        // Full for the interval: its queues at the last report and now cover it (the queue
        // then kept the link busy that long after it, and the packet that arrived now found it
        // busy that long before), or the link dropped what it was offered beyond what it
        // carried (a policer, a queue that overflowed).
        let interval_us = (now - iv.prev.0).as_secs_f64() * 1e6;
        let covered = iv.prev_queue_us + p.queue_us >= interval_us;
        // (Not on a path the scheduler passes over: one acknowledgement after an idle second
        // measures nothing, and cut a 20 Mbit/s path to 12 kbit/s. Nor on one whose queues
        // cover only part of the interval: a path idle between two transfers shows the queue
        // of its last packets at the report before the next transfer, and a 20 Mbit/s path
        // was cut to what it carried over an interval it had spent mostly idle, 4.2 Mbit/s.)
        let far_over = measured.filter(|&s| {
            (covered || iv.lost > 0.0)
                && iv.got_packets > 0.0
                && !iv.passed_over
                && s < p.rate_bps / 2.0
                && iv.offered >= 1.25 * s
        });
        // A link whose queues cover the interval was busy all through it (longer, if its
        // queue has stood since an earlier report): what it carried is its capacity,
        // measured without the idle time of a start or of a sender that backed off, which
        // the smoothed delivery rate includes. The rate goes just under that — the queue
        // drains, the link is not left idle afterwards — and up to it, when the link carries
        // more than it was believed to (it was overdriven because every path was: a TCP flow
        // starting). (A start that doubles per round trip fills a fast path between two
        // reports; cut to half its rate, or to a delivery rate smoothed over the start, the
        // path was paced at half its capacity while the start overflowed the others.)
        let busy_since = q.queued_since.or(covered.then_some(iv.prev));
        // Only while the path was offered at least that much: one the scheduler passes over
        // carries the last of its queue, still reported deep, far below what it can. (Most
        // of it: a path paced at what it carried is offered that give or take a few
        // packets, and halved instead, a fast path was paced at half its capacity.)
        let capacity = busy_since
            .and_then(|from| p.carried_since(from, r, now))
            .filter(|&c| iv.offered >= BUSY * c);
        // A cut shows in the queue a round trip after it: a report on packets sent before the
        // last cut (its echo older) says nothing yet of the rate since, and only a capacity
        // measured moves the rate again. (Halved at every report of that round trip, a fast
        // path that a start had filled fell from 19 to 9 Mbit/s, and was paced there.)
        let before_last_cut =
            r.echo != 0 && p.cut_at.is_some_and(|t| wire_micros_between(t, r.echo) < 0);
        // Packets enough in the interval to measure what the path carried in it.
        let measured_here = iv.got_packets >= f64::from(SHORT_SAMPLE_PACKETS);
        // A path the sender already gives less than it carries drains its queue: a cut would
        // only take its rate below its capacity. (Offered 10 Mbit/s while the pacing clock
        // held them behind the queue a report showed, two paths that carried 15 and 30 were
        // halved, and stood at half their capacity for half a second.)
        let draining = measured_here && iv.offered < BUSY * iv.carried;
        // What a path carried is at most its capacity: a cut goes no lower than just under
        // it. (Halved at a start's first queue, a path learned at 24.7 Mbit/s that carried 22
        // went to 12.4, and a far one believed at 2 Mbit/s, which the scheduler had filled
        // because every path was full, went to 1.) Not where the sender offered clearly less
        // than that: reports that come bunched count too much in too short an interval.
        let carried_floor = if measured_here {
            CUT_TO_DELIVERED * iv.carried
        } else {
            0.0
        };
        let new = if let Some(c) = capacity {
            (CUT_TO_DELIVERED * c).max(MIN_RATE)
        } else if before_last_cut || draining {
            return false;
        } else if let Some(s) = far_over {
            (CUT_TO_DELIVERED * s).max(MIN_RATE).min(p.rate_bps)
        } else if iv.got_packets == 0.0 {
            (p.rate_bps / 2.0).max(MIN_RATE)
        } else {
            (p.rate_bps / 2.0)
                .max(0.9 * p.delivery_bps)
                .max(MIN_RATE)
                .min(p.rate_bps)
                .max(carried_floor)
        };
        p.cuts += 1;
        p.cut_at = Some(now.wire_micros());
        let freed = p.rate_bps - new;
        p.rate_bps = new;
        self.spread(i, freed, active);
        true
    }
}
