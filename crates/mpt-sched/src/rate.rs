use mpt_core::{PathId, Time};

use mpt_core::bits;
use mpt_core::wire::ReportEntry;

use crate::clock::ns_per_byte;
use crate::pace::Pacer;
use crate::{PathSet, PathSpec, Scheduler};

mod delay;

/// Rate-aware earliest-delivery scheduler, after the Bandwidth-Aware and On-Demand schedulers
/// of the real-time CMT literature.
///
/// Each path has a rate and a virtual transmit clock: the time at which everything already
/// sent on it will have been serialised at that rate. A packet goes to the path where it
/// would be *delivered* earliest: `max(clock, now) + len / rate + one-way-delay offset`. Load
/// therefore spreads in proportion to rate, and because each packet is placed where it
/// arrives soonest, consecutive packets also arrive (nearly) in order even on unequal paths.
///
/// The one-way-delay offset starts at zero and follows the receiver's reports.
///
/// A path whose virtual backlog exceeds `MAX_BACKLOG` (50 ms) is passed over while another
/// path has room: a real bottleneck queue holds only so much, so "arrives earliest" must not
/// mean "queue 260 ms on the fast path" when the other path is 260 ms slower (the packets would
/// be dropped). Only when every path is that full does the earliest-delivery rule alone decide.
#[derive(Debug, Clone)]
pub struct RateScheduler {
    paths: PathSet,
    /// Per path: virtual transmit clock, nanoseconds.
    busy: Vec<u64>,
    /// Per path: serialisation time per byte, nanoseconds in 16.16 fixed point.
    ns_per_byte: Vec<u64>,
    /// Per path: one-way delay above the fastest path, nanoseconds.
    owd: Vec<u64>,
    /// Per path: the last reported minimum delay (µs, relative) and the inner length of the
    /// packet that saw it.
    owd_reported: Vec<Option<(u32, u16)>>,
    /// Per path: bytes per datagram beyond the inner packet ([`PathSpec::overhead`]).
    overhead: Vec<usize>,
    /// The path of the last packet sent (ties within [`STICKY`] go to it).
    last: Option<usize>,
    /// Per path: the length of the last datagram sent on it.
    last_len: Vec<usize>,
    /// Paths to pass over while another is eligible ([`Self::avoid`]).
    avoided: u64,
    /// The path kept short and its backlog limit in nanoseconds ([`Scheduler::keep_short`]).
    short: Option<(usize, u64)>,
    /// The receiver's last report showed the path kept short queued beyond its limit
    /// ([`RateScheduler::short_queued`]).
    short_queued: bool,
    /// The receiver delays bonded packets to match the farthest path by at most this
    /// ([`Scheduler::equalised`]); zero when it does not.
    equalised: u64,
    /// Per path: the configured rate, bits per second.
    configured: Vec<Option<u64>>,
    /// The rates are learned ([`RateScheduler::learning`]), not the links' own.
    learned: bool,
    /// The pacing clocks, when paced ([`Scheduler::pace`]).
    pacer: Option<Pacer>,
}

/// A report shows the path kept short queued when its queue is beyond the limit and this.
pub const SHORT_REPORTED: std::time::Duration = std::time::Duration::from_millis(5);

/// Most queueing delay the scheduler builds on a path while another path has room.
pub const MAX_BACKLOG: std::time::Duration = std::time::Duration::from_millis(50);

/// A path whose delivery estimate is within this of the best path's keeps the next packet if
/// it carried the last one. 50 µs is ~40 packets of 1400 bytes at 10 Gbit/s, 4 at 1 Gbit/s,
/// and less than one at 200 Mbit/s and below, where packets still alternate as before.
pub const STICKY: std::time::Duration = std::time::Duration::from_micros(50);

impl RateScheduler {
    pub fn new(paths: &[PathSpec]) -> Self {
        RateScheduler {
            paths: PathSet::new(paths),
            busy: vec![0; paths.len()],
            ns_per_byte: paths
                .iter()
                .map(|p| ns_per_byte(p.rate_bps.unwrap_or(u64::from(p.weight) * 1_000_000)))
                .collect(),
            owd: vec![0; paths.len()],
            owd_reported: vec![None; paths.len()],
            overhead: paths.iter().map(|p| p.overhead).collect(),
            last: None,
            last_len: vec![0; paths.len()],
            avoided: 0,
            short: None,
            short_queued: false,
            equalised: 0,
            configured: paths.iter().map(|p| p.rate_bps).collect(),
            learned: false,
            pacer: None,
        }
    }

    /// Whether path `i`'s rate is the link's own, configured (not learned, nor guessed from a
    /// weight): its clock is then the link's queue.
    fn linked(&self, i: usize) -> bool {
        !self.learned && self.configured.get(i).is_some_and(Option::is_some)
    }

    /// The most a path's clock may run ahead (ns) for a packet that takes `ser` ns on it to
    /// go there while another path has room: `cap`, or on a line whose rate is configured and
    /// where one such packet takes longer, one packet's time. On a 128 kbit/s line a 1200-byte
    /// UDP datagram (about 1300 bytes on the line) takes 81 ms: with `cap` (50 ms) a 64 kbit/s
    /// line next to it, where the packet arrives later (162 ms), got it while the line was
    /// 50-81 ms ahead, and the packets after it, sent on the 128 kbit/s line, arrived first.
    fn room(&self, i: usize, cap: u64, ser: u64) -> u64 {
        if self.linked(i) {
            cap.max(ser)
        } else {
            cap
        }
    }

    /// The rates given are first guesses, learned as traffic goes (the adaptive scheduler's):
    /// the clocks are guesses too.
    pub(crate) fn learning(self) -> Self {
        RateScheduler {
            learned: true,
            ..self
        }
    }

    /// Pace `path` at `rate_bps` (when paced), or not at all: a rate not known to be near the
    /// path's capacity must not hold traffic back (`pace.rs`).
    pub fn set_pace_rate(&mut self, path: PathId, rate_bps: Option<u64>) {
        if let Some(p) = self.pacer.as_mut() {
            p.set_rate(path.index(), rate_bps);
        }
    }

    /// The receiver saw `queue` waiting on `path`: its virtual clock runs at least that far
    /// ahead of `now`, so new packets go where they are not stuck behind it (a path whose rate
    /// was overestimated holds a real queue that its virtual clock never showed), and at most
    /// [`MAX_BACKLOG`] further, or two of the path's last datagrams on a slow line (what was
    /// sent since the receiver saw the queue): a clock built at rates guessed too low would
    /// otherwise stand seconds ahead of every real queue, and its differences between paths,
    /// not the queues, would decide where packets go.
    pub fn hold_queue(&mut self, now: Time, path: PathId, queue: std::time::Duration) {
        let i = path.index();
        if i < self.busy.len() {
            let seen = now.as_nanos() + queue.as_nanos() as u64;
            let slack =
                (MAX_BACKLOG.as_nanos() as u64).max(2 * self.serialisation(i, self.last_len[i]));
            self.busy[i] = self.busy[i].clamp(seen, seen + slack);
            if let Some(p) = self.pacer.as_mut() {
                p.hold_queue(now.as_nanos(), i, queue);
            }
        }
    }

    /// How far `path`'s virtual clock runs ahead of `now`: the queue the scheduler believes
    /// the path holds.
    pub fn backlog(&self, now: Time, path: PathId) -> std::time::Duration {
        let busy = self.busy.get(path.index()).copied().unwrap_or(0);
        std::time::Duration::from_nanos(busy.saturating_sub(now.as_nanos()))
    }

    /// Pass over `path` while another path is eligible (`avoid`), or no longer: a path found
    /// silent is likely dead before its liveness says so, whatever its rate and virtual clock.
    pub fn avoid(&mut self, path: PathId, avoid: bool) {
        let bit = 1u64 << path.index().min(63);
        if avoid {
            self.avoided |= bit;
        } else {
            self.avoided &= !bit;
        }
    }

    /// The paths a packet may go to at `now` (nanoseconds): the eligible ones (with the next
    /// tier's while every eligible one is full), without the path kept short while its backlog
    /// is over its limit and another path remains; of those, the ones not avoided, or all.
    fn candidates(&self, now: u64) -> u64 {
        let c = self.unpaced_candidates(now);
        // when paced, paths with room on their pacing clock first
        match self.pacer.as_ref().map(|p| c & !p.full(now)) {
            Some(roomy) if roomy != 0 => roomy,
            _ => c,
        }
    }

    /// [`RateScheduler::candidates`] before pacing's choice.
    fn unpaced_candidates(&self, now: u64) -> u64 {
        // a tier whose paths all hold more than [`MAX_BACKLOG`] overflows into the next
        let cap = MAX_BACKLOG.as_nanos() as u64;
        let full = (0..self.busy.len())
            .filter(|&i| self.busy[i] > now + cap)
            .fold(0u64, |m, i| m | 1 << i);
        let eligible = self.paths.eligible_overflowing(full);
        // the path kept short, while its queue is beyond its limit, is passed over for
        // another, even one avoided: a path found silent on one report is often only late
        // (its report came after a stall), and bulk moved off it must not queue behind the
        // light stream instead
        let open = match self.short {
            Some((i, limit)) if self.busy[i] > now + limit || self.short_queued => {
                match eligible & !(1 << i) {
                    0 => eligible,
                    o => o,
                }
            }
            _ => eligible,
        };
        match open & !self.avoided {
            0 => open,
            c => c,
        }
    }

    /// The receiver reported `queue` on `path`: if that is the path kept short and the queue
    /// is beyond its limit, the path is passed over (while another can take the traffic) until
    /// a report shows it within, whatever its virtual clock says. The clock runs at a learned
    /// rate: a few percent above the link's, and under a sender that keeps the paths full (BBR
    /// through a tunnel that equalises delays) a light stream met 25-60 ms of real queue that
    /// the clock never showed.
    pub fn short_queued(&mut self, path: PathId, queue: std::time::Duration) {
        if let Some((_, limit)) = self.short.filter(|&(i, _)| i == path.index()) {
            self.short_queued =
                queue.as_nanos() as u64 > limit.max(SHORT_REPORTED.as_nanos() as u64);
        }
    }

    /// Change a path's rate (bits per second).
    pub fn set_rate(&mut self, path: PathId, rate_bps: u64) {
        if let Some(n) = self.ns_per_byte.get_mut(path.index()) {
            *n = ns_per_byte(rate_bps);
        }
    }

    fn serialisation(&self, i: usize, len: usize) -> u64 {
        (len as u64).saturating_mul(self.ns_per_byte[i]) >> 16
    }
}

impl Scheduler for RateScheduler {
    fn name(&self) -> &'static str {
        "rate"
    }

    fn select(&mut self, now: Time, len: usize) -> Option<PathId> {
        let now = now.as_nanos();
        let cap = MAX_BACKLOG.as_nanos() as u64;
        // The earliest arrival among paths with room, and among all paths.
        let mut best: Option<(usize, u64)> = None;
        let mut best_roomy: Option<(usize, u64)> = None;
        // Paths are tried from the one after the last used, so exact ties (idle paths that look
        // alike, as every path does before anything is learned) take turns instead of all
        // going to the lowest-numbered path.
        let first = self.last.map_or(0, |l| (l + 1) as u32);
        let candidates = self.candidates(now);
        let far = self.farthest();
        let order = bits(candidates.rotate_right(first)).map(|j| (j + first as usize) % 64);
        for i in order {
            let start = self.busy[i].max(now);
            let ser = self.serialisation(i, len);
            let arrival = start + ser + self.offset(i, far);
            if best.is_none_or(|(_, a)| arrival < a) {
                best = Some((i, arrival));
            }
            if start - now <= self.room(i, cap, ser) && best_roomy.is_none_or(|(_, a)| arrival < a)
            {
                best_roomy = Some((i, arrival));
            }
        }
        let (i, arrival) = best_roomy.or(best)?;
        // A near tie goes to the path used last while its run is still being serialised: on
        // fast paths consecutive packets then form runs that leave in one GSO send and arrive
        // in order on their path. The tolerance is a time, so it spans many packets only where
        // they take little time each. A path that has gone idle again has no run to extend:
        // a light stream whose packets each find every path idle would otherwise all go to the
        // first path chosen, however slow it really is.
        if let Some(l) = self
            .last
            .filter(|&l| l != i && candidates & (1 << l) != 0 && self.busy[l] > now)
        {
            let start = self.busy[l].max(now);
            let ser = self.serialisation(l, len);
            let arrival_l = start + ser + self.offset(l, far);
            if start - now <= self.room(l, cap, ser)
                && arrival_l <= arrival + STICKY.as_nanos() as u64
            {
                return Some(PathId(l as u8));
            }
        }
        Some(PathId(i as u8))
    }

    fn on_sent(&mut self, now: Time, path: PathId, len: usize) {
        let i = path.index();
        if i < self.busy.len() {
            let mut ser = self.serialisation(i, len);
            if self.short.is_some_and(|(k, _)| k == i) && !self.linked(i) {
                // a learned rate above the link's must not let a queue build: bulk gets at
                // most half of what the path is believed to carry (a quarter more let BBR
                // bulk build 20-50 ms under a voice call when a report came late). A rate
                // configured is the link's, and the clock its queue: the limit alone keeps
                // it short (halved, a 100/s ping beside one TCP flow over two 20 Mbit/s
                // paths cost the flow a quarter of the bond: 26.6 Mbit/s, then 33.6)
                ser += ser;
            }
            self.busy[i] = self.busy[i].max(now.as_nanos()) + ser;
            self.last = Some(i);
            self.last_len[i] = len;
            if let Some(p) = self.pacer.as_mut() {
                p.on_sent(now.as_nanos(), i, len);
            }
        }
    }

    /// Control and resends take the path's time. Where the rate is learned (or guessed from
    /// a weight), only while its clock is under [`MAX_BACKLOG`]: they go where data was lost
    /// or a path must be kept alive, not where they arrive soonest, so nothing else bounds
    /// them. Charged at a rate cut in a flood, the resends of a near path's losses put a far
    /// path's clock seconds ahead: it got no data, learned nothing new, and kept its cut rate
    /// (the lab: 95 s ahead after two transfers). Where the rate is the link's, configured,
    /// the clock is the link's queue, and what goes on the line takes its time there whatever
    /// it is: a report a second left out of the clock of a 128 kbit/s line kept busy put the
    /// line 5 ms further behind its clock each second.
    fn on_control_sent(&mut self, now: Time, path: PathId, len: usize) {
        if self.linked(path.index()) || self.backlog(now, path) < MAX_BACKLOG {
            self.on_sent(now, path, len);
        }
    }

    fn on_unsent(&mut self, now: Time, path: PathId, len: usize) {
        let i = path.index();
        if i < self.busy.len() {
            let ser = self.serialisation(i, len);
            self.busy[i] = self.busy[i].saturating_sub(ser).max(now.as_nanos());
            if let Some(p) = self.pacer.as_mut() {
                p.on_unsent(now.as_nanos(), i, len);
            }
        }
    }

    fn on_path_state(&mut self, now: Time, path: PathId, up: bool) {
        self.paths.set_up(path, up);
        if up {
            // While a path was the only one, everything went to it whatever its backlog, and
            // its virtual clock may have run far ahead of its real queue (a learned rate below
            // what it carries). Bounded to the backlog limit, it shares at once with the path
            // that came back instead of leaving it all the traffic until the clock catches up.
            let limit = now.as_nanos() + MAX_BACKLOG.as_nanos() as u64;
            for b in self.busy.iter_mut() {
                *b = (*b).min(limit);
            }
        }
    }

    fn on_report(&mut self, _now: Time, _path: PathId, report: &ReportEntry) {
        self.take_delay_report(report);
    }

    fn is_up(&self, path: PathId) -> bool {
        self.paths.is_up(path)
    }

    fn backlog(&self, now: Time, path: PathId) -> std::time::Duration {
        RateScheduler::backlog(self, now, path)
    }

    fn equalised(&mut self, most: std::time::Duration) {
        self.equalised = most.as_nanos() as u64;
    }

    fn local_queue(&mut self, now: Time, path: PathId, queue: std::time::Duration) {
        if let Some(b) = self.busy.get_mut(path.index()) {
            *b = (*b).max(now.as_nanos() + queue.as_nanos() as u64);
        }
    }

    /// Paced at the configured rates; [`RateScheduler::set_pace_rate`] changes them.
    fn pace(&mut self, limit: Option<std::time::Duration>) {
        self.pacer = limit.map(|l| Pacer::new(l, &self.configured));
    }

    fn paced_until(&self, now: Time) -> Option<Time> {
        let n = now.as_nanos();
        self.pacer.as_ref()?.until(n, self.unpaced_candidates(n))
    }

    fn pace_granule(&self, len: usize) -> Option<std::time::Duration> {
        self.pacer.as_ref()?.granule(len)
    }

    fn keep_short(&mut self, path: Option<PathId>, limit: std::time::Duration) {
        let short = path
            .map(|p| p.index())
            .filter(|&i| i < self.busy.len())
            .map(|i| (i, limit.as_nanos() as u64));
        if short.map(|s| s.0) != self.short.map(|s| s.0) {
            self.short_queued = false;
        }
        self.short = short;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::WeightedRoundRobin;
    use std::time::Duration;

    /// Report `path` as `owd_us` further away than path 0 (reports cover every path).
    fn report_owd(s: &mut RateScheduler, path: PathId, owd_us: u32) {
        for (p, owd_min_us) in [(PathId(0), 0), (path, owd_us)] {
            let report = ReportEntry {
                path: p,
                owd_min_us,
                owd_min_len: 64,
                ..Default::default()
            };
            s.on_report(Time::ZERO, p, &report);
        }
    }

    /// A path that has carried no data is reported at 0 us on a packet of no length: that is
    /// no measurement. Taken as one, it would sit a full packet's serialisation (95 ms at 128
    /// kbit/s) further than paths measured on full packets, and get nothing more to measure.
    #[test]
    fn a_path_that_measured_nothing_gets_no_delay_offset() {
        let mut s = RateScheduler::new(&specs(&[128, 128]));
        let measured = ReportEntry {
            path: PathId(0),
            owd_min_us: 95_000,
            owd_min_len: 1498,
            ..Default::default()
        };
        s.on_report(Time::ZERO, PathId(0), &measured);
        let nothing = ReportEntry {
            path: PathId(1),
            ..Default::default()
        };
        s.on_report(Time::ZERO, PathId(1), &nothing);
        assert_eq!(s.owd, [0, 0]);
        // the idle path takes the next packet: its clock is free, path 0's no sooner
        s.on_sent(Time::ZERO, PathId(0), 1498);
        assert_eq!(s.select(Time::ZERO, 1498), Some(PathId(1)));
    }

    fn specs(rates_kbit: &[u64]) -> Vec<PathSpec> {
        rates_kbit
            .iter()
            .map(|&r| PathSpec::new((r / 64) as u32, Some(r * 1000), false))
            .collect()
    }

    /// Simulated FIFO links: each path serialises at its rate, then adds its propagation delay.
    /// Returns the fraction of packets that arrive in order (RFC 4737: not below the highest
    /// sequence seen before) and the bytes carried per path.
    fn simulate(
        s: &mut dyn Scheduler,
        rates_bps: &[u64],
        delay_ms: &[u64],
        packet_len: impl Fn(usize) -> usize,
        interval_ns: u64,
        n: usize,
    ) -> (f64, Vec<u64>) {
        let mut link_free = vec![0u64; rates_bps.len()];
        let mut arrivals: Vec<(u64, usize)> = Vec::with_capacity(n);
        let mut bytes = vec![0u64; rates_bps.len()];
        for seq in 0..n {
            let now = seq as u64 * interval_ns;
            let len = packet_len(seq);
            let p = s.select(Time::from_nanos(now), len).expect("path").index();
            s.on_sent(Time::from_nanos(now), PathId(p as u8), len);
            let tx = (len as u64 * 8 * 1_000_000_000) / rates_bps[p];
            link_free[p] = link_free[p].max(now) + tx;
            arrivals.push((link_free[p] + delay_ms[p] * 1_000_000, seq));
            bytes[p] += len as u64;
        }
        arrivals.sort(); // stable: equal times keep send order, as a FIFO would
        let mut highest = None;
        let mut in_order = 0;
        for (_, seq) in arrivals {
            if highest.is_none_or(|h| seq > h) {
                in_order += 1;
                highest = Some(seq);
            }
        }
        (in_order as f64 / n as f64, bytes)
    }

    /// Send `len`-byte packets `every_ms` apart at ticks `ticks`, counting them per path.
    fn send_evenly(
        s: &mut RateScheduler,
        ticks: std::ops::Range<u64>,
        every_ms: u64,
        len: usize,
        count: &mut [u32],
    ) {
        for k in ticks {
            let now = Time::from_millis(every_ms * k);
            let p = s.select(now, len).expect("path");
            s.on_sent(now, p, len);
            count[p.index()] += 1;
        }
    }

    /// A light stream over paths believed alike (and fast: every packet finds each of them
    /// idle) is shared out instead of all going to one path, which may really be the slowest.
    #[test]
    fn a_light_stream_over_idle_look_alike_paths_takes_turns() {
        let mut s = RateScheduler::new(&[PathSpec::new(1, Some(1_000_000), false); 4]);
        let mut count = [0u32; 4];
        send_evenly(&mut s, 0..400, 10, 270, &mut count);
        assert_eq!(count, [100; 4]);
    }

    /// A probe the kernel refused takes no time on the path's clock: the packets after it
    /// go where they would have gone without it.
    #[test]
    fn a_datagram_that_never_left_gives_its_time_back() {
        let mut s = RateScheduler::new(&[PathSpec::new(1, Some(1_000_000), false); 2]);
        let now = Time::from_millis(1);
        s.on_sent(now, PathId(0), 1250);
        let before = s.backlog(now, PathId(0));
        s.on_control_sent(now, PathId(0), 1500);
        s.on_unsent(now, PathId(0), 1500);
        assert_eq!(s.backlog(now, PathId(0)), before);
        s.on_unsent(now, PathId(1), 1500);
        assert_eq!(s.backlog(now, PathId(1)), std::time::Duration::ZERO);
    }

    /// Where the rate is learned, control and resends take a path's time until its clock is
    /// `MAX_BACKLOG` ahead (the last one whole, however long on a slow line), and no more: at
    /// 1 Mbit/s, 10 ms a datagram.
    #[test]
    fn control_takes_a_path_s_time_only_up_to_the_backlog_limit() {
        let mut s = RateScheduler::new(&[PathSpec::new(1, Some(1_000_000), false); 2]).learning();
        let now = Time::from_millis(1);
        for _ in 0..100 {
            s.on_control_sent(now, PathId(0), 1250);
        }
        assert_eq!(s.backlog(now, PathId(0)), Duration::from_millis(50));
        s.on_control_sent(now, PathId(1), 20_000);
        assert_eq!(s.backlog(now, PathId(1)), Duration::from_millis(160));
        // data still queues behind it
        s.on_sent(now, PathId(0), 1250);
        assert_eq!(s.backlog(now, PathId(0)), Duration::from_millis(60));
    }

    /// Where the rate is the link's, configured, control takes the path's time however far its
    /// clock runs ahead: the line carries it behind the data.
    #[test]
    fn control_takes_a_configured_path_s_time_in_full() {
        let mut s = RateScheduler::new(&[
            PathSpec::new(1, Some(1_000_000), false),
            PathSpec::new(1, None, false),
        ]);
        let now = Time::from_millis(1);
        for _ in 0..10 {
            s.on_control_sent(now, PathId(0), 1250);
        }
        assert_eq!(s.backlog(now, PathId(0)), Duration::from_millis(100));
        // a rate guessed from a weight (1 Mbit/s) is bounded
        for _ in 0..10 {
            s.on_control_sent(now, PathId(1), 1250);
        }
        assert_eq!(s.backlog(now, PathId(1)), Duration::from_millis(50));
    }

    /// A queue the receiver saw (and the virtual clock did not) keeps new packets off the path
    /// until it has drained below the backlog limit.
    #[test]
    fn a_reported_queue_is_waited_out() {
        let mut s = RateScheduler::new(&[PathSpec::new(1, Some(10_000_000), false); 2]);
        s.hold_queue(Time::ZERO, PathId(0), std::time::Duration::from_millis(80));
        let mut on = [0u32; 2];
        // 1000-byte packets every 2 ms for 40 ms: path 1 alone has room (0.8 ms each).
        send_evenly(&mut s, 0..20, 2, 1000, &mut on);
        assert_eq!(on, [0, 20]);
        // Once it has drained, path 0 takes packets again.
        send_evenly(&mut s, 20..50, 2, 1000, &mut on);
        assert!(on[0] > 0, "{on:?}");
    }

    /// Clocks built at rates guessed far too low stand seconds ahead of the real queues; the
    /// queues the receiver reports bring them back, and then the shorter real queue gets the
    /// next packets, not the path whose clock happened to run less far ahead.
    #[test]
    fn reported_queues_bring_clocks_built_at_low_guesses_back() {
        let mut s = RateScheduler::new(&[PathSpec::new(1, Some(64_000), false); 2]);
        // A second of 8 Mbit/s: each 1000-byte packet adds 125 ms to its path's clock.
        for ms in 0..1000 {
            let now = Time::from_millis(ms);
            let p = s.select(now, 1000).unwrap();
            s.on_sent(now, p, 1000);
        }
        // Path 0 one packet further ahead.
        s.on_sent(Time::from_millis(1000), PathId(0), 1000);
        let now = Time::from_millis(1000);
        assert!(s.backlog(now, PathId(1)) > std::time::Duration::from_secs(30));
        // The paths really carry more: the receiver sees 20 ms queued on path 0, 200 on path 1.
        s.hold_queue(now, PathId(0), std::time::Duration::from_millis(20));
        s.hold_queue(now, PathId(1), std::time::Duration::from_millis(200));
        // (at most two of the last packets above it: 250 ms at the guessed 64 kbit/s)
        for (p, q) in [(0, 20), (1, 200)] {
            let b = s.backlog(now, PathId(p)).as_millis();
            assert!((q..=q + 250).contains(&b), "path {p}: backlog {b} ms");
        }
        assert_eq!(s.select(now, 1000), Some(PathId(0)));
    }

    /// On configured slow lines a packet goes where it arrives first even when that line's
    /// clock runs more than `MAX_BACKLOG` ahead, as long as that is less than the packet's own
    /// time there: 1300 bytes behind 70 ms on a 128 kbit/s line arrive after 151 ms, on an
    /// idle 64 kbit/s line after 162 ms.
    #[test]
    fn a_slow_line_within_one_packet_s_time_keeps_the_packet_that_arrives_first_there() {
        let mut s = RateScheduler::new(&[
            PathSpec::new(1, Some(128_000), false),
            PathSpec::new(1, Some(64_000), false),
        ]);
        // 70 ms of control on the 128 kbit/s line
        s.on_control_sent(Time::ZERO, PathId(0), 1120);
        assert_eq!(s.backlog(Time::ZERO, PathId(0)).as_millis(), 70);
        assert_eq!(s.select(Time::ZERO, 1300), Some(PathId(0)));
        // with learned rates the backlog limit stands
        let mut s = RateScheduler::new(&[
            PathSpec::new(1, Some(128_000), false),
            PathSpec::new(1, Some(64_000), false),
        ])
        .learning();
        s.on_sent(Time::ZERO, PathId(0), 1120);
        assert_eq!(s.select(Time::ZERO, 1300), Some(PathId(1)));
    }

    /// On a 64 kbit/s line one 500-byte datagram takes 62.5 ms, more than MAX_BACKLOG: a report
    /// that shows no queue yet (its packets left before these two) must not take the two just
    /// sent off the clock, or the next packets go to the slow line too and arrive after their
    /// successors on faster ones.
    #[test]
    fn a_report_leaves_the_packets_just_sent_on_a_slow_line_on_its_clock() {
        let mut s = RateScheduler::new(&[PathSpec::new(1, Some(64_000), false)]);
        s.on_sent(Time::ZERO, PathId(0), 500);
        s.on_sent(Time::ZERO, PathId(0), 500);
        s.hold_queue(Time::ZERO, PathId(0), std::time::Duration::ZERO);
        assert_eq!(s.backlog(Time::ZERO, PathId(0)).as_micros(), 125_000);
    }

    #[test]
    fn unequal_paths_deliver_in_order_without_resequencing() {
        // MPT Table II case 17: 64/128/64/128 kbit/s paths, a 256 kbit/s stream of 160-byte
        // datagrams, i.e. 200 packets/s of 232 bytes each once inner UDP/IP (28), the mptd
        // header (16) and outer UDP/IP (28) are added: 371 of the 384 kbit/s available.
        let rates = [64_000, 128_000, 64_000, 128_000];
        let mut s = RateScheduler::new(&specs(&[64, 128, 64, 128]));
        let (ordered, bytes) = simulate(&mut s, &rates, &[5; 4], |_| 232, 5_000_000, 100_000);
        eprintln!(
            "rate on 64/128/64/128 kbit/s: {:.3} % in order",
            ordered * 100.0
        );
        assert!(ordered >= 0.99, "in order: {ordered}");
        assert!(
            bytes.iter().all(|&b| b > 0),
            "a path was left idle: {bytes:?}"
        );

        // The same stream under weighted round-robin (weights = rates, as MPT did) reorders.
        let mut w = WeightedRoundRobin::new(&specs(&[64, 128, 64, 128]));
        let (wrr_ordered, _) = simulate(&mut w, &rates, &[5; 4], |_| 232, 5_000_000, 100_000);
        eprintln!(
            "wrr on the same paths: {:.3} % in order",
            wrr_ordered * 100.0
        );
        assert!(wrr_ordered < 0.9, "wrr in order: {wrr_ordered}");
    }

    #[test]
    fn saturated_unequal_paths_share_by_rate_and_stay_in_order() {
        let rates = [64_000, 128_000, 64_000, 128_000];
        let mut s = RateScheduler::new(&specs(&[64, 128, 64, 128]));
        // Offered 512 kbit/s: more than the paths carry, so every path is kept busy.
        let (ordered, bytes) = simulate(&mut s, &rates, &[5; 4], |_| 200, 3_125_000, 100_000);
        assert!(ordered >= 0.99, "in order: {ordered}");
        let counts: Vec<usize> = bytes.iter().map(|&b| b as usize).collect();
        assert_shares(&counts, &[1.0, 2.0, 1.0, 2.0], 0.01);
    }

    #[test]
    fn known_delay_offsets_keep_order() {
        // Two equal-rate paths, one 40 ms slower; the receiver has reported the difference.
        let rates = [10_000_000, 10_000_000];
        let mut s = RateScheduler::new(&specs(&[10_000, 10_000]));
        report_owd(&mut s, PathId(1), 40_000);
        let interval = 1200 * 8 * 1_000_000_000 / 15_000_000;
        let (ordered, bytes) = simulate(&mut s, &rates, &[10, 50], |_| 1200, interval, 100_000);
        assert!(ordered >= 0.99, "in order: {ordered}");
        assert!(bytes[1] > bytes[0] / 4, "slow path unused: {bytes:?}");
    }

    /// Two 20 Mbit/s paths 50 ms apart, offered 30 Mbit/s: the near path's worst queue.
    fn near_queue_at_30_of_40(equalised: Option<std::time::Duration>) -> (u64, [u64; 2]) {
        let rates = [20_000_000u64, 20_000_000];
        let mut s = RateScheduler::new(&specs(&[20_000, 20_000]));
        report_owd(&mut s, PathId(1), 50_000);
        if let Some(most) = equalised {
            s.equalised(most);
        }
        let interval = 1200 * 8 * 1_000_000_000 / 30_000_000;
        let (mut worst, mut link_free, mut bytes) = (0u64, [0u64; 2], [0u64; 2]);
        for k in 0..20_000u64 {
            let now = k * interval;
            let p = s.select(Time::from_nanos(now), 1200).unwrap().index();
            s.on_sent(Time::from_nanos(now), PathId(p as u8), 1200);
            link_free[p] = link_free[p].max(now) + 1200 * 8 * 1_000_000_000 / rates[p];
            bytes[p] += 1200;
            worst = worst.max(link_free[0].saturating_sub(now));
        }
        (worst / 1_000_000, bytes)
    }

    /// Where the receiver delays bonded packets to match the farthest path, the near path is
    /// no sooner for them: load spreads by queue, and the near path's queue stays short
    /// instead of standing at the backlog limit while the far path idles.
    #[test]
    fn an_equalising_receiver_makes_paths_share_by_queue_not_by_nearness() {
        let (near_queue, bytes) =
            near_queue_at_30_of_40(Some(std::time::Duration::from_millis(200)));
        assert!(near_queue <= 2, "near path queued {near_queue} ms");
        let share = bytes[0] as f64 / (bytes[0] + bytes[1]) as f64;
        assert!((0.45..=0.55).contains(&share), "near path's share {share}");
        // without: the near path fills to the backlog limit first
        let (near_queue, _) = near_queue_at_30_of_40(None);
        assert!(near_queue >= 40, "near path queued {near_queue} ms");
        // beyond the receiver's longest wait, the rest of the difference still counts
        let (near_queue, _) = near_queue_at_30_of_40(Some(std::time::Duration::from_millis(20)));
        assert!(
            (25..=35).contains(&near_queue),
            "near path queued {near_queue} ms"
        );
    }

    #[test]
    fn a_far_slower_path_takes_the_overflow_instead_of_a_deep_queue() {
        // 10 Mbit/s each; path 1 is 260 ms further away. 12 Mbit/s offered: more than one
        // path carries, so path 1 must take some load, and path 0 must not be queued far
        // beyond MAX_BACKLOG waiting for path 1's delay.
        let rates = [10_000_000, 10_000_000];
        let mut s = RateScheduler::new(&specs(&[10_000, 10_000]));
        report_owd(&mut s, PathId(1), 260_000);
        let interval = 1200 * 8 * 1_000_000_000 / 12_000_000;
        let mut worst_backlog = 0u64;
        let mut link_free = [0u64; 2];
        for k in 0..20_000u64 {
            let now = k * interval;
            let p = s.select(Time::from_nanos(now), 1200).unwrap();
            s.on_sent(Time::from_nanos(now), p, 1200);
            let tx = 1200 * 8 * 1_000_000_000 / rates[p.index()];
            link_free[p.index()] = link_free[p.index()].max(now) + tx;
            worst_backlog = worst_backlog.max(link_free[0].saturating_sub(now));
        }
        let cap = MAX_BACKLOG.as_nanos() as u64 + 1_000_000;
        assert!(
            worst_backlog <= cap,
            "path 0 queued {} ms",
            worst_backlog / 1_000_000
        );
    }

    #[test]
    fn a_small_packet_minimum_does_not_fake_a_delay_offset() {
        // Equal 128 kbit/s lines. Path 0's minimum came from a 64-byte ping, path 1's from a
        // 188-byte datagram: 7.75 ms more serialisation, not more distance.
        let mut s = RateScheduler::new(&specs(&[128, 128]));
        let ser = |len: u32| (len + 44) * 8 * 1_000_000 / 128_000;
        let r0 = ReportEntry {
            path: PathId(0),
            owd_min_us: 0,
            owd_min_len: 64,
            ..Default::default()
        };
        let r1 = ReportEntry {
            path: PathId(1),
            owd_min_us: ser(188) - ser(64),
            owd_min_len: 188,
            ..Default::default()
        };
        s.on_report(Time::ZERO, PathId(0), &r0);
        s.on_report(Time::ZERO, PathId(1), &r1);
        assert!(
            s.owd[0] < 100_000 && s.owd[1] < 100_000,
            "offsets {:?} ns",
            s.owd
        );
        // A real 40 ms difference stays.
        let r1 = ReportEntry {
            owd_min_us: ser(188) - ser(64) + 40_000,
            ..r1
        };
        s.on_report(Time::ZERO, PathId(1), &r1);
        assert!(
            (s.owd[1] as i64 - 40_000_000).abs() < 100_000,
            "offset {} ns",
            s.owd[1]
        );
    }

    #[test]
    fn saturated_shares_follow_rates_over_100k() {
        for rates in [vec![20u64, 20, 10, 10], vec![2, 1, 1, 1], vec![1000, 10]] {
            let mut s =
                RateScheduler::new(&specs(&rates.iter().map(|r| r * 1000).collect::<Vec<_>>()));
            let c = shares(&mut s, rates.len(), 100_000, 1400);
            let w: Vec<f64> = rates.iter().map(|&r| r as f64).collect();
            assert_shares(&c, &w, 0.01);
        }
    }

    #[test]
    fn a_returning_path_shares_at_once_with_one_that_ran_alone() {
        let mut s = RateScheduler::new(&specs(&[1000, 1000]));
        s.on_path_state(Time::ZERO, PathId(1), false);
        // 1 s of traffic at twice path 0's rate while it is alone: its clock runs 0.5 s ahead
        for k in 0..1000u64 {
            let now = Time::from_millis(k);
            let p = s.select(now, 250).expect("path 0 is up");
            assert_eq!(p, PathId(0));
            s.on_sent(now, p, 250);
        }
        let now = Time::from_secs(1);
        s.on_path_state(now, PathId(1), true);
        // the next 100 ms of traffic (at the paths' combined rate) is shared, not all on path 1
        let mut count = [0usize; 2];
        for k in 0..100u64 {
            let t = now + std::time::Duration::from_millis(k);
            let p = s.select(t, 250).expect("a path is up");
            s.on_sent(t, p, 250);
            count[p.index()] += 1;
        }
        assert!(count[0] >= 25, "path 0 got {count:?}");
    }

    #[test]
    fn fast_paths_get_runs_slow_paths_alternate() {
        let switches = |rate_kbit: u64| {
            let mut s = RateScheduler::new(&specs(&[rate_kbit, rate_kbit]));
            let mut last = None;
            let mut switches = 0;
            let mut count = [0usize; 2];
            for _ in 0..10_000 {
                let p = s.select(Time::ZERO, 1400).expect("a path is up");
                s.on_sent(Time::ZERO, p, 1400);
                switches += usize::from(last.is_some_and(|l| l != p));
                last = Some(p);
                count[p.index()] += 1;
            }
            assert_shares(&count, &[1.0, 1.0], 0.01);
            switches
        };
        // 10 Gbit/s: ~45 packets (50 µs) per run; 1 Gbit/s: ~5; 20 Mbit/s: every packet
        // (but where the two paths tie exactly).
        assert!(
            switches(10_000_000) < 10_000 / 30,
            "{}",
            switches(10_000_000)
        );
        assert!(switches(1_000_000) < 10_000 / 3, "{}", switches(1_000_000));
        assert!(switches(20_000) >= 9_900, "{}", switches(20_000));
    }

    #[test]
    fn idle_paths_use_the_fastest() {
        let mut s = RateScheduler::new(&specs(&[1000, 2000]));
        // Packets far apart in time: each finds both paths idle and takes the faster one.
        for k in 0..10 {
            let now = Time::from_millis(k * 100);
            let p = s.select(now, 1000).unwrap();
            assert_eq!(p, PathId(1));
            s.on_sent(now, p, 1000);
        }
    }

    #[test]
    fn state_rules() {
        check_state_rules(|p| Box::new(RateScheduler::new(p)));
    }

    /// 1400 bytes every 373 µs (30 Mbit/s), the `n` packets from the `from`th: path 0's largest
    /// backlog meanwhile, and the packets each path took.
    fn run(s: &mut RateScheduler, from: u64, n: u64) -> (Duration, [u32; 2]) {
        let mut worst = Duration::ZERO;
        let mut per_path = [0u32; 2];
        for k in from..from + n {
            let now = Time::from_nanos(k * 373_333);
            let p = s.select(now, 1400).expect("path");
            s.on_sent(now, p, 1400);
            per_path[p.index()] += 1;
            worst = worst.max(s.backlog(now, PathId(0)));
        }
        (worst, per_path)
    }

    /// Two 20 Mbit/s paths, the second 50 ms further, offered 30 Mbit/s: the near path's
    /// backlog grows to the backlog limit before the far path is the sooner one. Kept short,
    /// it never stands more than its limit (plus one packet) ahead, and the far path takes the
    /// rest; given up, the near path fills again.
    #[test]
    fn a_path_kept_short_stays_short_and_the_others_take_the_rest() {
        let mut s = RateScheduler::new(&specs(&[20_000, 20_000]));
        report_owd(&mut s, PathId(1), 50_000);
        let limit = Duration::from_millis(5);
        let packet = Duration::from_nanos(1400 * 8 * 1_000_000_000 / 20_000_000);
        let (free, _) = run(&mut s, 0, 3000);
        assert!(
            free > Duration::from_millis(40),
            "near path backlog {free:?}"
        );
        s.keep_short(Some(PathId(0)), limit);
        run(&mut s, 3000, 500); // what stood in the queue drains
        let (short, per_path) = run(&mut s, 3500, 3000);
        assert!(short <= limit + packet * 2, "near path backlog {short:?}");
        // its rate is the link's (configured): its clock is the link's queue, and it still
        // carries its whole rate, 20 of the 30 Mbit/s
        assert!(per_path[0] >= 1900 && per_path[1] >= 950, "{per_path:?}");
        // a report shows a queue there that the clock does not: passed over until one shows
        // it gone
        s.short_queued(PathId(0), Duration::from_millis(12));
        let (_, per_path) = run(&mut s, 6500, 300);
        assert_eq!(per_path[0], 0, "{per_path:?}");
        s.short_queued(PathId(0), Duration::from_millis(1));
        let (_, per_path) = run(&mut s, 6800, 300);
        assert!(per_path[0] > 100, "{per_path:?}");
        s.keep_short(None, limit);
        let (again, _) = run(&mut s, 7100, 3000);
        assert!(
            again > Duration::from_millis(40),
            "near path backlog {again:?}"
        );
    }

    /// Where the rates are learned (`adaptive`'s, perhaps above the link's), the path kept
    /// short carries at most half of what it is believed to carry: its clock counts each of
    /// its packets twice.
    #[test]
    fn a_path_kept_short_at_a_learned_rate_carries_half_of_it() {
        let mut s = RateScheduler::new(&specs(&[20_000, 20_000])).learning();
        report_owd(&mut s, PathId(1), 50_000);
        let limit = Duration::from_millis(5);
        s.keep_short(Some(PathId(0)), limit);
        let packet = Duration::from_nanos(1400 * 8 * 1_000_000_000 / 20_000_000);
        let (short, per_path) = run(&mut s, 0, 3000);
        assert!(short <= limit + packet * 2, "near path backlog {short:?}");
        assert!(per_path[0] >= 950 && per_path[0] <= 1100, "{per_path:?}");
    }

    /// The far path found silent for a report (it may only be late) does not undo the near
    /// path's limit: bulk goes to the far path rather than queue behind a light stream.
    #[test]
    fn a_path_kept_short_stays_short_while_the_other_is_avoided() {
        let mut s = RateScheduler::new(&specs(&[20_000, 20_000]));
        report_owd(&mut s, PathId(1), 50_000);
        let limit = Duration::from_millis(2);
        s.keep_short(Some(PathId(0)), limit);
        s.avoid(PathId(1), true);
        let packet = Duration::from_nanos(1400 * 8 * 1_000_000_000 / 20_000_000);
        let (worst, per_path) = run(&mut s, 0, 3000);
        assert!(worst <= limit + packet * 2, "near path backlog {worst:?}");
        assert!(per_path[0] >= 1900 && per_path[1] >= 950, "{per_path:?}");
        // with nothing kept short, the path avoided gets nothing while the other has room
        s.keep_short(None, limit);
        s.avoid(PathId(1), true);
        let p = s.select(Time::from_nanos(3000 * 373_333), 1400);
        assert_eq!(p, Some(PathId(0)));
    }
}
