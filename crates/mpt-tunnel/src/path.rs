//! What the connection keeps per path ([`PathState`]), and what it shows of a path
//! ([`PathInfo`]).

use std::net::SocketAddr;

use mpt_core::wire::ReportEntry;
use mpt_core::Time;

use mpt_core::PathId;

use crate::liveness::{LinkState, Liveness};
use crate::{Connection, Event};

/// Everything the connection keeps per path.
#[derive(Debug, Clone)]
pub(crate) struct PathState {
    /// Where we send: configured, then wherever authenticated datagrams come from; `None`
    /// until known.
    pub(crate) remote: Option<SocketAddr>,
    /// Next per-path sequence number.
    pub(crate) path_seq: u16,
    /// Batches numbered for this path that the driver has not yet handed to the socket, and
    /// the fence that held before the oldest of them (see [`Connection::fence_header`]).
    pub(crate) unsent: u16,
    pub(crate) fence_before: (u32, u16),
    /// Data datagrams numbered for the path whose batch has not been sent yet.
    pub(crate) data_unsent: u64,
    /// Data datagrams sent on the path; and as of the last keepalive tick.
    pub(crate) data_sent: u64,
    pub(crate) data_at_tick: u64,
    /// `data_sent` and the time when we last answered a keepalive on this path.
    pub(crate) acked_data: u64,
    pub(crate) acked_at: Option<Time>,
    /// Smoothed RTT in microseconds, once measured.
    pub(crate) srtt_us: Option<u64>,
    pub(crate) live: Liveness,
    /// The peer's last report about our sending on this path, and when it came.
    pub(crate) peer_report: Option<(Time, ReportEntry)>,
    /// Why the path last went down.
    pub(crate) down_reason: Option<crate::DownReason>,
    /// The peer's keepalives on the path say it hears nothing from us on it: we send no data
    /// there, whatever we hear.
    pub(crate) peer_silent: bool,
    /// Our last keepalive on the path told the peer we hear nothing there: once we hear it,
    /// a keepalive goes at once to say so (the peer sends no data there meanwhile).
    pub(crate) told_silent: bool,
    /// Small packets waiting for the path ([`crate::bundle`]).
    pub(crate) bundle: Option<crate::bundle::OpenBundle>,
    /// Path MTU discovery: the largest datagram the path carries.
    pub(crate) pmtu: crate::pmtu::Pmtu,
    /// Until when the packets sent on the path are kept for resending: the peer asked for
    /// one of them lately ([`crate::resend::KEEP_AFTER_LOSS`]).
    pub(crate) keep_until: Option<Time>,
    /// When the scheduler's clock last showed the path idle (nothing queued), as path MTU
    /// discovery looked: a slow path is probed when idle, unless it has not been for a while.
    pub(crate) idle_at: Time,
    /// Parity: the sending side (loss rate, group), the receiving side (packets kept).
    pub(crate) fec_tx: crate::fec::FecTx,
    pub(crate) fec_rx: crate::fec::FecRx,
    /// When the path last carried data, sent or received: idle [`crate::IDLE_AFTER`] after.
    pub(crate) active_at: Time,
    /// When we last sent a keepalive or answered one on the path: an idle path needs one
    /// of either per idle keepalive interval.
    pub(crate) idle_sent_at: Time,
    /// Data woke the idle path at this time, and the peer has not been heard on it since.
    pub(crate) woken_at: Option<Time>,
}

impl PathState {
    /// Packets waiting in the path's bundle.
    pub(crate) fn bundled_packets(&self) -> u64 {
        self.bundle.as_ref().map_or(0, |b| b.count() as u64)
    }

    /// A path watched from `now` on, sending to `remote` (when known).
    pub(crate) fn new(remote: Option<SocketAddr>, now: Time, ceiling: usize) -> PathState {
        PathState {
            remote,
            path_seq: 0,
            unsent: 0,
            fence_before: (0, 0),
            data_unsent: 0,
            data_sent: 0,
            data_at_tick: 0,
            acked_data: 0,
            acked_at: Some(now),
            srtt_us: None,
            live: Liveness::new(now),
            peer_report: None,
            down_reason: None,
            peer_silent: false,
            told_silent: false,
            bundle: None,
            keep_until: None,
            idle_at: now,
            fec_tx: Default::default(),
            fec_rx: Default::default(),
            active_at: now,
            idle_sent_at: now,
            woken_at: None,
            pmtu: crate::pmtu::Pmtu::new(
                now,
                ceiling,
                if remote.is_some_and(|r| r.is_ipv6()) {
                    48
                } else {
                    28
                },
            ),
        }
    }

    /// A new path in the place of this one (a reload put another path at its id): what it
    /// learned of its link starts again, but its numbering goes on, so that the peer's
    /// resequencer sees no gap or jump on the id, and batches numbered for it and not yet
    /// sent still find their fences.
    pub(crate) fn replaced(
        &self,
        remote: Option<SocketAddr>,
        now: Time,
        ceiling: usize,
    ) -> PathState {
        PathState {
            path_seq: self.path_seq,
            unsent: self.unsent,
            fence_before: self.fence_before,
            data_unsent: self.data_unsent,
            bundle: self.bundle.clone(),
            ..PathState::new(remote, now, ceiling)
        }
    }
}

/// What the status document shows of a path.
#[derive(Debug, Clone)]
pub struct PathInfo {
    pub state: LinkState,
    pub remote: Option<SocketAddr>,
    pub last_heard: Option<Time>,
    pub srtt_us: Option<u64>,
    /// The rate the scheduler assumes (learned, or configured).
    pub rate_bps: Option<u64>,
    pub peer_report: Option<(Time, ReportEntry)>,
    pub down_events: u64,
    /// Why it is down, while it is.
    pub down_reason: Option<crate::DownReason>,
    /// The largest datagram (UDP payload) the path carries, as discovery knows it, and
    /// whether its search is over.
    pub datagram_max: usize,
    pub pmtu_found: bool,
    /// Path MTU probes sent; times the size found stopped passing.
    pub pmtu_probes: u64,
    pub pmtu_drops: u64,
}

/// What the connection shows of its paths.
impl<P> Connection<P> {
    /// Path `i`'s state as the operator sees it: down while the peer hears nothing from us on
    /// it, and while its uplink is down (even one never up).
    pub(crate) fn path_state(&self, i: usize) -> LinkState {
        let p = &self.paths[i];
        if p.peer_silent || p.live.uplink_down {
            LinkState::Down
        } else {
            p.live.state
        }
    }

    /// The rate the scheduler assumes for `path`: learned, or configured.
    pub(crate) fn path_rate(&self, path: PathId) -> Option<u64> {
        self.sched
            .learned_rate(path)
            .or(self.cfg.paths[path.index()].rate_bps)
    }

    /// Path `i` is slower than [`crate::timers::SLOW_PATH`] (its learned or configured rate):
    /// a path MTU probe holds it long, and path MTU discovery spares it.
    pub(crate) fn slow_path(&self, i: usize) -> bool {
        self.path_rate(PathId(i as u8))
            .is_some_and(|r| r < crate::timers::SLOW_PATH)
    }

    /// Where datagrams for `path` go now, once known.
    pub fn remote(&self, path: PathId) -> Option<SocketAddr> {
        self.paths[path.index()].remote
    }

    /// What the scheduler learned of `path` from the peer's reports at `now`, when it learns
    /// rates (`adaptive`).
    pub fn learned(&self, now: Time, path: PathId) -> Option<mpt_sched::Learned> {
        self.sched.learned(now, path)
    }

    pub fn path_info(&self, path: PathId) -> PathInfo {
        let p = &self.paths[path.index()];
        let silent = p.peer_silent && p.live.state != LinkState::Down && !p.live.uplink_down;
        let down = p.live.state == LinkState::Down || p.live.uplink_down;
        PathInfo {
            state: self.path_state(path.index()),
            remote: p.remote,
            last_heard: p.live.last_heard,
            srtt_us: p.srtt_us,
            rate_bps: self.path_rate(path),
            peer_report: p.peer_report,
            down_events: p.live.down_events,
            down_reason: if silent {
                Some(crate::DownReason::PeerHearsNothing)
            } else {
                p.down_reason.filter(|_| down)
            },
            datagram_max: p.pmtu.size,
            pmtu_found: p.pmtu.found(),
            pmtu_probes: p.pmtu.probes_sent,
            pmtu_drops: p.pmtu.drops,
        }
    }
}

/// Where a path's datagrams go: set, or learned from what authenticated.
impl<P> Connection<P> {
    /// The driver found the peer somewhere else for `path` (its connection's host name resolves
    /// to a new address): what we send on the path goes there from now on, and an initiator
    /// waiting for an answer sends its next initiation at once rather than after its backoff.
    pub fn set_remote(&mut self, path: PathId, to: SocketAddr) {
        if path.index() >= self.paths.len() || self.paths[path.index()].remote == Some(to) {
            return;
        }
        self.learn_address(path, to);
        if self.crypto.next_initiation.is_some() {
            self.crypto.next_initiation = Some(Time::ZERO);
        }
    }

    /// What we send on `path` goes to `from` from now on (an authentic datagram of the
    /// session, or a handshake, came from there).
    pub(crate) fn learn_address(&mut self, path: PathId, from: SocketAddr) {
        let p = &mut self.paths[path.index()];
        match p.remote.replace(from) {
            Some(old) if old != from => self.events.push_back(Event::AddressChanged {
                path,
                old,
                new: from,
            }),
            _ => {}
        }
    }

    /// A datagram of `len` bytes, more than the base datagram carries, is sent at `now`: it is
    /// the largest sent lately unless a larger one went within [`crate::timers::BIG_FOR`].
    pub(crate) fn note_big(&mut self, now: Time, len: usize) {
        match self.big {
            Some((at, most)) if most > len && now.saturating_since(at) < crate::timers::BIG_FOR => {
            }
            _ => self.big = Some((now, len)),
        }
    }

    /// A data datagram of `len` bytes went on path `i`, the last of its per-path sequences
    /// `path_seq`. On a slow path (below [`crate::timers::SLOW_PATH`]) one of the size found
    /// confirms it once the peer has it (the path MTU's report): a probe there holds the line
    /// long (94 ms at 128 kbit/s) and delays what goes behind it on schedulers that do not go
    /// around it. Faster paths keep their probes, which find a drop among small packets sooner.
    pub(crate) fn pmtu_data_sent(&mut self, i: usize, len: usize, path_seq: u16) {
        if len < self.paths[i].pmtu.size || !self.slow_path(i) {
            return;
        }
        let p = &mut self.paths[i];
        let lost = p.peer_report.as_ref().map(|(_, e)| e.lost);
        p.pmtu.data_sent(len, path_seq, lost);
    }
}
