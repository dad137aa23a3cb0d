//! Experiment descriptions (`scenarios/*.toml`) and the runners that reproduce the MPT
//! paper's Table I (FTP aggregation) and Table II (UDP stream), plus the delay-diversity case.
//!
//! Every runner prints a markdown table with the paper's figure and ours side by side, and
//! writes the raw results as CSV and the time series as CSV + PNG (gnuplot) under the output
//! directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mptd::status::Status;
use serde::Deserialize;

use crate::harness::{iperf3_bps, tunnel_addr, Impair, Lab, LinkSpec, Side, TunnelOpts};
use crate::report::{plot, throughput_csv, write};

/// A set of cases (one TOML file).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub title: String,
    /// UDP cases: seconds per run.
    #[serde(default)]
    pub duration_s: Option<u64>,
    /// UDP cases: datagram payload bytes.
    #[serde(default)]
    pub datagram: Option<usize>,
    #[serde(default)]
    pub reorder_window: Option<usize>,
    #[serde(default)]
    pub reorder_timeout_ms: Option<u64>,
    /// Model the rates as serial links in the emulator instead of `tbf` (see
    /// [`crate::harness::emulator`]): needed where a lone small packet must take its serialisation
    /// time, as on the paper's 64–128 kbit/s lines.
    #[serde(default)]
    pub serial: bool,
    pub case: Vec<Case>,
}

/// One experiment: the paths and the traffic.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: u32,
    /// Per path, both directions: `"2mbit"`, `"128kbit"`.
    pub rates: Vec<String>,
    /// Per path, one way, both directions.
    #[serde(default)]
    pub delay_ms: Vec<f64>,
    #[serde(default)]
    pub jitter_ms: Vec<f64>,
    #[serde(default)]
    pub loss_pct: Vec<f64>,
    /// FTP download of this many MiB.
    #[serde(default)]
    pub ftp_mb: Option<u64>,
    /// UDP stream of this many kbit/s.
    #[serde(default)]
    pub udp_kbit: Option<u64>,
    /// Datagram payload bytes for this case (default: the suite's).
    #[serde(default)]
    pub datagram: Option<usize>,
    /// A label shown instead of the id (e.g. "17b").
    #[serde(default)]
    pub label: Option<String>,
    /// The paper's figures for this case.
    #[serde(default)]
    pub paper: Option<toml::Table>,
}

impl Case {
    pub fn rates_bps(&self) -> Result<Vec<u64>> {
        self.rates
            .iter()
            .map(|r| {
                mptd::config::parse_rate(r)
                    .with_context(|| format!("case {}: bad rate {r:?}", self.id))
            })
            .collect()
    }

    /// The lab's paths; with `serial`, the rates are the emulator's serial links.
    pub fn paths(&self, serial: bool) -> Result<Vec<LinkSpec>> {
        let rates = self.rates_bps()?;
        Ok(rates
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let imp = Impair {
                    delay_ms: self.delay_ms.get(i).copied().unwrap_or(0.0),
                    jitter_ms: self.jitter_ms.get(i).copied().unwrap_or(0.0),
                    loss_pct: self.loss_pct.get(i).copied().unwrap_or(0.0),
                    rate_bps: serial.then_some(r),
                    queue_ms: 0.0,
                };
                LinkSpec {
                    rate_bps: (!serial).then_some(r),
                    ab: imp,
                    ba: imp,
                }
            })
            .collect())
    }

    fn paper_f64(&self, key: &str) -> Option<f64> {
        let v = self.paper.as_ref()?.get(key)?;
        v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
    }

    fn paper_str(&self, key: &str) -> String {
        match self.paper.as_ref().and_then(|p| p.get(key)) {
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "—".into(),
        }
    }

    /// The case's label, or its id.
    pub fn name(&self) -> String {
        self.label.clone().unwrap_or_else(|| self.id.to_string())
    }

    fn rates_label(&self) -> String {
        self.rates.join("/")
    }
}

/// The suites shipped in `scenarios/`.
pub fn builtin(name: &str) -> Result<Suite> {
    let text = match name {
        "table1" => include_str!("../../scenarios/table1.toml"),
        "table2" => include_str!("../../scenarios/table2.toml"),
        "delay" => include_str!("../../scenarios/delay.toml"),
        other => {
            let p = Path::new(other);
            if p.is_file() {
                return load(p);
            }
            bail!("unknown suite {other:?}: expected table1, table2, delay or a scenario file")
        }
    };
    toml::from_str(text).with_context(|| format!("built-in suite {name}"))
}

/// Read a suite from a file.
pub fn load(path: &Path) -> Result<Suite> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}", path.display()))
}

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

/// Table I: FTP download over the tunnel (B serves, A downloads).
pub fn run_table1(suite: &Suite, only: &[u32], out: &Path) -> Result<String> {
    let mut md = format!(
        "### {}\n\nEfficiency = tunnel FTP goodput / sum of what iperf3 TCP gets on each path alone (same lab, same run). Scheduler `rate`, sealed, tunnel MTU 1432 (path MTU 1500 − 68).\n\n\
         | case | file | paths Mbit/s | time s paper / ours | tunnel KiB/s paper / ours | per-path KiB/s paper / ours (datagram bytes) | paths alone KiB/s | efficiency paper / ours |\n|---|---|---|---|---|---|---|---|\n",
        suite.title
    );
    let mut csv = String::from(
        "case,file_mib,rates,time_s,tunnel_kib_s,paths_alone_kib_s,efficiency_pct,per_path_kib_s\n",
    );
    for c in suite
        .case
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.id))
    {
        let mb = c
            .ftp_mb
            .with_context(|| format!("case {} has no ftp_mb", c.id))?;
        eprintln!(
            "== table1 case {}: {} MiB over {}",
            c.id,
            mb,
            c.rates_label()
        );
        let mut lab = Lab::new(&c.paths(suite.serial)?)?;
        let alone = paths_alone(&mut lab, 8)?;
        let opts = TunnelOpts::default().with_full_mtu();
        lab.start_tunnel(&opts)?;
        let (time, size, samples) = ftp_download(&mut lab, mb)?;
        let kib_s = size / time / 1024.0;
        let alone_sum: f64 = alone.iter().sum();
        let eff = 100.0 * (size * 8.0 / time) / alone_sum;
        let per_path: Vec<f64> = match (samples.first(), samples.last()) {
            (Some((t0, a)), Some((t1, b))) => a
                .paths
                .iter()
                .zip(&b.paths)
                .map(|(x, y)| (y.tx_bytes - x.tx_bytes) as f64 / (t1 - t0).max(1e-3) / 1024.0)
                .collect(),
            _ => vec![],
        };
        let pp: Vec<String> = per_path.iter().map(|v| format!("{v:.1}")).collect();
        let al: Vec<String> = alone
            .iter()
            .map(|v| format!("{:.1}", v / 8.0 / 1024.0))
            .collect();
        let _ = writeln!(
            md,
            "| {} | {} MiB | {} | {} / {:.1} | {} / {:.1} | {} / {} | {} | {}% / **{:.1}%** |",
            c.id,
            mb,
            c.rates_label(),
            f(c.paper_f64("time_s"), 0),
            time,
            f(c.paper_f64("tun_kib_s"), 1),
            kib_s,
            c.paper_str("path_kib_s"),
            pp.join(" / "),
            al.join(" / "),
            f(c.paper_f64("efficiency_pct"), 1),
            eff
        );
        let _ = writeln!(
            csv,
            "{},{},{},{:.2},{:.1},{:.1},{:.2},{}",
            c.id,
            mb,
            c.rates_label(),
            time,
            kib_s,
            alone_sum / 8.0 / 1024.0,
            eff,
            pp.join(";")
        );
        let series = write(
            out,
            &format!("table1-case{}-throughput.csv", c.id),
            &throughput_csv(&samples),
        )?;
        plot(
            &series,
            &out.join(format!("table1-case{}-throughput.png", c.id)),
            &format!(
                "Table I case {}: {} MiB FTP over {} paths",
                c.id,
                mb,
                c.rates_label()
            ),
            "kbit/s (sender B)",
        );
        eprintln!("   {time:.1} s, {kib_s:.1} KiB/s, efficiency {eff:.1} %");
    }
    write(out, "table1.csv", &csv)?;
    write(out, "table1.md", &md)?;
    Ok(md)
}

/// Serve `mb` MiB from B over the tunnel, download it on A with curl while sampling B's
/// status every 500 ms; returns (seconds, bytes, samples).
pub(crate) fn ftp_download(lab: &mut Lab, mb: u64) -> Result<(f64, f64, Samples)> {
    let ftp = lab.ftp_server(Side::B, mb * 1024 * 1024)?;
    let sampler = Sampler::start(lab.control_socket(Side::B), Duration::from_millis(500));
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
    let samples = sampler.finish();
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
    Ok((time, size, samples))
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
    let len = c.datagram.or(suite.datagram).unwrap_or(160);
    lab.start_tunnel(opts)?;
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
        loss_pct: rcv["lost_percent"].as_f64().unwrap_or(f64::NAN),
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

/// The variants each Table II case runs: (scheduler, resequencing on).
const VARIANTS: [(&str, bool); 4] = [
    ("wrr", false),
    ("wrr", true),
    ("rate", false),
    ("rate", true),
];

/// Table II: a UDP stream A → B, each case with `wrr` (weights = rates) and `rate`, with
/// resequencing off and on.
pub fn run_table2(suite: &Suite, only: &[u32], out: &Path) -> Result<String> {
    let secs = suite.duration_s.unwrap_or(20);
    let len = suite.datagram.unwrap_or(160);
    let mut md = format!(
        "### {}\n\niperf3 UDP, {len}-byte datagrams, {secs} s per run (paper: 60 s). Figures as seen by the receiving iperf3; \"reordered\" = iperf3's out-of-order count / packets. `reseq off` = `reorder_window = 0`.\n\n\
         | case | paths kbit/s | stream kbit/s | scheduler | reseq | throughput kbit/s paper / ours | jitter ms paper / ours | loss % paper / ours | reordered % paper / ours | reordered on arrival (mptd) | hold p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        suite.title
    );
    let mut csv = String::from("case,rates,stream_kbit,scheduler,reseq,throughput_kbit,jitter_ms,loss_pct,reordered_pct,packets,mptd_reordered,hold_p99_ms\n");
    let mut port = 5500;
    for c in suite
        .case
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.id))
    {
        let mut lab = Lab::new(&c.paths(suite.serial)?)?;
        let single = c.rates.len() == 1;
        for (sched, reseq) in VARIANTS {
            if single && sched == "wrr" {
                continue; // one path: every scheduler sends the same
            }
            eprintln!(
                "== table2 case {}: {} kbit/s over {} kbit/s, {sched}, reseq {}",
                c.id,
                c.udp_kbit.unwrap_or(0),
                c.rates_label(),
                if reseq { "on" } else { "off" }
            );
            let opts = TunnelOpts {
                scheduler: sched.into(),
                reorder_window: if reseq {
                    suite.reorder_window.unwrap_or(512)
                } else {
                    0
                },
                reorder_timeout_ms: suite.reorder_timeout_ms.unwrap_or(100),
                ..TunnelOpts::default()
            };
            let tag = format!(
                "table2-case{}-{sched}-{}",
                c.name(),
                if reseq { "reseq" } else { "noreseq" }
            );
            std::fs::create_dir_all(out)?;
            let jcsv = out.join(format!("{tag}-jitter.csv"));
            port += 1;
            let (r, _) = stream_run(&mut lab, suite, c, &opts, port, &jcsv)?;
            plot(
                &jcsv,
                &out.join(format!("{tag}-jitter.png")),
                &format!(
                    "Table II case {} ({sched}, reseq {}): receiver jitter",
                    c.id,
                    if reseq { "on" } else { "off" }
                ),
                "jitter (ms)",
            );
            let _ = writeln!(
                md,
                "| {} | {} | {} | {sched} | {} | {} / {:.2} | {} / {:.2} | {} / {:.2} | {} / **{:.2}** | {} | {:.1} |",
                c.name(),
                c.rates_label(),
                c.udp_kbit.unwrap_or(0),
                if reseq { "on" } else { "off" },
                f(c.paper_f64("throughput_kbit"), 2),
                r.kbit,
                f(c.paper_f64("jitter_ms"), 2),
                r.jitter_ms,
                f(c.paper_f64("loss_pct"), 2),
                r.loss_pct,
                f(c.paper_f64("reordered_pct"), 2),
                r.reordered_pct,
                r.mptd_reordered,
                r.hold_p99_ms
            );
            let _ = writeln!(
                csv,
                "{},{},{},{sched},{},{:.2},{:.3},{:.3},{:.3},{},{},{:.2}",
                c.name(),
                c.rates_label(),
                c.udp_kbit.unwrap_or(0),
                reseq,
                r.kbit,
                r.jitter_ms,
                r.loss_pct,
                r.reordered_pct,
                r.packets,
                r.mptd_reordered,
                r.hold_p99_ms
            );
            eprintln!(
                "   {:.1} kbit/s, jitter {:.2} ms, loss {:.2} %, reordered {:.2} %",
                r.kbit, r.jitter_ms, r.loss_pct, r.reordered_pct
            );
        }
    }
    write(out, "table2.csv", &csv)?;
    write(out, "table2.md", &md)?;
    Ok(md)
}

/// Delay diversity: `wrr` 1:1 and `rate`, resequencing on; the resequencer's occupancy and
/// hold times alongside the application's view.
pub fn run_delay(suite: &Suite, out: &Path) -> Result<String> {
    let secs = suite.duration_s.unwrap_or(20);
    let len = suite.datagram.unwrap_or(1200);
    let mut md = format!(
        "### {}\n\niperf3 UDP, {len}-byte datagrams, {secs} s; reorder window {}, timeout {} ms. Occupancy = packets held by the resequencer, sampled at every arrival (the quantity modelled by Zinner et al.); hold = time a packet waited, ms.\n\n\
         | case | paths | stream kbit/s | scheduler | throughput kbit/s | loss % | reordered at app % | jitter ms | reordered on arrival | occupancy (packets) | hold (ms) |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        suite.title,
        suite.reorder_window.unwrap_or(512),
        suite.reorder_timeout_ms.unwrap_or(100)
    );
    let mut port = 5600;
    for c in &suite.case {
        let mut lab = Lab::new(&c.paths(suite.serial)?)?;
        for sched in ["wrr", "rate"] {
            eprintln!("== delay case {}: {sched}", c.id);
            let opts = TunnelOpts {
                scheduler: sched.into(),
                reorder_window: suite.reorder_window.unwrap_or(512),
                reorder_timeout_ms: suite.reorder_timeout_ms.unwrap_or(100),
                ..TunnelOpts::default()
            };
            port += 1;
            let jcsv = out.join(format!("delay-case{}-{sched}-jitter.csv", c.id));
            std::fs::create_dir_all(out)?;
            let (r, _) = stream_run(&mut lab, suite, c, &opts, port, &jcsv)?;
            let delays: Vec<String> = c.delay_ms.iter().map(|d| format!("{d} ms")).collect();
            let _ = writeln!(
                md,
                "| {} | {} at {} | {} | {sched} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {} |",
                c.id,
                c.rates_label(),
                delays.join("/"),
                c.udp_kbit.unwrap_or(0),
                r.kbit,
                r.loss_pct,
                r.reordered_pct,
                r.jitter_ms,
                r.mptd_reordered,
                r.occupancy,
                r.hold
            );
        }
    }
    write(out, "delay.md", &md)?;
    Ok(md)
}
