//! Inner header compression on a connection ([`mpt_core::hc`]; `docs/protocol.md`,
//! "Compressed headers"): what the resequencer holds, and its release to the driver, where
//! compressed packets are rebuilt (and packets that are not TCP wait behind a loss:
//! [`crate::ordered`]).
//!
//! The receiver rebuilds a packet where the resequencer releases it, not where it arrives:
//! released packets are in global order, so a flow's reference comes before the packets
//! compressed against it, whichever paths they took and however those reordered. A reference
//! that was lost is released late, when it is resent (the resequencer does not hold the
//! packets behind a gap it asked for): the packets compressed against it wait for it (at most
//! [`AWAITING`] of them), and go on after it. A reference that never comes shows as a mismatch
//! (the packet is refused and counted), never as a wrong packet.

mod asks;
mod spares;

use std::time::Duration;

use mpt_core::hc::{Decompressor, Reference, Refused, MAX_HEADERS};
use mpt_core::Time;

use crate::held::{Held, Order};
use crate::ordered::{InOrder, Sink};
use crate::resend::KEEP_SETTLES;
use crate::{DropReason, Payloads};

/// How long packets that are not TCP wait for a number given up before them that will not be
/// sent again: a path may reorder its own datagrams (two batches sent from different CPUs into
/// a veth or a bond are handled in either order), and the gap that leaves is no loss.
pub const PATH_REORDER: Duration = Duration::from_millis(5);

/// A released packet on its way to the driver.
#[derive(Debug)]
enum Out<P> {
    Ready(P),
    /// Its bytes: the buffer's from `start` on.
    Rebuilt(Vec<u8>, usize),
}

/// Released packets on their way to the driver: those that wait made their own by `keep`,
/// rebuilt ones in the driver's buffers they were held in.
struct ToDriver<'a, Pl, K, P> {
    payloads: &'a mut Pl,
    keep: K,
    delivered: &'a mut Vec<P>,
}

impl<P, Pl: Payloads<P>, K: Fn(&mut Pl, P) -> P> Sink<Out<P>> for ToDriver<'_, Pl, K, P> {
    fn keep(&mut self, o: Out<P>) -> Out<P> {
        match o {
            Out::Ready(p) => Out::Ready((self.keep)(self.payloads, p)),
            rebuilt => rebuilt,
        }
    }

    fn give(&mut self, o: Out<P>) {
        match o {
            Out::Ready(p) => self.delivered.push(p),
            Out::Rebuilt(buf, start) => {
                let end = buf.len();
                self.delivered.push(self.payloads.adopt(buf, start..end));
            }
        }
    }
}

/// What the resequencer released, in order, with compressed packets rebuilt as they come.
#[derive(Debug)]
pub(crate) struct Released<P> {
    /// Released, with their global sequence numbers and whether they wait for a number
    /// given up before them ([`crate::ordered`]).
    out: Vec<(Order, Out<P>)>,
    /// Global sequence numbers the resequencer gave up lately, to be waited for.
    pub(crate) given_up: Vec<u32>,
    /// The packets that wait for them.
    order: InOrder<Out<P>>,
    /// Packets that waited when the peer's session was new: delivered first, in order.
    flushed: Vec<Out<P>>,
    rx: Decompressor,
    /// Buffers of bodies refused and boxes of references stored, used again.
    spares: spares::Spares,
    /// Bodies refused: their reference lost or replaced, or malformed.
    pub(crate) refused: [u64; 2],
    /// Compressed packets waiting for their reference: since when, its global sequence
    /// number, and the packet.
    awaiting: std::collections::VecDeque<(Time, u32, Packed)>,
    /// References that packets named and that have not come, to ask the sender for by their
    /// global sequence numbers ([`Released::take_asks`]).
    asks: asks::Asks,
    /// The connection's clock, as it last told ([`Released::tick`]).
    now: Time,
}

impl<P> Default for Released<P> {
    fn default() -> Self {
        Released {
            out: Vec::new(),
            given_up: Vec::new(),
            order: InOrder::default(),
            flushed: Vec::new(),
            rx: Decompressor::new(),
            spares: spares::Spares::default(),
            refused: [0; 2],
            awaiting: Default::default(),
            asks: Default::default(),
            now: Time::ZERO,
        }
    }
}

/// A compressed body held: its global sequence number, and the body in `buf` after `room`
/// bytes.
#[derive(Debug)]
struct Packed {
    seq: u32,
    buf: Vec<u8>,
    room: usize,
}
/// Compressed packets that wait for a reference that has not come: past it, the oldest is
/// refused.
pub const AWAITING: usize = 256;
/// How long a compressed packet waits for its reference (a resend's round trip).
pub const AWAIT_FOR: Duration = Duration::from_millis(500);

impl<P> Released<P> {
    /// References the decompressor keeps, and compressed packets waiting for theirs.
    pub(crate) fn holds(&self) -> (usize, usize) {
        (self.rx.kept(), self.awaiting.len())
    }

    /// `body` held as [`Held::Packed`], after `prefix` and [`MAX_HEADERS`] bytes of room (in
    /// a buffer of those refused, or `fresh`), so that the rebuilt packet has `prefix` bytes
    /// before it.
    pub(crate) fn packed(
        &mut self,
        seq: u32,
        body: &[u8],
        prefix: usize,
        fresh: impl FnOnce() -> Vec<u8>,
    ) -> Held<P> {
        let mut buf = self.spares.buf(fresh);
        let room = prefix + MAX_HEADERS;
        buf.resize(room, 0);
        buf.extend_from_slice(body);
        Held::Packed {
            seq,
            body: buf,
            room,
        }
    }

    /// `r` in a box, one of those stored before if there is one.
    pub(crate) fn boxed(&mut self, r: Reference) -> Box<Reference> {
        self.spares.boxed(r)
    }

    /// The resequencer released `h`, in global order (but for packets resent): a whole
    /// packet's reference is stored, and the packets that waited for it go on after it; a
    /// packed body is rebuilt against its flow's, or waits for it if it has not come.
    pub(crate) fn push(&mut self, h: Held<P>) {
        match h {
            Held::Ready(p, o, r) => {
                self.out.push((o, Out::Ready(p)));
                if let Some(r) = r {
                    self.release_awaiting(&r);
                    self.rx.store(Reference::clone(&r));
                    self.spares.unbox(r);
                }
            }
            Held::Packed { seq, body, room } => self.rebuild(
                Packed {
                    seq,
                    buf: body,
                    room,
                },
                None,
            ),
        }
    }

    /// Rebuild `p` against its reference: `against`, or one the decompressor keeps.
    fn rebuild(&mut self, p: Packed, against: Option<&Reference>) {
        let Packed { seq, mut buf, room } = p;
        let mut headers = mpt_core::hc::Headers::new();
        match self
            .rx
            .rebuild_against(against, seq, &buf[room..], &mut headers)
        {
            Ok(skip) => {
                // the headers go into the room before the payload
                let start = room + skip - headers.len();
                buf[start..room + skip].copy_from_slice(&headers);
                let o = Order {
                    seq,
                    patient: false,
                };
                self.out.push((o, Out::Rebuilt(buf, start)));
            }
            Err(Refused::NoReference) => match self.rx.awaits(seq, &buf[room..]) {
                Some(want) => {
                    self.asks.ask(self.now, want);
                    if self.awaiting.len() >= AWAITING {
                        if let Some((.., old)) = self.awaiting.pop_front() {
                            self.refused[0] += 1;
                            self.spares.recycle(old.buf);
                        }
                    }
                    let p = Packed { seq, buf, room };
                    self.awaiting.push_back((self.now, want, p));
                }
                None => {
                    self.refused[0] += 1;
                    self.spares.recycle(buf);
                }
            },
            Err(Refused::Malformed) => {
                self.refused[1] += 1;
                self.spares.recycle(buf);
            }
        }
    }

    /// The references to ask the sender for since the last call ([`asks`]).
    pub(crate) fn take_asks(&mut self) -> Vec<u32> {
        self.asks.take()
    }

    /// Reference `r` came: the packets that waited for it, rebuilt against it (whether or not
    /// the decompressor keeps it: one resent late may be older than all it keeps).
    fn release_awaiting(&mut self, r: &Reference) {
        if self.awaiting.is_empty() {
            return;
        }
        let gseq = r.gseq();
        let mut waited = std::mem::take(&mut self.awaiting);
        waited.retain_mut(|(_, want, p)| {
            if *want != gseq {
                return true;
            }
            let p = Packed {
                buf: std::mem::take(&mut p.buf),
                ..*p
            };
            self.rebuild(p, Some(r));
            false
        });
        waited.append(&mut self.awaiting);
        self.awaiting = waited;
    }

    /// The time is `now`: packets that waited [`AWAIT_FOR`] for their reference are refused.
    pub(crate) fn tick(&mut self, now: Time) {
        self.now = now;
        while let Some(&(since, ..)) = self.awaiting.front() {
            if now.saturating_since(since) < AWAIT_FOR {
                break;
            }
            if let Some((.., p)) = self.awaiting.pop_front() {
                self.refused[0] += 1;
                self.spares.recycle(p.buf);
            }
        }
    }

    /// The released packets, appended to `delivered` in order (rebuilt ones in the driver's
    /// buffers they were held in), but for those that wait for a number given up before them
    /// (for at most `wait` after it was given up, [`crate::ordered`]), made their own by
    /// `keep` (they may lie in the datagram being handled); returns how many.
    pub(crate) fn take<Pl: Payloads<P>>(
        &mut self,
        wait: Duration,
        payloads: &mut Pl,
        keep: impl Fn(&mut Pl, P) -> P,
        delivered: &mut Vec<P>,
    ) -> usize {
        let before = delivered.len();
        let mut sink = ToDriver {
            payloads,
            keep,
            delivered,
        };
        for o in self.flushed.drain(..) {
            sink.give(o);
        }
        let order = &mut self.order;
        order.expire(self.now, &mut sink);
        if !self.given_up.is_empty() {
            order.given_up(&self.given_up, self.now + wait, &mut sink);
            self.given_up.clear();
        }
        let mut out = std::mem::take(&mut self.out);
        for (o, p) in out.drain(..) {
            order.pass(o.seq, o.patient, p, &mut sink);
        }
        self.out = out;
        sink.delivered.len() - before
    }

    /// The connection's clock, as it last told.
    pub(crate) fn now(&self) -> Time {
        self.now
    }

    /// When packets that wait for a number given up before them go on without it.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.order.next_deadline()
    }

    /// Packets that wait for a number given up before them now, and that waited in all.
    pub(crate) fn waiting(&self) -> (usize, u64) {
        self.order.waiting()
    }

    /// The refused bodies since the last call, by reason, for the connection's counts.
    pub(crate) fn take_refused(&mut self) -> [(DropReason, u64); 2] {
        let [missing, malformed] = std::mem::take(&mut self.refused);
        [
            (DropReason::NoReference, missing),
            (DropReason::NotIp, malformed),
        ]
    }

    /// A new session of the peer's: its references are gone, and what waited for one.
    pub(crate) fn reset(&mut self) {
        self.flushed.extend(self.order.reset());
        self.given_up.clear();
        self.rx.reset();
        self.refused[0] += self.awaiting.len() as u64;
        self.awaiting.clear();
        self.asks.clear();
    }
}

impl<P> Extend<Held<P>> for Released<P> {
    fn extend<I: IntoIterator<Item = Held<P>>>(&mut self, iter: I) {
        for h in iter {
            self.push(h);
        }
    }
}

impl<P> Released<P> {
    /// How long packets wait for a number given up before them (`wait`: the hold time): the
    /// hold time only if its packet may come again (lost on a path whose packets the peer
    /// keeps (`resend`), and whose round trip (`rtt` of a path's index, in µs) is within the
    /// hold time: the peer sends none older); otherwise [`PATH_REORDER`], in case its path
    /// only reordered it.
    pub(crate) fn given_up_wait(
        &self,
        wait: Duration,
        resend: &crate::resend::Resend,
        rtt: impl Fn(usize) -> Option<u64>,
    ) -> Duration {
        let rtt = |p: usize| rtt(p).map(Duration::from_micros);
        let near = |p: usize| rtt(p).is_some_and(|rtt| rtt < wait);
        let settled = |p: usize| rtt(p).map_or(wait, |rtt| (rtt + KEEP_SETTLES).min(wait));
        if resend.peer_keeps(self.now(), settled, near) {
            wait
        } else {
            PATH_REORDER.min(wait)
        }
    }
}
