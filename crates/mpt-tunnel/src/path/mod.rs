//! What the connection keeps per path ([`PathState`]), and what it shows of a path
//! ([`PathInfo`]); how a path's liveness turns ([`liveness`]), and a reloaded configuration's
//! paths ([`reconfigured`]).

mod liveness;
mod reload;

pub(crate) use liveness::Turn;
pub(crate) use reload::reconfigured;

use std::net::SocketAddr;

use mpt_core::wire::ReportEntry;
use std::time::Duration;

use mpt_core::Time;

use crate::liveness::{LinkState, Liveness};

/// Everything the connection keeps per path.
#[derive(Debug, Clone)]
pub(crate) struct PathState {
    /// Where we send: configured, then wherever authenticated datagrams come from; `None`
    /// until known.
    pub(crate) remote: Option<SocketAddr>,
    /// Next per-path sequence number.
    pub(crate) path_seq: u16,
    /// Batches numbered for this path that the driver has not yet handed to the socket, and
    /// the fence that held before the oldest of them (see `Control::fence_header`).
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
    /// Until when the path has not shown whether it loses: [`crate::resend::KEEP_AFTER_LOSS`]
    /// after it was first watched. Light traffic on it goes twice meanwhile
    /// ([`PathState::copies_light`]).
    pub(crate) proving_until: Time,
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
    /// The path's datagrams go on a stream (TCP or TLS), which delivers them whole and in
    /// order and resends them itself ([`crate::Transport::Stream`]).
    pub(crate) stream: bool,
}

impl PathState {
    /// The most bytes of body (after the header, and counter) a datagram on the path may
    /// carry now, under `cfg`: what discovery found passes, less the header (and counter and
    /// tag).
    pub(crate) fn body_cap(&self, cfg: &crate::ConnectionConfig) -> usize {
        let datagram = self.pmtu.size.min(cfg.max_datagram());
        datagram.saturating_sub(cfg.overhead().datagram())
    }

    /// Whether a packet sent on the path at `now` is kept for resending (with resending on):
    /// the path lost something lately.
    #[inline]
    pub(crate) fn keeps(&self, now: Time) -> bool {
        self.keep_until.is_some_and(|t| now < t) && !self.stream
    }

    /// Whether light traffic sent on the path at `now` goes twice: the path lost something
    /// lately, or has not shown yet whether it loses. (Copied only once the peer had asked for
    /// a loss, pings through a new tunnel lost a satellite's first handover: 1.5-1.8 % of 1000.)
    pub(crate) fn copies_light(&self, now: Time) -> bool {
        !self.stream && (self.keeps(now) || now < self.proving_until)
    }

    /// Whether the path's packets go with parity: its loss asks for it (the group size is not
    /// 0), and it is no stream, which loses nothing.
    #[inline]
    pub(crate) fn parity_on(&self) -> bool {
        self.fec_tx.k > 0 && !self.stream
    }

    /// Whether the path is idle at `now` ([`crate::ConnectionConfig::idle_keepalive`], in
    /// `cfg`).
    pub(crate) fn idle(&self, now: Time, cfg: &crate::ConnectionConfig) -> bool {
        cfg.idle_keepalive.is_some() && now.saturating_since(self.active_at) >= crate::IDLE_AFTER
    }

    /// Data goes on the path at `now`. An idle path that is not down wakes: until the peer is
    /// heard on it (down if not within `dead`), what it carries is copied to another path
    /// ([`PathState::woken_at`]). Returns whether it woke: a keepalive goes at once, where
    /// the remote is known.
    pub(crate) fn data_on(&mut self, now: Time, cfg: &crate::ConnectionConfig) -> bool {
        let wakes = self.idle(now, cfg) && self.live.state != LinkState::Down;
        if wakes {
            self.woken_at = Some(now);
        }
        self.active_at = now;
        wakes && self.remote.is_some()
    }

    /// How long the path may be silent at `now` before it is down: `dead`, or while it is
    /// idle [`crate::idle_dead`]. A path that is down is not idle: with every path down, the
    /// initiator seeks the peer again after `dead` (and its handshake retries), whether or not
    /// data goes there.
    pub(crate) fn silence_limit(&self, now: Time, cfg: &crate::ConnectionConfig) -> Duration {
        match cfg.idle_keepalive {
            Some(every) if self.idle(now, cfg) && self.live.state != LinkState::Down => {
                crate::idle_dead(every, cfg.dead)
            }
            _ if self.stream => cfg.dead.max(STREAM_DEAD),
            _ => cfg.dead,
        }
    }

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
            proving_until: now + crate::resend::KEEP_AFTER_LOSS,
            idle_at: now,
            fec_tx: Default::default(),
            fec_rx: Default::default(),
            active_at: now,
            idle_sent_at: now,
            woken_at: None,
            stream: false,
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

/// Below this rate (bits/s) a path is probed for its MTU only while packets larger than the
/// base datagram are sent: a 1500-byte probe holds a 1 Mbit/s path for 12 ms, a 64 kbit/s one
/// for 0.19 s.
pub const SLOW_PATH: u64 = 1_000_000;

/// A stream path (TCP or TLS) is down after at least this long in silence: its transport
/// holds what it carries back while it resends a loss (a retransmission timeout is 200 ms at
/// the least, and doubles), and a broken connection is the driver's to report
/// ([`crate::UplinkDown::Connecting`]).
pub const STREAM_DEAD: Duration = Duration::from_secs(3);

/// On a path we send data on, keepalives are answered at most this often.
pub const BUSY_ACK_INTERVAL: Duration = Duration::from_secs(1);

/// How long a datagram larger than the base one keeps slow paths probed for its size after
/// it was sent.
pub const BIG_FOR: Duration = Duration::from_secs(10);

impl PathState {
    /// The path's state as the operator sees it: down while the peer hears nothing from us on
    /// it, and while its uplink is down (even one never up).
    pub(crate) fn state(&self) -> LinkState {
        if self.peer_silent || self.live.uplink_down {
            LinkState::Down
        } else {
            self.live.state
        }
    }

    /// Whether the scheduler may use the path now, as far as its state goes.
    #[inline]
    pub(crate) fn usable(&self) -> bool {
        self.remote.is_some()
            && !self.live.uplink_down
            && !self.peer_silent
            && self.live.state != LinkState::Down
    }

    /// What the status document shows of the path, whose rate the scheduler takes as
    /// `rate_bps`.
    pub(crate) fn info(&self, rate_bps: Option<u64>) -> PathInfo {
        let live = &self.live;
        let silent = self.peer_silent && live.state != LinkState::Down && !live.uplink_down;
        let down = live.state == LinkState::Down || live.uplink_down;
        PathInfo {
            state: self.state(),
            remote: self.remote,
            last_heard: live.last_heard,
            srtt_us: self.srtt_us,
            rate_bps,
            peer_report: self.peer_report,
            down_events: live.down_events,
            down_reason: if silent {
                Some(crate::DownReason::PeerHearsNothing)
            } else {
                self.down_reason.filter(|_| down)
            },
            datagram_max: self.pmtu.size,
            pmtu_found: self.pmtu.found(),
            pmtu_probes: self.pmtu.probes_sent,
            pmtu_drops: self.pmtu.drops,
        }
    }

    /// The queue a datagram sent on the path at `now` would wait behind, as far as we know it:
    /// the scheduler's clock (`clock`) where the path's rate is configured (`configured`);
    /// where it is learned, no longer than the queue the peer's last report (within a second)
    /// shows on the path (its smoothed delay above its minimum); `None` for a learned rate
    /// without such a report. A learned rate is what the path was offered: on a path that
    /// carries little (TCP acknowledgements back to a site, or what BBR, which keeps its
    /// queues short, left to it), it runs the clock far ahead of a queue that is not there.
    /// Every acknowledgement then waited in a bundle (two sites through a NAT fell from 2.4 to
    /// 0.1–0.8 Gbit/s each), and light traffic took a path 50 ms further.
    #[inline]
    pub(crate) fn queue_seen(
        &self,
        now: Time,
        clock: Duration,
        configured: bool,
    ) -> Option<Duration> {
        if configured {
            return Some(clock);
        }
        match self.peer_report {
            Some((at, e)) if now.saturating_since(at) <= Duration::from_secs(1) => {
                let queue = e.owd_us.saturating_sub(e.owd_min_us);
                Some(clock.min(Duration::from_micros(u64::from(queue))))
            }
            _ => None,
        }
    }

    /// A data datagram of `len` bytes, at least the size found, went on the path, a slow one,
    /// the last of its per-path sequences `path_seq`: it confirms the size once the peer has
    /// it (see `Sending::pmtu_data_sent`).
    #[inline]
    pub(crate) fn pmtu_confirms(&mut self, len: usize, path_seq: u16) {
        let lost = self.peer_report.as_ref().map(|(_, e)| e.lost);
        self.pmtu.data_sent(len, path_seq, lost);
    }

    /// Fold an RTT sample (µs) into the path's smoothed RTT; absurd values are ignored.
    pub(crate) fn rtt_sample(&mut self, rtt: u32) {
        if rtt >= 60_000_000 {
            return;
        }
        let rtt = u64::from(rtt);
        self.srtt_us = Some(self.srtt_us.map_or(rtt, |old| (old * 7 + rtt) / 8));
    }
    /// Whether to answer a keepalive the peer sent on the path at `now`. Always, unless we
    /// sent data on the path since the last answer and that was less than
    /// [`BUSY_ACK_INTERVAL`] ago: the peer hears the path alive from our data, and an answer
    /// per keepalive would only cost the busy direction (on a 64 kbit/s line, a tenth of it);
    /// one a second still gives the peer its RTT.
    pub(crate) fn answer_keepalive(&mut self, now: Time) -> bool {
        let busy = self.acked_data != self.data_sent;
        let since = self.acked_at.map_or(Duration::MAX, |t| now - t);
        if busy && since < BUSY_ACK_INTERVAL {
            return false;
        }
        self.acked_data = self.data_sent;
        self.acked_at = Some(now);
        true
    }

    /// What watching the path's delivery needs of it ([`crate::pmtu::Seen`]).
    pub(crate) fn seen(&self) -> crate::pmtu::Seen {
        crate::pmtu::Seen {
            sent: self.data_sent,
            srtt_us: self.srtt_us,
            queue_full: self.fec_tx.queue_full,
        }
    }

    /// The peer's report `e` on the path came at `now` (`sched` was told already): parity and
    /// path MTU discovery take it. Returns the round trip it samples (µs), if it echoes.
    pub(crate) fn take_report(&mut self, now: Time, e: &ReportEntry) -> Option<u32> {
        self.peer_report = Some((now, *e));
        self.fec_tx.take_report(now, e);
        self.pmtu.watch_delivery(now, self.seen(), e);
        self.pmtu.report(now, e.path_seq, e.lost);
        (e.echo != 0).then(|| {
            now.wire_micros()
                .wrapping_sub(e.echo)
                .wrapping_sub(e.echo_age_us)
        })
    }
}

/// A datagram of `len` bytes, more than the base datagram carries, is sent at `now`: it is the
/// largest sent lately (`big`: when, and how large) unless a larger one went within
/// [`BIG_FOR`].
#[inline]
pub(crate) fn note_big(big: &mut Option<(Time, usize)>, now: Time, len: usize) {
    match *big {
        Some((at, most)) if most > len && now.saturating_since(at) < BIG_FOR => {}
        _ => *big = Some((now, len)),
    }
}
