//! `mptd -c FILE`: run the tunnel. `--check` validates the configuration (and the key file)
//! and exits. `mptd genkey` prints a new pre-shared key.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mpt_core::seal::{Psk, KEY_LEN};
use mptd::config::Config;
use mptd::datapath::{rx::rx_task, tx::tx_task};
use mptd::tunnel::Tunnel;
use tracing::{error, info, warn};

/// Multipath UDP tunnel daemon.
#[derive(Debug, Parser)]
#[command(version, about, subcommand_negates_reqs = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Configuration file (TOML).
    #[arg(short, long, value_name = "FILE", required = true)]
    config: Option<PathBuf>,
    /// Validate the configuration and exit (0 when valid).
    #[arg(long)]
    check: bool,
    /// More logging: -v debug, -vv trace. RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a new random pre-shared key (base64) for `[security] key_file`:
    /// `mptd genkey > /etc/mptd/mpt.key && chmod 600 /etc/mptd/mpt.key`, then copy the file to
    /// the peer.
    Genkey,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Genkey) = args.command {
        let mut key = [0u8; KEY_LEN];
        if let Err(e) = getrandom::fill(&mut key) {
            eprintln!("mptd: no randomness for a key: {e}");
            return ExitCode::FAILURE;
        }
        println!("{}", Psk::from_bytes(key).encode());
        return ExitCode::SUCCESS;
    }
    let Some(config) = args.config else {
        eprintln!("mptd: -c FILE is required");
        return ExitCode::from(2);
    };
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

    let (cfg, psk) =
        match Config::load(&config).and_then(|c| c.security.load_key(&config).map(|k| (c, k))) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("mptd: invalid configuration: {e}");
                return ExitCode::from(2);
            }
        };
    let encryption = match cfg.security.cipher {
        None => "none (unauthenticated)".to_owned(),
        Some(c @ mpt_core::seal::CipherChoice::Auto) => format!(
            "{c}: {}",
            if mpt_core::seal::aes_in_hardware() {
                "AES-256-GCM if the peer has AES in hardware too, else ChaCha20-Poly1305"
            } else {
                "ChaCha20-Poly1305, this CPU has no AES in hardware"
            }
        ),
        Some(c) => c.name().to_owned(),
    };
    if args.check {
        println!(
            "{}: ok ({} paths, scheduler {}, encryption {encryption})",
            config.display(),
            cfg.paths.len(),
            cfg.connection.scheduler
        );
        return ExitCode::SUCCESS;
    }
    if cfg.security.cipher.is_none() {
        warn!(
            config = %config.display(),
            "encryption = \"none\": datagrams are neither authenticated nor encrypted; anyone who \
             can send UDP to a path port can inject packets into {}",
            cfg.tunnel.name
        );
    }
    let mtu_problems = mptd::net::check_path_mtus(&cfg);
    if !mtu_problems.is_empty() {
        for m in &mtu_problems {
            eprintln!("mptd: invalid configuration: {}: {m}", config.display());
        }
        return ExitCode::from(2);
    }
    // A worker per direction (two at least); with more TUN queues, one per queue plus rx.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads((cfg.tunnel.queues + 1).max(2))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mptd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cfg, psk)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            eprintln!("mptd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cfg: Config, psk: Option<Psk>) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;

    let control_path = cfg.control.socket.clone();
    let sh = Arc::new(Tunnel::new(cfg, psk)?);
    let listener = mptd::control::bind(&control_path)?;
    info!(
        tunnel = %sh.cfg.tunnel.name,
        paths = sh.paths.len(),
        scheduler = %sh.cfg.connection.scheduler,
        encryption = sh.sealing().map_or("none", |c| c.name()),
        aes_in_hardware = mpt_core::seal::aes_in_hardware(),
        session = format_args!("{:08x}", sh.session),
        control = %control_path.display(),
        "mptd running"
    );
    for p in &sh.paths {
        info!(path = %p.cfg.name, local = %p.cfg.local, remote = %p.cfg.remote, interface = p.cfg.interface.as_deref().unwrap_or("-"), "path socket bound");
    }

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(rx_task(sh.clone()));
    for q in 0..sh.tun.len() {
        tasks.spawn(tx_task(sh.clone(), q));
    }
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
    // the tasks are stopped: the goodbyes are the last datagrams we send
    sh.say_goodbye();
    let name = sh.cfg.tunnel.name.clone();
    // The last reference closes the TUN device, which removes the interface.
    drop(sh);
    let _ = std::fs::remove_file(&control_path);
    info!(tunnel = %name, "stopped, interface removed");
    result
}
