//! The send side's own state ([`Sender`]): the scheduler and the next global sequence number,
//! the classes of light traffic, pacing's rule on held packets, our side of header
//! compression, and what the packets sent lately need answered.

use mpt_core::Time;
use mpt_sched::Scheduler;

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
