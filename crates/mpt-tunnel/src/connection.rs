//! The [`Connection`]: one peer session's protocol state, and what it shows of itself.

use std::collections::VecDeque;
use std::time::Duration;

use mpt_core::{PathId, Time};
use mpt_reseq::Stats;

use crate::counts::Counts;
use crate::crypto::CryptoState;
use crate::path::PathState;
use crate::{ConnectionConfig, DropCounts, DropReason, Event, Overhead, Random, Transmit};

/// One peer session: see the crate documentation. `P` is how the caller holds a received
/// inner packet while the resequencer may keep it (a buffer, or where it lies).
pub struct Connection<P> {
    pub(crate) cfg: ConnectionConfig,
    pub(crate) random: Random,
    /// The session what we send is sealed in: indices, key, counter, capabilities.
    pub(crate) session: crate::session::Session,
    pub(crate) paths: Vec<PathState>,
    /// The send side ([`crate::sending::Sender`]).
    pub(crate) tx: crate::sending::Sender,
    /// The receive side ([`crate::receiving::Receiver`]).
    pub(crate) rx: crate::receiving::Receiver<P>,
    /// Packets sent lately, and the gaps to ask for ([`crate::resend`]).
    pub(crate) resend: crate::resend::Resend,
    /// Receiver reports, ours and the peer's ([`crate::report::Reports`]).
    pub(crate) reports: crate::report::Reports,
    /// The handshake and the session's keys.
    pub(crate) crypto: CryptoState,
    /// What waits to leave besides a numbered batch ([`crate::pending::Outbox`]).
    pub(crate) outbox: crate::pending::Outbox,
    pub(crate) events: VecDeque<Event>,
    pub(crate) counts: Counts,
    pub(crate) timers: crate::ticks::Timers,
}

impl<P> std::fmt::Debug for Connection<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("session", &format_args!("{:08x}", self.session.ours))
            .field("paths", &self.paths.len())
            .field("peer_session", &self.session.theirs)
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
        let reseq = mpt_reseq::Config {
            window: cfg.reorder_window,
            timeout: cfg.reorder_timeout,
            paths: cfg.paths.len(),
        };
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
        let mut sched = cfg.scheduler();
        for (i, p) in cfg.paths.iter().enumerate() {
            if p.remote.is_none() {
                // not used until the peer is heard on it
                sched.on_path_state(now, PathId(i as u8), false);
            }
        }
        Connection {
            random,
            session: crate::session::Session::new(session, cfg.keys.encryption.is_some()),
            paths,
            tx: crate::sending::Sender::new(sched, now),
            rx: crate::receiving::Receiver::new(reseq),
            resend: Default::default(),
            reports: Default::default(),
            crypto,
            outbox: Default::default(),
            events: VecDeque::new(),
            counts: Counts::default(),
            timers: crate::ticks::Timers::new(now),
            cfg,
        }
    }

    /// Our session id.
    pub fn session(&self) -> u32 {
        self.session.ours
    }

    pub fn peer_session(&self) -> Option<u32> {
        self.session.theirs
    }

    pub fn peer_restarts(&self) -> u64 {
        self.crypto.peer_restarts
    }

    /// Sessions that replaced one both ends had (rekeys, handshakes after silence): the peer
    /// did not restart, and nothing it sent was lost to the change.
    pub fn rekeys(&self) -> u64 {
        self.crypto.rekeys
    }

    /// Data is sealed (the configuration says so).
    pub fn sealing(&self) -> bool {
        self.cfg.keys.encryption.is_some()
    }

    /// A handshake has made a session with the peer.
    pub fn keys_agreed(&self) -> bool {
        self.session.theirs.is_some()
    }

    /// How the session seals data, once there is one (`None` in the clear).
    pub fn cipher(&self) -> Option<mpt_core::seal::Cipher> {
        self.crypto.cipher
    }

    /// When the current session was made (the last handshake).
    pub fn session_made_at(&self) -> Option<Time> {
        self.crypto.made_at
    }

    pub fn config(&self) -> &ConnectionConfig {
        &self.cfg
    }

    /// What it holds for its peer, counted ([`crate::Footprint`]).
    pub fn footprint(&self) -> crate::Footprint {
        let (incomplete, pieces) = self.rx.assembled.pieces.held();
        let (references, awaiting) = self.rx.released.holds();
        let o = &self.outbox;
        crate::Footprint {
            held: self.rx.reseq.held(),
            incomplete,
            pieces,
            ready: self.rx.assembled.ready.len(),
            references,
            awaiting,
            resend_kept: self.resend.buffer.kept(),
            gaps: self.resend.gaps_held(),
            queued: o.pending.len() + o.ready.len() + o.after.len(),
            events: self.events.len(),
        }
    }

    /// When anything authentic last arrived from the peer, on any path.
    pub fn last_heard(&self) -> Option<Time> {
        self.crypto.last_heard
    }

    /// Where the prefix before an inner packet ends, in datagrams we build and in the buffers
    /// [`Connection::handle_datagram`] opens: [`mpt_core::wire::HEADER_LEN`], or [`mpt_core::seal::SEALED_HEADER_LEN`] when
    /// sealing.
    pub fn prefix(&self) -> usize {
        self.session.prefix()
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
        self.rx.reseq.stats()
    }

    /// Packets the resequencer holds now.
    pub fn held(&self) -> usize {
        self.rx.reseq.held()
    }

    /// The path whose datagrams the resequencer waits for, when it waits (with more than
    /// one path): the driver should read that path's socket next.
    pub fn lagging_path(&self) -> Option<PathId> {
        match self.paths.len() {
            1 => None,
            _ => self.rx.reseq.lagging_path(),
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
        let ready = match self.outbox.ready.pop_front() {
            Some(d) => Some(d),
            // copies leave after their batch
            None if self.paths.iter().all(|p| p.unsent == 0) => self.outbox.after.pop_front(),
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
        while let Some(p) = self.outbox.pending.pop_front() {
            // nothing but a handshake's answer goes on a path whose uplink is down (or that
            // the operator set down)
            if p.control_path()
                .is_some_and(|path| self.paths[path.index()].live.uplink_down)
            {
                continue;
            }
            if let Some(t) = self.control().build(now, p, buf) {
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

    /// The protocol version of the session with the peer (of our datagrams to it).
    pub fn wire_version(&self) -> u8 {
        self.session.caps.version()
    }

    /// What the session can do, as its handshake settled it.
    pub fn capabilities(&self) -> mpt_core::wire::Capabilities {
        self.session.caps
    }

    pub(crate) fn keepalive(&self) -> Duration {
        self.cfg.keepalive
    }

    /// Packets sent per class and path (`[class][path]`, in the configuration's order of
    /// classes; a class or path never used may be missing), and the copies sent by classes
    /// in `duplicate` mode.
    pub fn class_counts(&self) -> (&[Vec<u64>], u64) {
        self.tx.classes.counts()
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
            .filter(|&i| self.paths[i].state() == crate::LinkState::Up)
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
        let mut up =
            (0..self.paths.len()).filter(|&i| self.paths[i].state() == crate::LinkState::Up);
        let settled = up.clone().next().is_some() && up.all(|i| self.paths[i].pmtu.found());
        settled.then(|| self.largest_whole_packet())
    }

    /// Drops by reason, the resequencer's duplicates and too-old packets included.
    pub fn drop_counts(&self) -> [u64; DropReason::COUNT] {
        self.counts.drop_counts(&self.rx.reseq.stats().total)
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
        self.reports.pacer.fraction()
    }

    /// What header compression did on our side: packets sent compressed, flows' references
    /// sent whole, header bytes saved, TCP sent whole for want of a layout it takes.
    pub fn compression_counts(&self) -> mpt_core::hc::TxCounts {
        self.tx.hc.counts()
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
        self.rx.equal.counts()
    }

    /// How long bonded packets arriving on `path` wait now to match the farthest path.
    pub fn equalise_lag(&self, path: PathId) -> Duration {
        self.rx.equal.lag(path.index())
    }

    /// Count a drop for `reason`; returns it.
    #[inline]
    pub(crate) fn count(&mut self, reason: DropReason) -> DropReason {
        self.counts.drop(reason)
    }

    /// The peer takes bundles and express data (its handshake said so): without, every packet
    /// goes in a data datagram of its own.
    pub fn peer_takes_express(&self) -> bool {
        self.session.peer.express
    }

    /// Behave as towards a peer whose handshake did not say it takes packets in pieces (an
    /// older mptd), until the next handshake: for tests.
    #[doc(hidden)]
    pub fn forget_peer_pieces(&mut self) {
        self.session.peer.pieces = false;
    }

    /// Behave as towards a peer whose handshake did not say it takes bundles and express data
    /// (an older mptd), until the next handshake: for tests.
    #[doc(hidden)]
    pub fn forget_peer_express(&mut self) {
        self.session.peer.express = false;
    }

    /// Where datagrams for `path` go now, once known.
    pub fn remote(&self, path: PathId) -> Option<std::net::SocketAddr> {
        self.paths[path.index()].remote
    }

    /// What the scheduler learned of `path` from the peer's reports at `now`, when it learns
    /// rates (`adaptive`).
    pub fn learned(&self, now: Time, path: PathId) -> Option<mpt_sched::Learned> {
        self.tx.sched.learned(now, path)
    }

    pub fn path_info(&self, path: PathId) -> crate::PathInfo {
        self.paths[path.index()].info(crate::sending::path_rate(
            self.tx.sched.as_ref(),
            &self.cfg,
            path,
        ))
    }

    /// The driver found the peer somewhere else for `path` (its connection's host name resolves
    /// to a new address): what we send on the path goes there from now on, and an initiator
    /// waiting for an answer sends its next initiation at once rather than after its backoff.
    pub fn set_remote(&mut self, path: PathId, to: std::net::SocketAddr) {
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
    pub(crate) fn learn_address(&mut self, path: PathId, from: std::net::SocketAddr) {
        if let Some(old) = self.paths[path.index()].remote.replace(from) {
            if old != from {
                let new = from;
                self.events
                    .push_back(Event::AddressChanged { path, old, new });
            }
        }
    }

    /// The operator changed `path`'s weight, rate or backup flag (`None`: unchanged; a rate of
    /// `Some(None)`: none configured, learned or not assumed). The scheduler is made again with
    /// the new settings and told which paths are usable now; the `adaptive` scheduler learns
    /// its rates again.
    pub fn set_path_spec(
        &mut self,
        now: Time,
        path: PathId,
        weight: Option<u32>,
        rate_bps: Option<Option<u64>>,
        backup: Option<bool>,
    ) {
        let Some(p) = self.cfg.paths.get_mut(path.index()) else {
            return;
        };
        p.set_spec(weight, rate_bps, backup);
        self.new_scheduler(now, &[]);
    }

    /// Apply a changed configuration at `now` (a reload), keeping the session, its keys and
    /// sequence numbers, and what is held for delivery.
    ///
    /// Paths are matched by id (their position): one whose name is unchanged keeps its state,
    /// its settings (weight, rate, backup) and, if configured anew, its remote updated; one
    /// new at its id (added, or another name in a removed one's place) starts afresh and
    /// carries no data until the peer is heard on it; ids past the new count are gone. The
    /// scheduler is made again (a learning one learns again), and the hold time, keepalive
    /// interval and `dead` apply from now. Keys, `mtu`, the reorder window and the index slot
    /// stay as they were (the driver refuses to change them without a restart).
    ///
    /// When the number of paths changed and we initiate, a handshake that continues the
    /// session tells the peer at once (its initiation carries the count): a peer that follows
    /// our paths ([`ConnectionConfig::follow_peer_paths`]) takes the new count; one with paths
    /// of its own takes it once its own configuration has as many, until then refusing it
    /// while the session goes on.
    ///
    /// # Panics
    /// With no path or more than [`mpt_core::MAX_PATHS`] (the configuration refuses both).
    pub fn reconfigure(&mut self, now: Time, new: ConnectionConfig) {
        assert!(
            (1..=mpt_core::MAX_PATHS).contains(&new.paths.len()),
            "a connection has 1 to {} paths",
            mpt_core::MAX_PATHS
        );
        let before = self.paths.len();
        let (paths, fresh) = crate::path::reconfigured(&self.cfg.paths, &self.paths, &new, now);
        // packets waiting in the bundle of a path that is gone are lost with it, counted
        let orphaned: u64 = self.paths[paths.len().min(before)..]
            .iter()
            .map(|s| s.bundled_packets())
            .sum();
        self.counts.drops.add(DropReason::NoPath, orphaned);
        self.paths = paths;
        // per-class counters follow the classes by position: they start again when the
        // classes changed
        let (cfg, classes_changed) = self.cfg.reloaded(new);
        if classes_changed {
            self.tx.classes.reconfigured();
        }
        self.cfg = cfg;
        self.rx.release_equalised(now, true, None);
        self.rx.equal.resize(self.cfg.paths.len());
        let out = &mut self.rx.released;
        self.rx.reseq.reconfigure(
            now,
            self.cfg.paths.len(),
            self.cfg.reorder_timeout,
            &mut |p| out.push(p),
        );
        // `resend` may have changed
        self.update_repair_wait();
        self.new_scheduler(now, &fresh);
        if self.paths.len() != before && self.cfg.keys.initiate && self.session.theirs.is_some() {
            self.crypto.announce_paths = true;
            self.crypto.next_initiation = Some(now);
        }
    }

    /// The peer's initiation says it has `n` paths now, and we follow its paths: the paths
    /// kept keep their state; new ones wait to be heard on.
    pub(crate) fn follow_paths(&mut self, now: Time, n: usize) {
        let from = self.paths.len();
        self.reconfigure(now, self.cfg.with_peer_paths(n));
        self.events
            .push_back(Event::PeerPathsChanged { from, to: n });
    }

    /// The scheduler made again for the paths (after a change of their settings), told which
    /// are usable at `now`: not those in `fresh`, which wait to be heard on.
    fn new_scheduler(&mut self, now: Time, fresh: &[usize]) {
        self.tx.sched = self.cfg.scheduler();
        for (i, p) in self.paths.iter().enumerate() {
            let usable = !fresh.contains(&i) && p.usable();
            self.tx.sched.on_path_state(now, PathId(i as u8), usable);
        }
    }
}
