//! The receive side: opening and checking datagrams, the handshake, address learning, peer
//! restarts, fences, keepalive answers and the peer's reports.

use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::seal::{self, ReplayWindow, SealKey, COUNTER_LEN, SEALED_HEADER_LEN};
use mpt_core::wire::{Datagram, HeaderRepr, Kind, Report, HEADER_LEN};
use mpt_core::{PathId, Time};
use mpt_reseq::PacketMeta;

use crate::control::Pending;
use crate::hc::{Held, Order};
use crate::open::{Opened, Opener};
use crate::{Arrived, Connection, DropReason, Event, Incoming, Outcome, Payloads};
use mpt_core::hc::Reference;

/// On a path we send data on, keepalives are answered at most this often.
pub const BUSY_ACK_INTERVAL: Duration = Duration::from_secs(1);

impl<P> Connection<P> {
    /// A datagram arrived at `now` on `path` from `from`, in `buf`: opened in place when
    /// sealed, unless an [`Opener`] opened it already (`opened`). Control messages and
    /// handshakes are acted on here (answers are queued for [`Connection::poll_transmit`],
    /// events for [`Connection::poll_event`]). The inner packets data brought go to the
    /// resequencer, held as `payloads` makes them; what it releases is appended to
    /// `delivered`, in the order to write it to the TUN device (packets a datagram completes
    /// or makes again go before its own).
    pub fn handle_datagram(
        &mut self,
        now: Time,
        (path, from): (PathId, SocketAddr),
        buf: &mut [u8],
        opened: Option<Opened>,
        payloads: &mut impl Payloads<P>,
        delivered: &mut Vec<P>,
    ) -> Outcome {
        self.released.tick(now);
        let arrived = match opened {
            Some(o) => self.take_opened(now, path, from, buf, o),
            None => self.receive(now, path, from, buf),
        };
        let outcome = self.resequence_arrived(now, arrived, buf, payloads);
        let datagram = &*buf;
        self.take_delivered_keeping(payloads, |pl, p| pl.keep(p, datagram), delivered);
        outcome
    }

    /// The packets of what arrived in `datagram` go to the resequencer: first those put
    /// together from pieces, made again from a parity, or rebuilt from compressed entries,
    /// then the datagram's own.
    fn resequence_arrived(
        &mut self,
        now: Time,
        arrived: Result<Arrived, DropReason>,
        datagram: &[u8],
        payloads: &mut impl Payloads<P>,
    ) -> Outcome {
        let mut packets = 0;
        while let Some((data, bytes)) = self.assembled.pop_front() {
            let packet = &bytes[data.packet.clone()];
            let p = self.hold_as(&data, packet, payloads, |pl| pl.own(packet));
            self.push_data(now, &data, p, |p| p);
            packets += 1;
        }
        match arrived {
            Err(reason) => Outcome::Dropped(reason),
            Ok(Arrived::Handled) => Outcome::Handled,
            Ok(Arrived::Data(data)) => {
                let packet = &datagram[data.packet.clone()];
                let p = self.hold_as(&data, packet, payloads, |pl| {
                    pl.in_datagram(datagram, data.packet.clone())
                });
                self.push_data(now, &data, p, |p| payloads.keep(p, datagram));
                Outcome::Data(packets + 1)
            }
            Ok(Arrived::Bundle(entries)) => {
                // the packets of a bundle share a datagram: each gets a buffer of its own
                for data in &entries {
                    let packet = &datagram[data.packet.clone()];
                    let p = self.hold_as(data, packet, payloads, |pl| pl.own(packet));
                    self.push_data(now, data, p, |p| p);
                }
                Outcome::Data(packets + entries.len())
            }
        }
    }

    /// What the resequencer holds for `packet`, which arrived as `data`: a compressed body in
    /// a buffer of the connection's; a whole packet as `ready` makes it, with the reference it
    /// makes for its flow when it is TCP that goes in order, in one datagram, of
    /// [`mpt_core::hc::COMPRESS_FROM`] bytes or more ([`crate::hc`]; a peer of version 5 makes
    /// references of packets in pieces and short ones too).
    fn hold_as<Pl: Payloads<P>>(
        &mut self,
        data: &Incoming,
        packet: &[u8],
        payloads: &mut Pl,
        ready: impl FnOnce(&mut Pl) -> P,
    ) -> Held<P> {
        if packet.first() == Some(&mpt_core::hc::COMPRESSED_TCP) {
            let prefix = self.prefix();
            return self
                .released
                .packed(data.meta.seq, packet, prefix, || payloads.buffer());
        }
        let refers = match self.wire_version {
            ..=4 => false,
            5 => !data.express,
            _ => !data.express && !data.pieces && packet.len() >= mpt_core::hc::COMPRESS_FROM,
        };
        let reference = refers
            .then(|| Reference::of(data.meta.seq, packet))
            .flatten()
            .map(Box::new);
        let order = Order {
            seq: data.meta.seq,
            patient: !data.express && !mpt_core::hc::is_tcp(packet),
        };
        Held::Ready(ready(payloads), order, reference)
    }

    /// A data packet goes to the resequencer as `payload`, which `keep` turns into a payload
    /// of its own if the resequencer holds it. Bonded data from a path nearer than the
    /// farthest one up first waits out the difference ([`crate::equalise`]).
    fn push_data(
        &mut self,
        now: Time,
        data: &Incoming,
        payload: Held<P>,
        keep: impl FnOnce(P) -> P,
    ) {
        if self.equal.next_ready().is_some_and(|t| t <= now) {
            self.release_equalised(now, false, None);
        }
        if self.equal.waits(self.equalising(), data) {
            let payload = payload.kept(keep);
            self.equal
                .wait(now, data, payload, &mut self.reseq, &mut self.released);
        } else {
            self.resequence(now, data, payload, keep);
        }
    }

    /// `data` goes to the resequencer.
    pub(crate) fn resequence(
        &mut self,
        now: Time,
        data: &Incoming,
        payload: Held<P>,
        keep: impl FnOnce(P) -> P,
    ) {
        let out = &mut self.released;
        let keep = |h: Held<P>| h.kept(keep);
        if data.resent {
            self.reseq
                .push_resent(now, data.meta, payload, keep, &mut |p| out.push(p));
        } else if data.express {
            // ahead of bonded packets of its path that still wait: its path's progress must
            // not pass them
            let overtakes = self.equal.holds(data.meta.path.index());
            self.reseq
                .push_express_overtaking(now, data.meta, payload, overtakes, &mut |p| out.push(p));
        } else {
            self.reseq
                .push_keeping(now, data.meta, payload, keep, &mut |p| out.push(p));
        }
    }

    /// Bonded data waits to match the farthest path: configured so, and resequenced.
    pub(crate) fn equalising(&self) -> bool {
        self.cfg.equalise && self.cfg.reorder_window > 0
    }

    /// What waits to match the farthest path and is due at `now` (all of it with `all`; or
    /// only what came on path `only`) goes to the resequencer.
    pub(crate) fn release_equalised(&mut self, now: Time, all: bool, only: Option<usize>) {
        self.equal
            .release(now, (all, only), &mut self.reseq, &mut self.released);
    }

    /// A control message with header `h` fences its path: the peer's next sequences.
    fn fence(&mut self, now: Time, h: &HeaderRepr) {
        let at = (h.path, h.seq, h.path_seq);
        self.equal
            .fence(now, at, &mut self.reseq, &mut self.released);
    }

    fn receive(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
    ) -> Result<Arrived, DropReason> {
        let i = path.index();
        if i >= self.paths.len() {
            return Err(self.count(DropReason::PathMismatch));
        }
        if buf.len() > self.max_datagram() {
            return Err(self.count(DropReason::Oversize));
        }
        let (h, sealed) = match HeaderRepr::parse_outer(buf) {
            Ok(x) => x,
            Err(e) => return Err(self.count(DropReason::malformed(&e))),
        };
        if matches!(
            h.kind,
            Kind::Initiation | Kind::Response | Kind::CookieReply
        ) && !sealed
        {
            return self
                .take_handshake(now, path, from, buf)
                .map(|()| Arrived::Handled);
        }
        match (self.sealing(), sealed) {
            (true, false) => return Err(self.count(DropReason::Unauthenticated)),
            (false, true) => return Err(self.count(DropReason::Sealed)),
            _ => {}
        }
        if self.peer_session.is_none() {
            return Err(self.count(DropReason::UnknownSession));
        }
        let (start, end) = match (h.session == self.session, sealed) {
            (true, true) => self.open(buf)?,
            (true, false) => (0, buf.len()),
            (false, _) => self.other_session(now, path, from, h.session, sealed, buf)?,
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
    ) -> Result<Arrived, DropReason> {
        let d = match Datagram::parse(&buf[start..end]) {
            Ok(d) => d,
            Err(e) => return Err(self.count(DropReason::malformed(&e))),
        };
        let h = *d.header();
        if h.path != path {
            return Err(self.count(DropReason::PathMismatch));
        }
        // Of the session (authenticated, when sealing): the peer may have moved.
        self.learn_address(path, from);
        // what the peer says of the path before we count it heard: a path never up that the
        // peer does not hear us on comes up only once it does
        if let Datagram::Keepalive { flags, .. } = d {
            self.peer_view(now, path, flags & mpt_core::wire::KEEPALIVE_SILENT != 0);
        }
        self.heard(now, path);
        if matches!(
            d,
            Datagram::Data { .. } | Datagram::Bundle { .. } | Datagram::Continued { .. }
        ) {
            self.paths[path.index()].active_at = now;
        }
        match d {
            Datagram::Data { packet, .. } => {
                // the peer sends data on a path only while it hears us there
                if self.paths[path.index()].peer_silent {
                    self.peer_view(now, path, false);
                }
                let meta = PacketMeta {
                    path,
                    seq: h.seq,
                    path_seq: h.path_seq,
                    sent_us: h.timestamp,
                    len: packet.len(),
                };
                if h.kind != Kind::Resent {
                    self.parity_keep(now, &meta, packet);
                } else {
                    // it may have gone in pieces first: those that came are not waited for
                    self.reasm.forget(h.seq);
                }
                return Ok(Arrived::Data(Incoming {
                    meta,
                    packet: start + HEADER_LEN..end,
                    express: h.kind == Kind::Express,
                    resent: h.kind == Kind::Resent,
                    opens: h.kind == Kind::Express && crate::class::opens_tcp(packet),
                    pieces: false,
                }));
            }
            Datagram::Bundle { body, count, .. } => {
                if self.paths[path.index()].peer_silent {
                    self.peer_view(now, path, false);
                }
                let entries = mpt_core::wire::bundle_entries(body, h.seq);
                let out = self.take_entries(now, &h, body, start + HEADER_LEN, count, entries);
                return Ok(Arrived::Bundle(out));
            }
            Datagram::Continued {
                cont, body, count, ..
            } => {
                if self.paths[path.index()].peer_silent {
                    self.peer_view(now, path, false);
                }
                let at = mpt_core::wire::CONTINUATION_LEN;
                let piece = crate::reassembly::Piece::Rest {
                    seq: h.seq,
                    offset: cont.offset,
                    bytes: &body[at..at + cont.len],
                };
                self.take_piece(now, piece);
                let entries = mpt_core::wire::continued_entries(body, h.seq);
                let out = self.take_entries(now, &h, body, start + HEADER_LEN, count, entries);
                return Ok(Arrived::Bundle(out));
            }
            Datagram::Probe { size, .. } => {
                self.fence(now, &h);
                self.pending.push_back(Pending::ProbeAck { path, size });
            }
            Datagram::Nack { body, .. } => {
                self.fence(now, &h);
                if self.resending() {
                    self.take_nack(now, mpt_core::wire::nack_ranges(body));
                } else {
                    return Err(self.count(DropReason::Unexpected));
                }
            }
            Datagram::Parity { body, count, .. } => {
                // no fence: its sequence fields name its group
                self.take_parity(now, &h, body, count)?;
            }
            Datagram::ProbeAck { size, .. } => {
                self.fence(now, &h);
                let wire = usize::from(size) + self.seal_overhead();
                self.paths[path.index()].pmtu.acked(now, wire);
            }
            Datagram::Goodbye { .. } => {
                self.fence(now, &h);
                self.peer_closed(now);
            }
            Datagram::Keepalive { .. } => {
                self.fence(now, &h);
                if self.answer_keepalive(now, path) {
                    self.pending.push_back(Pending::Ack {
                        path,
                        echo: h.timestamp,
                        arrived: now,
                    });
                }
            }
            Datagram::KeepaliveAck { echo, hold_us, .. } => {
                self.fence(now, &h);
                self.rtt_sample(
                    path,
                    now.wire_micros().wrapping_sub(echo).wrapping_sub(hold_us),
                );
            }
            Datagram::Report { report, .. } => {
                self.fence(now, &h);
                self.take_report(now, &report);
            }
            Datagram::Handshake { .. } => {
                // Only valid plain, handled in `receive`.
                return Err(self.count(DropReason::Unexpected));
            }
        }
        Ok(Arrived::Handled)
    }

    /// The entries of a bundle (or of a continued datagram) with header `h`, whose body
    /// `body` starts at `at` in the buffer: whole packets for the resequencer, in order; a head
    /// piece to the reassembly. They take consecutive path sequences from the header's. When
    /// one is compressed (its headers rebuilt, so not in the buffer), all of them go as
    /// packets of their own (`assembled`), in the same order.
    fn take_entries(
        &mut self,
        now: Time,
        h: &HeaderRepr,
        body: &[u8],
        at: usize,
        count: usize,
        entries: mpt_core::wire::BundleEntries<'_>,
    ) -> Vec<Incoming> {
        let mut out: Vec<Incoming> = Vec::with_capacity(count);
        let mut owned = false;
        for (k, e) in entries.flatten().enumerate() {
            let meta = PacketMeta {
                path: h.path,
                seq: e.seq,
                path_seq: h.path_seq.wrapping_add(k as u16),
                sent_us: h.timestamp,
                len: e.len,
            };
            if e.is_head() {
                let piece = crate::reassembly::Piece::Head {
                    meta,
                    total: e.total,
                    bytes: &body[e.start..e.start + e.len],
                };
                self.take_piece(now, piece);
                continue;
            }
            let packet = e.packet(body);
            let meta = PacketMeta {
                len: packet.len(),
                ..meta
            };
            self.parity_keep(now, &meta, &packet);
            let data = Incoming {
                meta,
                packet: at + e.start..at + e.start + e.len,
                express: false,
                resent: false,
                opens: false,
                pieces: false,
            };
            if e.headers.is_some() && !owned {
                // the first compressed entry: those before it go as packets of their own too,
                // ahead of it
                owned = true;
                for d in out.drain(..) {
                    let bytes = body[d.packet.start - at..d.packet.end - at].to_vec();
                    let d = Incoming {
                        packet: 0..bytes.len(),
                        ..d
                    };
                    self.assembled.push_back((d, bytes));
                }
            }
            if owned {
                let data = Incoming {
                    packet: 0..packet.len(),
                    ..data
                };
                self.assembled.push_back((data, packet.into_owned()));
            } else {
                out.push(data);
            }
        }
        out
    }

    /// A data or express datagram arrived on `path`: kept while the path carries parity.
    pub(crate) fn parity_keep(&mut self, now: Time, meta: &PacketMeta, packet: &[u8]) {
        let rx = &mut self.paths[meta.path.index()].fec_rx;
        if rx.active(now) {
            rx.keep(meta.path_seq, meta.seq, packet);
        }
    }

    /// A parity over `k` packets arrived with `header`, their XOR `body`: a packet it makes
    /// again goes to the resequencer, and its gap, if the resequencer has not seen it yet
    /// (the group's last packet), is not asked for.
    fn take_parity(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        body: &[u8],
        k: usize,
    ) -> Result<(), DropReason> {
        if !self.parity() {
            return Err(self.count(DropReason::Unexpected));
        }
        let rx = &mut self.paths[header.path.index()].fec_rx;
        let Some((seq, path_seq, packet)) = rx.take_parity(
            now,
            (header, k, self.wire_version >= 5),
            body,
            &mut self.counts.parity,
        ) else {
            return Ok(());
        };
        let meta = PacketMeta {
            path: header.path,
            seq,
            path_seq,
            sent_us: now.wire_micros(),
            len: packet.len(),
        };
        let incoming = Incoming {
            meta,
            packet: 0..packet.len(),
            express: false,
            resent: true,
            opens: false,
            pieces: false,
        };
        self.assembled.push_back((incoming, packet));
        Ok(())
    }

    /// Sending a datagram of `size` bytes on `path` failed as too big (`EMSGSIZE`: the kernel
    /// knows the route's MTU is lower): discovery takes it at once, and the path's clock
    /// gets back the time it was charged for it. A search tries sizes above the interface's
    /// MTU first; charged, the refused probes ran a 128 kbit/s line's clock 300 ms ahead of a
    /// queue that was not there, and a stream starting on it lost half its packets for a
    /// second (dropped whole as if the queue were full).
    pub fn datagram_too_big(&mut self, now: Time, path: PathId, size: usize) {
        let Some(p) = self.paths.get_mut(path.index()) else {
            return;
        };
        p.pmtu.too_big(now, size);
        let outer = self.cfg.paths[path.index()].overhead;
        self.sched.on_unsent(now, path, size + outer);
    }

    /// Open a sealed datagram of the session in place. Returns where its plain form lies in
    /// `buf`.
    fn open(&mut self, buf: &mut [u8]) -> Result<(usize, usize), DropReason> {
        let c = &mut self.crypto;
        let r = match c.open.as_ref() {
            Some(key) => open_in_place(key, &mut c.replay, buf),
            None => Err(DropReason::UnknownSession),
        };
        r.map_err(|e| self.count(e))
    }

    /// A datagram whose session is not the current one: of the session a rekey replaced (in
    /// flight when it was replaced), or of the session we made as a rekey's responder (the
    /// peer has it: it becomes the current one). Anything else is dropped.
    fn other_session(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        session: u32,
        sealed: bool,
        buf: &mut [u8],
    ) -> Result<(usize, usize), DropReason> {
        let c = &mut self.crypto;
        if let Some(old) = c
            .previous
            .as_mut()
            .filter(|o| o.session == session && now < o.until)
        {
            let r = match (sealed, old.open.as_ref()) {
                (true, Some(key)) => open_in_place(key, &mut old.replay, buf),
                (false, None) => Ok((0, buf.len())),
                _ => Err(DropReason::UnknownSession),
            };
            return r.map_err(|e| self.count(e));
        }
        let Some(next) = c.next.take_if(|n| n.ours == session) else {
            return Err(self.count(DropReason::UnknownSession));
        };
        let mut replay = ReplayWindow::default();
        let r = match (sealed, next.keys.open.as_ref()) {
            (true, Some(key)) => open_in_place(key, &mut replay, buf),
            (false, None) => Ok((0, buf.len())),
            _ => Err(DropReason::UnknownSession),
        };
        match r {
            Ok(span) => {
                self.install(now, (path, from), next, true);
                self.crypto.replay = replay;
                Ok(span)
            }
            Err(e) => {
                self.crypto.next = Some(next);
                Err(self.count(e))
            }
        }
    }

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

    fn take_report(&mut self, now: Time, report: &Report<'_>) {
        if let Some(last) = self.report_at.replace(now) {
            let gap = now.saturating_since(last);
            self.report_gap = gap.max(self.report_gap * 7 / 8);
        }
        for e in report.entries() {
            let Some(p) = self.paths.get_mut(e.path.index()) else {
                continue;
            };
            p.peer_report = Some((now, e));
            self.sched.on_report(now, e.path, &e);
            p.fec_tx.take_report(now, &e);
            let queue_full = p.fec_tx.queue_full;
            p.pmtu
                .watch_delivery(now, (p.data_sent, p.srtt_us, queue_full), &e);
            p.pmtu.report(now, e.path_seq, e.lost);
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
}

/// Open a sealed datagram in place with `key`, checking and marking its counter in `replay`.
/// Returns where its plain form lies in `buf`.
fn open_in_place(
    key: &SealKey,
    replay: &mut ReplayWindow,
    buf: &mut [u8],
) -> Result<(usize, usize), DropReason> {
    let Some(low) = seal::counter_of(buf) else {
        return Err(DropReason::Truncated);
    };
    let counter = replay.expand(low);
    if replay.check(counter).is_err() {
        return Err(DropReason::Replayed);
    }
    let body = key
        .open(buf, counter)
        .map_err(|e| DropReason::unsealed(&e))?;
    replay.mark(counter);
    seal::unseal_in_place(buf);
    Ok((COUNTER_LEN, SEALED_HEADER_LEN + body))
}

/// Opening outside the lock ([`crate::Opener`]), and packets that came in pieces.
impl<P> Connection<P> {
    /// The current session's [`Opener`], once keys are agreed (sealing only).
    pub fn opener(&self) -> Option<Opener> {
        let c = &self.crypto;
        Some(Opener {
            key: c.open.clone()?,
            session: self.session,
            epoch: c.epoch,
            max_datagram: self.max_datagram(),
            highest: c.replay.highest(),
        })
    }

    fn take_opened(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
        opened: Opened,
    ) -> Result<Arrived, DropReason> {
        if path.index() >= self.paths.len() {
            return Err(self.count(DropReason::PathMismatch));
        }
        let (counter, body) = opened.result.map_err(|r| self.count(r))?;
        let c = &mut self.crypto;
        // Opened under the keys a rekey replaced since: of the old session, still taken.
        let replay = if c.epoch == opened.epoch {
            &mut c.replay
        } else if let Some(old) = c
            .previous
            .as_mut()
            .filter(|o| o.epoch == opened.epoch && now < o.until)
        {
            &mut old.replay
        } else {
            return Err(self.count(DropReason::UnknownSession));
        };
        if replay.check(counter).is_err() {
            return Err(self.count(DropReason::Replayed));
        }
        replay.mark(counter);
        seal::unseal_in_place(buf);
        self.dispatch(now, path, from, buf, COUNTER_LEN, SEALED_HEADER_LEN + body)
    }

    /// A piece of a packet: to the reassembly; a packet it completes goes to the resequencer
    /// before what else its datagram brought.
    pub(crate) fn take_piece(&mut self, now: Time, piece: crate::reassembly::Piece<'_>) {
        let max = usize::from(self.cfg.mtu);
        match self.reasm.add(now, max, piece) {
            Ok(Some((meta, bytes))) => {
                let len = bytes.len();
                self.assembled.push_back((
                    crate::Incoming {
                        meta,
                        packet: 0..len,
                        express: false,
                        resent: false,
                        opens: false,
                        pieces: true,
                    },
                    bytes,
                ));
            }
            Ok(None) => {}
            Err(reason) => {
                self.count(reason);
            }
        }
    }
}
