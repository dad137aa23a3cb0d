//! The [`Connection`]: one peer session's protocol state, and what it shows of itself.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use mpt_core::seal::{SealKey, SEALED_HEADER_LEN};
use mpt_core::wire::HEADER_LEN;
use mpt_core::{PathId, Time};
use mpt_reseq::feedback::ReportPacer;
use mpt_reseq::{Resequencer, Stats};
use mpt_sched::Scheduler;

use crate::control::Pending;
use crate::counts::Counts;
use crate::crypto::CryptoState;
use crate::path::PathState;
use crate::{ConnectionConfig, DropCounts, DropReason, Event, Overhead, Random, Transmit};

/// One peer session: see the crate documentation. `P` is how the caller holds a received
/// inner packet while the resequencer may keep it (a buffer, or where it lies).
pub struct Connection<P> {
    pub(crate) cfg: ConnectionConfig,
    pub(crate) random: Random,
    /// Our index for the current session (random per handshake): the peer puts it in the
    /// `session` field of what it sends us.
    pub(crate) session: u32,
    pub(crate) paths: Vec<PathState>,
    // send side
    pub(crate) sched: Box<dyn Scheduler>,
    /// Next global sequence number.
    pub(crate) seq: u32,
    /// This session's send key once the handshake made one (sealing only).
    pub(crate) seal: Option<Arc<SealKey>>,
    /// Next counter (nonce) under `seal`.
    pub(crate) counter: u64,
    /// The protocol version of our datagrams: the session's, as its handshake set it
    /// ([`mpt_core::wire::VERSION`] until one did, or [`mpt_core::wire::MIN_VERSION`] with a
    /// peer that speaks no later).
    pub(crate) wire_version: u8,
    /// The version of the initiation in flight.
    pub(crate) initiation_version: u8,
    // receive side
    pub(crate) reseq: Resequencer<crate::held::Held<P>>,
    /// The peer's index for the current session, once a handshake made one: what we put in
    /// the `session` field.
    pub(crate) peer_session: Option<u32>,
    /// Sessions made after the first.
    pub(crate) peer_restarts: u64,
    /// What the peer's handshake said it takes besides the cipher.
    pub(crate) peer: crate::negotiate::PeerFeatures,
    /// Packets sent lately, and the gaps to ask for ([`crate::resend`]).
    pub(crate) resend: crate::resend::Resend,
    /// Packets that came in pieces, waiting for the rest.
    pub(crate) reasm: crate::reassembly::Reassembly,
    /// Packets put back together (or made again, or rebuilt), to go to the resequencer before
    /// the packets of the datagram that completed them.
    pub(crate) assembled: VecDeque<(crate::Incoming, Vec<u8>)>,
    /// "Too big" answers for the TUN device ([`crate::BatchOut::icmp`]).
    pub(crate) icmp: crate::icmp::IcmpAnswers,
    /// The largest datagram sent lately that the base datagram ([`crate::BASE_DATAGRAM`]) does
    /// not carry, and when one that large was last sent: slow paths are probed only for the
    /// sizes such packets need ([`Connection::note_big`]).
    pub(crate) big: Option<(Time, usize)>,
    /// The path light traffic keeps short, and packets sent per class.
    pub(crate) classes: crate::class::Classes,
    /// CoDel's rule on the driver's queue of packets pacing held ([`crate::pace`]).
    pub(crate) codel: crate::pace::Codel,
    pub(crate) pacer: ReportPacer,
    /// What reports are made of, kept from one to the next.
    pub(crate) report: crate::report::ReportScratch,
    /// When the peer's last report came, and how far apart its reports come lately (the
    /// longer of the last gap and the earlier ones decaying): at a low rate the peer reports
    /// as seldom as once a second ([`mpt_reseq::feedback::MAX_INTERVAL`]).
    pub(crate) report_at: Option<Time>,
    pub(crate) report_gap: Duration,
    pub(crate) crypto: CryptoState,
    /// Packets the resequencer released (compressed ones rebuilt), for
    /// [`Connection::take_delivered`].
    pub(crate) released: crate::hc::Released<P>,
    /// Our side of header compression: the references of the flows we send.
    pub(crate) hc_tx: mpt_core::hc::Compressor,
    /// Bonded data waiting to match the farthest path ([`crate::equalise`]).
    pub(crate) equal: crate::equalise::Equaliser<crate::held::Held<P>>,
    // outputs
    pub(crate) pending: VecDeque<Pending>,
    /// Bundles closed to leave before the batch being numbered ([`crate::BatchOut::before`]).
    pub(crate) ready: VecDeque<crate::Datagram>,
    /// What leaves after the batch being numbered ([`crate::BatchOut::after`]).
    pub(crate) after: VecDeque<crate::Datagram>,
    pub(crate) events: VecDeque<Event>,
    pub(crate) counts: Counts,
    pub(crate) timers: Timers,
}

/// When each periodic job is next due.
#[derive(Debug, Clone)]
pub(crate) struct Timers {
    pub(crate) keepalive: Time,
    pub(crate) report: Time,
    pub(crate) liveness: Time,
}

impl<P> std::fmt::Debug for Connection<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("session", &format_args!("{:08x}", self.session))
            .field("paths", &self.paths.len())
            .field("peer_session", &self.peer_session)
            .finish_non_exhaustive()
    }
}

impl<P> Connection<P> {
    /// A new session at `now`.
    ///
    /// # Panics
    /// With no path or more than [`mpt_core::MAX_PATHS`] (the configuration refuses both).
    pub fn new(cfg: ConnectionConfig, now: Time, mut random: Random) -> Connection<P> {
        assert!(
            (1..=mpt_core::MAX_PATHS).contains(&cfg.paths.len()),
            "a connection has 1 to {} paths",
            mpt_core::MAX_PATHS
        );
        let sched = cfg.scheduler();
        let reseq = Resequencer::new(mpt_reseq::Config {
            window: cfg.reorder_window,
            timeout: cfg.reorder_timeout,
            paths: cfg.paths.len(),
        });
        let mut bytes = [0u8; 4];
        random(&mut bytes);
        let session = u32::from_be_bytes(bytes);
        let crypto = CryptoState::new(&cfg.keys, now);
        let paths = cfg
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| PathState::new(p.remote, now, cfg.datagram_ceiling(i)))
            .collect();
        let mut sched = sched;
        for (i, p) in cfg.paths.iter().enumerate() {
            if p.remote.is_none() {
                // not used until the peer is heard on it
                sched.on_path_state(now, PathId(i as u8), false);
            }
        }
        Connection {
            random,
            session,
            paths,
            sched,
            seq: 0,
            seal: None,
            counter: 0,
            wire_version: mpt_core::wire::VERSION,
            initiation_version: mpt_core::wire::VERSION,
            reseq,
            peer_session: None,
            peer_restarts: 0,
            peer: Default::default(),
            resend: Default::default(),
            reasm: Default::default(),
            assembled: VecDeque::new(),
            icmp: crate::icmp::IcmpAnswers::new(now),
            big: None,
            classes: Default::default(),
            codel: Default::default(),
            pacer: ReportPacer::default(),
            report: Default::default(),
            report_at: None,
            report_gap: Duration::ZERO,
            crypto,
            released: Default::default(),
            hc_tx: mpt_core::hc::Compressor::new(),
            equal: crate::equalise::Equaliser::new(cfg.paths.len()),
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            after: VecDeque::new(),
            events: VecDeque::new(),
            counts: Counts::default(),
            timers: Timers {
                keepalive: now,
                report: now,
                liveness: now,
            },
            cfg,
        }
    }

    pub fn config(&self) -> &ConnectionConfig {
        &self.cfg
    }

    /// When anything authentic last arrived from the peer, on any path.
    pub fn last_heard(&self) -> Option<Time> {
        self.crypto.last_heard
    }

    /// Where the prefix before an inner packet ends, in datagrams we build and in the buffers
    /// [`Connection::handle_datagram`] opens: [`HEADER_LEN`], or [`SEALED_HEADER_LEN`] when
    /// sealing.
    pub fn prefix(&self) -> usize {
        if self.sealing() {
            SEALED_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// What a datagram adds to its inner packet, outer headers as over IPv4.
    pub fn overhead(&self) -> Overhead {
        Overhead::new(self.sealing(), false)
    }

    /// The largest datagram a valid peer sends: a full inner packet with its header (and
    /// counter and tag).
    pub fn max_datagram(&self) -> usize {
        usize::from(self.cfg.mtu) + self.overhead().datagram()
    }

    /// How many paths the connection has.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// The resequencer's statistics (what arrived, per path and in all).
    pub fn stats(&self) -> &Stats {
        self.reseq.stats()
    }

    /// Packets the resequencer holds now.
    pub fn held(&self) -> usize {
        self.reseq.held()
    }

    /// The path whose datagrams the resequencer waits for, when it waits (with more than
    /// one path): the driver should read that path's socket next.
    pub fn lagging_path(&self) -> Option<PathId> {
        match self.paths.len() {
            1 => None,
            _ => self.reseq.lagging_path(),
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next datagram to send at `now`, if any (a control datagram built and sealed now),
    /// written into `buf` (emptied first): what the caller sends.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        // what the paths lost since the last poll is asked for at once
        self.request_resends(now);
        let ready = match self.ready.pop_front() {
            Some(d) => Some(d),
            // copies leave after their batch
            None if self.paths.iter().all(|p| p.unsent == 0) => self.after.pop_front(),
            None => None,
        };
        if let Some(d) = ready {
            buf.clear();
            buf.extend_from_slice(&d.contents);
            return Some(Transmit {
                path: d.path,
                destination: d.destination,
                kind: d.kind,
            });
        }
        while let Some(p) = self.pending.pop_front() {
            // nothing but a handshake's answer goes on a path whose uplink is down (or that
            // the operator set down)
            if p.control_path()
                .is_some_and(|path| self.paths[path.index()].live.uplink_down)
            {
                continue;
            }
            if let Some(t) = self.build(now, p, buf) {
                return Some(t);
            }
        }
        None
    }

    /// [`Connection::poll_transmit`] into a vector of its own (for simple drivers and tests:
    /// it allocates one per datagram).
    pub fn poll_datagram(&mut self, now: Time) -> Option<crate::Datagram> {
        let mut contents = Vec::new();
        let t = self.poll_transmit(now, &mut contents)?;
        Some(crate::Datagram {
            path: t.path,
            destination: t.destination,
            kind: t.kind,
            contents,
        })
    }

    /// `N` random bytes.
    pub(crate) fn random<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        (self.random)(&mut b);
        b
    }

    /// The protocol version of the session with the peer (of our datagrams to it).
    pub fn wire_version(&self) -> u8 {
        self.wire_version
    }

    /// Give a datagram whose header was just written the session's version (before it is
    /// sealed: the header is authenticated with it).
    pub(crate) fn stamp(&self, datagram: &mut [u8]) {
        if self.wire_version != mpt_core::wire::VERSION {
            mpt_core::wire::set_version(datagram, self.wire_version);
        }
    }

    pub(crate) fn keepalive(&self) -> Duration {
        self.cfg.keepalive
    }

    /// Packets sent per class and path (`[class][path]`, in the configuration's order of
    /// classes; a class or path never used may be missing), and the copies sent by classes
    /// in `duplicate` mode.
    pub fn class_counts(&self) -> (&[Vec<u64>], u64) {
        self.classes.counts()
    }

    /// The most bytes of body (after the header, and counter) a datagram on path `i` may
    /// carry now: what discovery found passes, less the header (and counter and tag).
    pub(crate) fn body_cap(&self, i: usize) -> usize {
        let datagram = self.paths[i].pmtu.size.min(self.max_datagram());
        datagram.saturating_sub(self.overhead().datagram())
    }

    /// The largest inner packet a datagram carries whole on one of the paths that are up
    /// (none up: the tunnel MTU).
    pub fn largest_whole_packet(&self) -> usize {
        (0..self.paths.len())
            .filter(|&i| self.path_state(i) == crate::LinkState::Up)
            .map(|i| self.body_cap(i))
            .max()
            .unwrap_or(usize::from(self.cfg.mtu))
    }

    /// What TCP segments to this peer are cut to ([`crate::SegmentSizes`]).
    pub fn segment_sizes(&self) -> crate::SegmentSizes {
        crate::SegmentSizes {
            whole: self.largest_whole_packet(),
            compressed: self.compressed_headers(),
            settled: self.settled_whole_packet(),
        }
    }

    /// As [`Connection::largest_whole_packet`], once every path that is up has found its MTU
    /// (`None` before: a path that still searches carries the base size for now, and a TCP
    /// flow whose MSS a driver clamps for that keeps segments smaller than its paths carry).
    pub fn settled_whole_packet(&self) -> Option<usize> {
        let mut up = (0..self.paths.len()).filter(|&i| self.path_state(i) == crate::LinkState::Up);
        let settled = up.clone().next().is_some() && up.all(|i| self.paths[i].pmtu.found());
        settled.then(|| self.largest_whole_packet())
    }

    /// Drops by reason, the resequencer's duplicates and too-old packets included.
    pub fn drop_counts(&self) -> [u64; DropReason::COUNT] {
        self.counts.drop_counts(&self.reseq.stats().total)
    }

    /// [`Connection::drop_counts`] by name.
    pub fn drops(&self) -> DropCounts {
        DropCounts::from_counts(&self.drop_counts())
    }

    pub fn drop_count(&self, reason: DropReason) -> u64 {
        self.drop_counts()[reason as usize]
    }

    /// Inner packets numbered for sending, and their bytes.
    pub fn tx_counts(&self) -> (u64, u64) {
        (self.counts.tx_packets, self.counts.tx_bytes)
    }

    /// Inner packets released for delivery so far.
    pub fn delivered(&self) -> u64 {
        self.counts.delivered
    }

    /// Bytes of receiver reports sent (outer headers included).
    pub fn report_bytes(&self) -> u64 {
        self.counts.report_bytes
    }

    /// Keepalives sent, and keepalives answered.
    pub fn keepalive_counts(&self) -> (u64, u64) {
        (self.counts.keepalives_sent, self.counts.keepalive_acks_sent)
    }

    /// Share of the received bandwidth the report pacer spends on reports.
    pub fn report_fraction(&self) -> f64 {
        self.pacer.fraction()
    }

    /// What header compression did on our side: packets sent compressed, flows' references
    /// sent whole, header bytes saved, TCP sent whole for want of a layout it takes.
    pub fn compression_counts(&self) -> mpt_core::hc::TxCounts {
        self.hc_tx.counts()
    }

    /// Bundles sent (of two packets or more), the inner packets they carried, and how many of
    /// those went without their IPv4 and UDP headers (compressed entries).
    pub fn bundle_counts(&self) -> (u64, u64, u64) {
        let c = &self.counts;
        (c.bundles_sent, c.bundled_packets, c.compressed_packets)
    }

    /// Packets that waited to match the farthest path, packets that went on early because too
    /// many waited, and packets waiting now (`equalise.rs`).
    pub fn equalise_counts(&self) -> (u64, u64, usize) {
        self.equal.counts()
    }

    /// How long bonded packets arriving on `path` wait now to match the farthest path.
    pub fn equalise_lag(&self, path: PathId) -> Duration {
        self.equal.lag(path.index())
    }

    /// Count a drop for `reason`; returns it.
    #[inline]
    pub(crate) fn count(&mut self, reason: DropReason) -> DropReason {
        self.counts.drop(reason)
    }

    /// Whether data goes with compressed headers: configured, with resending (a reference
    /// lost is sent again), in a session of version 6 (a peer of version 5 makes references of
    /// packets in pieces too).
    pub(crate) fn compressing(&self) -> bool {
        self.cfg.compress && self.resending() && self.wire_version >= 6
    }

    /// What a bulk TCP packet's IP and TCP headers take in a datagram while data goes with
    /// compressed headers: a driver that cuts TCP segments to fit a datagram
    /// ([`Connection::largest_whole_packet`]) counts this for headers that compress
    /// ([`crate::COMPRESSED_HEADERS`], or [`crate::COMPRESSED_HEADERS_V6`] in a session of
    /// version 6). One longer than that does not fit, and goes whole, in pieces.
    pub fn compressed_headers(&self) -> Option<usize> {
        self.compressing()
            .then(|| crate::compress::format(self.wire_version).1)
    }

    /// Per context, the flow ([`mpt_core::hc::flow_hash`]) whose next packets may be
    /// compressed against a reference ([`mpt_core::hc::Compressor::ready`]; all 0 while data
    /// goes whole). A driver that cuts TCP segments for [`Connection::compressed_headers`]
    /// cuts the first of a burst of any other flow to fit a datagram whole, as it would
    /// without compression: it goes whole, and becomes its flow's reference.
    pub fn compress_ready(&self, out: &mut [u32; mpt_core::hc::CONTEXTS]) {
        if self.compressing() {
            self.hc_tx.ready(self.seq, out);
        } else {
            out.fill(0);
        }
    }

    /// The peer takes bundles and express data (its handshake said so): without, every packet
    /// goes in a data datagram of its own.
    pub fn peer_takes_express(&self) -> bool {
        self.peer.express
    }

    /// Behave as towards a peer whose handshake did not say it takes packets in pieces (an
    /// older mptd), until the next handshake: for tests.
    #[doc(hidden)]
    pub fn forget_peer_pieces(&mut self) {
        self.peer.pieces = false;
    }

    /// Behave as towards a peer whose handshake did not say it takes bundles and express data
    /// (an older mptd), until the next handshake: for tests.
    #[doc(hidden)]
    pub fn forget_peer_express(&mut self) {
        self.peer.express = false;
    }
}
