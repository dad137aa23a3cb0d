//! The receive side's own state ([`Receiver`]): the resequencer, packets made whole before
//! it, what it released, and bonded data waiting to match the farthest path.

use mpt_core::hc::Reference;
use mpt_core::wire::{Capabilities, HeaderRepr};
use mpt_core::Time;
use mpt_reseq::Resequencer;

use crate::counts::Counts;
use crate::held::{Held, Order};
use crate::path::PathState;
use crate::resend::Resend;
use crate::{Arrived, DropReason, Incoming, Outcome, Payloads};

/// What arrived and waits: `P` is how the driver holds a received inner packet.
pub(crate) struct Receiver<P> {
    /// Puts the bonded packets back in order.
    pub(crate) reseq: Resequencer<Held<P>>,
    /// Packets that came in pieces, waiting for the rest, and packets made whole
    /// ([`crate::reassembly::Assembled`]).
    pub(crate) assembled: crate::reassembly::Assembled,
    /// Packets the resequencer released (compressed ones rebuilt), for
    /// [`crate::Connection::take_delivered`].
    pub(crate) released: crate::hc::Released<P>,
    /// Bonded data waiting to match the farthest path ([`crate::equalise`]).
    pub(crate) equal: crate::equalise::Equaliser<Held<P>>,
}

impl<P> Receiver<P> {
    /// Nothing received yet: a resequencer set by `reseq`.
    pub(crate) fn new(reseq: mpt_reseq::Config) -> Receiver<P> {
        let paths = reseq.paths;
        Receiver {
            reseq: Resequencer::new(reseq),
            assembled: Default::default(),
            released: Default::default(),
            equal: crate::equalise::Equaliser::new(paths),
        }
    }
}

/// How a received packet is held: the session's capabilities (which packets are their flows'
/// references), where the inner packet starts in a buffer, and whether bonded data waits to
/// match the farthest path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holding {
    pub(crate) caps: Capabilities,
    pub(crate) prefix: usize,
    pub(crate) equalising: bool,
}

/// What taking the released packets needs besides the receiver: the hold time, the paths'
/// round trips, whether the peer keeps what it sent (for a number given up), and the counts.
pub(crate) struct Delivery<'a> {
    pub(crate) timeout: std::time::Duration,
    pub(crate) paths: &'a [PathState],
    pub(crate) resend: &'a Resend,
    pub(crate) counts: &'a mut Counts,
}

/// Received packets on their way to the resequencer, and out of it.
impl<P> Receiver<P> {
    /// The packets of what arrived in `datagram` go to the resequencer: first those put
    /// together from pieces, made again from a parity, or rebuilt from compressed entries,
    /// then the datagram's own.
    pub(crate) fn resequence_arrived(
        &mut self,
        now: Time,
        arrived: Result<Arrived, DropReason>,
        datagram: &[u8],
        payloads: &mut impl Payloads<P>,
        how: Holding,
    ) -> Outcome {
        let mut packets = 0;
        while let Some((data, bytes)) = self.assembled.ready.pop_front() {
            let packet = &bytes[data.packet.clone()];
            let p = self.hold_as(&data, packet, payloads, how, |pl| pl.own(packet));
            self.push_data(now, &data, p, how, |p| p);
            packets += 1;
        }
        match arrived {
            Err(reason) => Outcome::Dropped(reason),
            Ok(Arrived::Handled) => Outcome::Handled,
            Ok(Arrived::Data(data)) => {
                let packet = &datagram[data.packet.clone()];
                let p = self.hold_as(&data, packet, payloads, how, |pl| {
                    pl.in_datagram(datagram, data.packet.clone())
                });
                self.push_data(now, &data, p, how, |p| payloads.keep(p, datagram));
                Outcome::Data(packets + 1)
            }
            Ok(Arrived::Bundle(entries)) => {
                // the packets of a bundle share a datagram: each gets a buffer of its own
                for data in &entries {
                    let packet = &datagram[data.packet.clone()];
                    let p = self.hold_as(data, packet, payloads, how, |pl| pl.own(packet));
                    self.push_data(now, data, p, how, |p| p);
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
        how: Holding,
        ready: impl FnOnce(&mut Pl) -> P,
    ) -> Held<P> {
        if mpt_core::hc::is_compressed(packet) {
            return self
                .released
                .packed(data.meta.seq, packet, how.prefix, || payloads.buffer());
        }
        let caps = &how.caps;
        let refers = match (caps.keeps_references(), caps.references_whole_bulk_only()) {
            (false, _) => false,
            (true, false) => !data.express,
            (true, true) => {
                !data.express && !data.pieces && packet.len() >= mpt_core::hc::COMPRESS_FROM
            }
        };
        let reference = refers
            .then(|| Reference::of(data.meta.seq, packet))
            .flatten()
            .map(|r| self.released.boxed(r));
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
        how: Holding,
        keep: impl FnOnce(P) -> P,
    ) {
        if self.equal.next_ready().is_some_and(|t| t <= now) {
            self.release_equalised(now, false, None);
        }
        let steady = payload.steady();
        if self.equal.waits(how.equalising, data, steady) {
            let payload = payload.kept(keep);
            self.equal.wait(
                now,
                data,
                steady,
                payload,
                &mut self.reseq,
                &mut self.released,
            );
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
            // not pass them, and the packets sent before it on farther paths come as much
            // later than it as its path's bonded packets wait
            let i = data.meta.path.index();
            let how = (self.equal.holds(i), self.equal.bonded_wait(i));
            self.reseq
                .push_express_overtaking(now, data.meta, payload, how, &mut |p| out.push(p));
        } else {
            self.reseq
                .push_keeping(now, data.meta, payload, keep, &mut |p| out.push(p));
        }
    }

    /// What waits to match the farthest path and is due at `now` (all of it with `all`; or
    /// only what came on path `only`) goes to the resequencer.
    pub(crate) fn release_equalised(&mut self, now: Time, all: bool, only: Option<usize>) {
        self.equal
            .release(now, all, only, &mut self.reseq, &mut self.released);
    }

    /// A control message with header `h` fences its path: the peer's next sequences.
    pub(crate) fn fence(&mut self, now: Time, h: &HeaderRepr) {
        let (reseq, out) = (&mut self.reseq, &mut self.released);
        self.equal.fence(now, h.path, h.seq, h.path_seq, reseq, out);
    }

    /// [`crate::Connection::take_delivered`], where the packets that wait after their release are
    /// made their own by `keep` (those of a datagram being handled may lie in it).
    pub(crate) fn take_delivered_keeping<Pl: crate::Payloads<P>>(
        &mut self,
        payloads: &mut Pl,
        keep: impl Fn(&mut Pl, P) -> P,
        out: &mut Vec<P>,
        d: Delivery<'_>,
    ) {
        self.reseq.take_given_up(&mut self.released.given_up);
        // (only numbers given up are waited for)
        let wait = if self.released.given_up.is_empty() {
            d.timeout
        } else {
            let paths = d.paths;
            let rtt = |p: usize| paths.get(p).and_then(|p| p.srtt_us);
            self.released.given_up_wait(d.timeout, d.resend, rtt)
        };
        d.counts.delivered += self.released.take(wait, payloads, keep, out) as u64;
        for (reason, n) in self.released.take_refused() {
            d.counts.drops.add(reason, n);
        }
    }
}
