//! The control queue's entries ([`Pending`]): control datagrams to build when polled, and
//! datagrams built already that wait their turn.

use mpt_core::{PathId, Time};

/// A control datagram queued for [`crate::Connection::poll_transmit`], built when polled (so that an
/// answer says how long it was held, and fences are current).
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    Keepalive(PathId),
    Goodbye(PathId),
    /// The answer to a keepalive that arrived at `arrived` carrying timestamp `echo`.
    Ack {
        path: PathId,
        echo: u32,
        arrived: Time,
    },
    /// A receiver report of [`crate::report::ReportScratch::entries`].
    Report {
        path: PathId,
    },
    /// A path MTU probe, `size` bytes on the wire (UDP payload).
    Probe {
        path: PathId,
        size: usize,
    },
    /// A resend request for `ranges` (at most [`mpt_core::wire::MAX_NACK_RANGES`]).
    Nack {
        path: PathId,
        ranges: Vec<mpt_core::wire::NackRange>,
    },
    /// A resend request for the flows' references `references` names by their global
    /// sequence numbers (at most [`mpt_core::wire::MAX_NACK_RANGES`]; version 7).
    NackReferences {
        path: PathId,
        references: Vec<u32>,
    },
    /// The answer to a probe whose plain form was `size` bytes.
    ProbeAck {
        path: PathId,
        size: u16,
    },
    /// A datagram built already: a handshake message, a bundle that closed on its timer
    /// (and its parities), a resent packet.
    Raw(crate::Datagram),
}

impl Pending {
    /// The path a control message goes on (`None` for a handshake message).
    pub(crate) fn control_path(&self) -> Option<PathId> {
        match self {
            Pending::Keepalive(path) | Pending::Goodbye(path) => Some(*path),
            Pending::Ack { path, .. } | Pending::Report { path, .. } => Some(*path),
            Pending::Probe { path, .. } | Pending::ProbeAck { path, .. } => Some(*path),
            Pending::Nack { path, .. } | Pending::NackReferences { path, .. } => Some(*path),
            Pending::Raw(_) => None,
        }
    }
}

/// What waits to leave besides a numbered batch: control datagrams to build when polled,
/// bundles closed to leave before the batch being numbered, and what leaves after it.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// Control datagrams, built as they are polled.
    pub(crate) pending: std::collections::VecDeque<Pending>,
    /// Bundles closed to leave before the batch being numbered ([`crate::BatchOut::before`]).
    pub(crate) ready: std::collections::VecDeque<crate::Datagram>,
    /// What leaves after the batch being numbered ([`crate::BatchOut::after`]).
    pub(crate) after: std::collections::VecDeque<crate::Datagram>,
}
