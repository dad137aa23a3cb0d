//! A `[[path]]` as validated ([`PathConfig`]): where it leaves and goes, its tier and rate,
//! how its datagrams travel ([`PathTransport`]) and its data budget ([`BudgetConfig`]).

use std::net::SocketAddr;

use mpt_core::PathId;

/// One `[[path]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    pub id: PathId,
    pub name: String,
    /// Bind the socket to this device (SO_BINDTODEVICE).
    pub interface: Option<String>,
    /// The address and port the socket binds; unspecified (and port 0) when not configured:
    /// whatever address the interface has.
    pub local: SocketAddr,
    /// Where the peer's socket for this path is, as configured. Without it, the peer's
    /// `endpoint` (resolved at start); without that, learned from the peer's authenticated
    /// datagrams.
    pub remote: Option<SocketAddr>,
    /// A dual-stack socket (`local` is `[::]:0`, IPv4 mapped): an interface-only path to a
    /// peer named by host name, which sends to the address of whichever family its interface
    /// has ([`crate::families`]).
    pub dual: bool,
    pub weight: u32,
    /// Configured rate in bits per second.
    pub rate_bps: Option<u64>,
    pub backup: bool,
    /// Its tier, 1 the highest: lower tiers carry traffic while the higher ones are down or
    /// full.
    pub priority: u8,
    /// A cap on the path's MTU (outer IP packet bytes); discovery finds it otherwise.
    pub mtu: Option<u16>,
    /// UDP, a TCP connection, or whichever works (`auto`).
    pub transport: PathTransport,
    /// A data budget: at most so many bytes on the path's uplink per period.
    pub budget: Option<BudgetConfig>,
}

/// A path's data budget, as configured (`budget`, `budget_period`, `budget_reset`,
/// `budget_exhausted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Bytes per period, both ways, headers included.
    pub limit: u64,
    pub period: crate::budget::calendar::Period,
    /// The day a period starts: of the month (1-31), or of the week (1 Monday to 7 Sunday);
    /// 1 for a daily period.
    pub reset_day: u8,
    /// What the path does once the budget is spent, until the next period.
    pub exhausted: Exhausted,
}

/// What a path whose budget is spent does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// It goes below every tier: it carries traffic only while no other path can.
    Backup,
    /// It carries nothing.
    Off,
}

impl Exhausted {
    /// Its name, as `budget_exhausted` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Exhausted::Backup => "backup",
            Exhausted::Off => "off",
        }
    }
}

/// How a path's datagrams travel (`[[path]] transport`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathTransport {
    /// One UDP datagram each.
    Udp,
    /// UDP while UDP answers, else a TCP connection (`crate::stream::auto`), on a path we
    /// dial (`dial`); a path the peer comes to is UDP (the peer's `[[listen]]` with `tcp =
    /// true` takes its connections).
    Auto { dial: bool },
    /// On a TCP connection, for networks that block UDP (`crate::stream`): dialled to the
    /// peer's address when we start the handshakes (`dial`), else taken at `local`.
    Tcp { dial: bool },
    /// As `Tcp`, in TLS 1.3 (`crate::stream::tls`), for networks that pass only HTTPS. A
    /// dialling side names `server_name` in its hello (SNI): the peer's endpoint, when that
    /// is a host name. A side taken at `local` takes plain and TLS connections alike.
    Tls {
        dial: bool,
        server_name: Option<String>,
    },
}
