//! Proof runs for the `adaptive` scheduler: the same scenarios with `wrr` (weights = rates),
//! `rate` (rates configured) and `adaptive` (nothing configured); a rate cut mid-run; a path
//! outage; the feedback overhead.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mptd::status::Status;

use crate::experiments::runs::{
    f, ftp_download, paths_alone, stream_run, Download, Sampler, Trace,
};
use crate::experiments::scenario::builtin;
use crate::harness::{iperf3_bps, Impair, Lab, LinkSpec, Side, TunnelOpts};
use crate::report::write;

/// A scheduler setup to compare.
#[derive(Debug, Clone, Copy)]
struct Variant {
    label: &'static str,
    scheduler: &'static str,
    configure_rates: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        label: "wrr, weights = rates",
        scheduler: "wrr",
        configure_rates: true,
    },
    Variant {
        label: "rate, rates configured",
        scheduler: "rate",
        configure_rates: true,
    },
    Variant {
        label: "adaptive, nothing configured",
        scheduler: "adaptive",
        configure_rates: false,
    },
];

/// Which cases and schedulers of the comparisons to run (empty: all), and the tunnel's
/// encryption (`None`: the lab's default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Only<'a> {
    pub cases: &'a [u32],
    pub schedulers: &'a [String],
    pub encryption: Option<&'a str>,
}

impl Only<'_> {
    fn case(&self, id: u32) -> bool {
        self.cases.is_empty() || self.cases.contains(&id)
    }

    fn variants(&self) -> impl Iterator<Item = Variant> + '_ {
        VARIANTS.into_iter().filter(|v| {
            self.schedulers.is_empty() || self.schedulers.iter().any(|s| s == v.scheduler)
        })
    }
}

fn opts(v: Variant, mtu: u16, encryption: Option<&str>) -> TunnelOpts {
    let d = TunnelOpts::default();
    TunnelOpts {
        scheduler: v.scheduler.into(),
        configure_rates: v.configure_rates,
        mtu,
        encryption: encryption.map_or(d.encryption.clone(), str::to_owned),
        ..d
    }
}

/// What a comparison's heading says of the encryption when it is not the default.
fn sealing_note(only: Only) -> String {
    only.encryption
        .map(|e| format!(", encryption {e}"))
        .unwrap_or_default()
}

/// Feedback overhead seen by a receiver: report bytes sent / data bytes received.
fn overhead_pct(rx: &Status) -> f64 {
    100.0 * rx.tunnel.tx_report_bytes as f64 / rx.tunnel.rx_bytes.max(1) as f64
}

/// Everything; returns the markdown.
pub fn run_adaptive(out: &Path, only: Only) -> Result<String> {
    let mut md = String::from(
        "### Adaptive scheduling: nothing configured vs. configured rates and weights\n\n",
    );
    md += &ftp_comparison(only)?;
    md += &stream_comparison(out, only)?;
    md += &rate_cut(out)?;
    md += &outage(out)?;
    write(out, "adaptive.md", &md)?;
    Ok(md)
}

/// Table I cases 5–10 with each scheduler; returns the markdown.
pub fn ftp_comparison(only: Only) -> Result<String> {
    let suite = builtin("table1")?;
    let mut md = format!(
        "#### Table I cases 5–10 (FTP download, B → A{})\n\nEfficiency = FTP goodput / Σ iperf3 TCP on each path alone. Overhead = receiver reports / data received.\n\n\
         | case | paths Mbit/s | scheduler | time s | efficiency | report overhead |\n|---|---|---|---|---|---|\n",
        sealing_note(only)
    );
    for c in suite
        .case
        .iter()
        .filter(|c| (5..=10).contains(&c.id) && only.case(c.id))
    {
        let mb = c.ftp_mb.context("ftp_mb")?;
        let mut lab = Lab::new(&c.paths(false)?)?;
        let alone: f64 = paths_alone(&mut lab, 8)?.iter().sum();
        for v in only.variants() {
            eprintln!("== adaptive/ftp case {}: {}", c.id, v.label);
            lab.start_tunnel(&opts(v, 1400, only.encryption).with_full_mtu())?;
            let trace = Trace::start(&lab, Side::B);
            let download = ftp_download(&mut lab, mb);
            trace.print();
            let Download {
                seconds: time,
                bytes: size,
                ..
            } = download?;
            let rx = lab.status(Side::A)?;
            lab.stop_mptd(Side::A)?;
            lab.stop_mptd(Side::B)?;
            let eff = 100.0 * size * 8.0 / time / alone;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {time:.1} | {eff:.1} % | {:.2} % |",
                c.id,
                c.rates.join("/"),
                v.label,
                overhead_pct(&rx)
            );
            eprintln!("   {time:.1} s, efficiency {eff:.1} %");
        }
    }
    md.push('\n');
    Ok(md)
}

pub fn stream_comparison(out: &Path, only: Only) -> Result<String> {
    // the small-packet stream (160-byte datagrams) these runs were measured with
    let mut suite = builtin("table2")?;
    suite.datagram = Some(160);
    let mut md = format!(
        "#### Table II cases 16–17 and 17b (UDP stream over 64/128/64/128 kbit/s serial lines, resequencing on; 17b = 17 with 400-byte datagrams, which the lines can carry{})\n\n\
         | case | stream kbit/s | scheduler | throughput kbit/s | jitter ms | loss % | reordered at app % | report overhead |\n|---|---|---|---|---|---|---|---|\n",
        sealing_note(only)
    );
    let mut port = 5700;
    for c in suite
        .case
        .iter()
        .filter(|c| (16..=18).contains(&c.id) && only.case(c.id))
    {
        let mut lab = Lab::new(&c.paths(suite.serial)?)?;
        for v in only.variants() {
            eprintln!("== adaptive/stream case {}: {}", c.name(), v.label);
            port += 1;
            let j = out.join(format!(
                "adaptive-case{}-{}-jitter.csv",
                c.name(),
                v.scheduler
            ));
            std::fs::create_dir_all(out)?;
            let mut o = opts(v, 1400, only.encryption);
            o.reorder_window = 512;
            let (r, rx) = stream_run(&mut lab, &suite, c, &o, port, &j)?;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} % |",
                c.name(),
                c.udp_kbit.unwrap_or(0),
                v.label,
                r.kbit,
                r.jitter_ms,
                r.loss_pct,
                r.reordered_pct,
                overhead_pct(&rx)
            );
        }
    }
    md.push('\n');
    Ok(md)
}

/// Throughput in bit/s of `bytes(status)` between two samples.
fn rate_between(a: &(f64, Status), b: &(f64, Status), bytes: impl Fn(&Status) -> u64) -> f64 {
    (bytes(&b.1).saturating_sub(bytes(&a.1))) as f64 * 8.0 / (b.0 - a.0).max(1e-3)
}

pub fn rate_cut(out: &Path) -> Result<String> {
    eprintln!("== adaptive/rate cut");
    let paths = vec![LinkSpec::shaped(10_000_000), LinkSpec::shaped(10_000_000)];
    let mut lab = Lab::new(&paths)?;
    let v = VARIANTS[2];
    lab.start_tunnel(&opts(v, 1400, None))?;
    let sampler = Sampler::start(lab.control_socket(Side::A), Duration::from_millis(100));
    let t0 = Instant::now();
    let (spid, client) = lab.tcp_transfer_in_background(5801, 20)?;
    std::thread::sleep(Duration::from_secs(8));
    let cut_at = t0.elapsed().as_secs_f64();
    lab.reshape(1, 5_000_000, 10_000_000)?;
    let out_json = client.wait_with_output()?;
    let samples = sampler.finish();
    lab.reap(spid);
    let v = serde_json::from_slice::<serde_json::Value>(&out_json.stdout).context("iperf3 JSON")?;
    if let Some(e) = v.get("error") {
        bail!(
            "iperf3 through the tunnel failed: {e}\n{}",
            lab.diagnostics()
        );
    }
    eprintln!(
        "   transfer done at {:.1} s; the paths alone:",
        t0.elapsed().as_secs_f64()
    );
    // The paths alone after the cut.
    let alone: f64 = paths_alone(&mut lab, 6)?.iter().sum();
    // Sample times are relative to the sampler's start, which is ~t0.
    let mut csv = String::from("t_s,tunnel_kbit,p0_kbit,p1_kbit,p0_rate_kbit,p1_rate_kbit\n");
    let mut settled = None;
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let p = |i: usize| rate_between(a, b, |s| s.paths[i].tx_bytes);
        let learned = |i: usize| b.1.paths[i].rate_bps.unwrap_or(0) as f64;
        let _ = writeln!(
            csv,
            "{:.2},{:.0},{:.0},{:.0},{:.0},{:.0}",
            b.0,
            rate_between(a, b, |s| s.tunnel.tx_bytes) / 1e3,
            p(0) / 1e3,
            p(1) / 1e3,
            learned(0) / 1e3,
            learned(1) / 1e3
        );
        if settled.is_none() && b.0 > cut_at && learned(1) <= 5_000_000.0 * 1.15 {
            settled = Some(b.0 - cut_at);
        }
    }
    let series = write(out, "adaptive-rate-cut.csv", &csv)?;
    crate::report::plot(
        &series,
        &out.join("adaptive-rate-cut.png"),
        "adaptive: path p1 cut from 10 to 5 Mbit/s at t = 8 s",
        "kbit/s",
    );
    // Aggregate from 2 s after the cut to the end.
    let after: Vec<&(f64, Status)> = samples.iter().filter(|s| s.0 >= cut_at + 2.0).collect();
    let agg = match (after.first(), after.last()) {
        (Some(a), Some(b)) => rate_between(a, b, |s| s.tunnel.tx_bytes),
        _ => 0.0,
    };
    let mut md =
        String::from("#### A path's rate cut in half mid-run (adaptive, nothing configured)\n\n");
    let _ = writeln!(
        md,
        "Two paths shaped 10 Mbit/s; iperf3 TCP A → B for 20 s; at t = {cut_at:.1} s path p1 is re-shaped to 5 Mbit/s (`tc qdisc change`). \
         The learned rate of p1 fell to within 15 % of 5 Mbit/s **{} after the cut**; from 2 s after the cut to the end the tunnel carried \
         {:.2} Mbit/s (inner bytes) against {:.2} Mbit/s that iperf3 TCP gets on the two paths alone afterwards: **{:.1} %**. Series: `adaptive-rate-cut.csv`/`.png`.\n",
        settled.map_or("not".to_owned(), |s| format!("{s:.1} s")),
        agg / 1e6,
        alone / 1e6,
        100.0 * agg / alone
    );
    Ok(md)
}

pub fn outage(out: &Path) -> Result<String> {
    eprintln!("== adaptive/outage");
    let link = Impair {
        delay_ms: 1.0,
        ..Impair::default()
    };
    let paths = vec![
        LinkSpec {
            rate_bps: Some(10_000_000),
            ab: link,
            ba: link,
        },
        LinkSpec {
            rate_bps: Some(10_000_000),
            ab: link,
            ba: link,
        },
    ];
    let mut lab = Lab::new(&paths)?;
    let o = opts(VARIANTS[2], 1400, None);
    let dead = o.dead_ms as f64 / 1000.0;
    lab.start_tunnel(&o)?;
    let sampler = Sampler::start(lab.control_socket(Side::A), Duration::from_millis(50));
    let t0 = Instant::now();
    let (spid, client) = lab.tcp_transfer_in_background(5802, 10)?;
    std::thread::sleep(Duration::from_secs(3).saturating_sub(t0.elapsed()));
    lab.set_outage(1, true)?;
    let down_at = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(1));
    lab.set_outage(1, false)?;
    let up_at = t0.elapsed().as_secs_f64();
    let res = client.wait_with_output()?;
    let samples = sampler.finish();
    lab.reap(spid);
    let v: serde_json::Value = serde_json::from_slice(&res.stdout).context("iperf3 JSON")?;
    let total_bps = iperf3_bps(&v);
    let mut csv = String::from("t_s,tunnel_kbit,p0_kbit,p1_kbit,p0_rate_kbit,p1_rate_kbit\n");
    let mut left = None;
    let mut back = None;
    let mut longest_stall: f64 = 0.0;
    let mut stall_start: Option<f64> = None;
    let before: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[1].0 < down_at && w[1].0 > down_at - 1.0)
        .map(|w| rate_between(&w[0], &w[1], |s| s.paths[1].tx_bytes))
        .collect();
    let p1_before = before.iter().sum::<f64>() / before.len().max(1) as f64;
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let tun = rate_between(a, b, |s| s.tunnel.tx_bytes);
        let p1 = rate_between(a, b, |s| s.paths[1].tx_bytes);
        let learned = |i: usize| b.1.paths[i].rate_bps.unwrap_or(0) as f64;
        let _ = writeln!(
            csv,
            "{:.2},{:.0},{:.0},{:.0},{:.0},{:.0}",
            b.0,
            tun / 1e3,
            rate_between(a, b, |s| s.paths[0].tx_bytes) / 1e3,
            p1 / 1e3,
            learned(0) / 1e3,
            learned(1) / 1e3
        );
        if b.0 > down_at && left.is_none() && p1 < 0.1 * p1_before {
            left = Some(b.0 - down_at);
        }
        if b.0 > up_at && back.is_none() && p1 >= 0.9 * p1_before {
            back = Some(b.0 - up_at);
        }
        if b.0 > 1.0 && b.0 < 9.5 {
            if tun < 1e6 {
                stall_start.get_or_insert(a.0);
            } else if let Some(s) = stall_start.take() {
                longest_stall = longest_stall.max(b.0 - s);
            }
        }
    }
    let series = write(out, "adaptive-outage.csv", &csv)?;
    crate::report::plot(
        &series,
        &out.join("adaptive-outage.png"),
        "adaptive: path p1 drops everything from t = 3 s to 4 s",
        "kbit/s",
    );
    let mut md =
        String::from("#### Outage (MPMTP-AR's test): one path drops everything for 1 s\n\n");
    let _ = writeln!(
        md,
        "Two paths of 10 Mbit/s (1 ms each way, emulated); iperf3 TCP A → B for 10 s ({:.2} Mbit/s on average); p1 drops everything from t = {down_at:.1} s to t = {up_at:.1} s. \
         Traffic left p1 **{}** after the outage began (`dead_ms` = {:.0} ms); the longest stretch with the tunnel below 1 Mbit/s was **{longest_stall:.2} s**; \
         p1 carried ≥ 90 % of its earlier rate again **{}** after it recovered. Series: `adaptive-outage.csv`/`.png`.\n",
        total_bps / 1e6,
        f(left, 2) + " s",
        dead * 1000.0,
        back.map_or("not within the run".to_owned(), |b| format!("{b:.2} s"))
    );
    Ok(md)
}
