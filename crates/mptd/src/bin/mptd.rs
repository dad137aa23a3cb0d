//! `mptd -c FILE`: run the tunnel. `--check` validates the configuration (and the key files)
//! and exits. `mptd genkey`, `mptd pubkey` and `mptd genpsk` make keys, as `wg` does.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;
use mpt_core::seal::{PrivateKey, Psk, KEY_LEN};
use mptd::cli::{Args, Command, LogFormat};
use mptd::config::{Config, Keys};
use mptd::datapath::{rx::rx_task, tx::tx_task};
use mptd::tunnel::Tunnel;
use tracing::{error, info, warn};

/// `genkey`, `pubkey`, `genpsk`.
fn key_command(c: &Command) -> ExitCode {
    let out = match c {
        Command::Genkey => PrivateKey::generate()
            .map(|k| k.encode())
            .map_err(|e| e.to_string()),
        Command::Genpsk => {
            let mut key = [0u8; KEY_LEN];
            getrandom::fill(&mut key)
                .map(|()| Psk::from_bytes(key).encode())
                .map_err(|e| e.to_string())
        }
        Command::Pubkey => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| e.to_string())
                .and_then(|_| PrivateKey::parse(&text).map_err(|e| e.to_string()))
                .map(|k| k.public().encode())
        }
    };
    match out {
        Ok(text) => {
            if !matches!(c, Command::Pubkey) {
                private_stdout();
            }
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mptd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A secret about to be printed into a file: make the file readable by its owner only.
fn private_stdout() {
    use std::os::unix::fs::PermissionsExt;
    let fd = std::path::Path::new("/proc/self/fd/1");
    if std::fs::metadata(fd).is_ok_and(|m| m.is_file()) {
        let _ = std::fs::set_permissions(fd, std::fs::Permissions::from_mode(0o600));
    }
}

/// One malloc arena for all threads (glibc): by default each thread that allocates gets its
/// own, and the rx and tx workers' arenas each keep their own free memory (about 1.5 MB more
/// resident at full rate). The datapath allocates little per packet, and glibc's per-thread
/// caches serve small allocations without the arena's lock. (musl has no per-thread arenas.)
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; called before any thread starts
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

fn main() -> ExitCode {
    one_malloc_arena();
    let args = Args::parse();
    if let Some(c) = &args.command {
        return key_command(c);
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
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => log.json().init(),
        // colours on a terminal only: not in files or the journal
        LogFormat::Text => log
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }

    let (cfg, keys) = match Config::load(&config).and_then(|c| c.load_keys(&config).map(|k| (c, k)))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mptd: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let encryption = match cfg.security.cipher {
        None => "none (data in the clear)".to_owned(),
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
        // what a start would do, short of doing it: exit 3 when this host cannot run it
        let (problems, warnings) = mptd::hostcheck::check_host(&cfg);
        for w in &warnings {
            println!("{}: warning: {w}", config.display());
        }
        for p in &problems {
            eprintln!("mptd: {}: this host cannot run it: {p}", config.display());
        }
        if !problems.is_empty() {
            return ExitCode::from(3);
        }
        println!(
            "{}: ok ({} paths, scheduler {}, encryption {encryption}; public key {})",
            config.display(),
            cfg.paths.len(),
            cfg.connection.scheduler,
            keys.private.public()
        );
        return ExitCode::SUCCESS;
    }
    if cfg.security.cipher.is_none() {
        warn!(
            config = %config.display(),
            "encryption = \"none\": data datagrams are neither authenticated nor encrypted; \
             anyone who can send UDP to a path port and guess the session can inject packets \
             into {}",
            cfg.tunnel.name
        );
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
    match rt.block_on(run(cfg, keys, &config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            eprintln!("mptd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cfg: Config, keys: Keys, config: &std::path::Path) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut sighup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;

    let control_path = cfg.control.socket.clone();
    let sh = Arc::new(Tunnel::new(cfg, &keys)?);
    let listener = mptd::control::bind(&control_path)?;
    info!(
        tunnel = %sh.cfg().tunnel.name,
        peers = sh.peers.list().len(),
        paths = sh.cfg().paths.len(),
        listen = sh.cfg().listen.len(),
        scheduler = %sh.cfg().connection.scheduler,
        encryption = sh.sealing().map_or("none", |c| c.name()),
        aes_in_hardware = mpt_core::seal::aes_in_hardware(),
        public_key = %keys.private.public(),
        control = %control_path.display(),
        "mptd running"
    );
    for s in sh.sockets().iter() {
        let local =
            s.io.sock
                .local_addr()
                .map_or_else(|_| "-".to_owned(), |a| a.to_string());
        let interface = s
            .path()
            .and_then(|p| sh.cfg().paths[p.index()].interface.clone())
            .unwrap_or_else(|| "-".to_owned());
        info!(socket = %s.name(), %local, interface, "socket bound");
    }
    for peer in sh.peers.list().iter() {
        let cfg = peer.cfg();
        let remotes: Vec<String> = match peer.lock().as_ref() {
            Some(ep) => (0..ep.path_count())
                .map(|i| {
                    ep.remote(mpt_core::PathId(i as u8))
                        .map_or_else(|| "learned".to_owned(), |r| r.to_string())
                })
                .collect(),
            None => vec!["its own paths, at our [[listen]] sockets".to_owned()],
        };
        info!(peer = %cfg.name, key = %cfg.public_key, endpoint = cfg.endpoint.as_ref().map_or_else(|| "-".to_owned(), ToString::to_string), remotes = ?remotes, "peer");
    }
    let mut tasks = tokio::task::JoinSet::new();
    {
        // the kernel's routes follow the peers up, and the shared prefixes their peers (again
        // and again while a failback hold runs)
        let sh = sh.clone();
        tasks.spawn(async move {
            loop {
                let t = sh.clone();
                let _ = tokio::task::spawn_blocking(move || t.sync_kernel_routes()).await;
                if sh.kernel.holding() {
                    let wait = sh.kernel.peers_changed.notified();
                    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), wait).await;
                } else {
                    sh.kernel.peers_changed.notified().await;
                }
                sh.reconsider_shared();
            }
        });
    }
    if let Some(mptd::tunnel::DefaultRoute { tunnel: ft, up }) = &sh.kernel.full_tunnel {
        if let Err(e) = ft.install() {
            teardown(&sh);
            return Err(e);
        }
        if ft.fail_closed {
            ft.route(true);
        } else {
            // the default route follows the peer: there while it is up
            let (ft, mut up) = (ft.clone(), up.subscribe());
            tasks.spawn(async move {
                while up.changed().await.is_ok() {
                    let now = *up.borrow_and_update();
                    let ft = ft.clone();
                    let _ = tokio::task::spawn_blocking(move || ft.route(now)).await;
                }
                std::future::pending().await
            });
        }
    }
    let name = sh.cfg().tunnel.name.clone();
    if let Some(up) = sh.cfg().hooks.up.clone() {
        let run = mptd::hooks::HookRun {
            event: mptd::hooks::HookEvent::Up,
            vars: mptd::hooks::tunnel_vars(&sh.cfg().tunnel),
        };
        if let Err(e) = mptd::hooks::run_one(&up, &name, &run, sh.cfg().hooks.timeout).await {
            teardown(&sh);
            return Err(anyhow::anyhow!("hooks.up: {e}; not starting"));
        }
        info!("hooks.up ran");
    }

    tasks.spawn(rx_task(sh.clone()));
    for q in 0..sh.tun.len() {
        tasks.spawn(tx_task(sh.clone(), q));
    }
    tasks.spawn(mptd::control::serve(listener, sh.clone()));
    tasks.spawn(sh.clone().uplink_task());
    tasks.spawn({
        let t = sh.clone();
        async move {
            mptd::datapath::streams::stream_task(t).await;
            Ok(())
        }
    });
    tasks.spawn(sh.clone().resolver_task());
    tasks.spawn(sh.clone().watchdog());
    tasks.spawn(sh.clone().summaries());
    tasks.spawn(sh.clone().budget_task());
    if let Some(addr) = sh.cfg().control.metrics {
        tasks.spawn(mptd::metrics::serve(addr, sh.clone()));
    }
    if let Some(addr) = sh.cfg().control.web {
        let token = sh.cfg().control.web_token.clone();
        tasks.spawn(mptd::web::serve(addr, token, sh.clone()));
    }
    let queue = sh.hooks.take_queue();
    if let Some(queue) = queue {
        tasks.spawn(mptd::hooks::run(
            sh.hooks.current(),
            sh.cfg().tunnel.name.clone(),
            queue,
        ));
    }
    // systemd Type=notify: the TUN device and every socket are up.
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);

    let result = loop {
        tokio::select! {
            _ = sigterm.recv() => { info!("SIGTERM: stopping"); break Ok(()) }
            _ = sigint.recv() => { info!("SIGINT: stopping"); break Ok(()) }
            _ = sighup.recv() => {
                info!(config = %config.display(), "SIGHUP: reloading the configuration");
                let t = sh.clone();
                // reading the file, resolving names and binding sockets may block a moment
                tokio::task::spawn_blocking(move || t.reload_file());
            }
            r = tasks.join_next() => break match r {
                Some(Ok(Err(e))) => Err(e),
                Some(Err(e)) => Err(anyhow::anyhow!("a task failed: {e}")),
                _ => Err(anyhow::anyhow!("a task ended unexpectedly")),
            },
        }
    };
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    tasks.shutdown().await;
    // the tasks are stopped: the goodbyes are the last datagrams we send
    sh.say_goodbye();
    // the data budgets' counts to the last byte sent, written if they changed since the last
    // write
    sh.account_budgets();
    let t = sh.clone();
    let _ = tokio::task::spawn_blocking(move || t.save_budgets()).await;
    if let Some(down) = sh.cfg().hooks.down.clone() {
        let run = mptd::hooks::HookRun {
            event: mptd::hooks::HookEvent::Down,
            vars: mptd::hooks::tunnel_vars(&sh.cfg().tunnel),
        };
        match mptd::hooks::run_one(&down, &name, &run, sh.cfg().hooks.timeout).await {
            Ok(()) => info!("hooks.down ran"),
            Err(e) => warn!("hooks.down: {e}"),
        }
    }
    teardown(&sh);
    // The last reference closes the TUN device, which removes the interface.
    drop(sh);
    let _ = std::fs::remove_file(&control_path);
    info!(tunnel = %name, "stopped, interface removed");
    result
}

/// Remove what the daemon routed: its routes, and a full tunnel's rules (failing closed, those
/// stay).
fn teardown(sh: &Tunnel) {
    for net in sh.kernel.take_installed() {
        mptd::net::remove_route(&sh.cfg().tunnel, net);
    }
    if let Some(d) = &sh.kernel.full_tunnel {
        d.tunnel.remove();
    }
}
