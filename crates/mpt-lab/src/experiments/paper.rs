//! The MPT paper's tables, rerun: Table I (FTP downloads), Table II (UDP streams) and the
//! delay-diversity runs.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::runs::*;
use super::scenario::Suite;
use crate::harness::{Lab, TunnelOpts};
use crate::report::{plot, throughput_csv, write};

/// Table I: FTP download over the tunnel (B serves, A downloads).
pub fn run_table1(suite: &Suite, only: &[u32], out: &Path) -> Result<String> {
    let mut md = format!(
        "### {}\n\nEfficiency = tunnel FTP goodput / sum of what iperf3 TCP gets on each path alone (same lab, same run). Scheduler `rate`, sealed, tunnel MTU 1436 (path MTU 1500 − 64){}.\n\n\
         | case | file | paths Mbit/s | time s paper / ours | tunnel KiB/s paper / ours | per-path KiB/s paper / ours (datagram bytes) | paths alone KiB/s | efficiency paper / ours |\n|---|---|---|---|---|---|---|---|\n",
        suite.title,
        match suite.pace {
            Some(false) => ", bonded traffic not paced (`--no-pace`)",
            _ => ", bonded traffic paced at the paths' rates (the default under `rate`)",
        }
    );
    let mut csv = String::from(
        "case,file_mib,rates,time_s,tunnel_kib_s,paths_alone_kib_s,efficiency_pct,per_path_kib_s\n",
    );
    // the Summary's row: efficiencies where a path has 2 Mbit/s and over 1 Mbit/s lines only,
    // and how many rows are at or above the paper's
    let (mut fast, mut slow, mut above) = (Vec::new(), Vec::new(), 0);
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
        let opts = TunnelOpts {
            pace: suite.pace,
            ..TunnelOpts::default().with_full_mtu()
        };
        lab.start_tunnel(&opts)?;
        let Download {
            seconds: time,
            bytes: size,
            sent: samples,
            arrived,
        } = ftp_download(&mut lab, mb)?;
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
            &throughput_csv(&arrived),
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
            "kbit/s arrived at A (inner bytes)",
        );
        eprintln!("   {time:.1} s, {kib_s:.1} KiB/s, efficiency {eff:.1} %");
        match c.rates_label().contains("2mbit") {
            true => fast.push(eff),
            false => slow.push(eff),
        }
        above += usize::from(c.paper_f64("efficiency_pct").is_some_and(|p| eff >= p));
    }
    if only.is_empty() && suite.pace.is_none() {
        let range = |v: &[f64]| {
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
            format!("{lo:.1}–{hi:.1} %")
        };
        let head = crate::summary::Headline {
            key: "table1".into(),
            what: "the MPT paper's Table I: FTP over 4 paths of 1–2 Mbit/s (`mpt-lab run table1`; \
                   FTP goodput against what TCP gets on the paths alone, same run)"
                .into(),
            figure: format!(
                "**{}** where a path has 2 Mbit/s, **{}** over four 1 Mbit/s paths; at or above \
                 the paper in {above} of {} rows",
                range(&fast),
                range(&slow),
                fast.len() + slow.len()
            ),
        };
        md += &head.comment();
        md.push('\n');
    }
    write(out, "table1.csv", &csv)?;
    write(out, "table1.md", &md)?;
    Ok(md)
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
    let len = suite.datagram.unwrap_or(super::scenario::IPERF_DATAGRAM);
    let mut md = format!(
        "### {}\n\niperf3 UDP, {len}-byte datagrams unless the case says otherwise, {secs} s per run (paper: 60 s). Figures as seen by the receiving iperf3, but loss: from counts, the sender's datagrams against those that reached B (an nftables counter, read a second after the stream ends: iperf3's server stops counting at the client's end-of-test message, which through the tunnel overtakes the last datagrams a slow line still carries); \"reordered\" = iperf3's out-of-order count / packets. `reseq off` = `reorder_window = 0`. \"plain UDP\" = the same stream without a tunnel, split over the lines in proportion to their rates, in the same run: what the lines carry (its jitter: over several lines, the lines' streams' mean, weighted by packets). Tunnel MTU {}. Bundling {}.{}\n\n\
         | case | datagram B | paths kbit/s | stream kbit/s | plain UDP kbit/s / loss % / jitter ms | scheduler | reseq | throughput kbit/s paper / ours | jitter ms paper / ours | loss % paper / ours | reordered % paper / ours | reordered on arrival (mptd) | hold p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        suite.title,
        suite.mtu.unwrap_or(mptd::config::defaults::MTU),
        if suite.bundle == Some(false) { "off (`--no-bundle`)" } else { "on (the default)" },
        if suite.pace == Some(false) { " `rate` not paced (`--no-pace`)." } else { " `rate` paced (its default)." }
    );
    let mut csv = String::from("case,rates,stream_kbit,scheduler,reseq,throughput_kbit,jitter_ms,loss_pct,reordered_pct,packets,mptd_reordered,hold_p99_ms,datagram,plain_kbit,plain_loss_pct,plain_jitter_ms,wire_late,wire_stalled,path_seq_errors\n");
    let mut port = 5500;
    let mut rows = Vec::new();
    for c in suite
        .case
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.id))
    {
        let mut lab = Lab::new(&c.paths(suite.serial)?)?;
        let single = c.rates.len() == 1;
        let dlen = suite.datagram_of(c);
        eprintln!(
            "== table2 case {}: {} kbit/s of plain UDP over {} kbit/s, no tunnel",
            c.id,
            c.udp_kbit.unwrap_or(0),
            c.rates_label()
        );
        port += 10;
        let plain = crate::experiments::runs::plain_run(&mut lab, suite, c, port)?;
        let (plain_kbit, plain_loss, plain_jitter) = (plain.kbit, plain.loss_pct, plain.jitter_ms);
        eprintln!("   {plain_kbit:.1} kbit/s, loss {plain_loss:.2} %, jitter {plain_jitter:.2} ms");
        port += 10;
        let mut jitter_series = Vec::new();
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
                bundle: suite.bundle,
                // `wrr` is never paced (its config refuses it)
                pace: suite.pace.filter(|_| sched == "rate"),
                mtu: suite.mtu.unwrap_or(mptd::config::defaults::MTU),
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
            jitter_series.push((
                jcsv.clone(),
                format!("{sched}, reseq {}", if reseq { "on" } else { "off" }),
            ));
            let _ = writeln!(
                md,
                "| {} | {dlen} | {} | {} | {plain_kbit:.1} / {plain_loss:.2} / {plain_jitter:.2} | {sched} | {} | {} / {:.2} | {} / {:.2} | {} / {:.2} | {} / **{:.2}** | {} | {:.1} |",
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
            rows.push(super::paper_summary::Row {
                case: c.name(),
                datagram: dlen,
                scheduler: sched,
                reseq,
                kbit: r.kbit,
                jitter_ms: r.jitter_ms,
                loss_pct: r.loss_pct,
                reordered_pct: r.reordered_pct,
                plain: (plain_kbit, plain_loss, plain_jitter),
                paper: (c.paper_f64("jitter_ms"), c.paper_f64("reordered_pct")),
            });
            let _ = writeln!(
                csv,
                "{},{},{},{sched},{},{:.2},{:.3},{:.3},{:.3},{},{},{:.2},{dlen},{plain_kbit:.2},{plain_loss:.3},{plain_jitter:.3},{},{},{}",
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
                r.hold_p99_ms,
                r.wire_late,
                r.wire_stalled,
                r.path_seq_errors
            );
            eprintln!(
                "   {:.1} kbit/s, jitter {:.2} ms, loss {:.2} %, reordered {:.2} % (the machine: {} packets the emulator wrote late, {} of them held by a stall; {} out of their path's order at B)",
                r.kbit, r.jitter_ms, r.loss_pct, r.reordered_pct, r.wire_late, r.wire_stalled, r.path_seq_errors
            );
        }
        crate::report::plot_together(
            &jitter_series,
            &out.join(format!("table2-case{}-jitter.png", c.name())),
            &format!(
                "Table II case {}: {} kbit/s over {}, {dlen} B",
                c.name(),
                c.udp_kbit.unwrap_or(0),
                c.rates_label()
            ),
            "jitter (ms)",
        );
    }
    for h in super::paper_summary::headlines(&rows, suite.mtu) {
        md += &h.comment();
        md.push('\n');
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
