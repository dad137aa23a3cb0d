//! An inner packet as the resequencer holds it ([`Held`]), ready or compressed, and the order
//! it is released in ([`Order`]); rebuilt and handed to the driver in [`crate::hc`].

use mpt_core::hc::Reference;

/// An inner packet in the resequencer: whole, ready for the driver (with its global sequence
/// number, whether it waits for a number given up before it ([`crate::ordered`]), and the
/// reference it makes, if it is TCP that came in order), or a compressed body (in a buffer of
/// the driver's, after `room` bytes) that is rebuilt when released.
#[derive(Debug)]
pub(crate) enum Held<P> {
    Ready(P, Order, Option<Box<Reference>>),
    Packed {
        seq: u32,
        body: Vec<u8>,
        room: usize,
    },
}

impl<P> Held<P> {
    /// Bonded and not TCP: a packet of a stream that does not pace itself by the delay its
    /// packets meet (voice, video, a game).
    pub(crate) fn steady(&self) -> bool {
        matches!(self, Held::Ready(_, o, _) if o.patient)
    }

    /// `keep` applied to a ready packet (a packed one is the connection's already).
    pub(crate) fn kept(self, keep: impl FnOnce(P) -> P) -> Held<P> {
        match self {
            Held::Ready(p, o, r) => Held::Ready(keep(p), o, r),
            packed => packed,
        }
    }
}

/// A whole packet's global sequence number, and whether it waits for a number given up before
/// it: it is not TCP, and not express ([`crate::ordered`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Order {
    pub(crate) seq: u32,
    pub(crate) patient: bool,
}
