//! The receive side's own state ([`Receiver`]): the resequencer, packets made whole before
//! it, what it released, and bonded data waiting to match the farthest path.

use mpt_reseq::Resequencer;

use crate::held::Held;

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
