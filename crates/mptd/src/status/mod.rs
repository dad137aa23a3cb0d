//! Counters and the status document `mptctl status --json` prints (documented in
//! `docs/status.md`; fields are only ever added).

pub use mpt_tunnel::DropCounts;
use serde::{Deserialize, Serialize};

mod path;
pub use path::{BudgetStatus, PathStatus, PeerReport};

/// `mptctl status --json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Status {
    /// Version of this document's layout.
    pub version: u32,
    /// The tunnel: its counters summed over the peers; its session fields, resequencer and
    /// reports are the first peer's (all of a one-peer tunnel).
    pub tunnel: TunnelStatus,
    /// The first peer's paths (all of a one-peer tunnel's).
    pub paths: Vec<PathStatus>,
    /// Every peer, with its own session and paths.
    #[serde(default)]
    pub peers: Vec<PeerStatus>,
}

/// One peer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PeerStatus {
    pub name: String,
    pub public_key: String,
    /// Where it is, as configured (we start the handshakes); `None`: it comes to us.
    pub endpoint: Option<String>,
    /// It comes to our `[[listen]]` sockets with its own paths.
    pub listening: bool,
    /// A handshake made a session with it.
    pub keys_agreed: bool,
    pub cipher: Option<String>,
    /// The protocol version the session speaks (ours, or the peer's older one).
    #[serde(default)]
    pub protocol: Option<u8>,
    pub session: Option<String>,
    pub peer_session: Option<String>,
    /// Sessions made after the first that started afresh (the peer restarted).
    pub restarts: u64,
    /// Sessions that renewed one both ends had (rekeys every `rekey_after_s`, handshakes
    /// after a silence): nothing was reset.
    #[serde(default)]
    pub rekeys: u64,
    /// Milliseconds since anything authentic arrived from it.
    pub last_heard_ms: Option<u64>,
    /// Milliseconds since the last handshake made the session.
    #[serde(default)]
    pub last_handshake_ms: Option<u64>,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub delivered: u64,
    /// Its connection's drops by reason (as `tunnel.drops`, which sums them over the peers):
    /// what it sent that was refused, and what was refused for it at a limit.
    #[serde(default)]
    pub drops: DropCounts,
    /// Its part in the prefixes it shares with other peers (several servers of a site): which
    /// it carries, which it stands by for, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub paths: Vec<PathStatus>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TunnelStatus {
    pub name: String,
    pub scheduler: String,
    /// The configured `encryption`: "auto", a cipher, or "none".
    #[serde(default)]
    pub encryption: String,
    /// The cipher agreed with the peer for this session, once keys are agreed.
    #[serde(default)]
    pub cipher: Option<String>,
    /// The handshake has made a session with the peer.
    #[serde(default)]
    pub keys_agreed: bool,
    pub uptime_ms: u64,
    /// Our index for the current session (hex): the peer's datagrams carry it.
    pub session: String,
    /// The peer's index for the session, once a handshake made one (hex).
    pub peer_session: Option<String>,
    /// Sessions made after the first that started afresh (the peer restarted).
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
    /// Bundles sent, and the inner packets they carried (of `tx_packets`).
    #[serde(default)]
    pub bundles_sent: u64,
    #[serde(default)]
    pub bundled_packets: u64,
    /// Of those, packets sent without their IPv4 and UDP headers (compressed bundle entries).
    #[serde(default)]
    pub compressed_packets: u64,
    /// Bulk TCP sent with compressed headers (`docs/protocol.md`, "Compressed headers"), the
    /// TCP packets that went whole and became their flow's reference, and the header bytes
    /// the compressed ones did not carry.
    #[serde(default)]
    pub tcp_compressed: u64,
    #[serde(default)]
    pub tcp_references: u64,
    #[serde(default)]
    pub tcp_header_bytes_saved: u64,
    /// TCP packets of 256 bytes or more that went whole because their headers do not
    /// compress (IP options, fragments, TCP options other than timestamps, urgent data).
    #[serde(default)]
    pub tcp_uncompressible: u64,
    /// Packets of a flow with a reference that went whole (in pieces) because compressed they
    /// did not fit the datagram either: a header longer than the driver cut their segment
    /// for, or a path smaller than that.
    #[serde(default)]
    pub tcp_too_long: u64,
    /// Copies sent by classes in `duplicate` mode (of `tx_packets`' packets; the peer drops
    /// the copy that arrives second and counts it in `drops.duplicate`).
    #[serde(default)]
    pub copies_sent: u64,
    /// The traffic classes in the order they are matched, and what each sent where.
    #[serde(default)]
    pub classes: Vec<ClassStatus>,
    pub drops: DropCounts,
    pub reseq: ReseqStatus,
    /// Datapath system calls: with `tx_packets` and `delivered`, how many packets each one
    /// carried (batching, offloads).
    #[serde(default)]
    pub calls: CallCounts,
}

/// One traffic class (`[[class]]`, or a built-in one), summed over the peers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClassStatus {
    pub name: String,
    /// "bond", "fastest" or "duplicate".
    pub mode: String,
    /// Packets of the class sent (copies included).
    pub sent: u64,
    /// Of those, per path (by path id, as in `paths`).
    pub sent_per_path: Vec<u64>,
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
    /// Cookie replies sent while under handshake load (one send each).
    #[serde(default)]
    pub cookie_replies: u64,
}

/// Resequencer figures, all cumulative.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReseqStatus {
    pub window: usize,
    pub timeout_ms: u64,
    /// Packets held right now.
    pub held: usize,
    /// Packets released that wait right now for a lost one before them to come again (not
    /// TCP: a stream that does not back off keeps its order).
    #[serde(default)]
    pub waiting_in_order: usize,
    /// Packets that so waited, in all.
    #[serde(default)]
    pub waited_in_order: u64,
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
    /// Resend requests we sent, the lost packets they named and their bytes on the links
    /// (outer headers included); packets that came again, and of those the ones that filled
    /// their gap in time (losses recovered).
    #[serde(default)]
    pub resend_requests: u64,
    #[serde(default)]
    pub resend_asked: u64,
    #[serde(default)]
    pub resend_request_bytes: u64,
    #[serde(default)]
    pub resent_received: u64,
    #[serde(default)]
    pub recovered: u64,
    /// Parities received, the lost packets they made again (also in `resent_received` and
    /// `recovered`), and those whose group lacked two or more (asked for instead).
    #[serde(default)]
    pub parity_received: u64,
    #[serde(default)]
    pub parity_repaired: u64,
    #[serde(default)]
    pub parity_unrepairable: u64,
    /// Parities whose group lacked nothing, and those whose sum was no packet.
    #[serde(default)]
    pub parity_unneeded: u64,
    #[serde(default)]
    pub parity_mismatched: u64,
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

/// Each path's throughput between one status document and the next (`mptctl watch`, the
/// daemon's `-v` summaries).
#[derive(Debug, Default)]
pub struct Throughput {
    /// (peer, path) -> bytes sent and received, as of the previous document.
    last: std::collections::HashMap<(String, String), (u64, u64)>,
}

/// One path's throughput since the previous document, bits per second each way.
#[derive(Debug)]
pub struct PathRate<'a> {
    pub peer: &'a PeerStatus,
    pub path: &'a PathStatus,
    pub tx_bps: f64,
    pub rx_bps: f64,
}

impl Throughput {
    /// Every path of `st`, with its rates over the `secs` since the previous document (0 for a
    /// path not seen before).
    pub fn rates<'a>(&mut self, st: &'a Status, secs: f64) -> Vec<PathRate<'a>> {
        let secs = secs.max(1e-3);
        let mut out = Vec::new();
        for peer in &st.peers {
            for path in &peer.paths {
                let now = (path.tx_bytes, path.rx_bytes);
                let (tx0, rx0) = self
                    .last
                    .insert((peer.name.clone(), path.name.clone()), now)
                    .unwrap_or(now);
                out.push(PathRate {
                    peer,
                    path,
                    tx_bps: now.0.saturating_sub(tx0) as f64 * 8.0 / secs,
                    rx_bps: now.1.saturating_sub(rx0) as f64 * 8.0 / secs,
                });
            }
        }
        out
    }
}
