//! `mpt-lab`: the experiments, the demo and the link emulator.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Reruns the MPT paper's experiments with mptd on this machine"
)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
    /// run and bench: also write the table into FILE (default `docs/results.md`), in the
    /// section the experiment's markers delimit (added at the end the first time), with the
    /// command, the day and the commit.
    #[arg(long, global = true, num_args = 0..=1, default_missing_value = "docs/results.md", value_name = "FILE")]
    write_results: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Write the man pages (mptd.8, mptctl.8, mpt.toml.5) and the shell completions (bash,
    /// zsh, fish) of mptd and mptctl under DIR: what the .deb ships.
    Docs {
        #[arg(long, default_value = "target/assets")]
        out: std::path::PathBuf,
    },
    /// The README's demo: a 4-path lab, mptd on both ends, iperf3 through tun0.
    Demo {
        /// `rate` (the paths' rates configured), `adaptive` (nothing configured: learned),
        /// `wrr` (weights = rates) or `rr`.
        #[arg(long, default_value = "rate")]
        scheduler: String,
    },
    /// Run an experiment suite: table1 (FTP), table2 (UDP stream), delay (delay diversity),
    /// adaptive (all of the adaptive scheduler's runs; adaptive-ftp, adaptive-stream,
    /// adaptive-cut, adaptive-outage: one), realworld (TCP with BBR and cubic over unequal,
    /// lossy paths: the paths alone, kernel MPTCP and mptd, in the same run; then UDP through
    /// mptd at 80 % of the paths' rates), or a scenario file.
    Run {
        suite: String,
        /// Only these case ids (default: all).
        #[arg(long, value_delimiter = ',')]
        cases: Vec<u32>,
        /// adaptive, adaptive-ftp and adaptive-stream only: only these schedulers of the
        /// comparison (wrr, rate, adaptive; default: all). realworld: mptd's scheduler (the
        /// first given; default adaptive, nothing configured per path; rr, wrr and rate get
        /// each path's rate and weight configured).
        #[arg(long, value_delimiter = ',')]
        schedulers: Vec<String>,
        /// adaptive, adaptive-ftp and adaptive-stream only: the tunnel's encryption
        /// (chacha20-poly1305, aes-256-gcm, auto or none; default chacha20-poly1305, fixed so
        /// that runs compare across machines).
        #[arg(long)]
        encryption: Option<String>,
        /// table1, table2, delay: seconds per UDP run instead of the suite's (the paper ran 60);
        /// realworld: seconds per transfer (default 10).
        #[arg(long)]
        duration: Option<u64>,
        #[command(flatten)]
        flags: RunFlags,
        /// Where the markdown, CSV and PNG files go.
        #[arg(long, default_value = "lab-out")]
        out: std::path::PathBuf,
    },
    /// Benchmarks: `throughput` (raw veth against mptd over 1 and 2 unshaped paths, with and
    /// without encryption; TCP, UDP, ping), `latency` (idle ping only, bare veth against one
    /// path), `compare` (single-stream TCP through several mptd builds in turn: `--mptd`),
    /// `peers` (one server, `--count` emulated sites: handshakes/s, memory and CPU per peer).
    Bench {
        what: String,
        /// Encryption settings to measure.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "none,chacha20-poly1305,aes-256-gcm"
        )]
        encryption: Vec<String>,
        #[arg(long, default_value = "lab-out")]
        out: std::path::PathBuf,
        /// compare only: the mptd binaries to run in turn.
        #[arg(long, value_delimiter = ',')]
        mptd: Vec<std::path::PathBuf>,
        /// compare only: unshaped paths.
        #[arg(long, default_value_t = 1)]
        paths: usize,
        /// compare only: runs of each build.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// peers only: how many sites.
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// throughput: the tunnel MTUs to measure, each a row of its own (default: the
        /// product's, 1500; e.g. `--mtu 1400,1500` to see what the full MTU costs); compare:
        /// the tunnel MTU of every build (the first given; builds before the 1500-byte MTU
        /// need 1400 or less).
        #[arg(long, value_delimiter = ',')]
        mtu: Vec<u16>,
        /// compare only: the scheduler of every build (default: the lab's).
        #[arg(long)]
        scheduler: Option<String>,
        /// compare only: the sender's rate (iperf3 -b, e.g. 3G), below what every build
        /// reaches, so that CPU per GB compares at one packet rate.
        #[arg(long)]
        rate: Option<String>,
    },
    /// Internal: run the link emulator (started by the lab inside its middle namespace).
    #[command(hide = true)]
    Emulate { spec: String },
}

/// What `mpt-lab run` changes in the tunnel, and how realworld measures.
#[derive(clap::Args, Debug, Clone, Copy)]
struct RunFlags {
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
    /// (`[connection] pace = true`; the default under `rate`, which table1 and table2 run).
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
    /// table2: the tunnel MTU (`tunnel.mtu`) instead of the daemon's default.
    #[arg(long)]
    mtu: Option<u16>,
    /// table2: every case's UDP datagram payload, bytes, instead of the suite's.
    #[arg(long)]
    datagram: Option<usize>,
}

fn run(
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
        mptd_only,
        runs,
        warm,
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
    // the section a run writes: one per experiment, and per set of cases when only some ran
    let key = match cases {
        [] => name.to_owned(),
        _ => format!(
            "{name} cases {}",
            cases
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
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
                    trace,
                    alone: mptd_only,
                    warm,
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

fn bench(
    what: &str,
    encryption: &[String],
    out: &std::path::Path,
    compare: mpt_lab::experiments::bench::Compare<'_>,
    (count, mtus): (usize, &[u16]),
) -> anyhow::Result<Option<(String, String)>> {
    if !mpt_lab::harness::require_root("mpt-lab bench") {
        anyhow::bail!("the lab needs root");
    }
    let md = match what {
        "throughput" => {
            let md = mpt_lab::experiments::bench::run_throughput(out, encryption, mtus)?;
            eprintln!("results in {}", out.display());
            md
        }
        "latency" => mpt_lab::experiments::bench::run_latency(out, encryption)?,
        "compare" => mpt_lab::experiments::bench::run_compare(out, encryption, &compare)?,
        "peers" => mpt_lab::experiments::peers::run(out, count)?,
        other => {
            anyhow::bail!(
                "unknown benchmark {other:?}, expected throughput, latency, compare or peers"
            )
        }
    };
    Ok(Some((format!("bench {what}"), md)))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !matches!(args.command, Cmd::Emulate { .. } | Cmd::Docs { .. }) {
        if let Err(e) = mpt_lab::harness::cleanup_on_signal() {
            eprintln!("mpt-lab: cannot watch SIGINT/SIGTERM ({e}); an interrupted run leaves its namespaces");
        }
    }
    let r = match args.command {
        Cmd::Docs { out } => mpt_lab::docs::generate(&out).map(|files| {
            for f in files {
                println!("{}", f.display());
            }
            None
        }),
        Cmd::Demo { scheduler } => mpt_lab::experiments::demo::run(&scheduler).map(|()| None),
        Cmd::Run {
            suite,
            cases,
            schedulers,
            encryption,
            duration,
            flags,
            out,
        } => run(
            &suite,
            &cases,
            &schedulers,
            encryption.as_deref(),
            duration,
            &flags,
            &out,
        ),
        Cmd::Bench {
            what,
            encryption,
            out,
            mptd,
            paths,
            rounds,
            count,
            mtu,
            scheduler,
            rate,
        } => bench(
            &what,
            &encryption,
            &out,
            mpt_lab::experiments::bench::Compare {
                builds: &mptd,
                paths,
                rounds,
                mtu: mtu.first().copied(),
                scheduler: scheduler.as_deref(),
                rate: rate.as_deref(),
            },
            (count, &mtu),
        ),
        Cmd::Emulate { spec } => serde_json::from_str(&spec)
            .map_err(anyhow::Error::from)
            .and_then(|links: Vec<mpt_lab::harness::emulator::Link>| {
                mpt_lab::harness::emulator::run(&links)
            })
            .map(|()| None),
    };
    // a table measured: printed, and written where --write-results says
    let r = r.and_then(|table| {
        let Some((key, md)) = table else {
            return Ok(());
        };
        println!("{md}");
        match &args.write_results {
            Some(file) => mpt_lab::report::write_results(file, &key, &md),
            None => Ok(()),
        }
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpt-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}
