//! The OpenMetrics and classic Prometheus renderings of a status.

use super::*;

#[test]
fn the_classic_format_names_counters_by_their_samples() {
    let om = "# HELP x_sent Bytes sent.\n# TYPE x_sent counter\nx_sent_total{a=\"b\"} 3\n\
              # HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n# EOF\n";
    assert_eq!(
        classic(om),
        "# HELP x_sent_total Bytes sent.\n# TYPE x_sent_total counter\nx_sent_total{a=\"b\"} 3\n\
         # HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"
    );
}

/// Every metric the shipped Grafana dashboard queries is one this daemon serves.
#[test]
fn the_dashboard_queries_only_metrics_we_serve() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../../../contrib/grafana/mptd.json"))
            .expect("the dashboard is JSON");
    let mut st = crate::status::Status::default();
    st.peers.push(crate::status::PeerStatus {
        name: "p".into(),
        paths: vec![crate::status::PathStatus {
            rtt_us: Some(1),
            rate_bps: Some(8),
            last_heard_ms: Some(1),
            ..Default::default()
        }],
        last_handshake_ms: Some(1),
        ..Default::default()
    });
    let served = classic(&render(
        &st,
        vec![(
            "p".into(),
            mpt_reseq::LogHistogram::default(),
            mpt_reseq::OccupancyHistogram::for_window(8),
        )],
    ));
    let names: std::collections::HashSet<&str> = served
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .collect();
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if let Some(name) = word.strip_prefix("mptd_") {
                    let family = ["_bucket", "_sum", "_count"]
                        .iter()
                        .find_map(|s| word.strip_suffix(s))
                        .unwrap_or(word);
                    assert!(
                        names.contains(family),
                        "mptd_{name} is not served: {names:?}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 10, "{checked}");
}

#[test]
fn occupancy_falls_in_the_first_bound_at_or_above_it() {
    let mut o = mpt_reseq::OccupancyHistogram::for_window(8000);
    for held in [0, 0, 3, 3000] {
        o.record(held);
    }
    let (sum, count, buckets) = occupancy_buckets(&o);
    assert_eq!((sum, count), (3003.0, 4));
    let at = |b: f64| buckets.iter().find(|(u, _)| *u == b).map(|x| x.1);
    assert_eq!(at(0.0), Some(2));
    assert_eq!(at(4.0), Some(1));
    assert_eq!(at(4096.0), Some(1));
    assert_eq!(buckets.last(), Some(&(f64::MAX, 0)));
}

#[test]
fn hold_times_fall_in_the_first_bound_at_or_above_them() {
    let mut h = mpt_reseq::LogHistogram::default();
    for ns in [0, 0, 50_000, 2_000_000, 3_000_000_000] {
        h.record(ns);
    }
    let (sum, count, buckets) = hold_buckets(&h);
    assert_eq!(count, 5);
    assert!((sum - 3.00205).abs() < 1e-6, "{sum}");
    let at = |b: f64| buckets.iter().find(|(u, _)| *u == b).map(|x| x.1);
    assert_eq!(at(0.0), Some(2));
    assert_eq!(at(0.0001), Some(1));
    assert_eq!(at(0.0025), Some(1));
    assert_eq!(buckets.last(), Some(&(f64::MAX, 1)));
    assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 5);
}

/// The families come in the order they did and every value is as it was: a change to either
/// fails here. (A new drop reason adds a line.)
#[test]
fn a_status_renders_as_it_did() {
    let (st, reseq) = sample();
    assert_eq!(normalised(&render(&st, reseq)), SAMPLE_RENDERED);
}

/// A status of two peers with two paths each, drops, a class and histograms.
fn sample() -> (crate::status::Status, Vec<ReseqHistograms>) {
    use crate::status::{ClassStatus, PathStatus, PeerStatus, Status};
    let mut st = Status::default();
    for (i, peer) in ["alpha", "beta"].iter().enumerate() {
        let mut paths = Vec::new();
        for (j, path) in ["lte", "dsl"].iter().enumerate() {
            let b = (i as u64 + 1) * 1000 + (j as u64 + 1) * 100;
            paths.push(PathStatus {
                name: (*path).into(),
                state: if j == 0 { "up".into() } else { "down".into() },
                tx_bytes: b + 1,
                tx_packets: b + 2,
                tx_control_bytes: b + 3,
                tx_control_packets: b + 4,
                rx_bytes: b + 5,
                rx_packets: b + 6,
                lost: b + 7,
                reordered: b + 8,
                resent: b + 9,
                resent_bytes: b + 10,
                parity_bytes: b + 11,
                down_events: b + 12,
                jitter_us: b as f64 + 0.5,
                rtt_us: (j == 0).then_some(b + 13),
                rate_bps: (i == 0).then_some(b * 8 + 14),
                last_heard_ms: (i + j != 1).then_some(b + 15),
                wire_tx_bytes: b + 16,
                wire_rx_bytes: b + 17,
                budget: (i + j == 0).then(|| crate::status::BudgetStatus {
                    limit: 20_000_000_000,
                    used: 3_210_000_000,
                    left: 16_790_000_000,
                    period_start: 1_796_083_200,
                    period_end: 1_798_761_600,
                    exhausted: false,
                    action: "backup".into(),
                }),
                ..Default::default()
            });
        }
        st.peers.push(PeerStatus {
            name: (*peer).into(),
            keys_agreed: i == 0,
            last_handshake_ms: (i == 0).then_some(2500),
            rekeys: i as u64 + 3,
            restarts: i as u64 + 5,
            delivered: i as u64 + 7,
            paths,
            ..Default::default()
        });
    }
    st.paths = st.peers[0].paths.clone();
    // beyond what an f64 holds exactly: counters stay u64
    st.peers[1].paths[1].tx_bytes = (1 << 53) + 1;
    let t = &mut st.tunnel;
    t.drops.no_path = 11;
    t.drops.bad_tag = 12;
    t.drops.duplicate = (1 << 60) + 3;
    t.classes.push(ClassStatus {
        name: "voice".into(),
        mode: "duplicate".into(),
        sent: 60,
        sent_per_path: vec![21, 22, 23],
    });
    t.copies_sent = 31;
    t.reseq.recovered = 32;
    t.reseq.parity_repaired = 33;
    t.reseq.held = 34;
    t.uptime_ms = 123_456;
    t.calls.cookie_replies = 35;
    let mut reseq = Vec::new();
    for (k, peer) in ["alpha", "beta"].iter().enumerate() {
        let mut h = mpt_reseq::LogHistogram::default();
        let mut o = mpt_reseq::OccupancyHistogram::for_window(64);
        for n in 0..=k as u64 + 2 {
            h.record(n * 700_000);
            o.record(n as usize * 3);
        }
        reseq.push(((*peer).to_string(), h, o));
    }
    (st, reseq)
}

/// `text` with each counter and gauge family's samples sorted: the encoder writes a family's
/// label sets in the order of its hash map, which differs from one registry to the next.
/// Families keep their order, and histograms theirs (a peer's, in the order given).
fn normalised(text: &str) -> String {
    let mut out = String::new();
    let mut samples: Vec<&str> = Vec::new();
    let mut sort = false;
    let flush = |out: &mut String, samples: &mut Vec<&str>, sort: bool| {
        if sort {
            samples.sort_unstable();
        }
        for s in samples.drain(..) {
            out.push_str(s);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut out, &mut samples, sort);
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                sort = !rest.ends_with(" histogram");
            }
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut out, &mut samples, sort);
    out
}

/// What [`render`] makes of [`sample`], [`normalised`].
const SAMPLE_RENDERED: &str = r#"# HELP mptd_path_up 1 while the path is up, 0 otherwise.
# TYPE mptd_path_up gauge
mptd_path_up{peer="alpha",path="dsl"} 0.0
mptd_path_up{peer="alpha",path="lte"} 1.0
mptd_path_up{peer="beta",path="dsl"} 0.0
mptd_path_up{peer="beta",path="lte"} 1.0
# HELP mptd_path_sent_bytes Bytes of datagrams sent on the path.
# TYPE mptd_path_sent_bytes counter
mptd_path_sent_bytes_total{peer="alpha",path="dsl"} 1201
mptd_path_sent_bytes_total{peer="alpha",path="lte"} 1101
mptd_path_sent_bytes_total{peer="beta",path="dsl"} 9007199254740993
mptd_path_sent_bytes_total{peer="beta",path="lte"} 2101
# HELP mptd_path_sent_packets Datagrams sent on the path.
# TYPE mptd_path_sent_packets counter
mptd_path_sent_packets_total{peer="alpha",path="dsl"} 1202
mptd_path_sent_packets_total{peer="alpha",path="lte"} 1102
mptd_path_sent_packets_total{peer="beta",path="dsl"} 2202
mptd_path_sent_packets_total{peer="beta",path="lte"} 2102
# HELP mptd_path_sent_control_bytes Bytes of control datagrams (keepalives, reports, handshakes, probes) sent on the path.
# TYPE mptd_path_sent_control_bytes counter
mptd_path_sent_control_bytes_total{peer="alpha",path="dsl"} 1203
mptd_path_sent_control_bytes_total{peer="alpha",path="lte"} 1103
mptd_path_sent_control_bytes_total{peer="beta",path="dsl"} 2203
mptd_path_sent_control_bytes_total{peer="beta",path="lte"} 2103
# HELP mptd_path_sent_control_packets Control datagrams sent on the path.
# TYPE mptd_path_sent_control_packets counter
mptd_path_sent_control_packets_total{peer="alpha",path="dsl"} 1204
mptd_path_sent_control_packets_total{peer="alpha",path="lte"} 1104
mptd_path_sent_control_packets_total{peer="beta",path="dsl"} 2204
mptd_path_sent_control_packets_total{peer="beta",path="lte"} 2104
# HELP mptd_path_received_bytes Bytes of inner packets received on the path.
# TYPE mptd_path_received_bytes counter
mptd_path_received_bytes_total{peer="alpha",path="dsl"} 1205
mptd_path_received_bytes_total{peer="alpha",path="lte"} 1105
mptd_path_received_bytes_total{peer="beta",path="dsl"} 2205
mptd_path_received_bytes_total{peer="beta",path="lte"} 2105
# HELP mptd_path_received_packets Inner packets received on the path.
# TYPE mptd_path_received_packets counter
mptd_path_received_packets_total{peer="alpha",path="dsl"} 1206
mptd_path_received_packets_total{peer="alpha",path="lte"} 1106
mptd_path_received_packets_total{peer="beta",path="dsl"} 2206
mptd_path_received_packets_total{peer="beta",path="lte"} 2106
# HELP mptd_path_lost_packets Packets lost on the path (per-path sequence gaps).
# TYPE mptd_path_lost_packets counter
mptd_path_lost_packets_total{peer="alpha",path="dsl"} 1207
mptd_path_lost_packets_total{peer="alpha",path="lte"} 1107
mptd_path_lost_packets_total{peer="beta",path="dsl"} 2207
mptd_path_lost_packets_total{peer="beta",path="lte"} 2107
# HELP mptd_path_reordered_packets Packets that arrived out of order on the path.
# TYPE mptd_path_reordered_packets counter
mptd_path_reordered_packets_total{peer="alpha",path="dsl"} 1208
mptd_path_reordered_packets_total{peer="alpha",path="lte"} 1108
mptd_path_reordered_packets_total{peer="beta",path="dsl"} 2208
mptd_path_reordered_packets_total{peer="beta",path="lte"} 2108
# HELP mptd_path_resent_packets Packets the path lost that were sent again because the peer asked.
# TYPE mptd_path_resent_packets counter
mptd_path_resent_packets_total{peer="alpha",path="dsl"} 1209
mptd_path_resent_packets_total{peer="alpha",path="lte"} 1109
mptd_path_resent_packets_total{peer="beta",path="dsl"} 2209
mptd_path_resent_packets_total{peer="beta",path="lte"} 2109
# HELP mptd_path_resent_bytes Bytes on the links that sending the path's losses again cost.
# TYPE mptd_path_resent_bytes counter
mptd_path_resent_bytes_total{peer="alpha",path="dsl"} 1210
mptd_path_resent_bytes_total{peer="alpha",path="lte"} 1110
mptd_path_resent_bytes_total{peer="beta",path="dsl"} 2210
mptd_path_resent_bytes_total{peer="beta",path="lte"} 2110
# HELP mptd_recovered_packets Lost packets that came again in time to fill their gap (the first peer's).
# TYPE mptd_recovered_packets counter
mptd_recovered_packets_total{} 32
# HELP mptd_path_parity_bytes Bytes on the links that parity (forward error correction) on the path cost.
# TYPE mptd_path_parity_bytes counter
mptd_path_parity_bytes_total{peer="alpha",path="dsl"} 1211
mptd_path_parity_bytes_total{peer="alpha",path="lte"} 1111
mptd_path_parity_bytes_total{peer="beta",path="dsl"} 2211
mptd_path_parity_bytes_total{peer="beta",path="lte"} 2111
# HELP mptd_parity_repaired_packets Lost packets made again from the peer's parity (the first peer's).
# TYPE mptd_parity_repaired_packets counter
mptd_parity_repaired_packets_total{} 33
# HELP mptd_path_down_events Times the path went down.
# TYPE mptd_path_down_events counter
mptd_path_down_events_total{peer="alpha",path="dsl"} 1212
mptd_path_down_events_total{peer="alpha",path="lte"} 1112
mptd_path_down_events_total{peer="beta",path="dsl"} 2212
mptd_path_down_events_total{peer="beta",path="lte"} 2112
# HELP mptd_path_rtt_seconds Smoothed round-trip time of the path.
# TYPE mptd_path_rtt_seconds gauge
mptd_path_rtt_seconds{peer="alpha",path="lte"} 0.001113
mptd_path_rtt_seconds{peer="beta",path="lte"} 0.002113
# HELP mptd_path_jitter_seconds RFC 3550 interarrival jitter of the path.
# TYPE mptd_path_jitter_seconds gauge
mptd_path_jitter_seconds{peer="alpha",path="dsl"} 0.0012005
mptd_path_jitter_seconds{peer="alpha",path="lte"} 0.0011005
mptd_path_jitter_seconds{peer="beta",path="dsl"} 0.0022005
mptd_path_jitter_seconds{peer="beta",path="lte"} 0.0021005
# HELP mptd_path_rate_bytes_per_second The rate the scheduler assumes for the path (learned or configured).
# TYPE mptd_path_rate_bytes_per_second gauge
mptd_path_rate_bytes_per_second{peer="alpha",path="dsl"} 1201.75
mptd_path_rate_bytes_per_second{peer="alpha",path="lte"} 1101.75
# HELP mptd_path_last_heard_seconds Seconds since anything arrived on the path.
# TYPE mptd_path_last_heard_seconds gauge
mptd_path_last_heard_seconds{peer="alpha",path="lte"} 1.115
mptd_path_last_heard_seconds{peer="beta",path="dsl"} 2.215
# HELP mptd_path_wire_sent_bytes Bytes the path's socket sent on the wire, outer IP and UDP headers included.
# TYPE mptd_path_wire_sent_bytes counter
mptd_path_wire_sent_bytes_total{peer="alpha",path="dsl"} 1216
mptd_path_wire_sent_bytes_total{peer="alpha",path="lte"} 1116
mptd_path_wire_sent_bytes_total{peer="beta",path="dsl"} 2216
mptd_path_wire_sent_bytes_total{peer="beta",path="lte"} 2116
# HELP mptd_path_wire_received_bytes Bytes the path's socket received on the wire, outer IP and UDP headers included.
# TYPE mptd_path_wire_received_bytes counter
mptd_path_wire_received_bytes_total{peer="alpha",path="dsl"} 1217
mptd_path_wire_received_bytes_total{peer="alpha",path="lte"} 1117
mptd_path_wire_received_bytes_total{peer="beta",path="dsl"} 2217
mptd_path_wire_received_bytes_total{peer="beta",path="lte"} 2117
# HELP mptd_path_budget_used_bytes Bytes the path's data budget counted in its period (both ways, headers included).
# TYPE mptd_path_budget_used_bytes gauge
mptd_path_budget_used_bytes{peer="alpha",path="lte"} 3210000000.0
# HELP mptd_path_budget_limit_bytes The path's data budget per period.
# TYPE mptd_path_budget_limit_bytes gauge
mptd_path_budget_limit_bytes{peer="alpha",path="lte"} 20000000000.0
# HELP mptd_path_budget_period_end_seconds When the path's data budget period ends (Unix time).
# TYPE mptd_path_budget_period_end_seconds gauge
mptd_path_budget_period_end_seconds{peer="alpha",path="lte"} 1798761600.0
# HELP mptd_path_budget_exhausted 1 while the path's data budget is spent (the path demoted or off), 0 otherwise.
# TYPE mptd_path_budget_exhausted gauge
mptd_path_budget_exhausted{peer="alpha",path="lte"} 0.0
# HELP mptd_peer_session_up 1 while a handshake has made a session with the peer.
# TYPE mptd_peer_session_up gauge
mptd_peer_session_up{peer="alpha"} 1.0
mptd_peer_session_up{peer="beta"} 0.0
# HELP mptd_peer_last_handshake_seconds Seconds since the last handshake with the peer.
# TYPE mptd_peer_last_handshake_seconds gauge
mptd_peer_last_handshake_seconds{peer="alpha"} 2.5
# HELP mptd_peer_rekeys Sessions that renewed one both ends had.
# TYPE mptd_peer_rekeys counter
mptd_peer_rekeys_total{peer="alpha"} 3
mptd_peer_rekeys_total{peer="beta"} 4
# HELP mptd_peer_restarts Sessions the peer started afresh (it restarted).
# TYPE mptd_peer_restarts counter
mptd_peer_restarts_total{peer="alpha"} 5
mptd_peer_restarts_total{peer="beta"} 6
# HELP mptd_dropped_packets Packets and datagrams dropped, by reason.
# TYPE mptd_dropped_packets counter
mptd_dropped_packets_total{reason="bad_control"} 0
mptd_dropped_packets_total{reason="bad_handshake"} 0
mptd_dropped_packets_total{reason="bad_tag"} 12
mptd_dropped_packets_total{reason="bad_version"} 0
mptd_dropped_packets_total{reason="cipher_mismatch"} 0
mptd_dropped_packets_total{reason="duplicate"} 1152921504606846979
mptd_dropped_packets_total{reason="empty"} 0
mptd_dropped_packets_total{reason="fragment_expired"} 0
mptd_dropped_packets_total{reason="fragment_overlap"} 0
mptd_dropped_packets_total{reason="handshake_limited"} 0
mptd_dropped_packets_total{reason="inner_length"} 0
mptd_dropped_packets_total{reason="no_path"} 11
mptd_dropped_packets_total{reason="no_reference"} 0
mptd_dropped_packets_total{reason="no_route"} 0
mptd_dropped_packets_total{reason="no_session"} 0
mptd_dropped_packets_total{reason="not_ip"} 0
mptd_dropped_packets_total{reason="oversize"} 0
mptd_dropped_packets_total{reason="paced"} 0
mptd_dropped_packets_total{reason="path_mismatch"} 0
mptd_dropped_packets_total{reason="queue_full"} 0
mptd_dropped_packets_total{reason="replayed"} 0
mptd_dropped_packets_total{reason="sealed"} 0
mptd_dropped_packets_total{reason="send_error"} 0
mptd_dropped_packets_total{reason="source_not_allowed"} 0
mptd_dropped_packets_total{reason="stale_handshake"} 0
mptd_dropped_packets_total{reason="stream_full"} 0
mptd_dropped_packets_total{reason="stream_garbage"} 0
mptd_dropped_packets_total{reason="stream_refused"} 0
mptd_dropped_packets_total{reason="stream_slow_reader"} 0
mptd_dropped_packets_total{reason="stream_unauthenticated"} 0
mptd_dropped_packets_total{reason="too_big"} 0
mptd_dropped_packets_total{reason="too_old"} 0
mptd_dropped_packets_total{reason="truncated"} 0
mptd_dropped_packets_total{reason="tun_read_error"} 0
mptd_dropped_packets_total{reason="tun_write_error"} 0
mptd_dropped_packets_total{reason="unauthenticated"} 0
mptd_dropped_packets_total{reason="unexpected"} 0
mptd_dropped_packets_total{reason="unknown_key"} 0
mptd_dropped_packets_total{reason="unknown_kind"} 0
mptd_dropped_packets_total{reason="unknown_session"} 0
# HELP mptd_delivered_packets Inner packets written to the TUN device.
# TYPE mptd_delivered_packets counter
mptd_delivered_packets_total{peer="alpha"} 7
mptd_delivered_packets_total{peer="beta"} 8
# HELP mptd_resequencer_held_packets Packets the first peer's resequencer holds now.
# TYPE mptd_resequencer_held_packets gauge
mptd_resequencer_held_packets{} 34.0
# HELP mptd_uptime_seconds Seconds since mptd started.
# TYPE mptd_uptime_seconds gauge
mptd_uptime_seconds{} 123.456
# HELP mptd_cookie_replies Cookie replies sent while under handshake load.
# TYPE mptd_cookie_replies counter
mptd_cookie_replies_total{} 35
# HELP mptd_class_sent_packets Packets of each traffic class sent, per path (copies included).
# TYPE mptd_class_sent_packets counter
mptd_class_sent_packets_total{class="voice",path="2"} 23
mptd_class_sent_packets_total{class="voice",path="dsl"} 22
mptd_class_sent_packets_total{class="voice",path="lte"} 21
# HELP mptd_copies_sent_packets Copies sent by traffic classes in duplicate mode.
# TYPE mptd_copies_sent_packets counter
mptd_copies_sent_packets_total{} 31
# HELP mptd_resequencer_hold_seconds How long packets waited in the resequencer (0 for those delivered at once).
# TYPE mptd_resequencer_hold_seconds histogram
mptd_resequencer_hold_seconds_sum{peer="alpha"} 0.0021
mptd_resequencer_hold_seconds_count{peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.0",peer="alpha"} 1
mptd_resequencer_hold_seconds_bucket{le="0.0001",peer="alpha"} 1
mptd_resequencer_hold_seconds_bucket{le="0.00025",peer="alpha"} 1
mptd_resequencer_hold_seconds_bucket{le="0.0005",peer="alpha"} 1
mptd_resequencer_hold_seconds_bucket{le="0.001",peer="alpha"} 2
mptd_resequencer_hold_seconds_bucket{le="0.0025",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.005",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.01",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.025",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.05",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.1",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.25",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="0.5",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="1.0",peer="alpha"} 3
mptd_resequencer_hold_seconds_bucket{le="+Inf",peer="alpha"} 3
mptd_resequencer_hold_seconds_sum{peer="beta"} 0.0042
mptd_resequencer_hold_seconds_count{peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.0",peer="beta"} 1
mptd_resequencer_hold_seconds_bucket{le="0.0001",peer="beta"} 1
mptd_resequencer_hold_seconds_bucket{le="0.00025",peer="beta"} 1
mptd_resequencer_hold_seconds_bucket{le="0.0005",peer="beta"} 1
mptd_resequencer_hold_seconds_bucket{le="0.001",peer="beta"} 2
mptd_resequencer_hold_seconds_bucket{le="0.0025",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.005",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.01",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.025",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.05",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.1",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.25",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="0.5",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="1.0",peer="beta"} 4
mptd_resequencer_hold_seconds_bucket{le="+Inf",peer="beta"} 4
# HELP mptd_resequencer_occupancy_packets Packets the resequencer held, sampled as each arrived.
# TYPE mptd_resequencer_occupancy_packets histogram
mptd_resequencer_occupancy_packets_sum{peer="alpha"} 9.0
mptd_resequencer_occupancy_packets_count{peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="0.0",peer="alpha"} 1
mptd_resequencer_occupancy_packets_bucket{le="1.0",peer="alpha"} 1
mptd_resequencer_occupancy_packets_bucket{le="2.0",peer="alpha"} 1
mptd_resequencer_occupancy_packets_bucket{le="4.0",peer="alpha"} 2
mptd_resequencer_occupancy_packets_bucket{le="8.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="16.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="32.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="64.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="128.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="256.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="512.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="1024.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="2048.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="4096.0",peer="alpha"} 3
mptd_resequencer_occupancy_packets_bucket{le="+Inf",peer="alpha"} 3
mptd_resequencer_occupancy_packets_sum{peer="beta"} 18.0
mptd_resequencer_occupancy_packets_count{peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="0.0",peer="beta"} 1
mptd_resequencer_occupancy_packets_bucket{le="1.0",peer="beta"} 1
mptd_resequencer_occupancy_packets_bucket{le="2.0",peer="beta"} 1
mptd_resequencer_occupancy_packets_bucket{le="4.0",peer="beta"} 2
mptd_resequencer_occupancy_packets_bucket{le="8.0",peer="beta"} 3
mptd_resequencer_occupancy_packets_bucket{le="16.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="32.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="64.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="128.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="256.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="512.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="1024.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="2048.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="4096.0",peer="beta"} 4
mptd_resequencer_occupancy_packets_bucket{le="+Inf",peer="beta"} 4
# EOF
"#;
