//! Hooks: commands the operator configures (`[hooks]`), with the event in environment
//! variables, as MLVPN's `statuscommand` and wg-quick's `PostUp` and `PreDown` do.
//!
//! `up` runs once the TUN device is configured and its routes installed, before the daemon
//! tells systemd it is ready (a failing `up` stops the start); `down` runs when the daemon
//! stops, before the device goes. The path and peer hooks run when a path or a peer goes up or
//! down: one at a time, in the order of the events, off the datapath (a queue feeds one task);
//! a failure, a timeout or a full queue is logged and the daemon goes on. Every hook runs
//! within `hooks.timeout_ms`.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::config::HooksConfig;

pub use crate::config::HookEvent;

/// One run of a hook: its event and the variables it gets.
#[derive(Debug, Clone)]
pub struct HookRun {
    pub event: HookEvent,
    /// `MPTD_*` variables besides `MPTD_EVENT`.
    pub vars: Vec<(&'static str, String)>,
}

/// Events queued for the hook task, at most this many: beyond, they are dropped and logged.
const QUEUE: usize = 256;

/// The sending side, kept by the tunnel.
#[derive(Debug)]
pub struct Hooks {
    /// The `[hooks]` running now (a reload replaces them), shared with the hook task.
    cfg: Arc<ArcSwap<HooksConfig>>,
    tx: mpsc::Sender<HookRun>,
    /// The queue the hook task reads, until it takes it ([`Hooks::take_queue`]).
    queue: std::sync::Mutex<Option<mpsc::Receiver<HookRun>>>,
    dropped: crate::log::RateLimit,
}

impl Hooks {
    /// The hooks of `cfg`, with the queue their task reads ([`Hooks::take_queue`]).
    pub fn new(cfg: &HooksConfig) -> Hooks {
        let (tx, rx) = mpsc::channel(QUEUE);
        Hooks {
            cfg: Arc::new(ArcSwap::from_pointee(cfg.clone())),
            tx,
            queue: std::sync::Mutex::new(Some(rx)),
            dropped: Default::default(),
        }
    }

    /// The queue the hook task reads: the first call takes it, later ones get `None`.
    pub fn take_queue(&self) -> Option<mpsc::Receiver<HookRun>> {
        self.queue.lock().ok().and_then(|mut q| q.take())
    }

    /// Whether any hook is configured.
    pub fn any(&self) -> bool {
        !self.cfg.load().is_empty()
    }

    /// Run these hooks from now on.
    pub fn replace(&self, cfg: &HooksConfig) {
        self.cfg.store(Arc::new(cfg.clone()));
    }

    /// Queue `run` if a hook is configured for its event (never waits).
    pub fn fire(&self, run: HookRun) {
        if self.cfg.load().command(run.event).is_none() {
            return;
        }
        if self.tx.try_send(run).is_err() {
            if let Some(n) = self.dropped.hit() {
                warn!(
                    dropped = n,
                    "hooks: the queue is full (hooks too slow?): event dropped"
                );
            }
        }
    }

    /// The hooks running now.
    pub fn config(&self) -> Arc<HooksConfig> {
        self.cfg.load_full()
    }

    /// The hooks running now as the hook task reads them (a reload's are seen at once).
    pub fn current(&self) -> Arc<ArcSwap<HooksConfig>> {
        self.cfg.clone()
    }
}

/// Run the queued hooks of tunnel `tunnel`, one at a time (as `current` says when each runs),
/// until the queue closes.
pub async fn run(
    current: Arc<ArcSwap<HooksConfig>>,
    tunnel: String,
    mut rx: mpsc::Receiver<HookRun>,
) -> anyhow::Result<()> {
    while let Some(r) = rx.recv().await {
        let cfg = current.load_full();
        if let Some(command) = cfg.command(r.event) {
            if let Err(e) = run_one(command, &tunnel, &r, cfg.timeout).await {
                warn!(event = r.event.name(), "{e}");
            }
        }
    }
    Ok(())
}

/// The tunnel's own variables for `up` and `down`: `MPTD_ADDRESSES` (its addresses with their
/// prefix lengths, space-separated) and `MPTD_MTU`.
pub fn tunnel_vars(t: &crate::config::TunnelConfig) -> Vec<(&'static str, String)> {
    let addresses: Vec<String> = t.addresses.iter().map(ToString::to_string).collect();
    vec![
        ("MPTD_ADDRESSES", addresses.join(" ")),
        ("MPTD_MTU", t.mtu.to_string()),
    ]
}

/// Run `command` for `r` with `/bin/sh -c`, within `timeout`: Ok when it exits 0, else what
/// went wrong (its standard error's tail included).
pub async fn run_one(
    command: &str,
    tunnel: &str,
    r: &HookRun,
    timeout: Duration,
) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .env("MPTD_EVENT", r.event.name())
        .env("MPTD_TUNNEL", tunnel)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in &r.vars {
        cmd.env(k, v);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("hook: cannot start /bin/sh: {e}"))?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) if out.status.success() => {
            debug!(event = r.event.name(), "hook ran");
            Ok(())
        }
        Ok(Ok(out)) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: String = stderr
                .trim()
                .chars()
                .rev()
                .take(300)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            Err(format!("hook failed ({}): {tail}", out.status))
        }
        Ok(Err(e)) => Err(format!("hook failed: {e}")),
        // the child is dropped, and killed, with the future
        Err(_) => Err(format!(
            "hook timed out after {} ms: killed",
            timeout.as_millis()
        )),
    }
}

pub use crate::config::DEFAULT_HOOK_TIMEOUT as DEFAULT_TIMEOUT;
