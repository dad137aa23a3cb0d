//! Prometheus metrics (`[control] metrics = "127.0.0.1:9754"`, off by default): the status
//! document as metrics, named per Prometheus' conventions, and the resequencer's hold times as
//! histograms, encoded by the `prometheus-client` crate (OpenMetrics text) at each scrape.
//! Served over plain HTTP: `GET /metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::status::{PathStatus, PeerStatus, Status};

mod histograms;
mod serve;
pub use histograms::ReseqHistograms;
use histograms::{hold_buckets, occupancy_buckets, PeerHistograms};
pub use serve::{serve, Source};

type Labels = Vec<(String, String)>;
type Counters = Family<Labels, Counter>;
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A family of metrics: its name (after the `mptd_` prefix; a counter's samples add
/// `_total`), its help, and where its samples come from.
#[derive(Debug)]
struct Metric {
    /// The family's name, without the prefix.
    name: &'static str,
    /// Its `# HELP` (the encoder adds the full stop).
    help: &'static str,
    /// Where its samples come from.
    of: Of,
}

/// Where a family's samples come from, and so its type: a counter counts (`u64`), a gauge
/// reads (`f64`; a path's or peer's `None` is no sample).
#[derive(Debug, Clone, Copy)]
enum Of {
    /// A counter of each path of each peer (labels `peer`, `path`).
    PathCount(fn(&PathStatus) -> u64),
    /// A gauge of each path of each peer (labels `peer`, `path`).
    PathReading(fn(&PathStatus) -> Option<f64>),
    /// A counter of each peer (label `peer`).
    PeerCount(fn(&PeerStatus) -> u64),
    /// A gauge of each peer (label `peer`).
    PeerReading(fn(&PeerStatus) -> Option<f64>),
    /// A counter of the whole tunnel (no labels).
    TunnelCount(fn(&Status) -> u64),
    /// A gauge of the whole tunnel (no labels).
    TunnelReading(fn(&Status) -> f64),
    /// The tunnel's drop counts, one sample per reason (label `reason`).
    Drops,
    /// Each traffic class's packets per path (labels `class`, `path`).
    Classes,
}

/// The families [`render`] writes, in the order it writes them (the registry keeps the order
/// of registration); the resequencer's histograms follow.
const METRICS: &[Metric] = &[
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

/// A family's samples, each label set's count (a counter) or reading (a gauge).
enum Samples {
    /// A counter's: counts stay `u64`.
    Counts(Vec<(Labels, u64)>),
    /// A gauge's.
    Readings(Vec<(Labels, f64)>),
}

/// The metrics of `st` (and each peer's resequencer histograms) in the OpenMetrics text
/// format.
pub fn render(st: &Status, reseq: Vec<ReseqHistograms>) -> String {
    let mut reg = Registry::with_prefix("mptd");
    for m in METRICS {
        register(&mut reg, m, samples(m.of, st));
    }
    let mut hold = PeerHistograms::default();
    let mut occupancy = PeerHistograms::default();
    for (peer, h, o) in &reseq {
        hold.0.push((peer.clone(), hold_buckets(h)));
        occupancy.0.push((peer.clone(), occupancy_buckets(o)));
    }
    reg.register(
        "resequencer_hold_seconds",
        "How long packets waited in the resequencer (0 for those delivered at once)",
        hold,
    );
    reg.register(
        "resequencer_occupancy_packets",
        "Packets the resequencer held, sampled as each arrived",
        occupancy,
    );
    let mut out = String::new();
    // writing into a String cannot fail
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

/// Registers `m` in `reg` as a counter or a gauge family holding `samples` (a label set seen
/// twice adds to a counter, and its last reading is a gauge's).
fn register(reg: &mut Registry, m: &Metric, samples: Samples) {
    match samples {
        Samples::Counts(counts) => {
            let f = Counters::default();
            for (l, n) in &counts {
                f.get_or_create(l).inc_by(*n);
            }
            reg.register(m.name, m.help, f);
        }
        Samples::Readings(readings) => {
            let f = Gauges::default();
            for (l, x) in &readings {
                f.get_or_create(l).set(*x);
            }
            reg.register(m.name, m.help, f);
        }
    }
}

/// The samples of `st` that `of` names.
fn samples(of: Of, st: &Status) -> Samples {
    match of {
        Of::PathCount(v) => Samples::Counts(per_path(st, |p| Some(v(p)))),
        Of::PathReading(v) => Samples::Readings(per_path(st, v)),
        Of::PeerCount(v) => Samples::Counts(per_peer(st, |p| Some(v(p)))),
        Of::PeerReading(v) => Samples::Readings(per_peer(st, v)),
        Of::TunnelCount(v) => Samples::Counts(vec![(Vec::new(), v(st))]),
        Of::TunnelReading(v) => Samples::Readings(vec![(Vec::new(), v(st))]),
        Of::Drops => Samples::Counts(drops(st)),
        Of::Classes => Samples::Counts(classes(st)),
    }
}

/// `v` of each path of each peer that has one, labelled by peer and path.
fn per_path<T>(st: &Status, v: impl Fn(&PathStatus) -> Option<T>) -> Vec<(Labels, T)> {
    let mut out = Vec::new();
    for peer in &st.peers {
        for path in &peer.paths {
            if let Some(x) = v(path) {
                out.push((labels(&[("peer", &peer.name), ("path", &path.name)]), x));
            }
        }
    }
    out
}

/// `v` of each peer that has one, labelled by peer.
fn per_peer<T>(st: &Status, v: impl Fn(&PeerStatus) -> Option<T>) -> Vec<(Labels, T)> {
    st.peers
        .iter()
        .filter_map(|peer| Some((labels(&[("peer", &peer.name)]), v(peer)?)))
        .collect()
}

/// The tunnel's drop count of each reason, labelled by reason (the status document's name).
fn drops(st: &Status) -> Vec<(Labels, u64)> {
    let d = serde_json::to_value(&st.tunnel.drops).unwrap_or_default();
    let Some(map) = d.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (reason, n) in map {
        out.push((labels(&[("reason", reason)]), n.as_u64().unwrap_or(0)));
    }
    out
}

/// The packets each traffic class sent on each path, labelled by class and path.
fn classes(st: &Status) -> Vec<(Labels, u64)> {
    let mut out = Vec::new();
    for c in &st.tunnel.classes {
        for (i, &n) in c.sent_per_path.iter().enumerate() {
            // the first peer's path names (all of a one-peer tunnel's)
            let path = st
                .paths
                .get(i)
                .map_or_else(|| i.to_string(), |p| p.name.clone());
            out.push((labels(&[("class", &c.name), ("path", &path)]), n));
        }
    }
    out
}

/// The OpenMetrics text of [`render`] in Prometheus' classic text format (0.0.4), for scrapers
/// that do not ask for OpenMetrics (and for `promtool check metrics`): a counter family's
/// HELP and TYPE name its `_total` samples, and there is no `# EOF`.
pub fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let total = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                out.push_str(&format!("{kind}{name}{total} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
