//! The receive side: checking datagrams, opening them (the keys are `CryptoState`'s, `open.rs`)
//! and handing each kind to what takes it: data to the [`crate::receiving::Receiver`],
//! bundles' entries to [`crate::reassembly::Assembled`], parity to its path's `FecRx`,
//! control messages here (reports, keepalives, resend requests, probes, goodbyes).

use std::net::SocketAddr;

use mpt_core::seal::{COUNTER_LEN, SEALED_HEADER_LEN};
use mpt_core::wire::{Datagram, HeaderRepr, Kind, HEADER_LEN};
use mpt_core::{PathId, Time};
use mpt_reseq::PacketMeta;

use crate::bundle::Entries;
use crate::open::{Opened, Opener, Other, Span};
use crate::pending::Pending;
use crate::{Arrived, Connection, DropReason, Incoming, Outcome, Payloads};

impl<P> Connection<P> {
    /// A datagram arrived at `now` on `path` from `from`, in `buf`: opened in place when
    /// sealed, unless an [`crate::Opener`] opened it already (`opened`). Control messages and
    /// handshakes are acted on here (answers are queued for [`Connection::poll_transmit`],
    /// events for [`Connection::poll_event`]). The inner packets data brought go to the
    /// resequencer, held as `payloads` makes them; what it releases is appended to
    /// `delivered`, in the order to write it to the TUN device (packets a datagram completes
    /// or makes again go before its own).
    pub fn handle_datagram(
        &mut self,
        now: Time,
        via: crate::Via,
        buf: &mut [u8],
        opened: Option<Opened>,
        payloads: &mut impl Payloads<P>,
        delivered: &mut Vec<P>,
    ) -> Outcome {
        let crate::Via { path, from } = via;
        self.rx.released.tick(now);
        let arrived = match opened {
            Some(o) => self.take_opened(now, path, from, buf, o),
            None => self.receive(now, path, from, buf),
        };
        let how = crate::receiving::Holding {
            caps: self.session.caps,
            prefix: self.prefix(),
            equalising: self.cfg.equalise && self.cfg.reorder_window > 0,
        };
        let outcome = self.rx.resequence_arrived(now, arrived, buf, payloads, how);
        let datagram = &*buf;
        self.take_delivered_keeping(payloads, |pl, p| pl.keep(p, datagram), delivered);
        outcome
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
        if self.session.theirs.is_none() {
            return Err(self.count(DropReason::UnknownSession));
        }
        let (start, end) = match (h.session == self.session.ours, sealed) {
            (true, true) => self.crypto.open(buf).map_err(|e| self.count(e))?,
            (true, false) => (0, buf.len()),
            (false, _) => self.other_session(now, path, from, h.session, sealed, buf)?,
        };
        self.dispatch(now, path, from, buf, start, end)
    }

    /// A datagram of `session` (`sealed` or not) that is not the current one, at `now`, on
    /// `path` from `from` ([`crate::crypto::CryptoState::other_session`]): of a session we
    /// made as a rekey's responder, it makes that one current.
    fn other_session(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        session: u32,
        sealed: bool,
        buf: &mut [u8],
    ) -> Result<Span, DropReason> {
        match self.crypto.other_session(now, session, sealed, buf) {
            Ok(Other::Previous(span)) => Ok(span),
            Ok(Other::Next { next, replay, span }) => {
                self.install(now, path, from, next, true);
                self.crypto.replay = replay;
                Ok(span)
            }
            Err(e) => Err(self.count(e)),
        }
    }

    /// The current session's [`Opener`], once keys are agreed (sealing only).
    pub fn opener(&self) -> Option<Opener> {
        self.crypto.opener(self.session.ours, self.max_datagram())
    }

    /// A datagram an [`Opener`] opened (`opened`) arrived at `now` on `path` from `from`.
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
        let body = self
            .crypto
            .accept_opened(now, opened, buf)
            .map_err(|e| self.count(e))?;
        self.dispatch(now, path, from, buf, COUNTER_LEN, SEALED_HEADER_LEN + body)
    }

    /// The entries `e` of a bundle (or of a continued datagram): the whole packets still in the
    /// buffer, for the resequencer in order ([`crate::reassembly::Assembled::take_entries`]).
    fn take_entries(&mut self, now: Time, e: Entries<'_>) -> Vec<Incoming> {
        let max = usize::from(self.cfg.mtu);
        let parity = &mut self.paths[e.header.path.index()].fec_rx;
        let taken = self.rx.assembled.take_entries(now, e, parity, max);
        if let Some(reason) = taken.dropped {
            self.count(reason);
        }
        taken.packets
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
            // the peer sends data on a path only while it hears us there
            if self.paths[path.index()].peer_silent {
                self.peer_view(now, path, false);
            }
        }
        // a bundle's or continued datagram's entries, its body at `start + HEADER_LEN`
        let entries = |body, count, entries| Entries {
            header: &h,
            body,
            at: start + HEADER_LEN,
            count,
            entries,
        };
        match d {
            Datagram::Data { packet, .. } => {
                let meta = PacketMeta {
                    path,
                    seq: h.seq,
                    path_seq: h.path_seq,
                    sent_us: h.timestamp,
                    len: packet.len(),
                };
                if h.kind != Kind::Resent {
                    self.paths[path.index()].fec_rx.arrived(now, &meta, packet);
                } else {
                    // it may have gone in pieces first: those that came are not waited for
                    self.rx.assembled.pieces.forget(h.seq);
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
                let e = entries(body, count, mpt_core::wire::bundle_entries(body, h.seq));
                return Ok(Arrived::Bundle(self.take_entries(now, e)));
            }
            Datagram::Continued {
                cont, body, count, ..
            } => {
                let at = mpt_core::wire::CONTINUATION_LEN;
                let piece = crate::reassembly::Piece::Rest {
                    seq: h.seq,
                    offset: cont.offset,
                    bytes: &body[at..at + cont.len],
                };
                let max = usize::from(self.cfg.mtu);
                if let Err(reason) = self.rx.assembled.take_piece(now, max, piece) {
                    self.count(reason);
                }
                let e = entries(body, count, mpt_core::wire::continued_entries(body, h.seq));
                return Ok(Arrived::Bundle(self.take_entries(now, e)));
            }
            control => self.take_control(now, &h, control)?,
        }
        Ok(Arrived::Handled)
    }

    /// A control datagram `d` with header `h` arrived (authentic, on its path).
    fn take_control(
        &mut self,
        now: Time,
        h: &HeaderRepr,
        d: Datagram<'_>,
    ) -> Result<(), DropReason> {
        let (h, path) = (*h, h.path);
        match d {
            Datagram::Probe { size, .. } => {
                self.rx.fence(now, &h);
                self.outbox
                    .pending
                    .push_back(Pending::ProbeAck { path, size });
            }
            Datagram::Nack { body, .. } => {
                self.rx.fence(now, &h);
                if !self.resending() {
                    return Err(self.count(DropReason::Unexpected));
                }
                if mpt_core::wire::nack_names(body) == mpt_core::wire::NACK_REFERENCES {
                    self.sending()
                        .take_reference_nack(now, mpt_core::wire::nack_references(body));
                } else {
                    self.sending()
                        .take_nack(now, mpt_core::wire::nack_ranges(body));
                }
            }
            Datagram::Parity { body, count, .. } => {
                // no fence: its sequence fields name its group
                if !self.parity() {
                    return Err(self.count(DropReason::Unexpected));
                }
                let parity = crate::fec::Parity {
                    header: &h,
                    k: count,
                    lengths: self.session.caps.parity_carries_lengths(),
                    body,
                };
                let rx = &mut self.paths[path.index()].fec_rx;
                let made = rx.repair(now, parity, &mut self.counts.parity);
                self.rx.assembled.ready.extend(made);
            }
            Datagram::ProbeAck { size, .. } => {
                self.rx.fence(now, &h);
                let wire = usize::from(size) + self.session.overhead();
                self.paths[path.index()].pmtu.acked(now, wire);
            }
            Datagram::Goodbye { .. } => {
                self.rx.fence(now, &h);
                self.peer_closed(now);
            }
            Datagram::Keepalive { .. } => {
                self.rx.fence(now, &h);
                if self.paths[path.index()].answer_keepalive(now) {
                    self.outbox.pending.push_back(Pending::Ack {
                        path,
                        echo: h.timestamp,
                        arrived: now,
                    });
                }
            }
            Datagram::KeepaliveAck { echo, hold_us, .. } => {
                self.rx.fence(now, &h);
                let rtt = now.wire_micros().wrapping_sub(echo).wrapping_sub(hold_us);
                self.paths[path.index()].rtt_sample(rtt);
            }
            Datagram::Report { report, .. } => {
                self.rx.fence(now, &h);
                self.take_report(now, &report);
            }
            Datagram::Handshake { .. }
            | Datagram::Data { .. }
            | Datagram::Bundle { .. }
            | Datagram::Continued { .. } => {
                // a handshake is only valid plain, handled in `receive`; data is dispatch's
                return Err(self.count(DropReason::Unexpected));
            }
        }
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
        self.tx.sched.on_unsent(now, path, size + outer);
    }

    /// The packets the resequencer released, in the order to deliver them, appended to `out`
    /// (those rebuilt from compressed headers in buffers `payloads` gives,
    /// [`Payloads::own`](crate::Payloads::own)).
    pub fn take_delivered(&mut self, payloads: &mut impl crate::Payloads<P>, out: &mut Vec<P>) {
        // (what was released outside a datagram's handling was held, so is its own)
        self.take_delivered_keeping(payloads, |_, p| p, out);
    }

    /// [`Connection::take_delivered`], where the packets that wait after their release are
    /// made their own by `keep` (those of a datagram being handled may lie in it).
    fn take_delivered_keeping<Pl: crate::Payloads<P>>(
        &mut self,
        payloads: &mut Pl,
        keep: impl Fn(&mut Pl, P) -> P,
        out: &mut Vec<P>,
    ) {
        let d = crate::receiving::Delivery {
            timeout: self.cfg.reorder_timeout,
            paths: &self.paths,
            resend: &self.resend,
            counts: &mut self.counts,
        };
        self.rx.take_delivered_keeping(payloads, keep, out, d);
    }

    /// Packets released that wait for a number given up before them, to be resent (they are
    /// not TCP: `ordered.rs`): now, and in all.
    pub fn waiting_in_order(&self) -> (usize, u64) {
        self.rx.released.waiting()
    }

    /// The peer's report came at `now`: each entry to the scheduler and its path.
    fn take_report(&mut self, now: Time, report: &mpt_core::wire::Report<'_>) {
        if let Some(last) = self.reports.heard_at.replace(now) {
            let gap = now.saturating_since(last);
            self.reports.gap = gap.max(self.reports.gap * 7 / 8);
        }
        for e in report.entries() {
            let Some(p) = self.paths.get_mut(e.path.index()) else {
                continue;
            };
            self.tx.sched.on_report(now, e.path, &e);
            if let Some(rtt) = p.take_report(now, &e) {
                p.rtt_sample(rtt);
            }
        }
    }
}
