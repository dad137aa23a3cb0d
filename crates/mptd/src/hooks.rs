//! Hooks: commands the operator configures (`[hooks]`) run when a path or a peer goes up or
//! down, with the event in environment variables, as MLVPN's `statuscommand` and wg-quick's
//! `PostUp` do. They run one at a time, in the order of the events, off the datapath (a
//! queue feeds one task), each within `hooks.timeout_ms`; a failure, a timeout or a full queue
//! is logged and the daemon goes on.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::config::HooksConfig;

/// What happened, for a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    PathUp,
    PathDown,
    PeerUp,
    PeerDown,
}

impl HookEvent {
    /// The name in `MPTD_EVENT`, and of its `[hooks]` key.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PathUp => "path_up",
            HookEvent::PathDown => "path_down",
            HookEvent::PeerUp => "peer_up",
            HookEvent::PeerDown => "peer_down",
        }
    }
}

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
    /// The `[hooks]` running now (a reload replaces them).
    cfg: ArcSwap<HooksConfig>,
    tx: mpsc::Sender<HookRun>,
    dropped: crate::log::RateLimit,
}

impl Hooks {
    /// The hooks of `cfg`, and the queue their task reads.
    pub fn new(cfg: &HooksConfig) -> (Hooks, mpsc::Receiver<HookRun>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (
            Hooks {
                cfg: ArcSwap::from_pointee(cfg.clone()),
                tx,
                dropped: Default::default(),
            },
            rx,
        )
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
}

/// Run the queued hooks of tunnel `t`, one at a time (as configured when each runs), until the
/// queue closes.
pub async fn run(
    t: Arc<crate::tunnel::Tunnel>,
    tunnel: String,
    mut rx: mpsc::Receiver<HookRun>,
) -> anyhow::Result<()> {
    while let Some(r) = rx.recv().await {
        let cfg = t.hooks.config();
        let Some(command) = cfg.command(r.event) else {
            continue;
        };
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(command)
            .env("MPTD_EVENT", r.event.name())
            .env("MPTD_TUNNEL", &tunnel)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in &r.vars {
            cmd.env(k, v);
        }
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                warn!(event = r.event.name(), error = %e, "hook: cannot start /bin/sh");
                continue;
            }
        };
        match tokio::time::timeout(cfg.timeout, child.wait_with_output()).await {
            Ok(Ok(out)) if out.status.success() => {
                debug!(event = r.event.name(), "hook ran");
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
                warn!(event = r.event.name(), status = %out.status, stderr = %tail, "hook failed");
            }
            Ok(Err(e)) => warn!(event = r.event.name(), error = %e, "hook failed"),
            // the child is dropped, and killed, with the future
            Err(_) => warn!(
                event = r.event.name(),
                timeout_ms = cfg.timeout.as_millis() as u64,
                "hook timed out: killed"
            ),
        }
    }
    Ok(())
}

/// Default of `hooks.timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
