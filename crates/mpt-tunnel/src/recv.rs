//! The receive side: opening and checking datagrams, the handshake, address learning, peer
//! restarts, fences, keepalive answers and the peer's reports.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mpt_core::seal::{self, ReplayWindow, COUNTER_LEN, SEALED_HEADER_LEN};
use mpt_core::wire::{Datagram, HeaderRepr, HelloRepr, Kind, Report, HEADER_LEN};
use mpt_core::{PathId, Time};
use mpt_reseq::PacketMeta;

use crate::liveness::Change;
use crate::send::Pending;
use crate::{DropReason, Endpoint, Event, Incoming, Outcome};

/// Least time between two hellos sent in answer to requests on one path: a flood of replayed
/// requests costs the peer at most this many answers.
pub const HELLO_REPLY_GAP: Duration = Duration::from_millis(20);
/// On a path we send data on, keepalives are answered at most this often.
pub const BUSY_ACK_INTERVAL: Duration = Duration::from_secs(1);

impl<P> Endpoint<P> {
    /// A datagram arrived at `now` on `path` from `from`, in `buf` (opened in place when
    /// sealed). Control messages and hellos are acted on here (answers are queued for
    /// [`Endpoint::poll_transmit`], packets a fence releases for
    /// [`Endpoint::take_delivered`]); data is returned for [`Endpoint::push_data`].
    pub fn handle_datagram(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
    ) -> Outcome {
        Outcome::of(self.receive(now, path, from, buf))
    }

    /// A data packet from [`Outcome::Data`] goes to the resequencer as `payload`, which
    /// `keep` turns into a payload of its own if the resequencer holds it (the receive buffer
    /// `payload` points into is reused after the batch).
    pub fn push_data(&mut self, now: Time, data: &Incoming, payload: P, keep: impl FnOnce(P) -> P) {
        let out = &mut self.released;
        self.reseq
            .push_keeping(now, data.meta, payload, keep, &mut |p| out.push(p));
    }

    fn receive(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
    ) -> Result<Option<Incoming>, DropReason> {
        let i = path.index();
        if i >= self.paths.len() {
            return Err(self.count(DropReason::PathMismatch));
        }
        if buf.len() > self.max_datagram() {
            return Err(self.count(DropReason::Oversize));
        }
        let (start, end) = if self.sealing() {
            match self.open(now, path, buf)? {
                Some(range) => range,
                None => return Ok(None), // a hello
            }
        } else {
            // Plain mode never moves a path's peer: the configured address is the only one.
            if from != self.cfg.paths[i].remote {
                return Err(self.count(DropReason::UnknownSource));
            }
            (0, buf.len())
        };
        self.dispatch(now, path, from, buf, start, end)
    }

    /// An authentic (or, without encryption, accepted) datagram, its plain form at
    /// `buf[start..end]`: parse it and act on it.
    pub(crate) fn dispatch(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &[u8],
        start: usize,
        end: usize,
    ) -> Result<Option<Incoming>, DropReason> {
        let i = path.index();
        let d = match Datagram::parse(&buf[start..end]) {
            Ok(d) => d,
            Err(e) => return Err(self.count(DropReason::malformed(&e))),
        };
        let h = *d.header();
        if h.path != path {
            return Err(self.count(DropReason::PathMismatch));
        }
        if self.sealing() {
            // Authenticated, from the agreed session: the peer may have moved.
            let old = self.paths[i].remote;
            if old != from {
                self.paths[i].remote = from;
                self.events.push_back(Event::AddressChanged {
                    path,
                    old,
                    new: from,
                });
            }
        } else {
            self.plain_session(now, path, h.session);
        }
        self.heard(now, path);
        let out = &mut self.released;
        let mut release = |p| out.push(p);
        match d {
            Datagram::Data { packet, .. } => {
                return Ok(Some(Incoming {
                    meta: PacketMeta {
                        path,
                        seq: h.seq,
                        path_seq: h.path_seq,
                        sent_us: h.timestamp,
                        len: packet.len(),
                    },
                    packet: start + HEADER_LEN..end,
                }));
            }
            Datagram::Goodbye { .. } => {
                self.reseq.fence(now, path, h.seq, h.path_seq, &mut release);
                self.peer_closed(now);
            }
            Datagram::Keepalive { .. } => {
                self.reseq.fence(now, path, h.seq, h.path_seq, &mut release);
                if self.answer_keepalive(now, path) {
                    self.pending.push_back(Pending::Ack {
                        path,
                        echo: h.timestamp,
                        arrived: now,
                    });
                }
            }
            Datagram::KeepaliveAck { echo, hold_us, .. } => {
                self.reseq.fence(now, path, h.seq, h.path_seq, &mut release);
                self.rtt_sample(
                    path,
                    now.wire_micros().wrapping_sub(echo).wrapping_sub(hold_us),
                );
            }
            Datagram::Report { report, .. } => {
                self.reseq.fence(now, path, h.seq, h.path_seq, &mut release);
                self.take_report(now, &report);
            }
            Datagram::Hello { .. } => {
                // Only valid sealed with the handshake key, handled in `open`.
                return Err(self.count(DropReason::Unexpected));
            }
        }
        Ok(None)
    }

    /// Without encryption, the session id in the headers tells a peer that restarted.
    fn plain_session(&mut self, now: Time, path: PathId, session: u32) {
        match self.peer_session {
            Some(s) if s == session => {}
            Some(s) => {
                self.reopen_closed(now);
                self.reseq.reset();
                self.peer_session = Some(session);
                self.peer_restarts += 1;
                self.events.push_back(Event::PeerRestarted {
                    old: Some(s),
                    session,
                    cipher: None,
                });
            }
            None => {
                self.peer_session = Some(session);
                self.events.push_back(Event::PeerHeard { path, session });
            }
        }
    }

    /// Open a sealed datagram in place. Returns where its plain form lies in `buf`, or `None`
    /// for a hello (handled here).
    fn open(
        &mut self,
        now: Time,
        path: PathId,
        buf: &mut [u8],
    ) -> Result<Option<(usize, usize)>, DropReason> {
        let (h, sealed) = match HeaderRepr::parse_outer(buf) {
            Ok(x) => x,
            Err(e) => return Err(self.count(DropReason::malformed(&e))),
        };
        if !sealed {
            return Err(self.count(DropReason::Unauthenticated));
        }
        if h.kind == Kind::Hello {
            return self.take_hello(now, path, buf).map(|()| None);
        }
        let peer_session = self.peer_session;
        let Some(c) = self.crypto.as_mut() else {
            return Err(self.count(DropReason::Unauthenticated));
        };
        let Some(key) = c.open.as_ref().filter(|_| peer_session == Some(h.session)) else {
            return Err(self.count(DropReason::UnknownSession));
        };
        let Some(counter) = seal::counter_of(buf) else {
            return Err(self.count(DropReason::Truncated));
        };
        if c.replay.check(counter).is_err() {
            return Err(self.count(DropReason::Replayed));
        }
        let body = match key.open(buf) {
            Ok(n) => n,
            Err(e) => return Err(self.count(DropReason::unsealed(&e))),
        };
        c.replay.mark(counter);
        seal::unseal_in_place(buf);
        Ok(Some((COUNTER_LEN, SEALED_HEADER_LEN + body)))
    }

    /// A sealed hello arrived on `path`: run the handshake, install new session keys, answer.
    fn take_hello(&mut self, now: Time, path: PathId, buf: &mut [u8]) -> Result<(), DropReason> {
        let Some(c) = self.crypto.as_ref() else {
            return Err(self.count(DropReason::Unexpected));
        };
        let body = match c.hello_key.open(buf) {
            Ok(n) => n,
            Err(_) => return Err(self.count(DropReason::BadTag)),
        };
        seal::unseal_in_place(buf);
        let (header, hello) = match Datagram::parse(&buf[COUNTER_LEN..SEALED_HEADER_LEN + body]) {
            Ok(Datagram::Hello { header, hello }) => (header, hello),
            Ok(_) => return Ok(()),
            Err(e) => return Err(self.count(DropReason::malformed(&e))),
        };
        if header.path != path {
            return Err(self.count(DropReason::PathMismatch));
        }
        let next_challenge = self.random();
        let Some(c) = self.crypto.as_mut() else {
            return Ok(());
        };
        match c.hs.on_hello(header.session, &hello, next_challenge) {
            seal::HelloOutcome::Reflected => Err(self.count(DropReason::BadHello)),
            seal::HelloOutcome::Accepted { install, reply } => {
                if install {
                    self.install_keys(now, path, &hello);
                }
                if let Some(reply) = reply {
                    self.answer_hello(now, path, reply);
                }
                Ok(())
            }
        }
    }

    /// The handshake agreed on a new peer: derive and install its session keys.
    fn install_keys(&mut self, now: Time, path: PathId, hello: &HelloRepr) {
        let Some(c) = self.crypto.as_mut() else {
            return;
        };
        let Some(peer) = c.hs.peer() else { return };
        let cipher = c.choice.agree(c.offer_aes, hello.offers_aes());
        let keys = seal::session_keys(&c.psk, cipher, c.hs.random(), &peer.random);
        c.open = Some(Arc::new(keys.rx));
        c.epoch += 1;
        c.cipher = Some(cipher);
        c.replay = ReplayWindow::default();
        self.seal = Some(Arc::new(keys.tx));
        self.counter = 0;
        let event = match self.peer_session {
            Some(old) => {
                self.reseq.reset();
                self.peer_restarts += 1;
                Event::PeerRestarted {
                    old: Some(old),
                    session: peer.session,
                    cipher: Some(cipher),
                }
            }
            None => Event::PeerAuthenticated {
                path,
                session: peer.session,
                cipher,
            },
        };
        self.events.push_back(event);
        self.peer_session = Some(peer.session);
        self.reopen_closed(now);
    }

    /// Answer a hello that asked for one, at most once per [`HELLO_REPLY_GAP`] per path.
    fn answer_hello(&mut self, now: Time, path: PathId, reply: HelloRepr) {
        let sent = &mut self.paths[path.index()].hello_sent;
        if sent.is_none_or(|t| now - t >= HELLO_REPLY_GAP) {
            *sent = Some(now);
            self.pending
                .push_back(Pending::Hello { path, hello: reply });
        }
    }

    fn take_report(&mut self, now: Time, report: &Report<'_>) {
        for e in report.entries() {
            let Some(p) = self.paths.get_mut(e.path.index()) else {
                continue;
            };
            p.peer_report = Some((now, e));
            self.sched.on_report(now, e.path, &e);
            if e.echo != 0 {
                let rtt = now
                    .wire_micros()
                    .wrapping_sub(e.echo)
                    .wrapping_sub(e.echo_age_us);
                self.rtt_sample(e.path, rtt);
            }
        }
    }

    /// Whether to answer a keepalive the peer sent on `path` at `now`. Always, unless we sent
    /// data on the path since the last answer and that was less than [`BUSY_ACK_INTERVAL`]
    /// ago: the peer hears the path alive from our data, and an answer per keepalive would
    /// only cost the busy direction (on a 64 kbit/s line, a tenth of it); one a second still
    /// gives the peer its RTT.
    fn answer_keepalive(&mut self, now: Time, path: PathId) -> bool {
        let p = &mut self.paths[path.index()];
        let busy = p.acked_data != p.data_sent;
        let since = p.acked_at.map_or(Duration::MAX, |t| now - t);
        if busy && since < BUSY_ACK_INTERVAL {
            return false;
        }
        p.acked_data = p.data_sent;
        p.acked_at = Some(now);
        true
    }

    /// Fold an RTT sample (µs) into the path's smoothed RTT; absurd values are ignored.
    fn rtt_sample(&mut self, path: PathId, rtt: u32) {
        if rtt >= 60_000_000 {
            return;
        }
        let p = &mut self.paths[path.index()];
        let rtt = u64::from(rtt);
        p.srtt_us = Some(p.srtt_us.map_or(rtt, |old| (old * 7 + rtt) / 8));
    }

    /// The peer said goodbye: every path is down at once.
    fn peer_closed(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if !self.paths[i].live.peer_closed() {
                continue;
            }
            self.path_went_down(now, PathId(i as u8), crate::DownReason::PeerClosed);
        }
    }

    /// `path` went down (its liveness says so already): the scheduler leaves it, the
    /// resequencer stops waiting for it, and the driver hears why.
    pub(crate) fn path_went_down(&mut self, now: Time, path: PathId, reason: crate::DownReason) {
        self.sched.on_path_state(now, path, false);
        let out = &mut self.released;
        self.reseq.path_down(now, path, &mut |p| out.push(p));
        self.events.push_back(Event::PathDown { path, reason });
    }

    /// A new peer session: paths its predecessor closed with a goodbye are used again.
    fn reopen_closed(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if self.paths[i].live.reopen() {
                let path = PathId(i as u8);
                self.sched.on_path_state(now, path, true);
                self.events.push_back(Event::PathUp { path, again: true });
            }
        }
    }

    /// Something valid arrived on `path`.
    fn heard(&mut self, now: Time, path: PathId) {
        let keepalive = self.keepalive();
        match self.paths[path.index()].live.heard(now, keepalive) {
            Change::None => {}
            Change::Up => self.events.push_back(Event::PathUp { path, again: false }),
            Change::Recovered => {
                self.sched.on_path_state(now, path, true);
                self.events.push_back(Event::PathUp { path, again: true });
            }
        }
    }
}
