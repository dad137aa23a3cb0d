//! The receiving side of mptd: puts the data packets that arrive over several paths back into
//! the sender's order, and measures the paths while doing so.
//!
//! Every data packet carries a global sequence number (`seq`, shared by all paths, increasing in
//! send order), a per-path sequence number (`path_seq`) and a send timestamp. Paths are FIFO but
//! have different delays, so packets arrive reordered across paths. The [`Resequencer`] hands
//! packets to the caller strictly in `seq` order and waits a bounded time for gaps:
//!
//! * at most [`Config::timeout`] after the arrival of any held packet ([`Resequencer::poll_timeout`],
//!   [`Resequencer::handle_timeout`]);
//! * never for a seq that can no longer arrive: once every *counting* path (one that received
//!   something and was not declared down) has delivered, or fenced, something sent after the
//!   gap, the gap is lost (paths are FIFO);
//! * never beyond [`Config::window`] held packets.
//!
//! A packet that arrives after its gap was given up is delivered at once, out of order
//! ([`Totals::late`]): the application gets the data the network carried (a TCP receiver fills
//! its hole before the retransmission comes; iperf3 counts it out of order, not lost), where
//! dropping it would only have lost it. Only one too old to tell from a duplicate is dropped
//! ([`Totals::too_old`]).
//!
//! Like the rest of the core crates this one does no I/O, never reads the clock (`now` is an
//! argument) and allocates only at construction: the ring of held packets, the received-bitmap,
//! the deadline queue and the statistics are all sized from the [`Config`].
#![forbid(unsafe_code)]

mod arrive;
mod bitmap;
mod deadlines;
pub mod feedback;
#[doc(hidden)]
pub mod fuzz;
mod measure;
mod release;
mod reorder;
mod stats;

use std::collections::VecDeque;
use std::time::Duration;

use mpt_core::{bits, PathId, Time, MAX_PATHS};

use bitmap::SeqBitmap;
use measure::Measure;
use reorder::ReorderTracker;

pub use reorder::REORDER_HISTORY;
pub use stats::{
    LogHistogram, OccupancyHistogram, PathStats, Stats, Totals, LOG_HISTOGRAM_BUCKETS,
    MAX_OCCUPANCY_BUCKETS,
};

/// Most given-up seqs kept between two [`Resequencer::take_given_up`] (the first ones given
/// up).
pub const MAX_GIVEN_UP: usize = 256;

/// Largest accepted [`Config::window`]; larger values are clamped.
pub const MAX_WINDOW: usize = 1 << 20;

pub use measure::{Gap, MAX_GAPS, OWD_GAIN};
pub use mpt_core::queue::{QueuePeak, CONGESTED_MIN_US, CONGESTED_SHARE, QUEUE_PEAK_AGE};

/// The received-bitmap always reaches at least this far on each side of the release point, so
/// duplicates up to this many seqs old are told from late packets even with small windows.
pub const MIN_HISTORY: usize = 1024;

/// Extended seqs start here, so that seqs up to 2^31 before the first packet of a session are
/// still representable (and simply late) without signed arithmetic.
const EXT_OFFSET: u64 = 1 << 32;

/// When the release point passes this, every extended seq is lowered by a multiple of 2^32
/// (which keeps all ring indices), so hostile forward jumps cannot overflow a `u64`.
const REBASE_AT: u64 = 1 << 62;

/// Resequencer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Most packets held while waiting for a gap; 0 = passthrough (deliver at once, in arrival
    /// order, still dropping duplicates). Clamped to [`MAX_WINDOW`].
    pub window: usize,
    /// Longest a held packet waits for a missing predecessor.
    pub timeout: Duration,
    /// Number of paths, 1..=[`MAX_PATHS`] (clamped). Packets on other path ids are ignored and
    /// counted in [`Totals::invalid_path`].
    pub paths: usize,
}

/// What the resequencer needs to know about a data packet (from its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// The path it arrived on.
    pub path: PathId,
    /// Global sequence number.
    pub seq: u32,
    /// Sequence number on its path.
    pub path_seq: u16,
    /// Send timestamp, sender's clock in microseconds (wrapping).
    pub sent_us: u32,
    /// Length, for byte counters.
    pub len: usize,
}

/// A held packet.
struct Entry<P> {
    /// `None`: an express packet, delivered when it arrived ([`Resequencer::push_express`]);
    /// its slot only marks its seq as done, so that the release point passes it.
    payload: Option<P>,
    arrival: Time,
}

/// Resequencing state of one path (its measurement lives in [`measure`]).
#[derive(Debug, Clone, Default)]
struct PathState {
    /// One past the highest extended seq known to have been sent on the path.
    progress: u64,
}

/// Why a gap was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Timeout,
    Fence,
    Overflow,
}

/// Puts packets from several paths back into global sequence order. See the crate
/// documentation.
///
/// `P` is the caller's payload (a buffer or a handle to one); it is moved in by
/// [`push`](Self::push) and out through the `deliver` callback, or dropped when the packet is a
/// duplicate, too old, or discarded by [`reset`](Self::reset).
pub struct Resequencer<P> {
    window: usize,
    timeout: Duration,
    /// Ring size: a power of two > `window` (so `window` packets fit behind a missing head).
    cap: u64,
    mask: u64,
    ring: Vec<Option<Entry<P>>>,
    /// Slots taken in the ring (express packets' marks included).
    held: usize,
    /// Of `held`, the marks of express packets delivered already.
    marks: usize,
    /// Whether the first packet of the session has fixed the extended seq space.
    started: bool,
    /// The release point: the extended seq delivered next. While packets are held, it is
    /// always missing (consecutive packets are delivered at once).
    head: u64,
    received: SeqBitmap,
    /// (extended seq, deadline) of held packets in arrival order; entries below `head` are
    /// stale and removed lazily (always from the front, so the front is held when `held > 0`).
    deadlines: VecDeque<(u64, Time)>,
    /// The same for express marks, whose deadlines may lie later than their arrival order
    /// gives ([`Resequencer::push_express_overtaking`]'s `grace`): kept in deadline order.
    mark_deadlines: VecDeque<(u64, Time)>,
    paths: Vec<PathState>,
    /// Bit per path: the path counts for the progress rule.
    counting: u64,
    reorder: ReorderTracker,
    measure: Measure,
    rebase_at: u64,
    stats: Stats,
    /// With resending on ([`Resequencer::set_repair`]): how long a gap the progress rule
    /// gives up still waits for its packet to be sent again.
    repair: Option<Duration>,
    /// Gaps the progress rule gave up, waiting for repair: (release point target, when), in
    /// increasing order of both.
    repairs: VecDeque<(u64, Time)>,
    /// With resending on: the seqs the progress rule gave up since the caller last took them
    /// ([`Resequencer::take_given_up`]), at most [`MAX_GIVEN_UP`].
    given_up: Vec<u32>,
}

impl<P> std::fmt::Debug for Resequencer<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resequencer")
            .field("window", &self.window)
            .field("timeout", &self.timeout)
            .field("paths", &self.paths.len())
            .field("next_seq", &self.next_seq())
            .field("held", &self.held)
            .field("counting", &format_args!("{:#x}", self.counting))
            .finish_non_exhaustive()
    }
}

impl<P> Resequencer<P> {
    /// A resequencer for `config`. The ring that holds packets is allocated when the first
    /// packet must wait (a tunnel whose packets all arrive in order, or an idle one, never
    /// pays for it: a server with a thousand idle peers would hold hundreds of MB of empty
    /// slots), whole then, so that holding never allocates again.
    pub fn new(config: Config) -> Self {
        let window = config.window.min(MAX_WINDOW);
        let npaths = config.paths.clamp(1, MAX_PATHS);
        let cap = (window + 1).next_power_of_two();
        let history = cap.max(MIN_HISTORY).next_power_of_two() as u64;
        let ring = Vec::new();
        Resequencer {
            window,
            timeout: config.timeout,
            cap: cap as u64,
            mask: cap as u64 - 1,
            ring,
            held: 0,
            marks: 0,
            started: false,
            head: EXT_OFFSET,
            received: SeqBitmap::new(history),
            deadlines: VecDeque::new(),
            mark_deadlines: VecDeque::new(),
            paths: vec![PathState::default(); npaths],
            counting: 0,
            reorder: ReorderTracker::new(),
            measure: Measure::new(npaths),
            rebase_at: REBASE_AT,
            repair: None,
            repairs: VecDeque::new(),
            given_up: Vec::new(),
            stats: Stats {
                total: Totals {
                    occupancy: OccupancyHistogram::for_window(window),
                    ..Totals::default()
                },
                paths: vec![PathStats::default(); npaths],
            },
        }
    }

    /// Number of packets held, waiting for a predecessor.
    pub fn held(&self) -> usize {
        self.held - self.marks
    }

    /// Everything measured so far (cumulative across [`reset`](Self::reset)).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The effective window (after clamping).
    pub fn window(&self) -> usize {
        self.window
    }

    /// While packets are held: the counting path that has shown the least progress, where the
    /// missing packets most likely still are (a path's datagrams arrive in the order they
    /// were sent). A receiver with datagrams waiting on several paths reads that one first:
    /// reading the paths in turn, equal amounts each, lets the one with the larger share run
    /// ahead in sequence until the window overflows.
    pub fn lagging_path(&self) -> Option<PathId> {
        if self.held == 0 {
            return None;
        }
        self.slowest().map(|(p, _)| PathId(p as u8))
    }

    /// The counting path with the least progress, and that progress.
    fn slowest(&self) -> Option<(usize, u64)> {
        bits(self.counting)
            .filter_map(|p| Some((p, self.paths.get(p)?.progress)))
            .min_by_key(|&(_, progress)| progress)
    }

    /// The global seq that will be delivered next (in passthrough mode: one past the highest
    /// delivered), `None` before the first packet of the session.
    pub fn next_seq(&self) -> Option<u32> {
        self.started.then_some(self.head as u32)
    }

    /// A control message arrived on `path`: the sender's next global seq is `next_seq` and its
    /// next seq on that path is `next_path_seq`, so every data packet sent on the path before
    /// has a lower seq. Makes the path count, advances its progress (possibly releasing gaps)
    /// and counts tail loss on the path.
    ///
    /// Before the first data packet of a session only the per-path part is used: the global
    /// seq space is anchored by data packets.
    pub fn fence(
        &mut self,
        now: Time,
        path: PathId,
        next_seq: u32,
        next_path_seq: u16,
        deliver: &mut impl FnMut(P),
    ) {
        let p = path.index();
        if p >= self.paths.len() {
            self.stats.total.invalid_path += 1;
            return;
        }
        if self.held > 0 {
            self.expire(now, deliver);
        }
        self.stats.paths[p].fences += 1;
        self.measure.fence(now, p, next_path_seq, &mut self.stats);
        self.counting |= 1u64 << p;
        if self.started {
            self.maybe_rebase();
            let ext = self.extend(next_seq);
            let progress = &mut self.paths[p].progress;
            if ext > *progress {
                *progress = ext;
            }
            self.progress_check(now, deliver);
        }
    }

    /// The daemon declares `path` down: stop waiting for packets on it. It counts again once
    /// a packet or a fence arrives on it.
    pub fn path_down(&mut self, now: Time, path: PathId, deliver: &mut impl FnMut(P)) {
        let p = path.index();
        if p >= self.paths.len() {
            return;
        }
        if self.held > 0 {
            self.expire(now, deliver);
        }
        self.counting &= !(1u64 << p);
        self.progress_check(now, deliver);
    }

    /// The paths or the hold time changed (a reload), at `now`: `paths` paths from now on
    /// (clamped to 1..=[`MAX_PATHS`]), and packets that arrive from now on wait at most
    /// `timeout`. The paths kept keep their state; a removed path is first taken down (what
    /// waited for it is released); added ones count once they deliver. The window, and the
    /// packets held, stay.
    pub fn reconfigure(
        &mut self,
        now: Time,
        paths: usize,
        timeout: Duration,
        deliver: &mut impl FnMut(P),
    ) {
        let n = paths.clamp(1, MAX_PATHS);
        self.timeout = timeout;
        for p in n..self.paths.len() {
            self.path_down(now, PathId(p as u8), deliver);
        }
        self.paths.resize(n, PathState::default());
        self.measure.resize(n);
        self.stats.paths.resize(n, PathStats::default());
    }

    /// Earliest time at which [`handle_timeout`](Self::handle_timeout) must be called: the
    /// deadline (arrival + timeout) of the oldest held packet. `None` while nothing is held.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.held == 0 {
            return None;
        }
        let hold = self.next_deadline().map(|(_, deadline)| deadline);
        let repair = self.repairs.front().map(|&(_, at)| at);
        match (hold, repair) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Releases every held packet whose deadline is not after `now`, with everything before it
    /// (giving up the gaps in between).
    pub fn handle_timeout(&mut self, now: Time, deliver: &mut impl FnMut(P)) {
        if self.held > 0 {
            self.expire(now, deliver);
        }
    }

    /// The peer restarted (new session): drop the held packets (counted in
    /// [`Totals::dropped_on_reset`]) and forget all sequence state and the delay baselines.
    /// Counters are kept.
    pub fn reset(&mut self) {
        if self.held > 0 {
            for slot in self.ring.iter_mut() {
                if slot.take().is_some_and(|e| e.payload.is_some()) {
                    self.stats.total.dropped_on_reset += 1;
                }
            }
        }
        self.held = 0;
        self.marks = 0;
        self.started = false;
        self.head = EXT_OFFSET;
        self.received.clear_all();
        self.deadlines.clear();
        self.mark_deadlines.clear();
        self.repairs.clear();
        self.given_up.clear();
        for ps in self.paths.iter_mut() {
            *ps = PathState::default();
        }
        self.measure.reset(&mut self.stats);
        self.counting = 0;
        self.reorder.clear();
        self.stats.total.resets += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::rng::Rng;
    use proptest::prelude::*;

    fn t(us: u64) -> Time {
        Time::from_micros(us)
    }

    fn config(window: usize, timeout_ms: u64, paths: usize) -> Config {
        Config {
            window,
            timeout: Duration::from_millis(timeout_ms),
            paths,
        }
    }

    /// A resequencer of `u32` payloads (the seq itself) that records what it delivers and
    /// numbers the packets of each path.
    struct H {
        r: Resequencer<u32>,
        out: Vec<u32>,
        path_seq: [u16; MAX_PATHS],
    }

    impl H {
        fn new(c: Config) -> Self {
            H {
                r: Resequencer::new(c),
                out: Vec::new(),
                path_seq: [0; MAX_PATHS],
            }
        }

        /// Pushes `seq` on `path` at `now_us` with the path's next `path_seq`; returns what was
        /// delivered.
        fn push(&mut self, now_us: u64, path: u8, seq: u32) -> Vec<u32> {
            push_sent(self, path, seq, 0, now_us)
        }

        fn push_meta(&mut self, now_us: u64, meta: PacketMeta) -> Vec<u32> {
            let mut got = Vec::new();
            self.r.push(t(now_us), meta, meta.seq, &mut |p| got.push(p));
            self.out.extend_from_slice(&got);
            got
        }

        fn fence(&mut self, now_us: u64, path: u8, next_seq: u32) -> Vec<u32> {
            let nps = self.path_seq[usize::from(path)];
            let mut got = Vec::new();
            self.r
                .fence(t(now_us), PathId(path), next_seq, nps, &mut |p| got.push(p));
            self.out.extend_from_slice(&got);
            got
        }

        fn down(&mut self, now_us: u64, path: u8) -> Vec<u32> {
            let mut got = Vec::new();
            self.r
                .path_down(t(now_us), PathId(path), &mut |p| got.push(p));
            self.out.extend_from_slice(&got);
            got
        }

        fn timeout_at(&mut self, now: Time) -> Vec<u32> {
            let mut got = Vec::new();
            self.r.handle_timeout(now, &mut |p| got.push(p));
            self.out.extend_from_slice(&got);
            got
        }

        fn total(&self) -> &Totals {
            &self.r.stats().total
        }

        fn path(&self, p: usize) -> &PathStats {
            &self.r.stats().paths[p]
        }

        /// Internal structures never exceed their preallocated bounds.
        fn check_bounds(&self) {
            let r = &self.r;
            assert!(r.held <= r.window);
            assert!(r.ring.is_empty() || r.ring.len() as u64 == r.cap);
            assert_eq!(r.ring.iter().filter(|s| s.is_some()).count(), r.held);
            assert!(r.deadlines.len() <= 2 * r.cap as usize + 1);
            assert!(r.deadlines.capacity() <= 2 * (2 * r.cap as usize + 1));
            assert!(r.mark_deadlines.len() <= 2 * r.cap as usize + 1);
            assert!(r.reorder.records() <= REORDER_HISTORY);
            assert_eq!(
                r.received.words() as u64 * 64,
                2 * r.received.half(),
                "bitmap size is fixed"
            );
            if r.held > 0 {
                // the head is missing and the oldest deadline belongs to a held packet
                assert!(r.ring[(r.head & r.mask) as usize].is_none());
                let (e, _) = r.next_deadline().expect("deadline of held packet");
                assert!(e >= r.head && e < r.head + r.cap);
                assert!(r.ring[(e & r.mask) as usize].is_some());
            }
        }
    }

    /// A resequencer whose path `idle` counts but never progresses, so the progress rule never
    /// releases anything (for tests of the other release rules).
    fn with_idle_path(c: Config, idle: u8) -> H {
        let mut h = H::new(c);
        h.fence(0, idle, 0);
        h
    }

    /// Two paths; path 0 loses seq 1 (its path sequence 1), path 1 carries seq 2, then path 0
    /// carries seq 3: every path has progressed past 1.
    fn lose_seq_1(h: &mut H) {
        h.push(0, 0, 0);
        h.path_seq[0] += 1; // seq 1, lost
        h.push(1_000, 1, 2);
        h.push(2_000, 0, 3);
    }

    fn resent(h: &mut H, now_us: u64, path: u8, seq: u32) -> (bool, Vec<u32>) {
        let meta = PacketMeta {
            path: PathId(path),
            seq,
            path_seq: 999,
            sent_us: 0,
            len: 100,
        };
        let mut got = Vec::new();
        let filled =
            h.r.push_resent(t(now_us), meta, seq, |p| p, &mut |p| got.push(p));
        h.out.extend_from_slice(&got);
        (filled, got)
    }

    #[test]
    fn without_repair_a_fenced_gap_is_given_up_at_once() {
        let mut h = H::new(config(64, 100, 2));
        lose_seq_1(&mut h);
        assert_eq!(h.out, [0, 2, 3]);
        assert_eq!(h.total().released_by_fence, 1);
        let mut gaps = Vec::new();
        h.r.take_gaps(&mut gaps);
        assert!(gaps.is_empty(), "gaps are kept only while resending is on");
        let mut given_up = Vec::new();
        h.r.take_given_up(&mut given_up);
        assert!(given_up.is_empty(), "so are the seqs given up");
    }

    /// A zero wait (what the tunnel sets): the gap is asked for, but given up at once, and its
    /// packet, when it comes again, is delivered late, after those behind it.
    #[test]
    fn with_a_zero_repair_wait_a_gap_is_asked_for_and_its_packet_comes_late() {
        let mut h = H::new(config(64, 100, 2));
        h.r.set_repair(Some(Duration::ZERO));
        lose_seq_1(&mut h);
        assert_eq!(h.out, [0, 2, 3], "nothing waits for the gap");
        let mut gaps = Vec::new();
        h.r.take_gaps(&mut gaps);
        assert_eq!(gaps.len(), 1, "the gap is asked for");
        let mut given_up = Vec::new();
        h.r.take_given_up(&mut given_up);
        assert_eq!(given_up, [1], "the seq given up may still come");
        assert_eq!(resent(&mut h, 12_000, 1, 1), (false, vec![1]), "late");
        assert_eq!(h.out, [0, 2, 3, 1]);
        let tot = h.total();
        assert_eq!(
            (tot.resent, tot.recovered, tot.skipped, tot.late),
            (1, 0, 1, 1)
        );
    }

    #[test]
    fn a_gap_waits_for_repair_and_a_resent_packet_fills_it() {
        let mut h = H::new(config(64, 100, 2));
        h.r.set_repair(Some(Duration::from_millis(20)));
        lose_seq_1(&mut h);
        assert_eq!(h.out, [0], "the gap waits for its packet to come again");
        let mut gaps = Vec::new();
        h.r.take_gaps(&mut gaps);
        assert_eq!(
            gaps,
            [Gap {
                path: PathId(0),
                first: 1,
                count: 1
            }]
        );
        assert_eq!(
            h.r.poll_timeout(),
            Some(t(22_000)),
            "the repair wait, not the hold"
        );
        let lost = h.path(0).lost;
        // it comes again on the other path, 10 ms later
        assert_eq!(resent(&mut h, 12_000, 1, 1), (true, vec![1, 2, 3]));
        assert_eq!(h.r.held(), 0);
        let tot = h.total();
        assert_eq!((tot.resent, tot.recovered, tot.skipped), (1, 1, 0));
        assert_eq!(h.path(0).lost, lost, "a resent packet is not measured");
        assert_eq!(h.path(1).packets, 1);
        // sent twice more: duplicates
        assert_eq!(resent(&mut h, 13_000, 0, 1), (false, vec![]));
        assert_eq!(h.total().duplicates, 1);
    }

    /// Pushes `seq` on `path` (its next path sequence), sent at `sent_us`, arriving at
    /// `arrive_us`.
    fn push_sent(h: &mut H, path: u8, seq: u32, sent_us: u64, arrive_us: u64) -> Vec<u32> {
        let ps = h.path_seq[usize::from(path)];
        h.path_seq[usize::from(path)] = ps.wrapping_add(1);
        h.push_meta(
            arrive_us,
            PacketMeta {
                path: PathId(path),
                seq,
                path_seq: ps,
                sent_us: sent_us as u32,
                len: 100,
            },
        )
    }

    /// A loss where the path's queue stands near the highest it has shown is the queue
    /// overflowing: counted, and given up at once with resending on (the inner congestion
    /// control must see it). A loss with less queue than that is waited for.
    #[test]
    fn a_loss_where_the_queue_overflowed_is_not_waited_for() {
        let mut h = H::new(config(64, 100, 2));
        h.r.set_repair(Some(Duration::from_millis(20)));
        // path 0's queue grows by 1 ms a packet to 40 ms; path 1 has none
        for k in 0..=40u64 {
            push_sent(
                &mut h,
                0,
                k as u32,
                k * 1_000,
                k * 1_000 + 10_000 + k * 1_000,
            );
        }
        let mut gaps = Vec::new();
        h.r.take_gaps(&mut gaps);
        assert!(gaps.is_empty());
        h.path_seq[0] += 1; // seq 41 lost where the queue stood at 40 ms
        push_sent(&mut h, 1, 42, 42_000, 52_000);
        let got = push_sent(&mut h, 0, 43, 43_000, 93_000);
        assert_eq!(got, [42, 43], "given up at once");
        // still asked for: a light packet (voice) may have been in it, and it is delivered
        // whenever it comes
        h.r.take_gaps(&mut gaps);
        assert_eq!(gaps.len(), 1);
        gaps.clear();
        assert_eq!((h.path(0).lost, h.path(0).congestion_lost), (1, 1));
        // the queue falls to 12 ms: under three quarters of the highest, a loss is asked for
        for k in 44..=50u64 {
            let sent = (k + 60) * 1_000;
            push_sent(&mut h, 0, k as u32, sent, sent + 10_000 + 12_000);
        }
        h.path_seq[0] += 1; // seq 51 lost
        push_sent(&mut h, 1, 52, 123_000, 133_000);
        let got = push_sent(&mut h, 0, 53, 113_000, 135_000);
        assert!(got.is_empty(), "the gap waits for its packet: {got:?}");
        h.r.take_gaps(&mut gaps);
        assert_eq!(gaps.len(), 1);
        assert_eq!((h.path(0).lost, h.path(0).congestion_lost), (2, 1));
    }

    #[test]
    fn a_gap_not_repaired_in_time_is_given_up_then_its_packet_is_late() {
        let mut h = H::new(config(64, 100, 2));
        h.r.set_repair(Some(Duration::from_millis(20)));
        lose_seq_1(&mut h);
        assert_eq!(h.timeout_at(t(21_999)), Vec::<u32>::new());
        assert_eq!(h.timeout_at(t(22_000)), [2, 3]);
        assert_eq!(h.total().released_by_fence, 1);
        assert_eq!(h.r.poll_timeout(), None);
        // the packet comes after all: late, delivered, not a recovery
        assert_eq!(resent(&mut h, 30_000, 1, 1), (false, vec![1]));
        assert_eq!((h.total().late, h.total().recovered), (1, 0));
    }

    #[test]
    fn the_repair_wait_never_outlasts_the_hold_time() {
        let mut h = H::new(config(64, 10, 2));
        h.r.set_repair(Some(Duration::from_millis(50)));
        lose_seq_1(&mut h);
        // seq 2 arrived at 1 ms: held at most 10 ms
        assert_eq!(h.r.poll_timeout(), Some(t(11_000)));
        assert_eq!(h.timeout_at(t(11_000)), [2, 3]);
        h.check_bounds();
    }

    #[test]
    fn the_lagging_path_is_the_one_the_gap_waits_for() {
        let mut h = H::new(config(64, 100, 3));
        assert_eq!(h.r.lagging_path(), None);
        h.push(10, 0, 0);
        h.push(10, 1, 1);
        h.push(10, 2, 2);
        // path 1 runs ahead while path 0's 3 and path 2's 4 are still on their way
        for s in 5..9 {
            h.push(20, 1, s);
        }
        assert_eq!(h.r.held(), 4);
        assert_eq!(
            h.r.lagging_path(),
            Some(PathId(0)),
            "path 0 has shown only seq 0"
        );
        h.push(30, 0, 3);
        assert_eq!(
            h.r.lagging_path(),
            Some(PathId(2)),
            "now path 2 (seq 2) is behind"
        );
        h.push(40, 2, 4);
        assert_eq!(h.r.held(), 0);
        assert_eq!(h.r.lagging_path(), None, "nothing held, nothing to chase");
        assert_eq!(h.out, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn in_order_is_delivered_at_once() {
        let mut h = H::new(config(8, 10, 1));
        for s in 0..100u32 {
            assert_eq!(h.push(u64::from(s), 0, s), [s]);
            assert_eq!(h.r.held(), 0);
            assert_eq!(h.r.poll_timeout(), None);
        }
        let tot = h.total();
        assert_eq!((tot.packets, tot.delivered, tot.bytes), (100, 100, 10_000));
        assert_eq!((tot.reordered, tot.skipped, tot.late), (0, 0, 0));
        assert_eq!(tot.hold_time_ns.max, 0);
        assert_eq!(tot.occupancy.buckets[0], 100);
        assert_eq!(h.path(0).lost, 0);
        assert_eq!(h.r.next_seq(), Some(100));
    }

    #[test]
    fn first_seq_anchors_the_session() {
        // a small first seq: wait for the earlier ones
        let mut h = with_idle_path(config(8, 10, 2), 1);
        assert_eq!(h.push(0, 0, 3), [] as [u32; 0]);
        assert_eq!(h.r.next_seq(), Some(0));
        assert_eq!(h.push(0, 0, 0), [0]);
        // a large one: resync to a sender that kept running
        let mut h = H::new(config(8, 10, 1));
        assert_eq!(h.push(0, 0, 5000), [5000]);
        assert_eq!(h.push(0, 0, 5001), [5001]);
        assert_eq!(h.r.next_seq(), Some(5002));
    }

    #[test]
    fn timeout_releases_exactly_at_deadline() {
        let mut h = with_idle_path(config(16, 10, 2), 1);
        assert!(h.push(1_000, 0, 1).is_empty());
        assert!(h.push(2_000, 0, 4).is_empty());
        assert!(h.push(3_000, 0, 3).is_empty());
        assert_eq!(h.r.held(), 3);
        h.check_bounds();
        assert_eq!(h.r.poll_timeout(), Some(t(11_000)));
        assert!(h.timeout_at(Time::from_nanos(11_000_000 - 1)).is_empty());
        assert_eq!(h.timeout_at(t(11_000)), [1]);
        // head 2 is missing; the oldest-arrived held packet is now 4 (arrived at 2 ms)
        assert_eq!(h.r.poll_timeout(), Some(t(12_000)));
        assert!(h.timeout_at(t(11_999)).is_empty());
        assert_eq!(h.timeout_at(t(12_000)), [3, 4]);
        assert_eq!(h.r.poll_timeout(), None);
        h.check_bounds();
        let tot = h.total();
        assert_eq!(tot.skipped, 2); // 0 and 2
        assert_eq!(tot.released_by_timeout, 2);
        assert_eq!(tot.released_by_fence + tot.released_by_overflow, 0);
        // hold times: 1 -> 10 ms, 3 -> 9 ms, 4 -> 10 ms
        assert_eq!(tot.hold_time_ns.count, 3);
        assert_eq!(tot.hold_time_ns.max, 10_000_000);
        assert_eq!(tot.hold_time_max(), Duration::from_millis(10));
        assert_eq!(tot.hold_time_percentile(1.0), Duration::from_millis(10));
        let p0 = tot.hold_time_ns.percentile(0.0);
        assert!((9_000_000..=9_000_000 * 9 / 8).contains(&p0), "{p0}");
        assert_eq!(tot.hold_time_ns.sum, 29_000_000);
        // occupancy after each push: 1, 2, 3
        assert_eq!(tot.occupancy.buckets, [0, 1, 1, 1]);
        assert!((tot.occupancy.mean() - 2.0).abs() < 1e-12);
        assert_eq!(tot.occupancy.percentile(0.5), 2);
    }

    #[test]
    fn only_held_packets_are_kept() {
        let mut r: Resequencer<(u32, bool)> = Resequencer::new(config(16, 10, 2));
        let mut kept = Vec::new();
        let mut out = Vec::new();
        let mut path_seq = [0u16; 2];
        for (path, seq) in [
            (0, 0),
            (1, 1),
            (0, 3),
            (0, 4),
            (1, 2),
            (0, 5),
            (0, 5),
            (1, 1),
        ] {
            path_seq[path] += 1;
            let meta = PacketMeta {
                path: PathId(path as u8),
                seq,
                path_seq: path_seq[path],
                sent_us: 0,
                len: 100,
            };
            r.push_keeping(
                t(0),
                meta,
                (seq, false),
                |(s, _)| {
                    kept.push(s);
                    (s, true)
                },
                &mut |p| out.push(p),
            );
        }
        // 3 and 4 waited for 2; the rest went straight through (or were duplicates)
        assert_eq!(kept, [3, 4]);
        let order: Vec<u32> = out.iter().map(|&(s, _)| s).collect();
        assert_eq!(order, [0, 1, 2, 3, 4, 5]);
        assert!(out.iter().all(|&(s, k)| k == (s == 3 || s == 4)));
    }

    #[test]
    fn push_after_deadline_releases_first() {
        let mut h = with_idle_path(config(16, 10, 2), 1);
        assert!(h.push(0, 0, 2).is_empty());
        // the next push comes late: the held packet is released before the new one is handled
        assert_eq!(h.push(50_000, 0, 5), [2]);
        assert_eq!(h.r.held(), 1);
        assert_eq!(h.r.poll_timeout(), Some(t(60_000)));
        assert_eq!(h.total().released_by_timeout, 1);
    }

    #[test]
    fn progress_rule_releases_only_when_every_counting_path_passed_the_gap() {
        let mut h = H::new(config(16, 1000, 3));
        assert_eq!(h.push(0, 1, 0), [0]); // path B progress 1
        assert!(h.push(0, 0, 2).is_empty()); // path A progress 3; 1 may still come on B
        assert_eq!(h.r.held(), 1);
        // path C has never carried anything: it does not count
        assert!(h.push(0, 0, 3).is_empty());
        // B announces it has sent everything below 4: seq 1 is lost
        assert_eq!(h.fence(10, 1, 4), [2, 3]);
        assert_eq!(h.total().released_by_fence, 1);
        assert_eq!(h.total().skipped, 1);

        // a gap at 4; A has passed it, B has not
        assert!(h.push(20, 0, 5).is_empty());
        assert!(h.fence(30, 1, 4).is_empty()); // B at 4 exactly: 4 may still come on B
                                               // C comes up and delivers an old packet: it now counts, with progress 1
        assert!(h.push(40, 2, 0).is_empty()); // a duplicate of 0
        assert_eq!(h.total().duplicates, 1);
        assert!(h.down(50, 1).is_empty()); // C still holds the gap
        assert_eq!(h.down(60, 2), [5]); // only A counts: 4 is given up
        assert_eq!(h.total().released_by_fence, 2);
        assert_eq!(h.total().skipped, 2);

        // B counts again once something arrives on it
        assert_eq!(h.push(70, 1, 6), [6]);
        assert!(h.push(80, 0, 8).is_empty()); // A at 9, B at 7: 7 may come on B
        assert_eq!(h.r.held(), 1);
        assert_eq!(h.push(90, 1, 9), [8, 9]); // B passed 7 too
        assert_eq!(h.total().released_by_fence, 3);
        assert_eq!(h.r.poll_timeout(), None);
        h.check_bounds();
    }

    #[test]
    fn all_paths_down_releases_everything() {
        let mut h = with_idle_path(config(16, 1000, 2), 1);
        assert!(h.push(0, 0, 3).is_empty());
        assert!(h.push(0, 0, 7).is_empty());
        // path 1 (progress 0) still counts: keep waiting
        assert!(h.down(1, 0).is_empty());
        assert_eq!(h.r.held(), 2);
        // no path counts any more: nothing can arrive, release everything
        assert_eq!(h.down(2, 1), [3, 7]);
        assert_eq!(h.total().released_by_fence, 1);
        assert_eq!(h.total().skipped, 6); // 0, 1, 2, 4, 5, 6
        assert_eq!(h.r.held(), 0);
    }

    #[test]
    fn overflow_releases_past_the_oldest_gap() {
        let mut h = with_idle_path(config(4, 1000, 2), 1);
        for s in 1..=4 {
            assert!(h.push(0, 0, s).is_empty());
        }
        assert_eq!(h.r.held(), 4);
        assert_eq!(h.push(0, 0, 5), [1, 2, 3, 4, 5]);
        assert_eq!(h.total().skipped, 1);
        assert_eq!(h.total().released_by_overflow, 1);

        // full again, but the new packet fills a gap before the first held one
        for s in [8, 9, 10, 11] {
            assert!(h.push(0, 0, s).is_empty());
        }
        assert_eq!(h.push(0, 0, 7), [7, 8, 9, 10, 11]); // 6 given up
        assert_eq!(h.total().skipped, 2);

        // a packet beyond the ring (capacity 8) flushes what lies too far back
        assert!(h.push(0, 0, 13).is_empty());
        assert_eq!(h.push(0, 0, 30), [13]);
        // head moved to 30 - 8 + 1 = 23: 12, 14..=22 skipped
        assert_eq!(h.r.next_seq(), Some(23));
        assert_eq!(h.total().skipped, 2 + 1 + 9);
        assert_eq!(h.r.held(), 1);
        h.check_bounds();
    }

    #[test]
    fn wraps_around_u32() {
        let mut h = with_idle_path(config(16, 1000, 2), 1);
        let m = u32::MAX;
        let arrivals = [m - 5, m - 3, m - 4, 1, m - 2, m - 1, m, 0, 3, 2];
        for s in arrivals {
            h.push(0, 0, s);
        }
        assert_eq!(h.out, [m - 5, m - 4, m - 3, m - 2, m - 1, m, 0, 1, 2, 3]);
        assert_eq!(h.r.held(), 0);
        // m-4 (after m-3), m-2, m-1, m and 0 (after 1), 2 (after 3)
        assert_eq!(h.total().reordered, 6);
    }

    impl H {
        /// An express packet `seq` on `path` at `now_us`; returns what was delivered.
        fn express(&mut self, now_us: u64, path: u8, seq: u32) -> Vec<u32> {
            self.express_after(now_us, path, seq, 0)
        }

        /// [`H::express`], the gaps before it waiting the hold time from `grace_us` later.
        fn express_after(&mut self, now_us: u64, path: u8, seq: u32, grace_us: u64) -> Vec<u32> {
            let ps = self.path_seq[usize::from(path)];
            self.path_seq[usize::from(path)] = ps.wrapping_add(1);
            let meta = PacketMeta {
                path: PathId(path),
                seq,
                path_seq: ps,
                sent_us: 0,
                len: 100,
            };
            let mut got = Vec::new();
            let how = (false, Duration::from_micros(grace_us));
            self.r
                .push_express_overtaking(t(now_us), meta, seq, how, &mut |p| got.push(p));
            self.out.extend_from_slice(&got);
            self.check_bounds();
            got
        }
    }

    #[test]
    fn an_express_packet_passes_the_gaps_before_it_and_is_never_delivered_twice() {
        let mut h = H::new(config(64, 100, 2));
        assert_eq!(h.push(0, 0, 0), vec![0]);
        assert_eq!(h.push(0, 1, 1), vec![1]);
        // 2 and 3 are on the slow path 1; 4 is express on the fast path 0: delivered at once
        assert_eq!(h.express(1_000, 0, 4), vec![4]);
        assert_eq!(
            h.r.held(),
            0,
            "an express packet's mark is not a held packet"
        );
        assert_eq!(
            h.push(2_000, 0, 5),
            Vec::<u32>::new(),
            "5 waits for 2 and 3"
        );
        // the gaps fill: the release point passes 4 without delivering it again
        assert_eq!(h.push(50_000, 1, 2), vec![2]);
        assert_eq!(h.push(51_000, 1, 3), vec![3, 5]);
        // its copy, sent on the slow path after 2 and 3, is a duplicate
        assert_eq!(h.express(52_000, 1, 4), Vec::<u32>::new());
        assert_eq!(h.total().duplicates, 1);
        assert_eq!(h.out, vec![0, 1, 4, 2, 3, 5]);
        assert_eq!(
            (h.r.held(), h.total().skipped, h.total().delivered),
            (0, 0, 6)
        );
        // an express packet at the release point is delivered as any
        assert_eq!(h.express(52_000, 0, 6), vec![6]);
        assert_eq!(h.push(53_000, 1, 8), Vec::<u32>::new());
        assert_eq!(h.express(54_000, 1, 9), vec![9]);
        // 7 never comes: at 8's deadline the gap is given up, 8 delivered, 9 passed
        h.timeout_at(t(153_000));
        assert_eq!(h.out, vec![0, 1, 4, 2, 3, 5, 6, 9, 8]);
        assert_eq!((h.total().skipped, h.r.held()), (1, 0));
        assert_eq!(
            h.push(160_000, 0, 7),
            vec![7],
            "late, delivered out of order"
        );
        assert_eq!(h.total().late, 1);
    }

    #[test]
    fn the_gaps_before_an_express_packet_wait_the_hold_time_from_its_grace() {
        let mut h = H::new(config(64, 100, 3));
        for (path, seq) in [(0, 0), (1, 1), (2, 2)] {
            assert_eq!(h.push(0, path, seq), vec![seq]);
        }
        // 3 is on the far path 1, 115 ms further; 4 comes express on the near path 0, whose
        // bonded packets the caller holds 115 ms: 3's gap waits 100 ms from 116 ms, not 1 ms
        assert_eq!(h.express_after(1_000, 0, 4, 115_000), vec![4]);
        assert_eq!(h.r.poll_timeout(), Some(t(216_000)));
        assert!(h.timeout_at(t(120_000)).is_empty());
        assert_eq!(h.push(121_000, 1, 3), vec![3], "in order, not given up");
        assert_eq!((h.total().skipped, h.total().late), (0, 0));
        // marks of different graces keep their own deadlines: 5 is on path 2 and never
        // comes, 6 comes express on path 0 (its gaps wait from 245 ms), 7 on path 1 (from
        // 131 ms)
        assert_eq!(h.express_after(130_000, 0, 6, 115_000), vec![6]);
        assert_eq!(h.express_after(131_000, 1, 7, 0), vec![7]);
        assert_eq!(h.r.poll_timeout(), Some(t(231_000)));
        assert!(h.timeout_at(t(231_000)).is_empty(), "marks only");
        assert_eq!(
            (h.total().skipped, h.r.held()),
            (1, 0),
            "5 given up at 7's deadline"
        );
    }

    #[test]
    fn express_packets_never_overrun_the_window_and_a_reset_forgets_their_marks() {
        let mut h = H::new(config(4, 100, 1));
        h.push(0, 0, 0);
        // 1 is missing; 2..=9 express: each delivered at once, the window's marks given up
        // in turn when full
        for s in 2..10 {
            assert_eq!(h.express(1_000, 0, s), vec![s]);
        }
        assert!(h.r.held <= 4);
        h.r.reset();
        assert_eq!((h.r.held(), h.r.held, h.r.marks), (0, 0, 0));
        assert_eq!(h.total().dropped_on_reset, 0, "marks are not packets");
    }

    #[test]
    fn duplicates_and_late_packets() {
        let mut h = with_idle_path(config(8, 10, 2), 1);
        assert_eq!(h.push(0, 0, 0), [0]);
        assert_eq!(h.push(0, 0, 1), [1]);
        assert!(h.push(0, 0, 1).is_empty()); // duplicate of a delivered packet
        assert!(h.push(0, 0, 3).is_empty());
        assert!(h.push(0, 0, 3).is_empty()); // duplicate of a held packet
        assert_eq!(h.total().duplicates, 2);
        assert_eq!(h.timeout_at(t(10_000)), [3]);
        // Given up, then arrived: late, delivered out of order rather than lost.
        assert_eq!(h.push(20_000, 0, 2), [2]);
        assert_eq!((h.total().late, h.total().delivered_out_of_order), (1, 1));
        assert!(h.push(20_000, 0, 2).is_empty()); // now a duplicate
        assert!(h.push(20_000, 0, 1).is_empty()); // still a duplicate
        assert_eq!(h.total().duplicates, 4);
        for s in 4..3000 {
            h.push(30_000, 0, s);
        }
        assert!(h.push(30_000, 0, 2999).is_empty());
        assert_eq!(h.total().duplicates, 5);
        // Older than the history: cannot be told from a duplicate, dropped.
        assert!(h.push(30_000, 0, 500).is_empty());
        assert_eq!(h.path(0).duplicates, 5);
        assert_eq!((h.path(0).late, h.path(0).too_old), (1, 1));
        assert_eq!(h.total().delivered, 3000);
    }

    #[test]
    fn passthrough_delivers_at_once_and_drops_duplicates() {
        let mut h = H::new(config(0, 10, 2));
        assert_eq!(h.push(0, 0, 0), [0]);
        assert_eq!(h.push(0, 0, 2), [2]);
        assert_eq!(h.push(0, 1, 1), [1]);
        assert!(h.push(0, 1, 2).is_empty());
        assert!(h.push(0, 0, 1).is_empty());
        assert_eq!(h.push(0, 0, 3), [3]);
        let tot = h.total();
        assert_eq!(tot.delivered, 4);
        assert_eq!(tot.delivered_out_of_order, 1);
        assert_eq!(tot.duplicates, 2);
        assert_eq!(tot.reordered, 1);
        assert_eq!(h.path(1).reordered, 1);
        assert_eq!(tot.occupancy.buckets, [6]);
        assert_eq!(h.r.poll_timeout(), None);
        assert_eq!(h.push(0, 0, 5000), [5000]);
        assert!(h.push(0, 0, 10).is_empty()); // too old to tell: dropped
        assert_eq!((h.total().late, h.total().too_old), (0, 1));
        assert_eq!(h.push(0, 0, 4990), [4990]);
        assert_eq!(h.total().delivered_out_of_order, 2);
    }

    #[test]
    fn per_path_loss_and_tail_loss() {
        let mut h = H::new(config(8, 10, 2));
        let m = |path_seq: u16, seq: u32| PacketMeta {
            path: PathId(0),
            seq,
            path_seq,
            sent_us: 0,
            len: 10,
        };
        for (i, ps) in [0u16, 1, 3, 4].into_iter().enumerate() {
            h.push_meta(0, m(ps, i as u32));
        }
        assert_eq!(h.path(0).lost, 1);
        // fence: the next path seq is 7, so 5 and 6 were lost at the tail
        let mut sink = |_p: u32| {};
        h.r.fence(t(1), PathId(0), 6, 7, &mut sink);
        assert_eq!(h.path(0).lost, 3);
        assert_eq!(h.path(0).fences, 1);
        h.push_meta(2, m(7, 6));
        assert_eq!(h.path(0).lost, 3);
        h.push_meta(3, m(2, 7)); // backwards
        assert_eq!(h.path(0).path_seq_errors, 1);
        h.push_meta(4, m(3, 8)); // resynced: in order
        h.push_meta(5, m(40_000, 9)); // forward by more than 32767
        assert_eq!(h.path(0).path_seq_errors, 2);
        h.push_meta(6, m(40_001, 10));
        // wrap of path_seq
        h.push_meta(7, m(u16::MAX, 11)); // gap of 65534 - 40001 - 1 + ... forward 25533
        h.push_meta(8, m(0, 12));
        h.push_meta(9, m(2, 13));
        let p = h.path(0);
        assert_eq!(p.path_seq_errors, 2);
        assert_eq!(p.lost, 3 + (u16::MAX as u64 - 40_002) + 1);
        assert_eq!(h.total().lost, p.lost);
        assert_eq!(h.path(1).lost, 0);
        assert_eq!(p.packets, 12);
        assert_eq!(p.bytes, 120);
    }

    #[test]
    fn rfc4737_reordering_in_the_resequencer() {
        for window in [0, 64] {
            let mut h = with_idle_path(config(window, 10, 3), 2);
            for (s, path) in [(1, 0), (2, 0), (4, 0), (5, 0), (3, 1)] {
                h.push(0, path, s);
            }
            let tot = h.total();
            assert_eq!(tot.reordered, 1);
            assert_eq!(tot.reorder_extent_max, 2);
            assert_eq!(tot.reorder_extent_sum, 2);
            assert_eq!(h.path(1).reordered, 1);
            assert_eq!(h.path(1).reorder_extent_max, 2);
            assert_eq!(h.path(0).reordered, 0);

            let mut h = with_idle_path(config(window, 10, 3), 2);
            for s in [1, 2, 3, 7, 8, 9, 4, 5, 6, 10] {
                h.push(0, u8::from(s >= 7), s);
            }
            let tot = h.total();
            assert_eq!(tot.reordered, 3);
            assert_eq!(tot.reorder_extent_max, 5);
            assert_eq!(tot.reorder_extent_sum, 3 + 4 + 5);
            assert!((tot.reorder_extent_mean() - 4.0).abs() < 1e-12);
        }
    }

    #[test]
    fn rfc3550_jitter() {
        let mut h = H::new(config(8, 10, 1));
        let m = |seq: u32, sent_us: u32| PacketMeta {
            path: PathId(0),
            seq,
            path_seq: seq as u16,
            sent_us,
            len: 10,
        };
        h.push_meta(1000, m(0, 0)); // transit 1000
        assert_eq!(h.path(0).jitter_us, 0.0);
        h.push_meta(2160, m(1, 1000)); // transit 1160: |D| = 160
        assert_eq!(h.path(0).jitter_us, 10.0);
        h.push_meta(3000, m(2, 2000)); // transit 1000: |D| = 160
        assert_eq!(h.path(0).jitter_us, 10.0 + 150.0 / 16.0);
        // the sender's clock wraps: transit still 1000
        let j = h.path(0).jitter_us;
        h.push_meta(4000, m(3, 3000));
        assert_eq!(h.path(0).jitter_us, j - j / 16.0);
    }

    #[test]
    fn relative_one_way_delay() {
        let mut h = H::new(config(8, 10, 2));
        let m = |path: u8, seq: u32, path_seq: u16, sent_us: u32| PacketMeta {
            path: PathId(path),
            seq,
            path_seq,
            sent_us,
            len: 10,
        };
        // the two clocks are unrelated: the sender's is far ahead and wraps
        let off = u32::MAX - 10_000;
        let sent = |us: u32| us.wrapping_add(off);
        h.push_meta(1000, m(0, 0, 0, sent(0))); // raw transit base
        h.push_meta(2500, m(1, 1, 0, sent(1000))); // 500 more than the base
        h.push_meta(3100, m(0, 2, 1, sent(2000))); // 100 more
        let p0 = h.path(0).clone();
        let p1 = h.path(1).clone();
        assert_eq!(p0.owd_min_us, Some(0));
        assert_eq!(p0.owd_last_us, Some(100));
        assert_eq!(p0.owd_us, Some(100.0 / 4.0));
        assert_eq!(p1.owd_min_us, Some(500));
        assert_eq!(p1.owd_us, Some(500.0));
        // path 1 sees a new minimum: 200 below the base
        h.push_meta(3800, m(1, 3, 1, sent(3000)));
        let p0 = h.path(0).clone();
        let p1 = h.path(1).clone();
        assert_eq!(p0.owd_min_us, Some(200));
        assert_eq!(p0.owd_us, Some(25.0 + 200.0));
        assert_eq!(p1.owd_min_us, Some(0));
        assert_eq!(p1.owd_last_us, Some(0));
        assert_eq!(p1.owd_us, Some(500.0 - 700.0 / 4.0 + 200.0));
        // reset forgets the baselines but keeps the counters
        h.r.reset();
        assert_eq!(h.path(0).owd_us, None);
        assert_eq!(h.path(0).packets, 2);
        assert_eq!(h.total().resets, 1);
        h.push_meta(10_000, m(1, 0, 0, 5));
        assert_eq!(h.path(1).owd_us, Some(0.0));
    }

    /// A path whose delay steps up by 20 ms as it goes dark for 100 ms (a satellite's
    /// handover) has the new delay as its floor at once; one whose delay grows while packets
    /// keep coming (a queue standing on a full path) keeps its floor, however long.
    #[test]
    fn a_delay_that_steps_up_across_a_dark_moment_is_the_floor() {
        let mut h = H::new(config(64, 10, 1));
        let mut seq = 0;
        // a packet every 2 ms
        let mut run = |h: &mut H, from_us: u64, to_us: u64, delay_us: u64| {
            let mut t = from_us;
            while t < to_us {
                push_sent(h, 0, seq, t, t + delay_us);
                seq += 1;
                t += 2_000;
            }
        };
        run(&mut h, 0, 1_000_000, 12_000);
        // a queue of 20 ms that stands for 5 s: still a queue
        run(&mut h, 1_000_000, 6_000_000, 32_000);
        let p = h.path(0).clone();
        assert!(
            p.owd_us.unwrap() as i64 - p.owd_min_us.unwrap() > 19_900,
            "{p:?}"
        );
        // dark for 100 ms, and 32 ms after it: no queue
        run(&mut h, 6_100_000, 6_200_000, 32_000);
        let p = h.path(0).clone();
        assert!(
            (p.owd_us.unwrap() as i64 - p.owd_min_us.unwrap()).abs() < 100,
            "{p:?}"
        );
        // and down again: the floor at once
        run(&mut h, 6_200_000, 6_300_000, 12_000);
        let p = h.path(0).clone();
        assert_eq!(p.owd_last_us, p.owd_min_us);
    }

    #[test]
    fn reset_drops_held_and_starts_over() {
        let mut h = with_idle_path(config(8, 10, 2), 1);
        h.push(0, 0, 100);
        h.push(0, 0, 101);
        h.push(0, 0, 103);
        assert_eq!(h.r.held(), 3);
        h.r.reset();
        assert_eq!(h.r.held(), 0);
        assert_eq!(h.r.poll_timeout(), None);
        assert_eq!(h.r.next_seq(), None);
        assert_eq!(h.total().dropped_on_reset, 3);
        // a new session from seq 0 on a single path: the old path 1 no longer counts
        assert_eq!(h.push(0, 0, 1), [1]);
        assert_eq!(h.r.next_seq(), Some(2));
        assert_eq!(h.out, [1]);
        assert_eq!(h.total().packets, 4);
        h.check_bounds();
    }

    #[test]
    fn huge_jumps() {
        let mut h = with_idle_path(config(64, 10, 2), 1);
        assert_eq!(h.push(0, 0, 0), [0]);
        assert!(h.push(0, 0, 5).is_empty());
        // the largest forward jump from the release point (1)
        let far = 1u32.wrapping_add((1 << 31) - 1);
        assert_eq!(h.push(0, 0, far), [5]);
        assert_eq!(h.r.held(), 1);
        h.check_bounds();
        // exactly 2^31 ahead is ambiguous: taken as behind, hence too old
        let before = h.total().too_old;
        h.push(0, 0, far.wrapping_add(1 << 31));
        assert_eq!(h.total().too_old, before + 1);
        // many maximal jumps: each O(capacity)
        let mut s = far;
        for _ in 0..10_000 {
            let head = h.r.next_seq().expect("started");
            s = head.wrapping_add((1 << 31) - 1);
            h.push(0, 0, s);
            h.check_bounds();
        }
        assert_eq!(h.r.held(), 1);
        let all = h.out.clone();
        assert_eq!(all.len(), 2 + 10_001 - 1);
        h.timeout_at(t(1_000_000));
        assert_eq!(h.out.last(), Some(&s));
    }

    #[test]
    fn rebase_keeps_working() {
        let mut h = with_idle_path(config(16, 10, 2), 1);
        h.r.rebase_at = EXT_OFFSET + (3 << 32);
        let mut s = 0u32;
        h.push(0, 0, s);
        for i in 0..40u32 {
            // jump, then a few in order with a small reordering
            s =
                h.r.next_seq()
                    .expect("started")
                    .wrapping_add((1 << 31) - 20);
            let now = u64::from(i) * 100_000;
            h.push(now, 0, s);
            h.push(now, 0, s.wrapping_add(2));
            h.push(now, 0, s.wrapping_add(1));
            h.timeout_at(t(u64::from(i) * 100_000 + 50_000));
            assert!(h.r.head < h.r.rebase_at + (1 << 32));
            assert_eq!(h.total().skipped, u64::from(i + 1) * ((1 << 31) - 20));
            h.check_bounds();
            let n = h.out.len();
            assert_eq!(
                &h.out[n - 2..],
                &[s.wrapping_add(1), s.wrapping_add(2)],
                "round {i}"
            );
        }
    }

    fn hostile_flood(window: usize, seed: u64) {
        let mut h = H::new(config(window, 5, 4));
        let mut rng = Rng::new(seed);
        let mut now = 0u64;
        let mut delivered = 0u64;
        let mut sink = |_p: u32| delivered += 1;
        let mut base = 0u32;
        for i in 0..100_000u32 {
            now += rng.below(200);
            let r = rng.below(100);
            let seq = match r {
                0..=49 => rng.next_u64() as u32,
                50..=79 => base.wrapping_add(rng.below(2 * window as u64 + 10) as u32),
                80..=89 => base.wrapping_sub(rng.below(3000) as u32), // replays
                _ => {
                    base = base.wrapping_add(rng.below(1 << 31) as u32);
                    base
                }
            };
            let meta = PacketMeta {
                path: PathId(rng.below(5) as u8), // path 4 is invalid
                seq,
                path_seq: rng.next_u64() as u16,
                sent_us: rng.next_u64() as u32,
                len: rng.below(1500) as usize,
            };
            h.r.push(t(now), meta, i, &mut sink);
            match rng.below(50) {
                0 => h.r.fence(
                    t(now),
                    PathId(rng.below(5) as u8),
                    rng.next_u64() as u32,
                    rng.next_u64() as u16,
                    &mut sink,
                ),
                1 => h.r.path_down(t(now), PathId(rng.below(5) as u8), &mut sink),
                2 => h.r.handle_timeout(t(now), &mut sink),
                3 if rng.below(100) == 0 => h.r.reset(),
                _ => {}
            }
            h.check_bounds();
        }
        let tot = h.total().clone();
        assert!(tot.invalid_path > 0);
        assert_eq!(tot.delivered, delivered);
        // every valid packet is accounted for exactly once
        assert_eq!(
            tot.packets,
            tot.delivered + tot.duplicates + tot.too_old + tot.dropped_on_reset + h.r.held() as u64
        );
        let per_path: u64 = h.r.stats().paths.iter().map(|p| p.packets).sum();
        assert_eq!(per_path, tot.packets);
    }

    #[test]
    fn hostile_flood_is_bounded() {
        hostile_flood(64, 1);
        hostile_flood(5, 2);
        hostile_flood(1, 3);
        hostile_flood(0, 4);
        hostile_flood(1000, 5);
    }

    #[test]
    fn replays_are_duplicates() {
        let mut h = H::new(config(32, 10, 1));
        for s in 0..1000 {
            h.push(0, 0, s);
        }
        for s in 0..1000 {
            assert!(h.push(0, 0, s).is_empty());
        }
        assert_eq!(h.total().duplicates, 1000);
        assert_eq!(h.total().delivered, 1000);
        assert_eq!(h.r.held(), 0);
    }

    #[test]
    fn config_is_clamped() {
        let r: Resequencer<()> = Resequencer::new(Config {
            window: usize::MAX,
            timeout: Duration::MAX,
            paths: 1000,
        });
        assert_eq!(r.window(), MAX_WINDOW);
        assert_eq!(r.stats().paths.len(), MAX_PATHS);
        let mut r: Resequencer<()> = Resequencer::new(config(4, 10, 0));
        assert_eq!(r.stats().paths.len(), 1);
        let meta = PacketMeta {
            path: PathId(1),
            seq: 0,
            path_seq: 0,
            sent_us: 0,
            len: 1,
        };
        r.push(Time::ZERO, meta, (), &mut |_| {});
        assert_eq!(r.stats().total.invalid_path, 1);
        assert_eq!(r.stats().total.packets, 0);
        // Duration::MAX timeout saturates instead of overflowing
        let mut r: Resequencer<u8> = Resequencer::new(Config {
            window: 4,
            timeout: Duration::MAX,
            paths: 2,
        });
        r.fence(Time::ZERO, PathId(1), 0, 0, &mut |_| {});
        r.push(
            Time::ZERO,
            PacketMeta {
                seq: 2,
                path: PathId(0),
                ..meta
            },
            2,
            &mut |_| {},
        );
        assert_eq!(r.poll_timeout(), Some(Time::from_nanos(u64::MAX)));
    }

    /// FIFO paths with random delay, jitter and loss, fences every `fence_every` packets and a
    /// final fence on every path; timers fire exactly at their deadlines.
    fn fifo_case(
        npaths: usize,
        window: usize,
        timeout_ms: u64,
        n: u32,
        fence_every: u32,
        seed: u64,
    ) -> Result<(), TestCaseError> {
        let mut rng = Rng::new(seed);
        let delay: Vec<u64> = (0..npaths).map(|_| rng.below(50_000)).collect();
        let jitter: Vec<u64> = (0..npaths).map(|_| rng.below(5_000)).collect();
        let loss: Vec<u64> = (0..npaths).map(|_| rng.below(30)).collect(); // percent
        #[derive(Clone, Copy)]
        enum Ev {
            Data(PacketMeta),
            Fence(PathId, u32, u16),
        }
        let mut events: Vec<(u64, usize, Ev)> = Vec::new();
        let mut last_arrival = vec![0u64; npaths];
        let mut path_seq = vec![0u16; npaths];
        // losses the receiver can see: after the first arrival on the path
        let mut lost = vec![0u64; npaths];
        let mut seen = vec![false; npaths];
        let mut lost_seqs = std::collections::HashSet::new();
        let mut arrive = |rng: &mut Rng, p: usize, sent: u64| {
            let a = (sent + delay[p] + rng.below(jitter[p] + 1)).max(last_arrival[p]);
            last_arrival[p] = a;
            a
        };
        for seq in 0..n {
            let sent = u64::from(seq) * 100;
            let p = rng.below(npaths as u64) as usize;
            let meta = PacketMeta {
                path: PathId(p as u8),
                seq,
                path_seq: path_seq[p],
                sent_us: sent as u32,
                len: 100,
            };
            path_seq[p] = path_seq[p].wrapping_add(1);
            let a = arrive(&mut rng, p, sent);
            if rng.below(100) < loss[p] {
                lost[p] += u64::from(seen[p]);
                lost_seqs.insert(seq);
            } else {
                seen[p] = true;
                events.push((a, events.len(), Ev::Data(meta)));
            }
            if seq % fence_every == fence_every - 1 {
                for q in 0..npaths {
                    let a = arrive(&mut rng, q, sent);
                    if rng.below(100) >= loss[q] {
                        seen[q] = true;
                        events.push((
                            a,
                            events.len(),
                            Ev::Fence(PathId(q as u8), seq + 1, path_seq[q]),
                        ));
                    }
                }
            }
        }
        // a final keepalive on every path, not lost
        for (q, &ps) in path_seq.iter().enumerate() {
            let a = arrive(&mut rng, q, u64::from(n) * 100);
            events.push((a, events.len(), Ev::Fence(PathId(q as u8), n, ps)));
        }
        events.sort_by_key(|&(a, i, _)| (a, i));

        let mut r: Resequencer<u32> = Resequencer::new(config(window, timeout_ms, npaths));
        let mut out = Vec::new();
        let mut deliver = |s: u32| out.push(s);
        for &(a, _, ev) in &events {
            while let Some(d) = r.poll_timeout() {
                if d > t(a) {
                    break;
                }
                prop_assert!(d >= Time::ZERO);
                r.handle_timeout(d, &mut deliver);
            }
            match ev {
                Ev::Data(m) => r.push(t(a), m, m.seq, &mut deliver),
                Ev::Fence(p, s, ps) => r.fence(t(a), p, s, ps, &mut deliver),
            }
            prop_assert!(r.held() <= window);
        }
        // after the last event the remaining timers fire on time too
        while let Some(d) = r.poll_timeout() {
            r.handle_timeout(d, &mut deliver);
        }
        prop_assert_eq!(r.held(), 0);
        let tot = r.stats().total.clone();
        // In order, but for late packets (given up, then arrived), which come at once.
        let late = tot.late;
        let mut highest = None;
        let mut behind = 0;
        for &s in &out {
            if highest.is_some_and(|h| s <= h) {
                behind += 1;
            } else {
                highest = Some(s);
            }
        }
        prop_assert!(behind <= late, "{} out of order, {} late", behind, late);
        prop_assert!(out.iter().all(|s| !lost_seqs.contains(s)));
        let received = u64::from(n) - lost_seqs.len() as u64;
        prop_assert_eq!(out.len() as u64 + tot.too_old, received);
        prop_assert_eq!(tot.duplicates, 0);
        prop_assert_eq!(tot.delivered, out.len() as u64);
        // nothing waits longer than the timeout when timers fire on time
        prop_assert!(tot.hold_time_ns.max <= timeout_ms * 1_000_000);
        // the final fences complete the per-path loss counts
        for (p, &l) in lost.iter().enumerate() {
            prop_assert_eq!(r.stats().paths[p].lost, l);
            prop_assert_eq!(r.stats().paths[p].path_seq_errors, 0);
        }
        // every seq below the release point was either delivered in order or given up (and
        // perhaps delivered late)
        let head = u64::from(r.next_seq().unwrap_or(0));
        prop_assert_eq!(out.len() as u64 - late + tot.skipped, head);
        Ok(())
    }

    /// Found by `fifo_paths_with_loss` in CI.
    #[test]
    fn fifo_case_regression_1() {
        fifo_case(2, 1, 1, 5, 5, 8401433582093602707).unwrap();
    }

    /// RFC 4737 by its definition, O(n^2): extent of each reordered arrival.
    fn naive_extents(arrivals: &[u32]) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, &s) in arrivals.iter().enumerate() {
            if arrivals[..i].iter().any(|&x| x > s) {
                let j = arrivals[..i].iter().position(|&x| x > s).unwrap_or(i);
                out.push((i - j) as u64);
            }
        }
        out
    }

    proptest! {
        /// The cargo-fuzz target's driver on random operation sequences.
        #[test]
        fn arbitrary_operation_sequences_keep_the_invariants(
            data in proptest::collection::vec(any::<u8>(), 0..2000)
        ) {
            crate::fuzz::run_ops(&data);
        }

        #[test]
        fn any_permutation_within_the_window_is_delivered_in_order(
            (window, perm, paths) in (1usize..=64)
                .prop_flat_map(|w| (Just(w), 1usize..=w))
                .prop_flat_map(|(w, n)| (
                    Just(w),
                    Just((0..n as u32).collect::<Vec<_>>()).prop_shuffle(),
                    proptest::collection::vec(0u8..4, n),
                ))
        ) {
            // path 4 counts but never progresses: only the permutation matters
            let mut h = with_idle_path(config(window, 10, 5), 4);
            for (&s, &p) in perm.iter().zip(&paths) {
                h.push(0, p, s);
                h.check_bounds();
            }
            let n = perm.len() as u32;
            prop_assert_eq!(&h.out, &(0..n).collect::<Vec<_>>());
            prop_assert_eq!(h.r.held(), 0);
            let tot = h.total();
            prop_assert_eq!((tot.skipped, tot.late, tot.duplicates), (0, 0, 0));
            let ext = naive_extents(&perm);
            prop_assert_eq!(tot.reordered, ext.len() as u64);
            prop_assert_eq!(tot.reorder_extent_sum, ext.iter().sum::<u64>());
            prop_assert_eq!(tot.reorder_extent_max, ext.iter().copied().max().unwrap_or(0));
        }

        #[test]
        fn fifo_paths_with_loss(
            npaths in 1usize..=4,
            window in 1usize..=128,
            timeout_ms in 1u64..=60,
            n in 1u32..=600,
            fence_every in 1u32..=64,
            seed in any::<u64>(),
        ) {
            fifo_case(npaths, window, timeout_ms, n, fence_every, seed)?;
        }
    }
}
