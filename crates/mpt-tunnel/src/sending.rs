//! The send side's own state ([`Sender`]): the scheduler and the next global sequence number,
//! the classes of light traffic, pacing's rule on held packets, our side of header
//! compression, and what the packets sent lately need answered.

use mpt_core::wire::HeaderRepr;
use mpt_core::{PathId, Time};
use mpt_sched::Scheduler;

use crate::counts::Counts;
use crate::out::Out;
use crate::parity::ParityTx;
use crate::path::PathState;
use crate::pending::{Outbox, Pending};
use crate::resend::Resend;
use crate::session::Session;
use crate::{ConnectionConfig, Datagram, DropReason, TransmitKind};

/// What numbering packets keeps from one batch to the next.
pub(crate) struct Sender {
    /// Picks each packet's path, and keeps each path's clock.
    pub(crate) sched: Box<dyn Scheduler>,
    /// Next global sequence number.
    pub(crate) seq: u32,
    /// The path light traffic keeps short, and packets sent per class.
    pub(crate) classes: crate::class::Classes,
    /// CoDel's rule on the driver's queue of packets pacing held ([`crate::pace`]).
    pub(crate) codel: crate::pace::Codel,
    /// Our side of header compression: the references of the flows we send.
    pub(crate) hc: mpt_core::hc::Compressor,
    /// The largest datagram sent lately that the base datagram ([`crate::BASE_DATAGRAM`]) does
    /// not carry, and when one that large was last sent: slow paths are probed only for the
    /// sizes such packets need ([`crate::path::note_big`]).
    pub(crate) big: Option<(Time, usize)>,
    /// "Too big" answers for the TUN device ([`crate::BatchOut::icmp`]).
    pub(crate) icmp: crate::icmp::IcmpAnswers,
}

impl Sender {
    /// Nothing sent yet, with `sched`, at `now`.
    pub(crate) fn new(sched: Box<dyn Scheduler>, now: Time) -> Sender {
        Sender {
            sched,
            seq: 0,
            classes: Default::default(),
            codel: Default::default(),
            hc: mpt_core::hc::Compressor::new(),
            big: None,
            icmp: crate::icmp::IcmpAnswers::new(now),
        }
    }
}

/// What sending data needs, lent by the connection: its settings, the session, the paths,
/// the send side, resending, the counts, and what waits to leave.
pub(crate) struct Sending<'a> {
    pub(crate) cfg: &'a ConnectionConfig,
    pub(crate) session: &'a mut Session,
    pub(crate) paths: &'a mut [PathState],
    pub(crate) tx: &'a mut Sender,
    pub(crate) resend: &'a mut Resend,
    pub(crate) counts: &'a mut Counts,
    pub(crate) outbox: &'a mut Outbox,
}

impl Sending<'_> {
    /// The way out for a datagram built outside the batch.
    pub(crate) fn out(&mut self) -> Out<'_> {
        Out {
            session: self.session,
            paths: self.paths,
            settings: &self.cfg.paths,
            sched: self.tx.sched.as_mut(),
        }
    }

    /// Parity's way out ([`ParityTx`]).
    pub(crate) fn parity_tx(&mut self) -> ParityTx<'_> {
        ParityTx {
            out: Out {
                session: self.session,
                paths: self.paths,
                settings: &self.cfg.paths,
                sched: self.tx.sched.as_mut(),
            },
            resend: self.resend,
        }
    }

    /// Count a drop for `reason`; returns it.
    pub(crate) fn count(&mut self, reason: DropReason) -> DropReason {
        self.counts.drop(reason)
    }

    /// Where the prefix before an inner packet ends.
    pub(crate) fn prefix(&self) -> usize {
        self.session.prefix()
    }

    /// The most bytes of body a datagram on path `i` may carry now
    /// ([`PathState::body_cap`]).
    pub(crate) fn body_cap(&self, i: usize) -> usize {
        self.paths[i].body_cap(self.cfg)
    }

    /// Whether resending is on with the peer.
    pub(crate) fn resending(&self) -> bool {
        self.session.peer.resending(self.cfg)
    }

    /// Whether parity is on with the peer.
    pub(crate) fn parity(&self) -> bool {
        self.session.peer.parity(self.cfg)
    }

    /// Whether data goes with compressed headers ([`Session::compressing`]).
    pub(crate) fn compressing(&self) -> bool {
        self.session.compressing(self.cfg)
    }

    /// Whether a packet sent on path `i` at `now` is kept for resending.
    #[inline]
    pub(crate) fn keeps(&self, i: usize, now: Time) -> bool {
        self.paths[i].keeps(now) && self.resending()
    }

    /// Where datagrams for `path` go now, once known.
    pub(crate) fn remote(&self, path: PathId) -> Option<std::net::SocketAddr> {
        self.paths[path.index()].remote
    }

    /// The path where a datagram sent at `now` arrives soonest, other than `not`
    /// ([`crate::fastest::soonest_where`]).
    pub(crate) fn soonest(&self, now: Time, not: Option<PathId>) -> Option<PathId> {
        self.soonest_where(now, |p| Some(p) != not)
    }

    /// [`Sending::soonest`] among the paths `allowed` admits.
    pub(crate) fn soonest_where(
        &self,
        now: Time,
        allowed: impl Fn(PathId) -> bool + Copy,
    ) -> Option<PathId> {
        let (paths, cfg) = (&self.paths[..], &self.cfg.paths[..]);
        crate::fastest::soonest_where(now, paths, cfg, self.tx.sched.as_ref(), allowed)
    }

    /// Data goes on path `i` at `now`: an idle path wakes, and a keepalive goes at once
    /// ([`PathState::data_on`]).
    pub(crate) fn data_on(&mut self, i: usize, now: Time) {
        if self.paths[i].data_on(now, self.cfg) {
            self.outbox
                .pending
                .push_back(Pending::Keepalive(PathId(i as u8)));
        }
    }

    /// A data datagram of `len` bytes went on path `i`, the last of its per-path sequences
    /// `path_seq`. On a slow path (below [`crate::path::SLOW_PATH`]) one of the size found
    /// confirms it once the peer has it (the path MTU's report): a probe there holds the line
    /// long (94 ms at 128 kbit/s) and delays what goes behind it on schedulers that do not go
    /// around it. Faster paths keep their probes, which find a drop among small packets sooner.
    #[inline]
    pub(crate) fn pmtu_data_sent(&mut self, i: usize, len: usize, path_seq: u16) {
        if len >= self.paths[i].pmtu.size && slow_path(self.tx.sched.as_ref(), self.cfg, i) {
            self.paths[i].pmtu_confirms(len, path_seq);
        }
    }

    /// Path `i` takes part in the batch being numbered, whose paths are `used`: the first
    /// time, the fence that holds until the batch has left is the one from before it.
    pub(crate) fn join_batch(&mut self, i: usize, used: &mut u64) {
        if *used & (1 << i) == 0 {
            *used |= 1 << i;
            let p = &mut self.paths[i];
            if p.unsent == 0 {
                p.fence_before = (self.tx.seq, p.path_seq);
            }
            p.unsent += 1;
        }
    }

    /// A data datagram built in a buffer of our own for `header` and the inner packet
    /// `packet`, sealed, to the path's remote (`None` while sealing has no key or the remote
    /// is unknown).
    pub(crate) fn owned_datagram(
        &mut self,
        header: &HeaderRepr,
        packet: &[u8],
    ) -> Option<Datagram> {
        let destination = self.remote(header.path)?;
        let mut buf = self.session.buffer(packet.len());
        buf.extend_from_slice(packet);
        let contents = self.session.seal_owned(header, buf, packet.len())?;
        Some(Datagram {
            path: header.path,
            destination,
            kind: TransmitKind::Data,
            contents,
        })
    }
}

/// The rate the scheduler `sched` assumes for `path`: learned, or configured in `cfg`.
pub(crate) fn path_rate(
    sched: &dyn Scheduler,
    cfg: &ConnectionConfig,
    path: PathId,
) -> Option<u64> {
    let configured = cfg.paths[path.index()].rate_bps;
    sched.learned_rate(path).or(configured)
}

/// Path `i` is slower than [`crate::path::SLOW_PATH`] (its rate as [`path_rate`] gives it): a
/// path MTU probe holds it long, and path MTU discovery spares it.
pub(crate) fn slow_path(sched: &dyn Scheduler, cfg: &ConnectionConfig, i: usize) -> bool {
    let rate = path_rate(sched, cfg, PathId(i as u8));
    rate.is_some_and(|r| r < crate::path::SLOW_PATH)
}
