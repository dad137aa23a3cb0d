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
    let got = normalised(&render(&st, reseq));
    if std::env::var_os("MPTD_BLESS").is_some() {
        // MPTD_BLESS=1 cargo test -p mptd metrics: write the rendering as the new golden file
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/src/metrics/golden.prom");
        std::fs::write(file, &got).expect("write golden.prom");
    }
    assert_eq!(got, SAMPLE_RENDERED);
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
                transport: if j == 0 { "tcp".into() } else { "udp".into() },
                transport_changes: b + 18,
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
    st.peers[0].drops.bad_tag = 12;
    st.peers[1].drops.no_path = 11;
    st.peers[1].drops.replayed = 13;
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
const SAMPLE_RENDERED: &str = include_str!("golden.prom");
