//! A path's part of the status document: its state, counters, the peer's view of it, and its
//! data budget.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PathStatus {
    pub id: u8,
    pub name: String,
    /// "up", "down" or "unknown" (not heard yet).
    pub state: String,
    /// Why it is down, while it is: "nothing heard for N ms", "the peer stopped", "interface
    /// absent", "link down".
    #[serde(default)]
    pub down_reason: Option<String>,
    /// How its datagrams travel now: "udp", "tcp" or "tls" (`transport = "tcp"` or `"tls"`,
    /// or a peer's path that came to a `[[listen]]` with `tcp = true` by TCP, plain or in
    /// TLS).
    #[serde(default = "udp")]
    pub transport: String,
    /// A `transport = "auto"` path's: why it is on its transport now ("no answer by UDP for
    /// 1.5 s while TCP connected", "UDP answered again", "UDP tried again 12 s ago: no
    /// answer"...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_why: Option<String>,
    /// Times an `auto` path moved between UDP and TCP.
    #[serde(default)]
    pub transport_changes: u64,
    pub backup: bool,
    /// Its tier (`priority`), 1 the highest.
    #[serde(default = "first_tier")]
    pub priority: u8,
    pub local: String,
    pub remote: String,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Of those, control datagrams (keepalives and their answers, reports, handshakes, MTU
    /// probes, resend requests, goodbyes) and their bytes.
    #[serde(default)]
    pub tx_control_packets: u64,
    #[serde(default)]
    pub tx_control_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Milliseconds since anything valid arrived on this path.
    pub last_heard_ms: Option<u64>,
    /// Smoothed round-trip time from keepalives and reports, microseconds.
    pub rtt_us: Option<u64>,
    /// The rate the scheduler assumes for this path (adaptive: learned), bits per second.
    pub rate_bps: Option<u64>,
    /// `adaptive`: what it learned of the path from the peer's reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<mpt_sched::Learned>,
    /// Packets lost on the way in (per-path sequence gaps).
    pub lost: u64,
    /// Of `lost`, the packets lost where the path's queue overflowed: not waited for (the
    /// inner congestion control sees them; what comes again is delivered late).
    #[serde(default)]
    pub congestion_lost: u64,
    pub loss_pct: f64,
    /// RFC 3550 interarrival jitter, microseconds.
    pub jitter_us: f64,
    /// One-way delay relative to the fastest path, microseconds (smoothed / minimum).
    pub owd_us: f64,
    pub owd_min_us: f64,
    /// Packets of this path that arrived behind a later-sent packet (RFC 4737).
    pub reordered: u64,
    pub reorder_extent_max: u64,
    /// Datagrams that arrived behind a later one of their own path (or whose path sequence
    /// jumped by half its range): a path is FIFO, so the link or a host on the way reordered
    /// them. The ones they overtook were counted lost, and are delivered late if given up.
    #[serde(default)]
    pub path_seq_errors: u64,
    /// What the peer last reported about our sending on this path.
    pub peer: Option<PeerReport>,
    /// Times this path went down.
    pub down_events: u64,
    /// The path's MTU as discovery knows it (outer IP packet bytes: the largest datagram it
    /// carries plus the outer IP and UDP headers), and whether its search is over.
    #[serde(default)]
    pub mtu: usize,
    #[serde(default)]
    pub mtu_found: bool,
    /// Path MTU probes sent, and times the MTU found stopped passing (a drop noticed).
    #[serde(default)]
    pub mtu_probes: u64,
    #[serde(default)]
    pub mtu_drops: u64,
    /// Loss recovery for what we sent on this path: packets the peer asked for again, those
    /// sent again (on the path where they arrived soonest) and what that cost on the links
    /// (bytes, outer headers included), and those asked for too late or no longer kept.
    #[serde(default)]
    pub resend_asked: u64,
    #[serde(default)]
    pub resent: u64,
    #[serde(default)]
    pub resent_bytes: u64,
    #[serde(default)]
    pub resend_missed: u64,
    /// Parity on this path (`docs/protocol.md`, "Parity"): the loss rate of what we send on
    /// it as the peer's reports show it (smoothed, %), packets per parity while it is on (0:
    /// off), and the parities sent and their bytes on the links.
    #[serde(default)]
    pub sent_loss_pct: f64,
    #[serde(default)]
    pub parity_group: usize,
    #[serde(default)]
    pub parity_sent: u64,
    #[serde(default)]
    pub parity_bytes: u64,
    /// How long bonded data arriving on this path waits now to match the farthest path up
    /// (`docs/protocol.md`, "Delay equalisation"), milliseconds.
    #[serde(default)]
    pub equalise_ms: f64,
    /// Bytes its socket sent and received on the wire, the outer IP and UDP headers
    /// included (a `[[path]]`'s socket; a listening peer's paths show their `[[listen]]`
    /// socket's, which all its peers share).
    #[serde(default)]
    pub wire_tx_bytes: u64,
    #[serde(default)]
    pub wire_rx_bytes: u64,
    /// Its data budget (`budget`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetStatus>,
}

/// A path's data budget in its period.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BudgetStatus {
    /// Bytes per period, both ways, headers included.
    pub limit: u64,
    /// Counted in this period, and left.
    pub used: u64,
    pub left: u64,
    /// The period: from its start to its end (Unix seconds).
    pub period_start: i64,
    pub period_end: i64,
    /// The limit is reached: the path is demoted (`backup`) or down (`off`) until the period
    /// ends or the operator resets the count.
    pub exhausted: bool,
    /// `budget_exhausted`: "backup" or "off".
    pub action: String,
}

/// The peer's view of one of our paths (from its receiver reports).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeerReport {
    pub age_ms: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub lost: u64,
    pub jitter_us: u64,
    pub owd_us: u64,
}

/// The transport of a path whose status says none (an older mptd's).
fn udp() -> String {
    "udp".to_owned()
}

/// The tier of a path whose status says none (an older mptd's).
fn first_tier() -> u8 {
    1
}
