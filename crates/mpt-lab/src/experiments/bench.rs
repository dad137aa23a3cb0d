//! `mpt-lab bench throughput`: how fast the tunnel goes on this machine, unshaped, against the
//! bare veth it runs over; with and without encryption. A benchmark, not a test: it reports.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::experiments::floor::{floor_addr, MinimalTunnel};
use crate::harness::{iperf3_bps, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

/// One measured configuration.
#[derive(Debug, Clone)]
struct Row {
    setup: String,
    tcp1_bps: f64,
    tcp4_bps: f64,
    udp_bps: f64,
    udp_pps: f64,
    udp_loss_pct: f64,
    /// Both daemons' CPU seconds per GB carried by the single-stream TCP run.
    cpu_s_per_gb: Option<f64>,
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    /// Ping during the single-stream TCP run.
    load_rtt_p50_us: f64,
    load_rtt_p99_us: f64,
}

/// utime + stime of `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // fields after the command name (which may hold spaces) start after the last ')'
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz.max(1.0))
}

/// utime + stime of all of `pids`, in seconds (a process that is gone counts 0).
fn cpu_seconds_of(pids: &[u32]) -> f64 {
    pids.iter().map(|&p| cpu_seconds(p).unwrap_or(0.0)).sum()
}

/// A lab of `paths` unshaped paths with mptd running on both sides with `opts`; the
/// daemons' pids.
fn tunnel_lab(paths: usize, opts: &TunnelOpts) -> Result<(Lab, [u32; 2])> {
    let mut lab = Lab::new(&vec![LinkSpec::unshaped(); paths]).context("tunnel lab")?;
    let pids = [
        lab.start_mptd(Side::A, opts)?,
        lab.start_mptd(Side::B, opts)?,
    ];
    lab.wait_for_tunnel(Duration::from_secs(10))?;
    Ok((lab, pids))
}

/// `n` pings from A to `addr`, 10 ms apart, started in the background after `delay_s`.
fn start_ping(lab: &Lab, addr: &str, n: u32, delay_s: u32) -> Result<std::process::Child> {
    Ok(lab
        .cmd(Side::A, "sh")
        .args([
            "-c",
            &format!("sleep {delay_s}; exec ping -c {n} -i 0.01 -W 1 {addr}"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?)
}

/// p50 and p99 of the RTTs (µs) a ping printed.
fn ping_percentiles(ping: std::process::Child, addr: &str) -> Result<(f64, f64)> {
    let out = ping.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next())
        .filter_map(|v| v.parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .collect();
    anyhow::ensure!(!rtts.is_empty(), "no ping replies from {addr}");
    rtts.sort_by(f64::total_cmp);
    let pct = |q: f64| rtts[((rtts.len() - 1) as f64 * q).round() as usize];
    Ok((pct(0.5), pct(0.99)))
}

/// TCP 1 and 4 streams, UDP 1400-byte datagrams at full speed, idle ping; `pids` are the
/// daemons whose CPU is charged to the single-stream run.
fn measure(lab: &mut Lab, setup: String, addr: &str, pids: &[u32]) -> Result<Row> {
    let secs = "5";
    let (p50, p99) = ping_percentiles(start_ping(lab, addr, 200, 0)?, addr)?;
    let cpu0 = cpu_seconds_of(pids);
    // 200 pings (2 s) from the second second of the transfer on
    let loaded_ping = start_ping(lab, addr, 200, 1)?;
    let v = lab.iperf3(Side::A, addr, 5201, &["-t", secs])?;
    let cpu1 = cpu_seconds_of(pids);
    let (lp50, lp99) = ping_percentiles(loaded_ping, addr)?;
    let tcp1 = iperf3_bps(&v);
    let bytes = v["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    let v4 = lab.iperf3(Side::A, addr, 5202, &["-t", secs, "-P", "4"])?;
    // 1372 bytes of UDP payload: 1400-byte IP packets, the tunnel MTU
    let vu = lab.iperf3(
        Side::A,
        addr,
        5203,
        &["-t", secs, "-u", "-b", "0", "-l", "1372"],
    )?;
    let sum = &vu["end"]["sum"];
    let udp_bps = sum["bits_per_second"].as_f64().unwrap_or(0.0);
    let lost = sum["lost_percent"].as_f64().unwrap_or(0.0);
    let received_bps = udp_bps * (1.0 - lost / 100.0);
    let row = Row {
        setup,
        tcp1_bps: tcp1,
        tcp4_bps: iperf3_bps(&v4),
        udp_bps: received_bps,
        udp_pps: received_bps / (1400.0 * 8.0),
        udp_loss_pct: lost,
        cpu_s_per_gb: (!pids.is_empty() && bytes > 0.0).then(|| (cpu1 - cpu0) / (bytes / 1e9)),
        rtt_p50_us: p50,
        rtt_p99_us: p99,
        load_rtt_p50_us: lp50,
        load_rtt_p99_us: lp99,
    };
    eprintln!("{row:?}");
    Ok(row)
}

/// Runs `measure` on the bare veth, then through mptd over each of `path_counts` unshaped
/// paths with each encryption setting and tunnel MTU (none given: the default):
/// `measure(lab, setup name, address, daemon pids)`.
fn each_setup<R>(
    path_counts: &[usize],
    encryptions: &[String],
    mtus: &[u16],
    mut measure: impl FnMut(&mut Lab, String, &str, &[u32]) -> Result<R>,
) -> Result<Vec<R>> {
    let mut rows = Vec::new();
    {
        let mut lab = Lab::new(&[LinkSpec::unshaped()]).context("raw veth lab")?;
        let addr = lab.path_addr(Side::B, 0);
        rows.push(measure(&mut lab, "raw veth".into(), &addr, &[])?);
    }
    let default = [TunnelOpts::default().mtu];
    let mtus = if mtus.is_empty() { &default[..] } else { mtus };
    for &paths in path_counts {
        for enc in encryptions {
            for &mtu in mtus {
                let opts = TunnelOpts {
                    encryption: enc.clone(),
                    mtu,
                    ..TunnelOpts::default()
                };
                let (mut lab, pids) = tunnel_lab(paths, &opts)?;
                let setup = format!(
                    "mptd, {paths} path{}, {enc}, MTU {mtu}",
                    if paths > 1 { "s" } else { "" }
                );
                rows.push(measure(&mut lab, setup, &tunnel_addr(Side::B), &pids)?);
            }
        }
    }
    Ok(rows)
}

/// `mpt-lab bench latency`: idle round trips only (1000 pings 10 ms apart), bare veth against
/// one unshaped path per encryption setting; the quick way to see what the tunnel adds. Also
/// the floor: a minimal tunnel ([`MinimalTunnel`]) with blocking threads, and spinning ones.
pub fn run_latency(out: &Path, encryptions: &[String]) -> Result<String> {
    std::fs::create_dir_all(out)?;
    let idle_ping = |lab: &Lab, setup: String, addr: &str| -> Result<(String, f64, f64)> {
        let (p50, p99) = ping_percentiles(start_ping(lab, addr, 1000, 0)?, addr)?;
        eprintln!("{setup}: p50 {p50:.0} µs, p99 {p99:.0} µs");
        Ok((setup, p50, p99))
    };
    let mut rows = each_setup(&[1], encryptions, &[], |lab, setup, addr, _| {
        idle_ping(lab, setup, addr)
    })?;
    for (spin, setup) in [
        (false, "minimal tunnel, blocking threads (the floor)"),
        (true, "minimal tunnel, spinning (a core per side)"),
    ] {
        let lab = Lab::new(&[LinkSpec::unshaped()]).context("minimal tunnel lab")?;
        let _tunnel = MinimalTunnel::start(&lab, spin)?;
        rows.push(idle_ping(&lab, setup.into(), &floor_addr(Side::B))?);
    }
    let raw = rows[0].1;
    let mut md = String::new();
    writeln!(md, "| setup | ping idle p50 µs | p99 µs | added p50 µs |")?;
    writeln!(md, "|---|---|---|---|")?;
    for (setup, p50, p99) in &rows {
        writeln!(md, "| {setup} | {p50:.0} | {p99:.0} | {:.0} |", p50 - raw)?;
    }
    // the Summary's row: what mptd adds (each encryption), and the blocking floor
    let added: Vec<f64> = rows[1..rows.len() - 2].iter().map(|r| r.1 - raw).collect();
    let (lo, hi) = added
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), a| (l.min(*a), h.max(*a)));
    let head = crate::summary::Headline {
        key: "latency".into(),
        what: "an idle ping through the tunnel, one unshaped path (`mpt-lab bench latency`; \
               p50 against the bare veth)"
            .into(),
        figure: format!(
            "adds **{lo:.0}–{hi:.0} µs** ({}), where the simplest blocking userspace tunnel \
             adds {:.0}",
            encryptions.join(", "),
            rows[rows.len() - 2].1 - raw
        ),
    };
    writeln!(md, "{}", head.comment())?;
    std::fs::write(out.join("latency.md"), &md)?;
    Ok(md)
}

/// What `mpt-lab bench compare` runs.
#[derive(Debug, Clone, Copy)]
pub struct Compare<'a> {
    /// The mptd binaries, run in turn.
    pub builds: &'a [PathBuf],
    /// Unshaped paths.
    pub paths: usize,
    /// Runs of each build.
    pub rounds: usize,
    /// The tunnel MTU (default: the lab's).
    pub mtu: Option<u16>,
    /// The scheduler (default: the lab's).
    pub scheduler: Option<&'a str>,
    /// The sender's rate (iperf3's `-b`, e.g. `3G`), below what every build reaches: each
    /// then carries the same packet rate, and CPU per GB compares code rather than how fast a
    /// run happened to go (CPU per GB falls as throughput rises: fewer wakeups per packet).
    pub rate: Option<&'a str>,
}

/// A build as `--mptd` names it: its path, and `connection.compress = false` where the path
/// ends in `:nocompress` (so that one run alternates a build with and without compression).
fn build_setting(b: &Path) -> (PathBuf, Option<bool>) {
    match b.to_str().and_then(|s| s.strip_suffix(":nocompress")) {
        Some(path) => (PathBuf::from(path), Some(false)),
        None => (b.to_owned(), None),
    }
}

/// `mpt-lab bench compare --mptd OLD,NEW`: single-stream TCP over `paths` unshaped paths
/// through each build in turn, `rounds` times, per encryption setting; for telling a datapath
/// change from this machine's drift, which moves single runs by ±25 % between hours.
/// Returns the markdown table (also written to `out`): Gbit/s per run and mean, and the
/// daemons' CPU seconds per GB.
pub fn run_compare(out: &Path, encryptions: &[String], c: &Compare<'_>) -> Result<String> {
    let (builds, paths, rounds) = (c.builds, c.paths, c.rounds);
    std::fs::create_dir_all(out)?;
    anyhow::ensure!(!builds.is_empty(), "--mptd names no build to compare");
    // (encryption, build) -> (Gbit/s, CPU s/GB) per round
    let mut runs = vec![vec![Vec::new(); builds.len()]; encryptions.len()];
    for round in 0..rounds {
        for (e, enc) in encryptions.iter().enumerate() {
            // each round starts with another build, so that none always runs first
            for b in (0..builds.len()).map(|k| (k + round) % builds.len()) {
                let (bin, compress) = build_setting(&builds[b]);
                let mut opts = TunnelOpts {
                    encryption: enc.clone(),
                    mptd: Some(bin),
                    compress,
                    ..TunnelOpts::default()
                };
                if let Some(m) = c.mtu {
                    opts.mtu = m;
                }
                if let Some(s) = c.scheduler {
                    opts.scheduler = s.to_owned();
                }
                let (mut lab, pids) = tunnel_lab(paths, &opts)?;
                let cpu0 = cpu_seconds_of(&pids);
                let mut args = vec!["-t", "5"];
                if let Some(r) = c.rate {
                    args.extend(["-b", r]);
                }
                let v = lab.iperf3(Side::A, &tunnel_addr(Side::B), 5201, &args)?;
                let bytes = v["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
                let gbps = iperf3_bps(&v) / 1e9;
                let cpu_per_gb = (cpu_seconds_of(&pids) - cpu0) / (bytes / 1e9).max(1e-9);
                eprintln!(
                    "round {}, {enc}, {}: {gbps:.2} Gbit/s, {cpu_per_gb:.2} CPU s/GB",
                    round + 1,
                    builds[b].display()
                );
                runs[e][b].push((gbps, cpu_per_gb));
            }
        }
    }
    let mut md = String::new();
    writeln!(
        md,
        "{paths} unshaped path(s), tunnel MTU {}, scheduler {}, sender {}, {rounds} round(s)\n",
        c.mtu.map_or("as the lab's".to_owned(), |m| m.to_string()),
        c.scheduler.unwrap_or("as the lab's"),
        c.rate
            .map_or("unlimited".to_owned(), |r| format!("at {r}bit/s"))
    )?;
    writeln!(md, "| encryption | mptd build | TCP 1 stream Gbit/s, each run | mean | daemons' CPU s/GB, mean |")?;
    writeln!(md, "|---|---|---|---|---|")?;
    // each build by its path, and its setting
    let names: Vec<String> = builds
        .iter()
        .map(|b| {
            let (bin, compress) = build_setting(b);
            let off = if compress == Some(false) {
                " with `compress = false`"
            } else {
                ""
            };
            format!("`{}`{off}", bin.display())
        })
        .collect();
    let mut figures = Vec::new();
    for (e, enc) in encryptions.iter().enumerate() {
        for (b, name) in names.iter().enumerate() {
            let r = &runs[e][b];
            let n = r.len().max(1) as f64;
            let each: Vec<String> = r.iter().map(|(g, _)| format!("{g:.2}")).collect();
            let (gbps, cpu) = (
                r.iter().map(|(g, _)| g).sum::<f64>() / n,
                r.iter().map(|(_, c)| c).sum::<f64>() / n,
            );
            writeln!(
                md,
                "| {enc} | {name} | {} | {gbps:.2} | {cpu:.2} |",
                each.join(", ")
            )?;
            figures.push(format!(
                "{enc}, {name}: **{cpu:.2} CPU s/GB** at {gbps:.2} Gbit/s"
            ));
        }
    }
    let head = crate::summary::Headline {
        key: "compare".into(),
        what: format!(
            "single-stream TCP through mptd over {paths} unshaped path(s), sender {} \
             (`mpt-lab bench compare`, {rounds} rounds, the daemons' CPU per GB)",
            c.rate
                .map_or("unlimited".to_owned(), |r| format!("at {r}bit/s"))
        ),
        figure: figures.join("; "),
    };
    writeln!(md, "\n{}", head.comment())?;
    std::fs::write(out.join("compare.md"), &md)?;
    Ok(md)
}

/// Run the throughput benchmark; returns the markdown table (also written to `out`).
pub fn run_throughput(out: &Path, encryptions: &[String], mtus: &[u16]) -> Result<String> {
    std::fs::create_dir_all(out)?;
    let rows = each_setup(&[1, 2], encryptions, mtus, measure)?;
    let raw = rows[0].tcp1_bps.max(1.0);
    let mut md = String::new();
    writeln!(md, "| setup | TCP 1 stream Gbit/s | TCP 4 streams Gbit/s | UDP 1400 B Gbit/s received (kpps, loss) | mptd/raw (TCP 1) | daemons' CPU s/GB | ping idle p50 / p99 µs | ping under TCP load p50 / p99 µs |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    for r in &rows {
        writeln!(
            md,
            "| {} | {:.2} | {:.2} | {:.2} ({:.0}, {:.1} %) | {:.3} | {} | {:.0} / {:.0} | {:.0} / {:.0} |",
            r.setup,
            r.tcp1_bps / 1e9,
            r.tcp4_bps / 1e9,
            r.udp_bps / 1e9,
            r.udp_pps / 1e3,
            r.udp_loss_pct,
            r.tcp1_bps / raw,
            r.cpu_s_per_gb.map_or("—".into(), |c| format!("{c:.2}")),
            r.rtt_p50_us,
            r.rtt_p99_us,
            r.load_rtt_p50_us,
            r.load_rtt_p99_us
        )?;
    }
    std::fs::write(out.join("throughput.md"), &md)?;
    Ok(md)
}
