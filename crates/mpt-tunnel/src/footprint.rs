//! What a connection holds for its peer, counted ([`Footprint`]): each count has a fixed
//! bound (`docs/protocol.md`, "Limits per peer"), which a peer's datagrams, whatever they
//! say, cannot raise; at a bound the engine drops (and counts) instead of growing.

/// The state one connection holds for its peer ([`crate::Connection::footprint`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Packets the resequencer holds for a predecessor (at most the reorder window).
    pub held: usize,
    /// Packets waiting for the rest of their pieces (at most
    /// [`crate::MAX_INCOMPLETE`]), and the pieces they hold (each at most
    /// [`crate::MAX_PIECES`]).
    pub incomplete: usize,
    pub pieces: usize,
    /// Packets made whole, waiting to go to the resequencer (only within one datagram's
    /// handling: 0 between calls).
    pub ready: usize,
    /// Header-compression references kept (at most [`MAX_REFERENCES`]).
    pub references: usize,
    /// Compressed packets waiting for their reference (at most [`MAX_AWAITING`]).
    pub awaiting: usize,
    /// Packets kept to be sent again (at most [`crate::RESEND_KEPT`], in at most
    /// [`crate::RESEND_BYTES`]).
    pub resend_kept: usize,
    /// Gaps to ask the peer for, or asked for.
    pub gaps: usize,
    /// Control datagrams and bundles queued to leave.
    pub queued: usize,
    /// Events not yet taken by the driver.
    pub events: usize,
}

/// Most header-compression references a connection keeps for its peer: 16 for each of 64
/// contexts.
pub const MAX_REFERENCES: usize = mpt_core::hc::CONTEXTS * mpt_core::hc::KEPT_REFERENCES;

/// Most compressed packets that wait for their reference.
pub const MAX_AWAITING: usize = crate::hc::AWAITING;
