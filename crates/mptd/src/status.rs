//! Counters and the status document `mptctl status --json` prints (documented in
//! `docs/status.md`; fields are only ever added).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use mpt_core::wire::WireError;
use serde::{Deserialize, Serialize};

/// Why a datagram or packet was dropped. Each reason is its own counter.
#[derive(Debug, Default)]
pub struct Drops {
    /// Outbound packets with no path up.
    pub no_path: AtomicU64,
    /// Outbound datagrams the kernel refused to send.
    pub send_error: AtomicU64,
    /// Inner packets the TUN device refused.
    pub tun_write_error: AtomicU64,
    /// Reads from the TUN device that failed (e.g. a super-packet that could not be split).
    pub tun_read_error: AtomicU64,
    /// Datagrams from an address other than the path's `remote`.
    pub unknown_source: AtomicU64,
    /// Datagrams whose path id is not the path they arrived on.
    pub path_mismatch: AtomicU64,
    /// Datagrams larger than the receive buffer (tunnel MTU + header).
    pub oversize: AtomicU64,
    pub truncated: AtomicU64,
    pub bad_version: AtomicU64,
    pub sealed: AtomicU64,
    pub unknown_kind: AtomicU64,
    pub empty: AtomicU64,
    pub not_ip: AtomicU64,
    pub inner_length: AtomicU64,
    pub bad_control: AtomicU64,
    /// Plain datagrams while sealing is required.
    pub unauthenticated: AtomicU64,
    /// Sealed datagrams of a session we have no keys for (before the handshake, or a peer's
    /// old or forged session).
    pub unknown_session: AtomicU64,
    /// Sealed datagrams whose counter was seen before or is too old (replay window).
    pub replayed: AtomicU64,
    /// Sealed datagrams (hellos included) that failed authentication.
    pub bad_tag: AtomicU64,
    /// Authenticated hellos carrying our own random (reflected back at us).
    pub bad_hello: AtomicU64,
    /// Outbound packets dropped because the handshake has not agreed on keys yet.
    pub no_session: AtomicU64,
    /// Valid datagrams of a kind not expected here (a plain hello).
    pub unexpected: AtomicU64,
}

impl Drops {
    /// Count a datagram refused by the parser.
    pub fn malformed(&self, e: &WireError) {
        let c = match e {
            WireError::Truncated { .. } => &self.truncated,
            WireError::BadVersion(_) => &self.bad_version,
            WireError::Sealed => &self.sealed,
            WireError::UnknownKind(_) => &self.unknown_kind,
            WireError::EmptyPayload => &self.empty,
            WireError::NotIp(_) => &self.not_ip,
            WireError::InnerLength { .. } => &self.inner_length,
            WireError::ReportEntryLen(_) | WireError::ControlLength { .. } => &self.bad_control,
        };
        c.fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> DropCounts {
        let g = |c: &AtomicU64| c.load(Relaxed);
        DropCounts {
            no_path: g(&self.no_path),
            send_error: g(&self.send_error),
            tun_write_error: g(&self.tun_write_error),
            tun_read_error: g(&self.tun_read_error),
            unknown_source: g(&self.unknown_source),
            path_mismatch: g(&self.path_mismatch),
            oversize: g(&self.oversize),
            truncated: g(&self.truncated),
            bad_version: g(&self.bad_version),
            sealed: g(&self.sealed),
            unknown_kind: g(&self.unknown_kind),
            empty: g(&self.empty),
            not_ip: g(&self.not_ip),
            inner_length: g(&self.inner_length),
            bad_control: g(&self.bad_control),
            unauthenticated: g(&self.unauthenticated),
            unknown_session: g(&self.unknown_session),
            replayed: g(&self.replayed),
            bad_tag: g(&self.bad_tag),
            bad_hello: g(&self.bad_hello),
            no_session: g(&self.no_session),
            unexpected: g(&self.unexpected),
            duplicate: 0,
            too_old: 0,
        }
    }
}

/// Drop counters by reason.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DropCounts {
    pub no_path: u64,
    pub send_error: u64,
    pub tun_write_error: u64,
    #[serde(default)]
    pub tun_read_error: u64,
    pub unknown_source: u64,
    pub path_mismatch: u64,
    pub oversize: u64,
    pub truncated: u64,
    pub bad_version: u64,
    pub sealed: u64,
    pub unknown_kind: u64,
    pub empty: u64,
    pub not_ip: u64,
    pub inner_length: u64,
    pub bad_control: u64,
    /// Plain datagrams while sealing is required.
    #[serde(default)]
    pub unauthenticated: u64,
    /// Sealed datagrams of a session without keys here.
    #[serde(default)]
    pub unknown_session: u64,
    /// Sealed datagrams refused by the replay window (duplicate or too old).
    #[serde(default)]
    pub replayed: u64,
    /// Sealed datagrams that failed authentication.
    #[serde(default)]
    pub bad_tag: u64,
    /// Hellos reflected back at us.
    #[serde(default)]
    pub bad_hello: u64,
    /// Outbound packets dropped before the handshake agreed on keys.
    #[serde(default)]
    pub no_session: u64,
    /// Valid datagrams of an unexpected kind.
    #[serde(default)]
    pub unexpected: u64,
    /// Data packets received twice (resequencer).
    pub duplicate: u64,
    /// Data packets too old to tell from a duplicate (far behind the resequencer's release
    /// point).
    #[serde(default)]
    pub too_old: u64,
}

impl DropCounts {
    /// Datagrams refused as malformed, all reasons together.
    pub fn malformed(&self) -> u64 {
        self.oversize
            + self.truncated
            + self.bad_version
            + self.sealed
            + self.unknown_kind
            + self.empty
            + self.not_ip
            + self.inner_length
            + self.bad_control
    }
}

/// `mptctl status --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// Version of this document's layout.
    pub version: u32,
    pub tunnel: TunnelStatus,
    pub paths: Vec<PathStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TunnelStatus {
    pub name: String,
    pub scheduler: String,
    /// The configured `encryption`: "auto", a cipher, or "none".
    #[serde(default)]
    pub encryption: String,
    /// The cipher agreed with the peer for this session, once keys are agreed.
    #[serde(default)]
    pub cipher: Option<String>,
    /// Sealing: the handshake has agreed on session keys with the peer.
    #[serde(default)]
    pub keys_agreed: bool,
    pub uptime_ms: u64,
    /// This daemon's session id (hex).
    pub session: String,
    /// The peer's session id, once heard (hex).
    pub peer_session: Option<String>,
    /// Times the peer was seen restarting (new session id).
    pub peer_restarts: u64,
    /// Inner packets read from the TUN device and sent.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Inner packets received from the paths.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Inner packets written to the TUN device.
    pub delivered: u64,
    /// Bytes of receiver reports sent (outer headers included): the feedback overhead.
    pub tx_report_bytes: u64,
    /// Share of the received bandwidth the report pacer currently spends on reports.
    pub report_fraction: f64,
    /// Keepalives sent, all paths (none on a path while it carries data).
    #[serde(default)]
    pub keepalives_sent: u64,
    /// Keepalives answered; on a path we send data on, at most one a second.
    #[serde(default)]
    pub keepalive_acks_sent: u64,
    pub drops: DropCounts,
    pub reseq: ReseqStatus,
    /// Datapath system calls: with `tx_packets` and `delivered`, how many packets each one
    /// carried (batching, offloads).
    #[serde(default)]
    pub calls: CallCounts,
}

/// Datapath system calls, cumulative.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CallCounts {
    /// Reads from the TUN device (a TSO super-packet is one read).
    pub tun_reads: u64,
    /// Batches written to the TUN device (each coalesced into as few super-packets as
    /// GRO allows, one write each).
    pub tun_write_batches: u64,
    /// Sends on the path sockets (a GSO run is one send).
    pub udp_sends: u64,
    /// Batched receives on the path sockets (recvmmsg, each buffer possibly GRO-coalesced).
    pub udp_recvs: u64,
}

/// Resequencer figures, all cumulative.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReseqStatus {
    pub window: usize,
    pub timeout_ms: u64,
    /// Packets held right now.
    pub held: usize,
    /// Packets that arrived out of order across paths (RFC 4737).
    pub reordered: u64,
    pub reorder_extent_max: u64,
    /// Packets written to tun0 out of order (0 while resequencing is on).
    pub delivered_out_of_order: u64,
    /// Sequence numbers given up as lost.
    pub skipped: u64,
    /// Packets that arrived after their sequence number was given up, delivered out of order
    /// (also in `delivered_out_of_order`); one too old to tell from a duplicate is dropped and
    /// counted in `drops.too_old` instead.
    #[serde(default)]
    pub late: u64,
    pub released_by_timeout: u64,
    pub released_by_fence: u64,
    pub released_by_overflow: u64,
    pub hold_p50_us: u64,
    pub hold_p90_us: u64,
    pub hold_p99_us: u64,
    pub hold_max_us: u64,
    pub occupancy_mean: f64,
    pub occupancy_p50: u64,
    pub occupancy_p90: u64,
    pub occupancy_p99: u64,
    pub occupancy_max: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathStatus {
    pub id: u8,
    pub name: String,
    /// "up", "down" or "unknown" (not heard yet).
    pub state: String,
    pub backup: bool,
    pub local: String,
    pub remote: String,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Milliseconds since anything valid arrived on this path.
    pub last_heard_ms: Option<u64>,
    /// Smoothed round-trip time from keepalives and reports, microseconds.
    pub rtt_us: Option<u64>,
    /// The rate the scheduler assumes for this path (adaptive: learned), bits per second.
    pub rate_bps: Option<u64>,
    /// Packets lost on the way in (per-path sequence gaps).
    pub lost: u64,
    pub loss_pct: f64,
    /// RFC 3550 interarrival jitter, microseconds.
    pub jitter_us: f64,
    /// One-way delay relative to the fastest path, microseconds (smoothed / minimum).
    pub owd_us: f64,
    pub owd_min_us: f64,
    /// Packets of this path that arrived behind a later-sent packet (RFC 4737).
    pub reordered: u64,
    pub reorder_extent_max: u64,
    /// What the peer last reported about our sending on this path.
    pub peer: Option<PeerReport>,
    /// Times this path went down.
    pub down_events: u64,
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
