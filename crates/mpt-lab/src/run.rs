//! `mpt-lab run`: the flags that change the tunnel and how realworld measures, and running
//! the experiment they name.

/// What `mpt-lab run` changes in the tunnel, and how realworld measures.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(crate) struct RunFlags {
    /// table2: the tunnel sends every packet in a datagram of its own (`[connection]
    /// bundle = false`), to compare with the default.
    #[arg(long)]
    no_bundle: bool,
    /// realworld: mptd without parity on lossy paths (`[connection] parity = false`;
    /// losses are still asked for and resent), to compare with the default.
    #[arg(long)]
    no_parity: bool,
    /// realworld: mptd without delay equalisation (`[connection] equalise = false`), to
    /// compare with the default.
    #[arg(long)]
    no_equalise: bool,
    /// realworld: mptd without resending (`[connection] resend = false`, which turns parity
    /// off too): what a path loses reaches the inner TCP.
    #[arg(long)]
    no_resend: bool,
    /// realworld: mptd with TCP headers whole (`[connection] compress = false`), to compare
    /// with the default.
    #[arg(long)]
    no_compress: bool,
    /// realworld, table1, and table2's `rate` rows: mptd with bonded traffic paced
    /// (`[connection] pace = true`; the default under `rate` and `adaptive`).
    #[arg(long, conflicts_with = "no_pace")]
    pace: bool,
    /// realworld, table1, and table2's `rate` rows: mptd with bonded traffic not paced
    /// (`[connection] pace = false`), to compare with the default.
    #[arg(long)]
    no_pace: bool,
    /// realworld: print, every second of a transfer through mptd, the sender's TCP state
    /// (`ss -tin`), each path's `tbf` rate carried, drops and backlog, and what B's
    /// resequencer gave up and received late so far; then what both daemons counted.
    #[arg(long)]
    trace: bool,
    /// realworld, with `--trace`: a line every this many milliseconds instead of every second
    /// (a TCP start and the paths' first cuts take a second or so).
    #[arg(long, value_name = "MS")]
    trace_ms: Option<u64>,
    /// realworld: measure mptd only (no paths-alone or MPTCP columns), to compare builds
    /// quickly.
    #[arg(long)]
    mptd_only: bool,
    /// realworld: runs of each scenario, averaged.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// realworld: before the measured transfers, a cubic transfer of this many seconds
    /// through the newly started tunnel, not counted, so that the measured ones meet paths
    /// whose rates `adaptive` has learned (the default measures a tunnel that carried nothing
    /// yet: its first transfer pays for the learning).
    #[arg(long, value_name = "SECS")]
    warm: Option<u64>,
    /// realworld: after `--warm`'s transfer, this many seconds with the tunnel idle before
    /// the measured ones (what a transfer meets after a pause: rates learned, but what the
    /// paths carried lately is little).
    #[arg(long, value_name = "SECS", requires = "warm")]
    idle: Option<u64>,
    /// realworld: a DNS lookup (an A and an AAAA query from one port) from A every this many
    /// milliseconds beside mptd's transfers and UDP stream: light traffic, as a host's
    /// resolver sends it.
    #[arg(long, value_name = "MS")]
    lookups: Option<u64>,
    /// table2: the tunnel MTU (`tunnel.mtu`) instead of the daemon's default.
    #[arg(long)]
    mtu: Option<u16>,
    /// table2: every case's UDP datagram payload, bytes, instead of the suite's.
    #[arg(long)]
    datagram: Option<usize>,
}

pub(crate) fn run(
    name: &str,
    cases: &[u32],
    schedulers: &[String],
    encryption: Option<&str>,
    duration: Option<u64>,
    flags: &RunFlags,
    out: &std::path::Path,
) -> anyhow::Result<Option<(String, String)>> {
    let RunFlags {
        no_bundle,
        no_parity,
        no_equalise,
        no_resend,
        no_compress,
        pace,
        no_pace,
        trace,
        trace_ms,
        mptd_only,
        runs,
        warm,
        idle,
        lookups,
        mtu,
        datagram,
    } = *flags;
    // `[connection] pace` as asked; `None`: the daemon's default
    let pace_opt = match (pace, no_pace) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let only = mpt_lab::experiments::adaptive::Only {
        cases,
        schedulers,
        encryption,
    };
    use mpt_lab::experiments::{paper, scenario};
    if !mpt_lab::harness::require_root("mpt-lab run") {
        anyhow::bail!("the lab needs root");
    }
    // the section a run writes: one per experiment, and per set of cases, scheduler, lookups,
    // datagram and MTU when asked for
    let mut key = name.to_owned();
    let list = |v: Vec<String>| v.join(",");
    if !cases.is_empty() {
        key += &format!(
            " cases {}",
            list(cases.iter().map(u32::to_string).collect())
        );
    }
    if !schedulers.is_empty() {
        key += &format!(" schedulers {}", list(schedulers.to_vec()));
    }
    for (what, v) in [
        ("lookups", lookups),
        ("datagram", datagram.map(|d| d as u64)),
        ("mtu", mtu.map(u64::from)),
    ] {
        if let Some(v) = v {
            key += &format!(" {what} {v}");
        }
    }
    match name {
        "adaptive-cut" => {
            return Ok(Some((key, mpt_lab::experiments::adaptive::rate_cut(out)?)));
        }
        "adaptive-stream" => {
            let md = mpt_lab::experiments::adaptive::stream_comparison(out, only)?;
            return Ok(Some((key, md)));
        }
        "adaptive-ftp" => {
            let md = mpt_lab::experiments::adaptive::ftp_comparison(only)?;
            return Ok(Some((key, md)));
        }
        "adaptive-outage" => {
            return Ok(Some((key, mpt_lab::experiments::adaptive::outage(out)?)));
        }
        "realworld" => {
            let md = mpt_lab::experiments::realworld::run_realworld(
                cases,
                runs,
                duration.unwrap_or(10),
                &mpt_lab::experiments::realworld::MptdOpts {
                    scheduler: schedulers.first().map_or("adaptive", String::as_str),
                    parity: !no_parity,
                    resend: !no_resend,
                    compress: !no_compress,
                    pace: pace_opt,
                    equalise: !no_equalise,
                    trace: trace.then(|| {
                        std::time::Duration::from_millis(trace_ms.unwrap_or(1000).max(10))
                    }),
                    alone: mptd_only,
                    warm,
                    idle,
                    lookups: lookups.map(std::time::Duration::from_millis),
                },
                out,
            )?;
            eprintln!("results in {}", out.display());
            return Ok(Some((key, md)));
        }
        _ => {}
    }
    let mut suite = if name == "adaptive" {
        scenario::builtin("table1")?
    } else {
        scenario::builtin(name)?
    };
    if duration.is_some() {
        suite.duration_s = duration;
    }
    if no_bundle {
        suite.bundle = Some(false);
    }
    if pace_opt.is_some() {
        suite.pace = pace_opt;
    }
    if mtu.is_some() {
        suite.mtu = mtu;
    }
    if let Some(d) = datagram {
        suite.datagram = Some(d);
        for c in &mut suite.case {
            c.datagram = None;
        }
    }
    let md = match name {
        "table1" => paper::run_table1(&suite, cases, out)?,
        "delay" => paper::run_delay(&suite, out)?,
        "adaptive" => mpt_lab::experiments::adaptive::run_adaptive(out, only)?,
        _ if suite.case.iter().all(|c| c.ftp_mb.is_some()) => {
            paper::run_table1(&suite, cases, out)?
        }
        _ => paper::run_table2(&suite, cases, out)?,
    };
    eprintln!("results in {}", out.display());
    Ok(Some((key, md)))
}
