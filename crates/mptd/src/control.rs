//! The control socket: one request line in, one JSON document out.
//!
//! Requests: `status` (the status document, `docs/status.md`); `path NAME up|down|backup|
//! primary|weight W|rate R|budget reset` (the operator changes a `[[path]]`), `reload` (read the
//! configuration file again and apply it) and `showconf` (the running configuration),
//! answered with `{"ok": "..."}` or `{"error": "..."}`.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, warn};

use crate::status::Status;
use crate::tunnel::Tunnel;

/// Bind the control socket, replacing a stale one left by a daemon that died.
pub fn bind(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the control socket directory {}",
                dir.display()
            )
        })?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(anyhow!(
                "control socket {} is in use: is another mptd running with this config?",
                path.display()
            ));
        }
        std::fs::remove_file(path).with_context(|| {
            format!("cannot remove the stale control socket {}", path.display())
        })?;
    }
    UnixListener::bind(path)
        .with_context(|| format!("cannot bind the control socket {}", path.display()))
}

/// Answer requests until the task is aborted.
pub async fn serve(listener: UnixListener, sh: Arc<Tunnel>) -> Result<()> {
    loop {
        let (stream, _) = listener.accept().await.context("control socket accept")?;
        let sh = sh.clone();
        tokio::spawn(async move {
            if let Err(e) = tokio::time::timeout(Duration::from_secs(5), answer(stream, sh)).await {
                debug!(error = %e, "control client timed out");
            }
        });
    }
}

async fn answer(stream: UnixStream, sh: Arc<Tunnel>) {
    let (r, mut w) = stream.into_split();
    let mut line = String::new();
    let mut r = BufReader::new(r).take(256);
    if let Err(e) = r.read_line(&mut line).await {
        debug!(error = %e, "control request unreadable");
        return;
    }
    let reply = match parse_request(&line) {
        Ok(Request::Status) => {
            serde_json::to_string(&sh.status()).unwrap_or_else(|e| error_json(&e.to_string()))
        }
        Ok(Request::Reload) => {
            let t = sh.clone();
            match tokio::task::spawn_blocking(move || t.reload_file()).await {
                Ok(Ok(done)) => serde_json::json!({ "ok": done }).to_string(),
                Ok(Err(e)) => error_json(&e),
                Err(e) => error_json(&format!("the reload failed: {e}")),
            }
        }
        Ok(Request::Showconf) => {
            let (file, text) = &sh.cfg().source;
            let head = format!(
                "# the configuration this mptd runs, as read from {} (at its start, or its \
                 last reload)\n",
                file.display()
            );
            serde_json::json!({ "ok": head + text }).to_string()
        }
        Ok(Request::Admin { path, down }) => match sh.set_admin(path, down) {
            Ok(done) => serde_json::json!({ "ok": done }).to_string(),
            Err(e) => error_json(&e),
        },
        Ok(Request::BudgetReset { path }) => match sh.budget_reset(path) {
            Ok(done) => serde_json::json!({ "ok": done }).to_string(),
            Err(e) => error_json(&e),
        },
        Ok(Request::Change { path, change }) => match sh.set_spec(path, change) {
            Ok(done) => serde_json::json!({ "ok": done }).to_string(),
            Err(e) => error_json(&e),
        },
        Err(e) => error_json(&e),
    };
    if let Err(e) = w.write_all(format!("{reply}\n").as_bytes()).await {
        warn!(error = %e, "control reply failed");
    }
}

/// A request the control socket takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    Status,
    Reload,
    Showconf,
    /// `path NAME up|down`.
    Admin {
        path: &'a str,
        down: bool,
    },
    /// `path NAME budget reset`.
    BudgetReset {
        path: &'a str,
    },
    /// `path NAME backup|primary|weight W|rate R`.
    Change {
        path: &'a str,
        change: crate::uplinks::PathChange,
    },
}

/// The request in `line` (as read: at most 256 bytes, up to its newline), or the error to
/// answer.
pub fn parse_request(line: &str) -> Result<Request<'_>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words[..] {
        ["status"] => Ok(Request::Status),
        ["reload"] => Ok(Request::Reload),
        ["showconf"] => Ok(Request::Showconf),
        ["path", path, state @ ("up" | "down")] => Ok(Request::Admin {
            path,
            down: state == "down",
        }),
        ["path", path, "budget", "reset"] => Ok(Request::BudgetReset { path }),
        ["path", path, ref change @ ..] => Ok(Request::Change {
            path,
            change: path_change(change)?,
        }),
        _ => Err(format!(
            "unknown request {:?}, expected \"status\", \"showconf\", \"reload\" or \"path \
             NAME up|down|backup|primary|weight W|rate R|budget reset\"",
            line.trim()
        )),
    }
}

/// `backup`, `primary`, `weight W` (1 to 10000) or `rate R` (as in the config: "20mbit").
fn path_change(words: &[&str]) -> Result<crate::uplinks::PathChange, String> {
    use crate::uplinks::PathChange;
    match words {
        ["backup"] => Ok(PathChange::Backup(true)),
        ["primary"] => Ok(PathChange::Backup(false)),
        ["weight", w] => match w.parse::<u32>() {
            Ok(w @ 1..=10_000) => Ok(PathChange::Weight(w)),
            _ => Err(format!(
                "weight {w:?}: expected a whole number from 1 to 10000"
            )),
        },
        ["rate", r] => match crate::config::parse_rate(r) {
            Some(bps) if bps > 0 => Ok(PathChange::Rate(bps)),
            _ => Err(format!(
                "rate {r:?}: expected a rate such as \"20mbit\" or \"500kbit\""
            )),
        },
        _ => Err(format!(
            "path: {:?}, expected up, down, backup, primary, weight W or rate R",
            words.join(" ")
        )),
    }
}

fn error_json(msg: &str) -> String {
    serde_json::json!({ "error": msg }).to_string()
}

/// Client side: send `request`, return the reply.
pub fn request(socket: &Path, request: &str) -> io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{request}\n").as_bytes())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    Ok(reply)
}

/// Ask a running daemon for its status.
pub fn status(socket: &Path) -> Result<Status> {
    let reply = request(socket, "status")
        .with_context(|| format!("cannot talk to mptd at {}", socket.display()))?;
    parse_status(&reply)
}

/// An answer `{"ok": ...}` or `{"error": ...}`: the first, or the second as an error.
pub fn parse_answer(reply: &str) -> Result<String> {
    let v: serde_json::Value = serde_json::from_str(reply)
        .context("mptd sent an answer this mptctl does not understand")?;
    match (v.get("ok"), v.get("error")) {
        (Some(ok), _) => Ok(ok.as_str().unwrap_or_default().to_owned()),
        (_, Some(e)) => Err(anyhow!("mptd: {}", e.as_str().unwrap_or_default())),
        _ => Err(anyhow!(
            "mptd sent an answer this mptctl does not understand: {reply}"
        )),
    }
}

/// A status reply: the document, or the error the daemon sent.
pub fn parse_status(reply: &str) -> Result<Status> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(reply) {
        if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
            return Err(anyhow!("mptd: {e}"));
        }
    }
    serde_json::from_str(reply).context("mptd sent a status this mptctl does not understand")
}

use tokio::io::AsyncReadExt as _;
