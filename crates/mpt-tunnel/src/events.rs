//! What a connection tells its driver: [`Event`]s, and why a path went down ([`DownReason`],
//! [`UplinkDown`]).

use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::PathId;

use crate::DropReason;

/// Why a path went down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownReason {
    /// Nothing valid arrived on it for this long (`dead_ms` or more).
    Silent(Duration),
    /// The peer said goodbye: it is stopping.
    PeerClosed,
    /// Our uplink for the path cannot carry anything (the driver said so:
    /// [`Connection::set_uplink`](crate::Connection::set_uplink)).
    Uplink(UplinkDown),
    /// The peer's keepalives on it say that it hears nothing from us there (we hear it: the
    /// path works one way only). We send no data on it until they say otherwise.
    PeerHearsNothing,
}

/// Why our uplink for a path cannot carry anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UplinkDown {
    /// The interface does not exist (not yet, or no longer).
    Absent,
    /// The interface exists but its link is down (no carrier, or set down).
    LinkDown,
    /// The operator set the path down (`mptctl path NAME down`).
    Administrative,
    /// The interface has no address to send from (a dual-stack path's uplink between
    /// addresses, or before its first).
    NoAddress,
    /// The path's stream (TCP or TLS) broke, and is being connected again.
    Connecting,
    /// The path's data budget is spent and it is set to go off then (`budget_exhausted =
    /// "off"`), until its next period or a reset.
    Budget,
}

impl DownReason {
    /// How the status document says it.
    pub fn describe(&self) -> String {
        match self {
            DownReason::Silent(d) => format!("nothing heard for {} ms", d.as_millis()),
            DownReason::PeerClosed => "the peer stopped".into(),
            DownReason::Uplink(u) => u.name().into(),
            DownReason::PeerHearsNothing => "the peer hears nothing from us on it".into(),
        }
    }
}

impl UplinkDown {
    pub fn name(self) -> &'static str {
        match self {
            UplinkDown::Absent => "interface absent",
            UplinkDown::LinkDown => "link down",
            UplinkDown::Administrative => "set down by the operator",
            UplinkDown::NoAddress => "no address",
            UplinkDown::Connecting => "its TCP connection is being made again",
            UplinkDown::Budget => "data budget spent",
        }
    }
}

/// Something the daemon may want to log or act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A path delivers: for the first time (`again` false) or after being down.
    PathUp {
        path: PathId,
        again: bool,
    },
    PathDown {
        path: PathId,
        reason: DownReason,
    },
    /// We sent an initiation on every path whose remote we know (`attempt` counts from 1 since
    /// the last session was made).
    HandshakeSent {
        attempt: u32,
        /// To renew the keys of a session that works (its age reached `rekey_after`).
        rekey: bool,
    },
    /// A handshake made the first session with the peer: `session` is our index, `cipher` how
    /// data is sealed (`None`: in the clear).
    PeerAuthenticated {
        path: PathId,
        session: u32,
        cipher: Option<mpt_core::seal::Cipher>,
    },
    /// A handshake replaced the session the peer still had (a rekey, or a handshake after a
    /// silence): new keys and indices, the same sequence numbers, nothing reset.
    Rekeyed {
        path: PathId,
        old: u32,
        session: u32,
    },
    /// A handshake replaced the session with one the peer started afresh (it restarted). The
    /// resequencer was reset.
    NewSession {
        path: PathId,
        old: u32,
        session: u32,
        cipher: Option<mpt_core::seal::Cipher>,
    },
    /// The peer is under load and sent a cookie: our initiations prove our address with it
    /// (`again`: the initiation went again at once with it).
    CookieReceived {
        path: PathId,
        again: bool,
    },
    /// A handshake with the peer failed in a way the operator should hear about.
    HandshakeRefused {
        path: PathId,
        reason: DropReason,
    },
    /// The peer's initiation said it has `to` paths, not `from`: our paths follow (the peer
    /// reloaded its configuration), the session goes on.
    PeerPathsChanged {
        from: usize,
        to: usize,
    },
    /// Authenticated datagrams of a path come from a new address (NAT rebinding,
    /// renumbering); what we send on the path goes there from now on.
    AddressChanged {
        path: PathId,
        old: SocketAddr,
        new: SocketAddr,
    },
}
