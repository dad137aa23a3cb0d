//! `mpt-lab`: the experiments, the demo and the link emulator.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod run;
use run::{run, RunFlags};

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
    /// command, and the plots the table shows into `figures/` beside FILE.
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
    /// `peers` (one server, `--count` emulated sites: handshakes/s, memory and CPU per peer),
    /// `soak` (one server, `--count` emulated sites for `--minutes`, their uplinks flapping,
    /// restarting and rekeying: reconnect times, panics, the server's RSS over time).
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
        /// compare only: the mptd binaries to run in turn; one that ends in `:nocompress` runs
        /// with `connection.compress = false` (e.g. `--mptd target/release/mptd,target/release/mptd:nocompress`).
        #[arg(long, value_delimiter = ',')]
        mptd: Vec<std::path::PathBuf>,
        /// compare only: unshaped paths.
        #[arg(long, default_value_t = 1)]
        paths: usize,
        /// compare only: runs of each build.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// peers and soak: how many sites.
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// soak only: how long, in minutes.
        #[arg(long, default_value_t = 60)]
        minutes: u64,
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
    /// Write the suite's measurements into the results file (`--write-results`, default
    /// `docs/results.md`): every `RESULT` line of the logs under its test, in its section's
    /// block (`<!-- mpt-lab suite PREFIX… -->`), and the `HEADLINE` lines the Summary and the
    /// README's table are made from; a log's lines between `BEGIN-BLOCK KEY` and `END-BLOCK`
    /// become block KEY whole. Then the Summary and the README's table again.
    Results {
        /// A log of `./test.sh` (or of a benchmark that prints `HEADLINE` lines); several
        /// are read in turn, a later headline replacing an earlier one of the same key.
        #[arg(long, required = true)]
        log: Vec<std::path::PathBuf>,
    },
    /// Internal: run the link emulator (started by the lab inside its middle namespace).
    #[command(hide = true)]
    Emulate { spec: String },
}

/// peers and soak: how many sites, and for how long.
struct Sites {
    count: usize,
    minutes: u64,
}

fn bench(
    what: &str,
    encryption: &[String],
    out: &std::path::Path,
    compare: mpt_lab::experiments::bench::Compare<'_>,
    sites: Sites,
    mtus: &[u16],
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
        "peers" => mpt_lab::experiments::peers::run(out, sites.count)?,
        "soak" => mpt_lab::experiments::soak::run(out, sites.count, sites.minutes)?,
        other => {
            anyhow::bail!(
                "unknown benchmark {other:?}, expected throughput, latency, compare, peers or soak"
            )
        }
    };
    Ok(Some((format!("bench {what}"), md)))
}

/// `mpt-lab results`: the suite's block and the summaries, from `logs`.
fn results(logs: &[std::path::PathBuf], file: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context;
    let file = file.unwrap_or(std::path::Path::new("docs/results.md"));
    let logs = logs
        .iter()
        .map(|l| std::fs::read_to_string(l).with_context(|| format!("reading {}", l.display())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let doc =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let doc = logs
        .iter()
        .fold(doc, |d, l| mpt_lab::suite::write_whole_blocks(&d, l));
    std::fs::write(file, mpt_lab::suite::write_suite(&doc, &logs))
        .with_context(|| format!("writing {}", file.display()))?;
    mpt_lab::summary::refresh(file)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !matches!(args.command, Cmd::Emulate { .. } | Cmd::Docs { .. }) {
        if let Err(e) = mpt_lab::harness::cleanup_on_signal() {
            eprintln!("mpt-lab: cannot watch SIGINT/SIGTERM ({e}); an interrupted run leaves its namespaces");
        }
    }
    // where a run's plots are, for --write-results to put beside the results
    let out_dir = match &args.command {
        Cmd::Run { out, .. } | Cmd::Bench { out, .. } => Some(out.clone()),
        _ => None,
    };
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
            minutes,
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
            Sites { count, minutes },
            &mtu,
        ),
        Cmd::Results { log } => results(&log, args.write_results.as_deref()).map(|()| None),
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
            Some(file) => mpt_lab::report::write_results(file, &key, &md, out_dir.as_deref()),
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
