//! Prometheus metrics (`[control] metrics = "127.0.0.1:9754"`, off by default): the status
//! document as metrics, named per Prometheus' conventions, and the resequencer's hold times as
//! histograms, encoded by the `prometheus-client` crate (OpenMetrics text) at each scrape.
//! Served over plain HTTP: `GET /metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::status::Status;

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

/// The metrics of `st` (and each peer's resequencer histograms) in the OpenMetrics text
/// format.
pub fn render(st: &Status, reseq: Vec<ReseqHistograms>) -> String {
    let mut reg = Registry::with_prefix("mptd");
    let counter = |reg: &mut Registry, name: &str, help: &str| {
        let f = Counters::default();
        reg.register(name, help, f.clone());
        f
    };
    let gauge = |reg: &mut Registry, name: &str, help: &str| {
        let f = Gauges::default();
        reg.register(name, help, f.clone());
        f
    };
    let up = gauge(&mut reg, "path_up", "1 while the path is up, 0 otherwise");
    let sent_b = counter(
        &mut reg,
        "path_sent_bytes",
        "Bytes of datagrams sent on the path",
    );
    let sent_p = counter(&mut reg, "path_sent_packets", "Datagrams sent on the path");
    let sent_cb = counter(
        &mut reg,
        "path_sent_control_bytes",
        "Bytes of control datagrams (keepalives, reports, handshakes, probes) sent on the path",
    );
    let sent_cp = counter(
        &mut reg,
        "path_sent_control_packets",
        "Control datagrams sent on the path",
    );
    let recv_b = counter(
        &mut reg,
        "path_received_bytes",
        "Bytes of inner packets received on the path",
    );
    let recv_p = counter(
        &mut reg,
        "path_received_packets",
        "Inner packets received on the path",
    );
    let lost = counter(
        &mut reg,
        "path_lost_packets",
        "Packets lost on the path (per-path sequence gaps)",
    );
    let reordered = counter(
        &mut reg,
        "path_reordered_packets",
        "Packets that arrived out of order on the path",
    );
    let resent_p = counter(
        &mut reg,
        "path_resent_packets",
        "Packets the path lost that were sent again because the peer asked",
    );
    let resent_b = counter(
        &mut reg,
        "path_resent_bytes",
        "Bytes on the links that sending the path's losses again cost",
    );
    let recovered = counter(
        &mut reg,
        "recovered_packets",
        "Lost packets that came again in time to fill their gap (the first peer's)",
    );
    let parity_b = counter(
        &mut reg,
        "path_parity_bytes",
        "Bytes on the links that parity (forward error correction) on the path cost",
    );
    let repaired = counter(
        &mut reg,
        "parity_repaired_packets",
        "Lost packets made again from the peer's parity (the first peer's)",
    );
    let downs = counter(&mut reg, "path_down_events", "Times the path went down");
    let rtt = gauge(
        &mut reg,
        "path_rtt_seconds",
        "Smoothed round-trip time of the path",
    );
    let jitter = gauge(
        &mut reg,
        "path_jitter_seconds",
        "RFC 3550 interarrival jitter of the path",
    );
    let rate = gauge(
        &mut reg,
        "path_rate_bytes_per_second",
        "The rate the scheduler assumes for the path (learned or configured)",
    );
    let heard = gauge(
        &mut reg,
        "path_last_heard_seconds",
        "Seconds since anything arrived on the path",
    );
    let session = gauge(
        &mut reg,
        "peer_session_up",
        "1 while a handshake has made a session with the peer",
    );
    let handshake = gauge(
        &mut reg,
        "peer_last_handshake_seconds",
        "Seconds since the last handshake with the peer",
    );
    let rekeys = counter(
        &mut reg,
        "peer_rekeys",
        "Sessions that renewed one both ends had",
    );
    let restarts = counter(
        &mut reg,
        "peer_restarts",
        "Sessions the peer started afresh (it restarted)",
    );
    let drops = counter(
        &mut reg,
        "dropped_packets",
        "Packets and datagrams dropped, by reason",
    );
    let delivered = counter(
        &mut reg,
        "delivered_packets",
        "Inner packets written to the TUN device",
    );
    let held = gauge(
        &mut reg,
        "resequencer_held_packets",
        "Packets the first peer's resequencer holds now",
    );
    let uptime = gauge(&mut reg, "uptime_seconds", "Seconds since mptd started");
    let cookies = counter(
        &mut reg,
        "cookie_replies",
        "Cookie replies sent while under handshake load",
    );
    let class_sent = counter(
        &mut reg,
        "class_sent_packets",
        "Packets of each traffic class sent, per path (copies included)",
    );
    let copies = counter(
        &mut reg,
        "copies_sent_packets",
        "Copies sent by traffic classes in duplicate mode",
    );
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

    let t = &st.tunnel;
    for peer in &st.peers {
        let p = labels(&[("peer", &peer.name)]);
        session
            .get_or_create(&p)
            .set(f64::from(u8::from(peer.keys_agreed)));
        if let Some(ms) = peer.last_handshake_ms {
            handshake.get_or_create(&p).set(ms as f64 / 1000.0);
        }
        rekeys.get_or_create(&p).inc_by(peer.rekeys);
        restarts.get_or_create(&p).inc_by(peer.restarts);
        delivered.get_or_create(&p).inc_by(peer.delivered);
        for path in &peer.paths {
            let l = labels(&[("peer", &peer.name), ("path", &path.name)]);
            up.get_or_create(&l)
                .set(f64::from(u8::from(path.state == "up")));
            sent_b.get_or_create(&l).inc_by(path.tx_bytes);
            sent_p.get_or_create(&l).inc_by(path.tx_packets);
            sent_cb.get_or_create(&l).inc_by(path.tx_control_bytes);
            sent_cp.get_or_create(&l).inc_by(path.tx_control_packets);
            recv_b.get_or_create(&l).inc_by(path.rx_bytes);
            recv_p.get_or_create(&l).inc_by(path.rx_packets);
            lost.get_or_create(&l).inc_by(path.lost);
            reordered.get_or_create(&l).inc_by(path.reordered);
            resent_p.get_or_create(&l).inc_by(path.resent);
            resent_b.get_or_create(&l).inc_by(path.resent_bytes);
            parity_b.get_or_create(&l).inc_by(path.parity_bytes);
            downs.get_or_create(&l).inc_by(path.down_events);
            jitter.get_or_create(&l).set(path.jitter_us / 1e6);
            if let Some(r) = path.rtt_us {
                rtt.get_or_create(&l).set(r as f64 / 1e6);
            }
            if let Some(r) = path.rate_bps {
                rate.get_or_create(&l).set(r as f64 / 8.0);
            }
            if let Some(ms) = path.last_heard_ms {
                heard.get_or_create(&l).set(ms as f64 / 1000.0);
            }
        }
    }
    let d = serde_json::to_value(&t.drops).unwrap_or_default();
    if let Some(map) = d.as_object() {
        for (reason, n) in map {
            drops
                .get_or_create(&labels(&[("reason", reason)]))
                .inc_by(n.as_u64().unwrap_or(0));
        }
    }
    for c in &t.classes {
        for (i, &n) in c.sent_per_path.iter().enumerate() {
            // the first peer's path names (all of a one-peer tunnel's)
            let path = st
                .paths
                .get(i)
                .map_or_else(|| i.to_string(), |p| p.name.clone());
            class_sent
                .get_or_create(&labels(&[("class", &c.name), ("path", &path)]))
                .inc_by(n);
        }
    }
    copies.get_or_create(&Vec::new()).inc_by(t.copies_sent);
    recovered
        .get_or_create(&Vec::new())
        .inc_by(t.reseq.recovered);
    repaired
        .get_or_create(&Vec::new())
        .inc_by(t.reseq.parity_repaired);
    held.get_or_create(&Vec::new()).set(t.reseq.held as f64);
    uptime
        .get_or_create(&Vec::new())
        .set(t.uptime_ms as f64 / 1000.0);
    cookies
        .get_or_create(&Vec::new())
        .inc_by(t.calls.cookie_replies);
    let mut out = String::new();
    // writing into a String cannot fail
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
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
