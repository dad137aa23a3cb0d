//! `mpt-lab run realworld`: bonding on real-looking links, against kernel MPTCP measured in the
//! same run (issue 19). Each scenario's paths get their rate from `tbf` and their delay,
//! jitter and loss from the userspace wire; one TCP transfer at a time, with BBR and with
//! cubic, goes
//!
//! * over each path at once, a plain TCP connection with BBR per path (what the paths carry
//!   alone: cubic would measure what random loss leaves of it);
//! * over kernel MPTCP: an `IPPROTO_MPTCP` connection to B's first path address; B announces
//!   its other path addresses (`ip mptcp endpoint ... signal`) and A's in-kernel path manager
//!   opens a subflow to each, over that address's path;
//! * through mptd with the `adaptive` scheduler and nothing configured per path.
//!
//! Then a UDP stream that does not back off goes through mptd at [`UDP_SHARE`] of the
//! paths' rates: what it loses, and what arrives out of order. Scenarios with pings (the
//! satellite's) also measure a 100/s ping stream marked EF over each link alone, through mptd
//! idle and beside mptd's transfers ([`super::pings`]).
//!
//! The transfers are this program's own (a socket that writes for the run's length, one that
//! reads and counts), so that every column is measured the same way.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::tcp::{set_up_mptcp, transfer};
use crate::experiments::runs::{loss_pct, udp_args, udp_sent, Arrivals};
use crate::harness::{tunnel_addr, Lab, Side, TunnelOpts};
use crate::plot::{bars_svg, Group};
use crate::report::write;

use super::lookups::Lookups;
use super::mixes::scenarios;
use super::pings::{PingRuns, Pings};
use super::trace::Tracer;

const CCS: [&str; 2] = ["bbr", "cubic"];

/// The UDP stream's share of the paths' rates (their `tbf` rates summed).
const UDP_SHARE: f64 = 0.8;
/// The UDP stream's datagrams (payload bytes): a video call's, and whole in a datagram of
/// every path.
const UDP_DATAGRAM: usize = 1200;

/// A UDP stream of `bps` from A to B through the tunnel for `secs`: the share of its
/// datagrams lost (counted where they reach B, [`Arrivals`]) and of those received that
/// arrived out of order (the receiving iperf3's count), in %.
fn udp_through(lab: &mut Lab, bps: u64, secs: u64) -> Result<(f64, f64)> {
    let port = 5710;
    let arrivals = Arrivals::start(lab, port, port)?;
    let args = udp_args(&bps.to_string(), UDP_DATAGRAM, secs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = lab.iperf3(Side::A, &tunnel_addr(Side::B), port, &args)?;
    let received = arrivals.count(lab, UDP_DATAGRAM)?;
    let packets = v["end"]["sum_received"]["packets"].as_u64().unwrap_or(0);
    let ooo = crate::harness::iperf3_receiver_out_of_order(&v).unwrap_or(0);
    Ok((
        loss_pct(udp_sent(&v), received),
        100.0 * ooo as f64 / packets.max(1) as f64,
    ))
}

/// Mean of the runs.
fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// A column's mean, or "—" where it was not measured (`--mptd-only`).
fn cell(v: &[f64]) -> String {
    match v.is_empty() {
        true => "—".into(),
        false => format!("{:.1}", mean(v)),
    }
}

/// How mptd runs in `mpt-lab run realworld`.
#[derive(Debug)]
pub struct MptdOpts<'a> {
    /// `adaptive`: nothing configured per path; the others get each path's rate and weight.
    pub scheduler: &'a str,
    pub parity: bool,
    /// Losses asked for and sent again (`[connection] resend`).
    pub resend: bool,
    /// TCP headers compressed (`[connection] compress`).
    pub compress: bool,
    /// Bonded traffic paced or not (`[connection] pace`); `None`: the default.
    pub pace: Option<bool>,
    pub equalise: bool,
    /// Print, every this long during a transfer through mptd, what the sender's TCP and A's
    /// `tbf` queues say, and after it what both daemons counted.
    pub trace: Option<Duration>,
    /// Measure mptd alone (no paths-alone or MPTCP column): quicker, to compare builds.
    pub alone: bool,
    /// Seconds of an uncounted cubic transfer through the tunnel before the measured ones.
    pub warm: Option<u64>,
    /// Seconds with the tunnel idle after the warm-up transfer.
    pub idle: Option<u64>,
    /// A DNS lookup from A every this long beside mptd's transfers and stream.
    pub lookups: Option<Duration>,
}

/// Run the scenarios (`cases`: only these ids), `runs` times each, `secs` per transfer.
pub fn run_realworld(
    cases: &[u32],
    runs: usize,
    secs: u64,
    mptd: &MptdOpts,
    out: &Path,
) -> Result<String> {
    let MptdOpts {
        scheduler,
        parity,
        resend,
        compress,
        pace,
        equalise,
        trace,
        alone: mptd_alone,
        warm,
        idle,
        lookups,
    } = *mptd;
    let mut configured = if scheduler == "adaptive" {
        "nothing configured per path".to_owned()
    } else {
        "each path's rate and weight configured".to_owned()
    };
    if !parity {
        configured += ", `parity = false`";
    }
    if !equalise {
        configured += ", `equalise = false`";
    }
    if !resend {
        configured += ", `resend = false`";
    }
    if !compress {
        configured += ", `compress = false`";
    }
    if let Some(p) = pace {
        configured += &format!(", `pace = {p}`");
    }
    if let Some(w) = warm {
        configured += &format!(
            ", after an uncounted cubic transfer of {w} s through the newly started tunnel"
        );
    }
    if let Some(i) = idle {
        configured += &format!(" and {i} s with the tunnel idle");
    }
    if let Some(every) = lookups {
        configured += &format!(
            ", with a DNS lookup (an A and an AAAA query) from A every {} ms beside them",
            every.as_millis()
        );
    }
    let mut md = String::new();
    writeln!(
        md,
        "### Real-world bonding: mptd against kernel MPTCP (`mpt-lab run realworld`)\n\n\
         One TCP transfer of {secs} s at a time (this program's own sender and receiver), mean of \
         {runs} run(s), Mbit/s received. *paths alone*: a plain TCP connection with BBR on every \
         path at once, summed (what the paths carry, their random loss notwithstanding). *MPTCP*: kernel MPTCP, a subflow per path (in-kernel path \
         manager). *mptd*: TCP through the tunnel, `{scheduler}` scheduler, {configured}, \
         default settings. Rates from `tbf`, delay, jitter and loss from the userspace \
         wire, both ways. *UDP at 80 %*: then a UDP stream of {UDP_DATAGRAM}-byte datagrams \
         through mptd at 80 % of the paths' `tbf` rates summed, {secs} s: lost (counted where \
         they reach B) and out of order (the receiving iperf3's count), % of the stream, mean \
         of the runs.\n\n\
         | # | scenario | paths alone (sum) | MPTCP BBR | MPTCP cubic | mptd BBR | mptd cubic | mptd BBR / sum | mptd cubic / sum | mptd UDP at 80 %: lost / out of order |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    )?;
    let mut ping_rows = String::new();
    let mut groups = Vec::new();
    // the Summary's row: each scenario's fractions, then the UDP stream's losses
    let (mut fractions, mut udp) = (Vec::new(), Vec::new());
    for sc in scenarios()
        .into_iter()
        .filter(|s| cases.is_empty() || cases.contains(&s.id))
    {
        let mut pings = PingRuns::default();
        let mut alone = Vec::new();
        let mut mptcp = [Vec::new(), Vec::new()];
        let mut tunnel = [Vec::new(), Vec::new()];
        let (mut udp_lost, mut udp_ooo) = (Vec::new(), Vec::new());
        let rates: u64 = sc.paths.iter().filter_map(|p| p.rate_bps).sum();
        let udp_bps = (UDP_SHARE * rates as f64) as u64;
        for run in 0..runs {
            eprintln!("== realworld {}: {} (run {})", sc.id, sc.name, run + 1);
            let mut lab = Lab::new(&sc.paths).context("lab")?;
            if sc.pings {
                let each = pings.links_alone(&lab, secs)?;
                eprintln!("   pings over each link alone (lost % / p99 / max ms): {each:?}");
            }
            let per_path: Vec<SocketAddr> = (0..sc.paths.len())
                .map(|i| {
                    format!("{}:{}", lab.path_addr(Side::B, i), 5600 + i)
                        .parse()
                        .expect("address")
                })
                .collect();
            if !mptd_alone {
                // BBR: what a path carries, its random loss notwithstanding
                let each = transfer(&lab, &per_path, false, "bbr", secs)?;
                eprintln!("   paths alone: {each:.1?} Mbit/s");
                alone.push(each.iter().sum::<f64>());
                set_up_mptcp(&lab)?;
                for (k, cc) in CCS.iter().enumerate() {
                    let got = transfer(&lab, &per_path[..1], true, cc, secs)?[0];
                    eprintln!("   MPTCP {cc}: {got:.1} Mbit/s");
                    mptcp[k].push(got);
                }
            }
            let opts = TunnelOpts {
                scheduler: scheduler.into(),
                configure_rates: scheduler != "adaptive",
                parity: (!parity).then_some(false),
                resend: (!resend).then_some(false),
                compress: (!compress).then_some(false),
                pace,
                equalise: (!equalise).then_some(false),
                ..TunnelOpts::default()
            };
            lab.start_tunnel(&opts).context("tunnel")?;
            let inner: SocketAddr = format!("{}:5700", tunnel_addr(Side::B)).parse()?;
            if let Some(w) = warm {
                let got = transfer(&lab, &[inner], false, "cubic", w)?[0];
                eprintln!("   mptd warm-up (cubic, {w} s, not counted): {got:.1} Mbit/s");
                if let Some(i) = idle {
                    std::thread::sleep(Duration::from_secs(i));
                }
            }
            let through = tunnel_addr(Side::B);
            if sc.pings {
                let idle = Pings::start(&lab, &through, secs)?.finish()?;
                eprintln!("   pings through mptd, idle: {idle}");
                pings.idle.push(idle);
            }
            let dns = lookups.map(|every| Lookups::start(&lab, every));
            for (k, cc) in CCS.iter().enumerate() {
                let tracer = trace.map(|every| Tracer::start(&lab, every));
                let beside = match sc.pings {
                    true => Some(Pings::start(&lab, &through, secs)?),
                    false => None,
                };
                let got = transfer(&lab, &[inner], false, cc, secs)?[0];
                eprintln!("   mptd {cc}: {got:.1} Mbit/s");
                if let Some(p) = beside {
                    let p = p.finish()?;
                    eprintln!("   pings beside it: {p}");
                    pings.beside[k].push(p);
                }
                if let Some(t) = tracer {
                    t.finish(&lab);
                }
                tunnel[k].push(got);
            }
            let tracer = trace.map(|every| Tracer::start(&lab, every));
            let (lost, ooo) = udp_through(&mut lab, udp_bps, secs)?;
            if let Some(t) = tracer {
                t.finish(&lab);
            }
            eprintln!(
                "   mptd UDP at {:.1} Mbit/s: {lost:.3} % lost, {ooo:.3} % out of order",
                udp_bps as f64 / 1e6
            );
            udp_lost.push(lost);
            udp_ooo.push(ooo);
            if let Some(d) = dns {
                eprintln!("   DNS queries sent beside them: {}", d.finish());
            }
        }
        let sum = mean(&alone);
        let ratio = |v: &[f64]| {
            if sum > 0.0 {
                format!("{:.2}", mean(v) / sum)
            } else {
                "—".into()
            }
        };
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {:.3} / {:.3} |",
            sc.id,
            sc.name,
            cell(&alone),
            cell(&mptcp[0]),
            cell(&mptcp[1]),
            mean(&tunnel[0]),
            mean(&tunnel[1]),
            ratio(&tunnel[0]),
            ratio(&tunnel[1]),
            mean(&udp_lost),
            mean(&udp_ooo),
        )?;
        if sc.pings {
            ping_rows += &pings.row(sc.id, sc.name);
        }
        let of = |v: &[f64]| mean(v) / sum.max(f64::MIN_POSITIVE);
        fractions.push(format!(
            "{}: **{:.2}** / **{:.2}** (MPTCP {:.2} / {:.2})",
            sc.short,
            of(&tunnel[1]),
            of(&tunnel[0]),
            of(&mptcp[1]),
            of(&mptcp[0])
        ));
        udp.push(format!(
            "{} {:.3} / {:.3} %",
            sc.short,
            mean(&udp_lost),
            mean(&udp_ooo)
        ));
        let some = |v: &[f64]| (!v.is_empty()).then(|| mean(v));
        groups.push(Group {
            label: format!("{}: {}", sc.id, sc.short),
            values: vec![
                some(&alone),
                some(&mptcp[0]),
                some(&mptcp[1]),
                some(&tunnel[0]),
                some(&tunnel[1]),
            ],
        });
    }
    // the plot of the table's transfers, which --write-results puts beside the results
    if !mptd_alone {
        let name = match cases {
            [] => "realworld.svg".to_owned(),
            _ => format!(
                "realworld-cases-{}.svg",
                cases
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join("-")
            ),
        };
        let series = [
            "paths alone (sum)",
            "MPTCP BBR",
            "MPTCP cubic",
            "mptd BBR",
            "mptd cubic",
        ];
        let title = format!("One TCP transfer, {secs} s, mean of {runs} run(s)");
        write(out, &name, &bars_svg(&title, "Mbit/s", &series, &groups))?;
        writeln!(
            md,
            "\n![mptd against kernel MPTCP and the paths alone](figures/{name})"
        )?;
    }
    if !ping_rows.is_empty() {
        md += &PingRuns::header(secs);
        md += &ping_rows;
        md.push('\n');
    }
    let key = match (lookups, scheduler) {
        (Some(_), _) => "lookups".to_owned(),
        (None, "adaptive") => "realworld".to_owned(),
        (None, s) => format!("realworld-{s}"),
    };
    if !mptd_alone && (cases.is_empty() || lookups.is_some()) {
        let what = format!(
            "one TCP flow over unequal, lossy paths, kernel MPTCP in the same run \
             (`mpt-lab run realworld`, `{scheduler}` with {configured}, {runs} run(s) of {secs} s; \
             the fraction of what the paths carry alone, mptd with cubic / BBR)"
        );
        let figure = format!(
            "{}; UDP at 80 %, lost / out of order: {}",
            fractions.join("; "),
            udp.join(", ")
        );
        md += &crate::summary::Headline { key, what, figure }.comment();
        md.push('\n');
    }
    write(out, "realworld.md", &md)?;
    Ok(md)
}
