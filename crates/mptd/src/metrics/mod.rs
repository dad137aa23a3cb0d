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
mod table;
pub use histograms::ReseqHistograms;
use histograms::{hold_buckets, occupancy_buckets, PeerHistograms};
pub use serve::{serve, Source};
use table::METRICS;

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
    /// Each peer's drop counts, one sample per reason it dropped any for (labels `peer`,
    /// `reason`).
    PeerDrops,
    /// Each traffic class's packets per path (labels `class`, `path`).
    Classes,
}

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
        Of::PeerDrops => Samples::Counts(peer_drops(st)),
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
    by_reason(&st.tunnel.drops)
        .map(|(reason, n)| (labels(&[("reason", reason)]), n))
        .collect()
}

/// Each peer's drop counts that are not 0, labelled by peer and reason: a server of many
/// peers shows who sent what it refused, in a sample per reason that happened.
fn peer_drops(st: &Status) -> Vec<(Labels, u64)> {
    let mut out = Vec::new();
    for peer in &st.peers {
        for (reason, n) in by_reason(&peer.drops).filter(|&(_, n)| n > 0) {
            out.push((labels(&[("peer", &peer.name), ("reason", reason)]), n));
        }
    }
    out
}

/// `drops`' count of each reason, by the status document's name.
fn by_reason(drops: &mpt_tunnel::DropCounts) -> impl Iterator<Item = (&'static str, u64)> + '_ {
    mpt_tunnel::DropReason::ALL
        .iter()
        .map(move |r| (r.name(), drops.get(*r)))
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
