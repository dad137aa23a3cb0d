//! `mptd -c FILE`: run the tunnel. `--check` validates the configuration and exits.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use mpt_core::config::Config;
use mptd::daemon::{self, Shared};
use tracing::{error, info};

/// Multipath UDP tunnel daemon.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Configuration file (TOML).
    #[arg(short, long, value_name = "FILE")]
    config: PathBuf,
    /// Validate the configuration and exit (0 when valid).
    #[arg(long)]
    check: bool,
    /// More logging: -v debug, -vv trace. RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let level = match args.verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();

    let cfg = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mptd: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!(
            "{}: ok ({} paths, scheduler {})",
            args.config.display(),
            cfg.paths.len(),
            cfg.connection.scheduler
        );
        return ExitCode::SUCCESS;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mptd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            eprintln!("mptd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cfg: Config) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;

    let control_path = cfg.control.socket.clone();
    let sh = Arc::new(Shared::new(cfg)?);
    let listener = mptd::control::bind(&control_path)?;
    info!(
        tunnel = %sh.cfg.tunnel.name,
        paths = sh.paths.len(),
        scheduler = %sh.cfg.connection.scheduler,
        session = format_args!("{:08x}", sh.session),
        control = %control_path.display(),
        "mptd running"
    );
    for p in &sh.paths {
        info!(path = %p.cfg.name, local = %p.cfg.local, remote = %p.cfg.remote, interface = p.cfg.interface.as_deref().unwrap_or("-"), "path socket bound");
    }

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(daemon::rx_task(sh.clone()));
    tasks.spawn(daemon::tx_task(sh.clone()));
    tasks.spawn(daemon::keepalive_task(sh.clone()));
    tasks.spawn(daemon::report_task(sh.clone()));
    tasks.spawn(mptd::control::serve(listener, sh.clone()));
    // systemd Type=notify: the TUN device and every socket are up.
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);

    let result = tokio::select! {
        _ = sigterm.recv() => { info!("SIGTERM: stopping"); Ok(()) }
        _ = sigint.recv() => { info!("SIGINT: stopping"); Ok(()) }
        r = tasks.join_next() => match r {
            Some(Ok(Err(e))) => Err(e),
            Some(Err(e)) => Err(anyhow::anyhow!("a task failed: {e}")),
            _ => Err(anyhow::anyhow!("a task ended unexpectedly")),
        },
    };
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    tasks.shutdown().await;
    let name = sh.cfg.tunnel.name.clone();
    // The last reference closes the TUN device, which removes the interface.
    drop(sh);
    let _ = std::fs::remove_file(&control_path);
    info!(tunnel = %name, "stopped, interface removed");
    result
}
