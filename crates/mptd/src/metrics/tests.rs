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
