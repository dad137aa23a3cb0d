//! UDP stream runs over a case's lines: plain UDP without a tunnel, and one stream through
//! the tunnel with the receiver's and the resequencer's figures.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use mptd::status::Status;

use super::{loss_pct, udp_sent, Arrivals, Trace};
use crate::experiments::scenario::{Case, Suite};
use crate::harness::{tunnel_addr, Lab, Side, TunnelOpts};

/// One UDP stream run; returns the row's figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamResult {
    pub(crate) kbit: f64,
    pub(crate) jitter_ms: f64,
    pub(crate) loss_pct: f64,
    pub(crate) reordered_pct: f64,
    pub(crate) packets: u64,
    pub(crate) mptd_reordered: u64,
    pub(crate) hold_p99_ms: f64,
    /// What the link emulator counted of its own lateness during the stream: packets it
    /// wrote late, and held by a stall of the machine
    /// ([`crate::harness::emulator::LATE`], [`crate::harness::emulator::STALL`]); and B's
    /// datagrams that arrived behind a later one of their own path (a host on the way
    /// reordered them; a link does not). A stall or the latter can put the stream out of
    /// order with no fault of the tunnel's.
    pub(crate) wire_late: u64,
    pub(crate) wire_stalled: u64,
    pub(crate) path_seq_errors: u64,
    pub(crate) occupancy: String,
    pub(crate) hold: String,
}

/// What plain UDP delivers over case `c`'s lines without a tunnel: the stream's rate and
/// datagram size, split over the lines in proportion to their rates, all at once, from A's
/// addresses on the lines to B's (iperf3 servers on `port` and up).
pub(crate) fn plain_run(lab: &mut Lab, suite: &Suite, c: &Case, port: u16) -> Result<Plain> {
    let kbit = c
        .udp_kbit
        .with_context(|| format!("case {} has no udp_kbit", c.id))?;
    let secs = suite.duration_s.unwrap_or(20);
    let len = suite.datagram_of(c);
    let rates = c.rates_bps()?;
    let total: u64 = rates.iter().sum::<u64>().max(1);
    let targets: Vec<(String, u16, Vec<String>)> = rates
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let bps = (kbit as f64 * 1000.0 * *r as f64 / total as f64).round() as u64;
            let args = udp_args(&bps.to_string(), len, secs);
            (lab.path_addr(Side::B, i), port + i as u16, args)
        })
        .collect();
    let arrivals = Arrivals::start(lab, port, port + rates.len() as u16 - 1)?;
    let results = lab.iperf3_each(Side::A, &targets)?;
    let received = arrivals.count(lab, len)?;
    let (mut sent, mut bits, mut jitter, mut packets) = (0, 0.0, 0.0, 0);
    for v in &results {
        sent += udp_sent(v);
        let rcv = &v["end"]["sum_received"];
        bits += rcv["bits_per_second"].as_f64().unwrap_or(0.0);
        let n = rcv["packets"].as_u64().unwrap_or(0);
        jitter += rcv["jitter_ms"].as_f64().unwrap_or(0.0) * n as f64;
        packets += n;
    }
    Ok(Plain {
        kbit: bits / 1000.0,
        loss_pct: loss_pct(sent, received),
        jitter_ms: if packets == 0 {
            f64::NAN
        } else {
            jitter / packets as f64
        },
    })
}

/// What plain UDP delivered over a case's lines ([`plain_run`]).
pub(crate) struct Plain {
    /// Received, kbit/s.
    pub(crate) kbit: f64,
    /// Loss from counts, %.
    pub(crate) loss_pct: f64,
    /// The receivers' jitter, ms: over more than one line, their mean weighted by packets
    /// received (each line's stream is one iperf3 stream of its own).
    pub(crate) jitter_ms: f64,
}

/// iperf3's client arguments for a UDP stream of `rate` (iperf3's `-b`: bits/s, or with a
/// unit) in datagrams of `len` bytes for `secs`, the server's figures in its JSON.
pub(crate) fn udp_args(rate: &str, len: usize, secs: u64) -> Vec<String> {
    [
        "-u",
        "-b",
        rate,
        "-l",
        &len.to_string(),
        "-t",
        &secs.to_string(),
        "--get-server-output",
    ]
    .map(str::to_owned)
    .to_vec()
}

pub(crate) fn stream_run(
    lab: &mut Lab,
    suite: &Suite,
    c: &Case,
    opts: &TunnelOpts,
    port: u16,
    jitter_csv: &Path,
) -> Result<(StreamResult, Status)> {
    let kbit = c
        .udp_kbit
        .with_context(|| format!("case {} has no udp_kbit", c.id))?;
    let secs = suite.duration_s.unwrap_or(20);
    let len = suite.datagram_of(c);
    lab.start_tunnel(opts)?;
    let late_before = lab.wire_lateness();
    let arrivals = Arrivals::start(lab, port, port)?;
    let trace = Trace::start(lab, Side::A);
    let args = udp_args(&format!("{kbit}k"), len, secs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = lab.iperf3(Side::A, &tunnel_addr(Side::B), port, &args);
    trace.print();
    let late = lab.wire_lateness().since(late_before);
    let received = arrivals.count(lab, len);
    let st = lab.status(Side::B);
    if let Ok(a) = lab.status(Side::A) {
        // what the sender dropped, by reason (pacing's CoDel: `paced`)
        let d = &a.tunnel.drops;
        let dropped: Vec<String> = mpt_tunnel::DropReason::ALL
            .iter()
            .filter(|&&r| d.get(r) > 0)
            .map(|&r| format!("{} {}", r.name(), d.get(r)))
            .collect();
        let t = &a.tunnel;
        eprintln!(
            "case {}: the sender dropped {dropped:?}; sent {} packets, {} of them in {} bundles",
            c.id, t.tx_packets, t.bundled_packets, t.bundles_sent
        );
    }
    lab.stop_mptd(Side::A)?;
    lab.stop_mptd(Side::B)?;
    let v = v?;
    let st = st?;
    // The receiver's figures: iperf3 3.x puts them in `sum_received` (and the server's own
    // JSON when the server runs with -J).
    let srv = &v["server_output_json"];
    let rcv = &v["end"]["sum_received"];
    let packets = rcv["packets"].as_u64().unwrap_or(0);
    let ooo = crate::harness::iperf3_receiver_out_of_order(&v)
        .or_else(|| v["end"]["streams"][0]["udp"]["out_of_order"].as_u64())
        .unwrap_or(0);
    let mut series = String::from("t_s,jitter_ms\n");
    if let Some(iv) = srv["intervals"].as_array() {
        for i in iv {
            let s = &i["sum"];
            let _ = writeln!(
                series,
                "{:.1},{:.3}",
                s["end"].as_f64().unwrap_or(0.0),
                s["jitter_ms"].as_f64().unwrap_or(0.0)
            );
        }
    }
    std::fs::write(jitter_csv, series)?;
    let r = &st.tunnel.reseq;
    let result = StreamResult {
        kbit: rcv["bits_per_second"].as_f64().unwrap_or(0.0) / 1000.0,
        jitter_ms: rcv["jitter_ms"].as_f64().unwrap_or(f64::NAN),
        loss_pct: loss_pct(udp_sent(&v), received?),
        reordered_pct: if packets == 0 {
            0.0
        } else {
            100.0 * ooo as f64 / packets as f64
        },
        packets,
        mptd_reordered: r.reordered,
        hold_p99_ms: r.hold_p99_us as f64 / 1000.0,
        wire_late: late.late,
        wire_stalled: late.stalled,
        path_seq_errors: st.paths.iter().map(|p| p.path_seq_errors).sum(),
        occupancy: format!(
            "mean {:.1}, p50 {}, p90 {}, p99 {}, max {}",
            r.occupancy_mean, r.occupancy_p50, r.occupancy_p90, r.occupancy_p99, r.occupancy_max
        ),
        hold: format!(
            "p50 {:.1}, p90 {:.1}, p99 {:.1}, max {:.1}",
            r.hold_p50_us as f64 / 1e3,
            r.hold_p90_us as f64 / 1e3,
            r.hold_p99_us as f64 / 1e3,
            r.hold_max_us as f64 / 1e3
        ),
    };
    Ok((result, st))
}
