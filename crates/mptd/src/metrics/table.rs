//! The families the metrics page shows ([`METRICS`]): each one's name, help, and where its
//! samples come from in the status document.

use super::{Metric, Of};

/// The families [`super::render`] writes, in the order it writes them (the registry keeps the order
/// of registration); the resequencer's histograms follow.
pub(super) const METRICS: &[Metric] = &[
    Metric {
        name: "path_up",
        help: "1 while the path is up, 0 otherwise",
        of: Of::PathReading(|p| Some(f64::from(u8::from(p.state == "up")))),
    },
    Metric {
        name: "path_sent_bytes",
        help: "Bytes of datagrams sent on the path",
        of: Of::PathCount(|p| p.tx_bytes),
    },
    Metric {
        name: "path_sent_packets",
        help: "Datagrams sent on the path",
        of: Of::PathCount(|p| p.tx_packets),
    },
    Metric {
        name: "path_sent_control_bytes",
        help:
            "Bytes of control datagrams (keepalives, reports, handshakes, probes) sent on the path",
        of: Of::PathCount(|p| p.tx_control_bytes),
    },
    Metric {
        name: "path_sent_control_packets",
        help: "Control datagrams sent on the path",
        of: Of::PathCount(|p| p.tx_control_packets),
    },
    Metric {
        name: "path_received_bytes",
        help: "Bytes of inner packets received on the path",
        of: Of::PathCount(|p| p.rx_bytes),
    },
    Metric {
        name: "path_received_packets",
        help: "Inner packets received on the path",
        of: Of::PathCount(|p| p.rx_packets),
    },
    Metric {
        name: "path_lost_packets",
        help: "Packets lost on the path (per-path sequence gaps)",
        of: Of::PathCount(|p| p.lost),
    },
    Metric {
        name: "path_reordered_packets",
        help: "Packets that arrived out of order on the path",
        of: Of::PathCount(|p| p.reordered),
    },
    Metric {
        name: "path_resent_packets",
        help: "Packets the path lost that were sent again because the peer asked",
        of: Of::PathCount(|p| p.resent),
    },
    Metric {
        name: "path_resent_bytes",
        help: "Bytes on the links that sending the path's losses again cost",
        of: Of::PathCount(|p| p.resent_bytes),
    },
    Metric {
        name: "recovered_packets",
        help: "Lost packets that came again in time to fill their gap (the first peer's)",
        of: Of::TunnelCount(|st| st.tunnel.reseq.recovered),
    },
    Metric {
        name: "path_parity_bytes",
        help: "Bytes on the links that parity (forward error correction) on the path cost",
        of: Of::PathCount(|p| p.parity_bytes),
    },
    Metric {
        name: "parity_repaired_packets",
        help: "Lost packets made again from the peer's parity (the first peer's)",
        of: Of::TunnelCount(|st| st.tunnel.reseq.parity_repaired),
    },
    Metric {
        name: "path_down_events",
        help: "Times the path went down",
        of: Of::PathCount(|p| p.down_events),
    },
    Metric {
        name: "path_rtt_seconds",
        help: "Smoothed round-trip time of the path",
        of: Of::PathReading(|p| p.rtt_us.map(|r| r as f64 / 1e6)),
    },
    Metric {
        name: "path_jitter_seconds",
        help: "RFC 3550 interarrival jitter of the path",
        of: Of::PathReading(|p| Some(p.jitter_us / 1e6)),
    },
    Metric {
        name: "path_rate_bytes_per_second",
        help: "The rate the scheduler assumes for the path (learned or configured)",
        of: Of::PathReading(|p| p.rate_bps.map(|r| r as f64 / 8.0)),
    },
    Metric {
        name: "path_last_heard_seconds",
        help: "Seconds since anything arrived on the path",
        of: Of::PathReading(|p| p.last_heard_ms.map(|ms| ms as f64 / 1000.0)),
    },
    Metric {
        name: "path_wire_sent_bytes",
        help: "Bytes the path's socket sent on the wire, outer IP and UDP headers included",
        of: Of::PathCount(|p| p.wire_tx_bytes),
    },
    Metric {
        name: "path_wire_received_bytes",
        help: "Bytes the path's socket received on the wire, outer IP and UDP headers included",
        of: Of::PathCount(|p| p.wire_rx_bytes),
    },
    Metric {
        name: "path_transport_tcp",
        help: "1 while the path's datagrams travel on TCP, 0 on UDP",
        of: Of::PathReading(|p| Some(f64::from(u8::from(p.transport != "udp")))),
    },
    Metric {
        name: "path_transport_changes",
        help: "Times a transport = auto path moved between UDP and TCP",
        of: Of::PathCount(|p| p.transport_changes),
    },
    Metric {
        name: "path_budget_used_bytes",
        help: "Bytes the path's data budget counted in its period (both ways, headers included)",
        of: Of::PathReading(|p| p.budget.as_ref().map(|b| b.used as f64)),
    },
    Metric {
        name: "path_budget_limit_bytes",
        help: "The path's data budget per period",
        of: Of::PathReading(|p| p.budget.as_ref().map(|b| b.limit as f64)),
    },
    Metric {
        name: "path_budget_period_end_seconds",
        help: "When the path's data budget period ends (Unix time)",
        of: Of::PathReading(|p| p.budget.as_ref().map(|b| b.period_end as f64)),
    },
    Metric {
        name: "path_budget_exhausted",
        help: "1 while the path's data budget is spent (the path demoted or off), 0 otherwise",
        of: Of::PathReading(|p| p.budget.as_ref().map(|b| f64::from(u8::from(b.exhausted)))),
    },
    Metric {
        name: "peer_session_up",
        help: "1 while a handshake has made a session with the peer",
        of: Of::PeerReading(|p| Some(f64::from(u8::from(p.keys_agreed)))),
    },
    Metric {
        name: "peer_last_handshake_seconds",
        help: "Seconds since the last handshake with the peer",
        of: Of::PeerReading(|p| p.last_handshake_ms.map(|ms| ms as f64 / 1000.0)),
    },
    Metric {
        name: "peer_rekeys",
        help: "Sessions that renewed one both ends had",
        of: Of::PeerCount(|p| p.rekeys),
    },
    Metric {
        name: "peer_restarts",
        help: "Sessions the peer started afresh (it restarted)",
        of: Of::PeerCount(|p| p.restarts),
    },
    Metric {
        name: "dropped_packets",
        help: "Packets and datagrams dropped, by reason",
        of: Of::Drops,
    },
    Metric {
        name: "peer_dropped_packets",
        help: "Packets and datagrams of a peer dropped, by reason (the reasons it had any for)",
        of: Of::PeerDrops,
    },
    Metric {
        name: "delivered_packets",
        help: "Inner packets written to the TUN device",
        of: Of::PeerCount(|p| p.delivered),
    },
    Metric {
        name: "resequencer_held_packets",
        help: "Packets the first peer's resequencer holds now",
        of: Of::TunnelReading(|st| st.tunnel.reseq.held as f64),
    },
    Metric {
        name: "uptime_seconds",
        help: "Seconds since mptd started",
        of: Of::TunnelReading(|st| st.tunnel.uptime_ms as f64 / 1000.0),
    },
    Metric {
        name: "cookie_replies",
        help: "Cookie replies sent while under handshake load",
        of: Of::TunnelCount(|st| st.tunnel.calls.cookie_replies),
    },
    Metric {
        name: "class_sent_packets",
        help: "Packets of each traffic class sent, per path (copies included)",
        of: Of::Classes,
    },
    Metric {
        name: "copies_sent_packets",
        help: "Copies sent by traffic classes in duplicate mode",
        of: Of::TunnelCount(|st| st.tunnel.copies_sent),
    },
];
