//! Control datagrams: queued as [`Pending`] and built when polled (so that an answer says
//! how long it was held and fences are current), each sealed under the next counter and
//! given to the scheduler's clock of its path.

use mpt_core::wire::ReportEntry;
use mpt_core::{PathId, Time};

/// A control datagram queued for [`Connection::poll_transmit`], built when polled (so that an
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
    Report {
        path: PathId,
        entries: Vec<ReportEntry>,
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
    /// The answer to a probe whose plain form was `size` bytes.
    ProbeAck {
        path: PathId,
        size: u16,
    },
    /// A datagram built already (a handshake message).
    Raw {
        path: PathId,
        destination: std::net::SocketAddr,
        contents: Vec<u8>,
    },
}

impl Pending {
    /// The path a control message goes on (`None` for a handshake message).
    pub(crate) fn control_path(&self) -> Option<PathId> {
        match self {
            Pending::Keepalive(path) | Pending::Goodbye(path) => Some(*path),
            Pending::Ack { path, .. } | Pending::Report { path, .. } => Some(*path),
            Pending::Probe { path, .. } | Pending::ProbeAck { path, .. } => Some(*path),
            Pending::Nack { path, .. } => Some(*path),
            Pending::Raw { .. } => None,
        }
    }
}
