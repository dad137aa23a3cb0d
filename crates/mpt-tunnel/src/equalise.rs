//! Delay equalisation: bonded data that arrives on a path nearer than the farthest path up
//! waits the difference before it goes to the resequencer, so that every packet of a bonded
//! flow takes as long as if it had come the far way. On paths whose rate is configured, a
//! packet of a stream that is not TCP waits its own time ([`Equaliser::playout`]), its time on
//! the line included.
//!
//! Why: a tunnel carries one inner congestion control over all its paths. With paths 10 and
//! 60 ms away, a TCP flow's packets take 10 ms while the near path has room and 60 when they
//! spill to the far one (or wait there in the resequencer for the far path's packets). BBR caps
//! what it keeps in flight near twice its bandwidth times the *least* RTT it saw, the near
//! path's, which is far too little to fill the far path too: it stays at about the near path's
//! rate. When every bonded packet takes the far path's time, the bundle is one pipe with one
//! RTT, and any congestion control fills it. Light traffic (classes sent `fastest` or
//! `duplicate`: voice, DNS, TCP acknowledgements) never waits here; a TCP SYN does, so that the
//! handshake's RTT, which starts a BBR flow's minimum, is the one its data will see.
//!
//! The cost is latency: a bonded flow's packets take the farthest path's delay (up to
//! [`MAX_LAG`] more), whatever path they took. `connection.equalise = false` turns it off.

use std::collections::VecDeque;
use std::time::Duration;

use mpt_core::{PathId, Time};
use mpt_reseq::Resequencer;

use crate::Incoming;

/// Most a packet waits to match the farthest path.
pub const MAX_LAG: Duration = Duration::from_millis(200);
/// Paths whose delays differ by less than this are not equalised (their packets' order is the
/// resequencer's job).
pub const MIN_LAG: Duration = Duration::from_millis(2);
/// Most packets waiting on one path: beyond, the oldest goes on at once.
pub const MAX_WAITING: usize = 16_384;

/// A packet waiting for its time.
struct Waiting<P> {
    ready: Time,
    data: Incoming,
    payload: P,
}

/// What waits, per path, and how long each path's packets wait.
pub(crate) struct Equaliser<P> {
    lines: Vec<VecDeque<Waiting<P>>>,
    lag: Vec<Duration>,
    /// What [`Equaliser::set_lags`] was last told of each path.
    paths: Vec<PathDelay>,
    /// Two paths or more are up and one has no delay measured yet (the tunnel just started):
    /// a connection's first SYN waits [`MAX_LAG`]. Its RTT starts a BBR flow's minimum, and
    /// one that is too short keeps BBR at the near path's rate for ten seconds (5 Mbit/s of
    /// two 20 Mbit/s paths, 10 and 60 ms away), where one too long is replaced by the first
    /// data's.
    unmeasured: bool,
    /// Fences (a control message's next sequence numbers: path, global, path) that came
    /// while packets waited, and when the last of those is due: a fence says everything sent
    /// before it on its path has arrived or is lost, and must not pass packets that wait.
    fences: VecDeque<(Time, PathId, u32, u16)>,
    /// Packets that waited, and those that went on early because too many waited.
    equalised: u64,
    overflow: u64,
}

/// What [`lags`] knows of a path.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PathDelay {
    /// Up, with a known remote, and of the highest tier configured.
    pub(crate) up: bool,
    /// Its least one-way delay as the resequencer measures it (µs, the time the datagram it
    /// was measured on took on the line taken out), once it carried data.
    pub(crate) owd_us: Option<i64>,
    /// Half its smoothed RTT (µs), once measured.
    pub(crate) half_rtt_us: Option<i64>,
    /// How long a full datagram takes on its line, where its rate is configured.
    pub(crate) carry: Duration,
    /// Its configured rate (bits/s).
    pub(crate) rate_bps: Option<u64>,
    /// The bytes a packet of the tunnel takes on its line beyond its own: the tunnel's, the
    /// outer headers' and the link's framing.
    pub(crate) framing: usize,
}

impl PathDelay {
    /// How long `len` bytes of inner packet take on the line (none where the rate is not
    /// configured).
    fn on_line_us(&self, len: usize) -> i64 {
        crate::pmtu::airtime(len + self.framing, self.rate_bps).as_micros() as i64
    }

    /// The least one-way delay `s` shows, less the time its measuring packet took on the line.
    pub(crate) fn least(&self, s: &mpt_reseq::PathStats) -> Option<i64> {
        Some(s.owd_min_us? - s.owd_min_len.map_or(0, |len| self.on_line_us(len)))
    }
}

impl<P> Equaliser<P> {
    pub(crate) fn new(paths: usize) -> Self {
        Equaliser {
            lines: (0..paths).map(|_| VecDeque::new()).collect(),
            lag: vec![Duration::ZERO; paths],
            paths: vec![PathDelay::default(); paths],
            unmeasured: false,
            fences: VecDeque::new(),
            equalised: 0,
            overflow: 0,
        }
    }

    /// Packets that waited, packets that went on early because too many waited, and packets
    /// waiting now.
    pub(crate) fn counts(&self) -> (u64, u64, usize) {
        (self.equalised, self.overflow, self.waiting())
    }

    /// Whether packets of path `i` wait.
    pub(crate) fn holds(&self, i: usize) -> bool {
        self.lines.get(i).is_some_and(|l| !l.is_empty())
    }

    /// Packets waiting, all paths.
    pub(crate) fn waiting(&self) -> usize {
        self.lines.iter().map(VecDeque::len).sum()
    }

    /// How long packets arriving on path `i` wait now.
    pub(crate) fn lag(&self, i: usize) -> Duration {
        self.lag.get(i).copied().unwrap_or_default()
    }

    /// How long bonded packets arriving on path `i` wait now (its lag, where that is worth
    /// waiting; none while equalisation is off, or the path is not up).
    pub(crate) fn bonded_wait(&self, i: usize) -> Duration {
        Some(self.lag(i))
            .filter(|&l| l >= MIN_LAG)
            .unwrap_or_default()
    }

    /// When the next waiting packet is due.
    pub(crate) fn next_ready(&self) -> Option<Time> {
        self.lines
            .iter()
            .filter_map(|l| l.front().map(|w| w.ready))
            .chain(self.fences.front().map(|f| f.0))
            .min()
    }

    /// When the last packet waiting now is due.
    fn last_ready(&self) -> Option<Time> {
        self.lines
            .iter()
            .filter_map(|l| l.back().map(|w| w.ready))
            .max()
    }

    pub(crate) fn resize(&mut self, paths: usize) {
        self.lines.resize_with(paths, VecDeque::new);
        self.lag.resize(paths, Duration::ZERO);
        self.paths.resize(paths, PathDelay::default());
    }

    /// Whether `data` waits to match the farthest path, equalisation being `on`: bonded
    /// traffic (or a connection's first SYN), while its path's lag is worth it, it waits its
    /// own time (`steady`: bonded, not TCP, [`Equaliser::timed`]), or packets wait there
    /// already (which it must not overtake).
    pub(crate) fn waits(&self, on: bool, data: &Incoming, steady: bool) -> bool {
        let i = data.meta.path.index();
        let Some(line) = self.lines.get(i) else {
            return false;
        };
        on && !data.resent
            && (!data.express || data.opens)
            && (self.lag[i] >= MIN_LAG
                || !line.is_empty()
                || (data.opens && self.unmeasured)
                || (steady && self.timed(i)))
    }

    /// Whether path `i`'s steady packets (bonded, not TCP) wait each its own time
    /// ([`Equaliser::playout`]): it is up, its rate configured, and other paths are up. TCP
    /// keeps its path's lag: it paces itself by the delay its packets meet, queue included,
    /// and held to the farthest line's time its packets stopped showing the queues before
    /// they overflowed (MPT's Table I, FTP over four 1 Mbit/s lines: 94 % of the lines alone,
    /// 78-86 % so held).
    fn timed(&self, i: usize) -> bool {
        self.paths
            .get(i)
            .is_some_and(|d| d.up && d.rate_bps.is_some())
            && self.paths.iter().filter(|d| d.up).count() >= 2
    }

    /// How long a packet of `len` bytes that has just arrived on path `i` waits, on a path
    /// whose packets wait each its own time ([`Equaliser::timed`]): until it has taken as long
    /// as a packet of its size takes with no queue on the path where that is longest (the
    /// largest, over the paths, of a path's least one-way delay, less the time its measuring
    /// packet took on the line, plus the time this one would take there). On slow lines that
    /// time is most of the delay: a 1200-byte UDP datagram (about 1300 bytes on the line)
    /// takes 81 ms on a 128 kbit/s line and 162 ms on a 64 kbit/s one. Packets that would wait a path's lag (the lines' delays apart) would still arrive
    /// as unevenly as the sender's queues on each line were deep; each waiting for its own
    /// time, they arrive as evenly as they were sent while the lines have room. Paths that
    /// have carried no data yet do not count. `None` before the packet's own path has a delay.
    fn playout(&self, i: usize, len: usize, stats: &mpt_reseq::Stats) -> Option<Duration> {
        let own = stats.paths.get(i)?.owd_last_us?;
        let mut farthest = i64::MIN;
        for (d, s) in self.paths.iter().zip(&stats.paths).filter(|(d, _)| d.up) {
            if let Some(least) = d.least(s) {
                farthest = farthest.max(least + d.on_line_us(len));
            }
        }
        let us = farthest.saturating_sub(own).max(0) as u64;
        Some(Duration::from_micros(us).min(MAX_LAG))
    }

    /// `data` (its payload its own; `steady`: bonded, not TCP) waits its path's lag (or its
    /// own time, [`Equaliser::playout`]), and behind what waits there already;
    /// `reseq` measures it now (what the peer hears of the path is not delayed). A path with
    /// [`MAX_WAITING`] packets waiting hands its oldest on, released into `out`.
    pub(crate) fn wait(
        &mut self,
        now: Time,
        data: &Incoming,
        steady: bool,
        payload: P,
        reseq: &mut Resequencer<P>,
        out: &mut impl Extend<P>,
    ) {
        let i = data.meta.path.index();
        if self.lines[i].len() >= MAX_WAITING {
            if let Some(w) = self.lines[i].pop_front() {
                self.overflow += 1;
                equalised(now, w, reseq, out);
            }
        }
        reseq.measure(now, &data.meta);
        let timed = (steady && self.timed(i))
            .then(|| self.playout(i, data.meta.len, reseq.stats()))
            .flatten();
        let lag = if data.opens && self.unmeasured {
            MAX_LAG
        } else {
            timed.unwrap_or(self.lag[i])
        };
        let line = &mut self.lines[i];
        let w = Waiting {
            ready: line.back().map_or(now + lag, |b| b.ready.max(now + lag)),
            data: data.clone(),
            payload,
        };
        if w.ready <= now && line.is_empty() {
            // its time has come, and nothing waits before it on its path
            return equalised(now, w, reseq, out);
        }
        line.push_back(w);
        self.equalised += 1;
    }

    /// A control message on `path` says the peer's next global sequence is `seq` and its next
    /// on the path `path_seq`: to `reseq` now (what it releases into `out`), or, while packets
    /// wait, once they have all gone on.
    pub(crate) fn fence(
        &mut self,
        now: Time,
        path: PathId,
        seq: u32,
        path_seq: u16,
        reseq: &mut Resequencer<P>,
        out: &mut impl Extend<P>,
    ) {
        // after what waits, and after the fences that wait already
        let after = self.fences.back().map(|f| f.0);
        match self.last_ready().max(after) {
            Some(at) => self.fences.push_back((at, path, seq, path_seq)),
            None => reseq.fence(now, path, seq, path_seq, &mut |p| out.extend([p])),
        }
    }

    /// Hand every waiting packet that is due at `now` (all of them with `all`; or only those
    /// of path `only`) to `reseq`, and the fences that waited for them; what it releases goes
    /// into `out`.
    pub(crate) fn release(
        &mut self,
        now: Time,
        all: bool,
        only: Option<usize>,
        reseq: &mut Resequencer<P>,
        out: &mut impl Extend<P>,
    ) {
        for i in 0..self.lines.len() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            while let Some(w) = self.lines[i].front() {
                if !all && w.ready > now {
                    break;
                }
                let Some(w) = self.lines[i].pop_front() else {
                    break;
                };
                equalised(now, w, reseq, out);
            }
        }
        while let Some(&(at, path, seq, path_seq)) = self.fences.front() {
            if at > now && !(all && only.is_none()) {
                break;
            }
            self.fences.pop_front();
            reseq.fence(now, path, seq, path_seq, &mut |p| out.extend([p]));
        }
    }

    /// Each path's lag from what `delays` says of the paths (see [`lags`]).
    pub(crate) fn set_lags(&mut self, delays: &[PathDelay]) {
        let (lags, unmeasured) = lags(delays);
        self.unmeasured = unmeasured;
        for (l, new) in self.lag.iter_mut().zip(lags) {
            *l = new;
        }
        for (p, d) in self.paths.iter_mut().zip(delays) {
            *p = *d;
        }
    }
}

/// A packet's wait is over: to `reseq` (which measured it when it arrived).
fn equalised<P>(now: Time, w: Waiting<P>, reseq: &mut Resequencer<P>, out: &mut impl Extend<P>) {
    reseq.push_measured(now, w.data.meta, w.payload, w.data.express, &mut |p| {
        out.extend([p])
    });
}

/// Each path's lag: the farthest path up's least one-way delay (or, while a path up has
/// carried no data yet, half the smoothed RTT) less its own, at most [`MAX_LAG`]; none with
/// fewer than two paths up. Where a full datagram takes longer to carry than the difference,
/// none either: the difference may be that still (a packet in pieces, its last held a little
/// for the packets after it, or one path's least taken from a small datagram and another's
/// from a full one), not the paths'. Also whether two paths or more are up and one has
/// neither figure (then no lags, but a SYN waits [`MAX_LAG`]).
pub(crate) fn lags(delays: &[PathDelay]) -> ([Duration; mpt_core::MAX_PATHS], bool) {
    let up = || delays.iter().enumerate().filter(|(_, d)| d.up);
    let by_owd = up().all(|(_, d)| d.owd_us.is_some());
    let delay = |d: &PathDelay| if by_owd { d.owd_us } else { d.half_rtt_us };
    let count = up().count();
    let measured = up().all(|(_, d)| delay(d).is_some());
    let far = up().filter_map(|(_, d)| delay(d)).max().unwrap_or(0);
    let mut lags = [Duration::ZERO; mpt_core::MAX_PATHS];
    if count >= 2 && measured {
        for (i, d) in up() {
            let us = (far - delay(d).unwrap_or(far)).max(0) as u64;
            if Duration::from_micros(us) > d.carry {
                lags[i] = Duration::from_micros(us).min(MAX_LAG);
            }
        }
    }
    (lags, count >= 2 && !measured)
}
