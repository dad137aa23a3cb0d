//! Delay equalisation: bonded data that arrives on a path nearer than the farthest path up
//! waits the difference before it goes to the resequencer, so that every packet of a bonded
//! flow takes as long as if it had come the far way.
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

use mpt_core::Time;

use crate::liveness::LinkState;
use crate::{Connection, Incoming, PathSettings};

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
    /// Two paths or more are up and one has no delay measured yet (the tunnel just started):
    /// a connection's first SYN waits [`MAX_LAG`]. Its RTT starts a BBR flow's minimum, and
    /// one that is too short keeps BBR at the near path's rate for ten seconds (5 Mbit/s of
    /// two 20 Mbit/s paths, 10 and 60 ms away), where one too long is replaced by the first
    /// data's.
    unmeasured: bool,
    /// Fences (a control message's next sequence numbers: path, global, path) that came
    /// while packets waited, and when the last of those is due: a fence says everything sent
    /// before it on its path has arrived or is lost, and must not pass packets that wait.
    fences: VecDeque<(Time, mpt_core::PathId, u32, u16)>,
}

impl<P> Equaliser<P> {
    pub(crate) fn new(paths: usize) -> Self {
        Equaliser {
            lines: (0..paths).map(|_| VecDeque::new()).collect(),
            lag: vec![Duration::ZERO; paths],
            unmeasured: false,
            fences: VecDeque::new(),
        }
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
    }
}

impl<P> Connection<P> {
    /// Whether `data` waits to match the farthest path: bonded traffic (or a connection's
    /// first SYN), while its path's lag is worth it or packets wait there already (which it
    /// must not overtake).
    pub(crate) fn waits(&self, data: &Incoming) -> bool {
        let i = data.meta.path.index();
        let Some(line) = self.equal.lines.get(i) else {
            return false;
        };
        self.cfg.equalise
            && self.cfg.reorder_window > 0
            && !data.resent
            && (!data.express || data.opens)
            && (self.equal.lag[i] >= MIN_LAG
                || !line.is_empty()
                || (data.opens && self.equal.unmeasured))
    }

    /// `data` (its payload its own) waits its path's lag, and behind what waits there already.
    pub(crate) fn wait(&mut self, now: Time, data: &Incoming, payload: P) {
        let i = data.meta.path.index();
        if self.equal.lines[i].len() >= MAX_WAITING {
            if let Some(w) = self.equal.lines[i].pop_front() {
                self.counts.equalise_overflow += 1;
                self.equalised(now, w);
            }
        }
        // measured as it arrives: what the peer hears of the path is not delayed
        self.reseq.measure(now, &data.meta);
        let lag = if data.opens && self.equal.unmeasured {
            MAX_LAG
        } else {
            self.equal.lag[i]
        };
        let line = &mut self.equal.lines[i];
        let ready = line.back().map_or(now + lag, |b| b.ready.max(now + lag));
        line.push_back(Waiting {
            ready,
            data: data.clone(),
            payload,
        });
        self.counts.equalised += 1;
    }

    /// A control message on `path` says the peer's next global sequence is `seq` and its next
    /// on the path `path_seq`: to the resequencer now, or, while packets wait, once they have
    /// all gone on.
    pub(crate) fn fence(&mut self, now: Time, path: mpt_core::PathId, seq: u32, path_seq: u16) {
        // after what waits, and after the fences that wait already
        let after = self.equal.fences.back().map(|f| f.0);
        match self.equal.last_ready().max(after) {
            Some(at) => self.equal.fences.push_back((at, path, seq, path_seq)),
            None => {
                let out = &mut self.released;
                self.reseq
                    .fence(now, path, seq, path_seq, &mut |p| out.push(p));
            }
        }
    }

    /// Hand every waiting packet that is due at `now` (all of them with `all`; or only those
    /// of path `only`) to the resequencer, and the fences that waited for them.
    pub(crate) fn release_equalised(&mut self, now: Time, all: bool, only: Option<usize>) {
        for i in 0..self.equal.lines.len() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            while let Some(w) = self.equal.lines[i].front() {
                if !all && w.ready > now {
                    break;
                }
                let Some(w) = self.equal.lines[i].pop_front() else {
                    break;
                };
                self.equalised(now, w);
            }
        }
        while let Some(&(at, path, seq, path_seq)) = self.equal.fences.front() {
            if at > now && !(all && only.is_none()) {
                break;
            }
            self.equal.fences.pop_front();
            let out = &mut self.released;
            self.reseq
                .fence(now, path, seq, path_seq, &mut |p| out.push(p));
        }
    }

    /// A packet's wait is over: to the resequencer (which measured it when it arrived).
    fn equalised(&mut self, now: Time, w: Waiting<P>) {
        let out = &mut self.released;
        self.reseq
            .push_measured(now, w.data.meta, w.payload, w.data.express, &mut |p| {
                out.push(p)
            });
    }

    /// Each path's lag: the farthest path up's least one-way delay (as the resequencer measures
    /// it, or half the smoothed RTT while a path has carried no data yet) less its own, at most
    /// [`MAX_LAG`]; none with fewer than two paths up (backup paths left out), or without
    /// resequencing (`reorder_window` 0: packets go on as they come). While a path up has
    /// neither figure, none either, but a SYN waits [`MAX_LAG`].
    pub(crate) fn equalise_lags(&mut self) {
        // every report tick, every peer: no allocation
        let on = self.cfg.equalise && self.cfg.reorder_window > 0;
        let top = self.cfg.paths.iter().map(PathSettings::tier).min();
        let up = |i: &usize| {
            let p = &self.paths[*i];
            on && p.remote.is_some()
                && p.live.state != LinkState::Down
                && self.cfg.paths.get(*i).map(PathSettings::tier) == top
        };
        let n = self.paths.len();
        let stats = &self.reseq.stats().paths;
        // a least delay is measured on some packet, and its time on the line is part of it:
        // where the rate is configured (the link's; a learned one is what we sent), that time
        // is taken out. On slow lines a full datagram's time on the line is tens of
        // milliseconds (more than its size at the rate gives: the line's framing), so a path
        // whose least came from a full datagram would look that much farther than identical
        // lines whose least came from small ones, and their packets would wait for nothing
        let datagram = self.overhead().datagram();
        let owd = |i: usize| {
            let s = stats.get(i)?;
            let least = s.owd_min_us?;
            let on_line = s.owd_min_len.map_or(Duration::ZERO, |len| {
                let wire = len + datagram + self.cfg.paths[i].overhead;
                crate::pmtu::airtime(wire, self.cfg.paths[i].rate_bps)
            });
            Some(least - on_line.as_micros() as i64)
        };
        let by_owd = (0..n).filter(up).all(|i| owd(i).is_some());
        let delay = |i: usize| {
            if by_owd {
                owd(i)
            } else {
                self.paths[i].srtt_us.map(|r| (r / 2) as i64)
            }
        };
        let count = (0..n).filter(up).count();
        let measured = (0..n).filter(up).all(|i| delay(i).is_some());
        let far = (0..n).filter(up).filter_map(delay).max().unwrap_or(0);
        let mut lags = [Duration::ZERO; mpt_core::MAX_PATHS];
        if count >= 2 && measured {
            for i in (0..n).filter(up) {
                let us = (far - delay(i).unwrap_or(far)).max(0) as u64;
                // and where a full datagram takes longer to carry than the difference, the
                // difference may be that still (a packet in pieces, its last held a little
                // for the packets after it, or one path's least taken from a small datagram
                // and another's from a full one), not the paths'. Only a configured rate: the
                // receiver of a transfer sends little, and its learned rates are that little,
                // which would cancel every lag and with them the bonding of unequal paths
                let carry = crate::pmtu::airtime(self.max_datagram(), self.cfg.paths[i].rate_bps);
                if Duration::from_micros(us) > carry {
                    lags[i] = Duration::from_micros(us).min(MAX_LAG);
                }
            }
        }
        let eq = &mut self.equal;
        eq.unmeasured = count >= 2 && !measured;
        for (l, new) in eq.lag.iter_mut().zip(lags) {
            *l = new;
        }
    }
}
