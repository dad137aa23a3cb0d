//! A peer's paths as the status document shows them.

use mpt_core::{PathId, Time};
use mpt_tunnel::Connection;

use super::super::Tunnel;
use crate::peer::{Peer, RxBuf};
use crate::status::{PathStatus, PeerReport};

impl Tunnel {
    /// Peer `peer`'s paths as the status shows them.
    pub(super) fn path_status(
        &self,
        now: Time,
        peer: &Peer,
        ep: &Connection<RxBuf>,
    ) -> Vec<PathStatus> {
        let st = ep.stats();
        (0..ep.path_count())
            .map(|i| {
                let path = PathId(i as u8);
                let ps = st.paths.get(i).cloned().unwrap_or_default();
                let info = ep.path_info(path);
                let resend = ep.resend_counts(path);
                let expected = ps.packets + ps.lost;
                let (tx_packets, tx_bytes) = peer.tx(path);
                let (tx_control_packets, tx_control_bytes) = peer.tx_control(path);
                let sock = self.socket(peer.socket(path));
                let transport = transport(ep.path_transport(path), sock.as_deref(), info.remote);
                let local = sock
                    .as_ref()
                    .and_then(|s| s.io.sock.local_addr().ok())
                    .map_or_else(|| "-".to_owned(), |a| a.to_string());
                let wire = sock.as_ref().map_or((0, 0), |s| s.wire.get());
                let auto = sock.as_ref().and_then(|s| s.auto.as_ref());
                let (transport_why, transport_changes) = match auto {
                    Some(a) => {
                        let (_, why, changes) = a.describe(now);
                        (Some(why), changes)
                    }
                    None => (None, 0),
                };
                PathStatus {
                    id: i as u8,
                    name: self.path_name(peer, path),
                    state: info.state.name().to_owned(),
                    down_reason: info.down_reason.map(|r| r.describe()),
                    transport: transport.to_owned(),
                    transport_why,
                    transport_changes,
                    backup: ep.config().paths[i].backup,
                    priority: ep.config().paths[i].priority,
                    local,
                    remote: info
                        .remote
                        .map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
                    tx_packets,
                    tx_bytes,
                    tx_control_packets,
                    tx_control_bytes,
                    rx_packets: ps.packets,
                    rx_bytes: ps.bytes,
                    last_heard_ms: info.last_heard.map(|h| (now - h).as_millis() as u64),
                    rtt_us: info.srtt_us,
                    rate_bps: info.rate_bps,
                    learned: ep.learned(now, path),
                    lost: ps.lost,
                    congestion_lost: ps.congestion_lost,
                    loss_pct: if expected == 0 {
                        0.0
                    } else {
                        100.0 * ps.lost as f64 / expected as f64
                    },
                    jitter_us: ps.jitter_us,
                    owd_us: ps.owd_us.unwrap_or(0.0),
                    owd_min_us: ps.owd_min_us.unwrap_or(0) as f64,
                    reordered: ps.reordered,
                    reorder_extent_max: ps.reorder_extent_max,
                    path_seq_errors: ps.path_seq_errors,
                    peer: info.peer_report.map(|(at, e)| peer_report(now, at, &e)),
                    down_events: info.down_events,
                    mtu: wire_mtu(&info),
                    mtu_found: info.pmtu_found,
                    mtu_probes: info.pmtu_probes,
                    mtu_drops: info.pmtu_drops,
                    resend_asked: resend.requested,
                    resent: resend.resent,
                    resent_bytes: resend.resent_bytes,
                    resend_missed: resend.missed,
                    sent_loss_pct: ep.parity_state(path).0 * 100.0,
                    parity_group: ep.parity_state(path).1,
                    parity_sent: resend.parity_sent,
                    parity_bytes: resend.parity_bytes,
                    equalise_ms: ep.equalise_lag(path).as_secs_f64() * 1e3,
                    wire_tx_bytes: wire.0,
                    wire_rx_bytes: wire.1,
                    budget: (!peer.listening)
                        .then(|| self.budget_status(&self.path_name(peer, path)))
                        .flatten(),
                }
            })
            .collect()
    }
}

/// What the peer reported of a path at `at`, seen `now`.
fn peer_report(now: Time, at: Time, e: &mpt_core::wire::ReportEntry) -> PeerReport {
    PeerReport {
        age_ms: (now - at).as_millis() as u64,
        rx_packets: u64::from(e.packets),
        rx_bytes: e.bytes,
        lost: u64::from(e.lost),
        jitter_us: u64::from(e.jitter_us),
        owd_us: u64::from(e.owd_us),
    }
}

/// A path's MTU on the wire: its largest datagram with the outer IP and UDP headers.
fn wire_mtu(info: &mpt_tunnel::PathInfo) -> usize {
    let outer = if info.remote.is_some_and(|r| r.is_ipv6()) {
        48
    } else {
        28
    };
    info.datagram_max + outer
}

/// A path's transport in the status: "udp", or a stream's "tcp" or "tls" (a dialling side's as
/// configured, a listening side's as the stream to the peer's address `remote` came).
fn transport(
    engine: mpt_tunnel::Transport,
    sock: Option<&crate::tunnel::SockIo>,
    remote: Option<std::net::SocketAddr>,
) -> &'static str {
    use crate::stream::Role;
    if engine == mpt_tunnel::Transport::Datagram {
        return "udp";
    }
    let tls = sock
        .and_then(|s| s.stream.as_ref())
        .is_some_and(|side| match &side.role {
            Role::Dial { tls, .. } => tls.is_some(),
            Role::Listen => remote
                .and_then(|r| side.conn(r))
                .is_some_and(|c| c.tls.load(std::sync::atomic::Ordering::Relaxed)),
        });
    if tls {
        "tls"
    } else {
        "tcp"
    }
}
