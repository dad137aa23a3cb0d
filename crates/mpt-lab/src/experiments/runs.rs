//! The building blocks of the experiments: sampling the daemons' status, the paths alone,
//! an FTP download and a UDP stream through the tunnel, with an optional trace.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mptd::status::Status;

use super::scenario::{Case, Suite};
use crate::harness::{iperf3_bps, tunnel_addr, Lab, Side, TunnelOpts};

/// Status snapshots with their time in seconds since sampling began.
pub(crate) type Samples = Vec<(f64, Status)>;

/// Samples a daemon's status every `every` on a thread until stopped.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(f64, Status)>>,
}

impl Sampler {
    pub(crate) fn start(socket: PathBuf, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut out = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                if let Ok(s) = mptd::control::status(&socket) {
                    out.push((t0.elapsed().as_secs_f64(), s));
                }
                std::thread::sleep(every);
            }
            if let Ok(s) = mptd::control::status(&socket) {
                out.push((t0.elapsed().as_secs_f64(), s));
            }
            out
        });
        Sampler { stop, handle }
    }

    pub(crate) fn finish(self) -> Vec<(f64, Status)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// iperf3 TCP on every path alone, all at once; goodput per path in bit/s.
pub(crate) fn paths_alone(lab: &mut Lab, secs: u64) -> Result<Vec<f64>> {
    let targets: Vec<(String, u16)> = (0..lab.paths.len())
        .map(|i| (lab.path_addr(Side::B, i), 5300 + i as u16))
        .collect();
    Ok(lab
        .iperf3_many(Side::A, &targets, &["-t", &secs.to_string()])?
        .iter()
        .map(iperf3_bps)
        .collect())
}

pub(crate) fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |x| format!("{x:.digits$}"))
}

/// A download through the tunnel, and both daemons' status while it ran.
pub(crate) struct Download {
    pub(crate) seconds: f64,
    pub(crate) bytes: f64,
    /// The sender's (B's) status every 500 ms: what it put on each path.
    pub(crate) sent: Samples,
    /// The receiver's (A's) status every 500 ms: what arrived.
    pub(crate) arrived: Samples,
}

/// Serve `mb` MiB from B over the tunnel and download it on A with curl, sampling both
/// daemons' status every 500 ms.
pub(crate) fn ftp_download(lab: &mut Lab, mb: u64) -> Result<Download> {
    let ftp = lab.ftp_server(Side::B, mb * 1024 * 1024)?;
    let every = Duration::from_millis(500);
    let sampler = Sampler::start(lab.control_socket(Side::B), every);
    let receiver = Sampler::start(lab.control_socket(Side::A), every);
    let o = lab
        .cmd(Side::A, "curl")
        .args([
            "-sS",
            "--max-time",
            "300",
            "-o",
            "/dev/null",
            "-w",
            "%{time_total} %{size_download}",
        ])
        .arg(format!("{}/random.bin", ftp.url))
        .output()?;
    let sent = sampler.finish();
    let arrived = receiver.finish();
    lab.reap(ftp.pid);
    if !o.status.success() {
        bail!("download failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let mut it = text.split_whitespace();
    let time: f64 = it
        .next()
        .and_then(|v| v.parse().ok())
        .context("curl time")?;
    let size: f64 = it
        .next()
        .and_then(|v| v.parse().ok())
        .context("curl size")?;
    Ok(Download {
        seconds: time,
        bytes: size,
        sent,
        arrived,
    })
}

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
    pub(crate) occupancy: String,
    pub(crate) hold: String,
}

/// With `MPT_LAB_TRACE` set, both sides' status sampled every 100 ms while it runs.
pub(crate) struct Trace(Option<(Sampler, Sampler)>);

impl Trace {
    /// Trace a run whose data goes from `sender` to the other side.
    pub(crate) fn start(lab: &Lab, sender: Side) -> Trace {
        let every = Duration::from_millis(100);
        Trace(std::env::var("MPT_LAB_TRACE").is_ok().then(|| {
            (
                Sampler::start(lab.control_socket(sender), every),
                Sampler::start(lab.control_socket(sender.other()), every),
            )
        }))
    }

    /// Stop sampling and print the trace (nothing when not tracing).
    pub(crate) fn print(self) {
        if let Some((a, b)) = self.0 {
            print_trace(&a.finish(), &b.finish());
        }
    }
}

/// `MPT_LAB_TRACE`: per sample, the receiver's resequencer skips, out-of-order deliveries and
/// late packets (cumulative), the sender's report bytes and keepalives since the previous
/// sample, then per path the sender's scheduling rate, the datagrams it sent since the previous
/// sample, the inner kbit/s the receiver got on it since its previous sample, the queue the
/// receiver sees (smoothed minus minimum one-way delay) and the packets it found missing on the
/// path (cumulative).
fn print_trace(sender: &[(f64, Status)], receiver: &[(f64, Status)]) {
    for (s, r) in sender.windows(2).zip(receiver.windows(2)) {
        let ((t, now), (_, before)) = (&s[1], &s[0]);
        let ((rt, rx), (rt0, rx0)) = (&r[1], &r[0]);
        let r = &rx.tunnel.reseq;
        // Control datagrams the sender put on its paths: its own reports (bytes) and keepalives.
        let (st, bt) = (&now.tunnel, &before.tunnel);
        let mut line = format!(
            "{t:5.2} skip {:4} ooo {:4} late {:3} ctl {:4}B {:2}ka",
            r.skipped,
            r.delivered_out_of_order,
            r.late,
            st.tx_report_bytes.saturating_sub(bt.tx_report_bytes),
            st.keepalives_sent.saturating_sub(bt.keepalives_sent)
        );
        for (i, p) in now.paths.iter().enumerate() {
            let sent = p
                .tx_packets
                .saturating_sub(before.paths.get(i).map_or(0, |b| b.tx_packets));
            let queue_ms = rx
                .paths
                .get(i)
                .map_or(0.0, |q| (q.owd_us - q.owd_min_us) / 1000.0);
            let rate_k = p.rate_bps.unwrap_or(0) / 1000;
            // What the path delivered to the receiver since its previous sample (inner bytes).
            let got = rx
                .paths
                .get(i)
                .map_or(0, |q| q.rx_bytes)
                .saturating_sub(rx0.paths.get(i).map_or(0, |q| q.rx_bytes));
            let got_k = got as f64 * 8.0 / (rt - rt0).max(1e-3) / 1000.0;
            // Packets the receiver found missing on the path (sequence gaps), cumulative.
            let lost = rx.paths.get(i).map_or(0, |q| q.lost);
            line += &format!(" | {rate_k:4}k tx{sent:3} d{got_k:4.0}k q{queue_ms:4.0}ms l{lost:3}");
        }
        eprintln!("{line}");
    }
}

/// Counts the UDP datagrams that reach B for a stream's ports: an nftables counter in B's
/// namespace. iperf3's server stops counting when the client's end-of-test message comes, and
/// through the tunnel that message (light traffic, which never waits behind bulk) overtakes
/// the stream's last datagrams while a slow line still carries them: they arrived, one or two
/// at 128 kbit/s, but the server had them lost (0.46-0.92 % in Table II rows that lost nothing).
/// Without a tunnel the message queues behind them on the line.
#[derive(Debug)]
pub struct Arrivals;

/// The nftables table of [`Arrivals`].
const ARRIVALS_TABLE: &str = "inet mptlab_arrivals";

impl Arrivals {
    /// Count from now on the datagrams B receives for UDP ports `first..=last`.
    pub fn start(lab: &Lab, first: u16, last: u16) -> Result<Arrivals> {
        lab.sh(
            Side::B,
            &format!(
                "nft add table {ARRIVALS_TABLE}
                 nft flush table {ARRIVALS_TABLE}
                 nft add chain {ARRIVALS_TABLE} input '{{ type filter hook input priority 0; }}'
                 nft add rule {ARRIVALS_TABLE} input udp dport {first}-{last} counter"
            ),
        )
        .context("counting the stream's datagrams at B (nft)")?;
        Ok(Arrivals)
    }

    /// The datagrams of `payload` bytes each counted, after a second for what the lines
    /// still carry (a 300 ms queue at the most, and the one-way delay); the counter is
    /// removed. The counter sees packets as the stack takes them in: mptd writes datagrams
    /// that leave the resequencer together as one (UDP GRO), so datagrams are counted from
    /// the bytes, each packet's IPv4 and UDP headers taken out.
    pub fn count(self, lab: &Lab, payload: usize) -> Result<u64> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let out = lab.sh(Side::B, &format!("nft list chain {ARRIVALS_TABLE} input"))?;
        let _ = lab.sh(Side::B, &format!("nft delete table {ARRIVALS_TABLE}"));
        let text = String::from_utf8_lossy(&out.stdout);
        let words: Vec<&str> = text.split_whitespace().collect();
        let after = |key: &str| -> Option<u64> {
            words
                .windows(2)
                .find(|w| w[0] == key)
                .and_then(|w| w[1].parse().ok())
        };
        let (Some(packets), Some(bytes)) = (after("packets"), after("bytes")) else {
            bail!("no packet and byte counts in nft's output: {text}");
        };
        let headers = mpt_core::wire::UDP4_HEADERS as u64;
        Ok(bytes.saturating_sub(packets * headers) / payload.max(1) as u64)
    }
}

/// Datagrams the iperf3 client sent, from its JSON. (The receiver's own count, and its
/// `lost_percent`, miss those lost at the end of the stream, and those that arrive after the
/// client's end-of-test message: see [`Arrivals`].)
pub fn udp_sent(v: &serde_json::Value) -> u64 {
    let end = &v["end"];
    end["sum_sent"]["packets"]
        .as_u64()
        .or_else(|| end["sum"]["packets"].as_u64())
        .unwrap_or(0)
}

/// The share of `sent` datagrams that did not arrive, in %.
pub fn loss_pct(sent: u64, received: u64) -> f64 {
    if sent == 0 {
        return f64::NAN;
    }
    100.0 * sent.saturating_sub(received) as f64 / sent as f64
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
            let args = [
                "-u".to_owned(),
                "-b".to_owned(),
                bps.to_string(),
                "-l".to_owned(),
                len.to_string(),
                "-t".to_owned(),
                secs.to_string(),
                "--get-server-output".to_owned(),
            ];
            (lab.path_addr(Side::B, i), port + i as u16, args.to_vec())
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
    let arrivals = Arrivals::start(lab, port, port)?;
    let trace = Trace::start(lab, Side::A);
    let v = lab.iperf3(
        Side::A,
        &tunnel_addr(Side::B),
        port,
        &[
            "-u",
            "-b",
            &format!("{kbit}k"),
            "-l",
            &len.to_string(),
            "-t",
            &secs.to_string(),
            "--get-server-output",
        ],
    );
    trace.print();
    let received = arrivals.count(lab, len);
    let st = lab.status(Side::B);
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
