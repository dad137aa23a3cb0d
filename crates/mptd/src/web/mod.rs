//! The live status page (`[control] web`): `GET /` a page of the peers and paths with charts
//! of the last ten minutes, `GET /api/status` and `GET /api/history` the JSON it draws from,
//! and its scripts and styles, all in the binary (a router whose tunnel is down has no internet
//! to fetch them from). Read-only; with `web_token` every request needs the token.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::{debug, info};

use crate::metrics::Source;

mod assets;
pub mod history;
mod request;
pub mod view;

use history::History;
use request::Request;

/// Clients served at once; more are turned away (the page makes one request a second).
const CLIENTS: usize = 16;

/// The page's state: its token and the history the sampler keeps.
#[derive(Debug)]
struct Web {
    token: Option<String>,
    sampled: Mutex<Sampled>,
}

#[derive(Debug, Default)]
struct Sampled {
    history: History,
    /// When the last sample was taken: the page asks again just after the next.
    at: Option<Instant>,
}

/// `GET /api/history`: how long ago the last sample was taken, and every peer's samples.
#[derive(serde::Serialize)]
struct HistoryReply<'a> {
    age_ms: Option<u64>,
    peers: &'a [history::PeerHistory],
}

/// An answer: status line, content type and body.
struct Reply {
    status: &'static str,
    kind: &'static str,
    body: Cow<'static, [u8]>,
}

impl Reply {
    fn ok(kind: &'static str, body: impl Into<Cow<'static, [u8]>>) -> Self {
        Reply {
            status: "200 OK",
            kind,
            body: body.into(),
        }
    }

    fn text(status: &'static str, text: &'static str) -> Self {
        Reply {
            status,
            kind: "text/plain; charset=utf-8",
            body: text.as_bytes().into(),
        }
    }
}

/// Serve the page on `addr` (with `token` required if given), sampling what `sh` says every
/// second, until the task is aborted.
pub async fn serve(addr: SocketAddr, token: Option<String>, sh: Arc<impl Source>) -> Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("control.web: cannot listen on {addr}"))?;
    info!(%addr, token = token.is_some(), "status page served at http://{addr}/");
    let web = Arc::new(Web {
        token,
        sampled: Mutex::new(Sampled::default()),
    });
    let clients = Arc::new(Semaphore::new(CLIENTS));
    let accept = async {
        loop {
            let (stream, from) = listener.accept().await.context("web accept")?;
            let Ok(permit) = clients.clone().try_acquire_owned() else {
                debug!(%from, "status page: too many clients, turned away");
                continue;
            };
            let (web, sh) = (web.clone(), sh.clone());
            tokio::spawn(async move {
                let served = answer(stream, &web, sh.as_ref());
                let r = tokio::time::timeout(Duration::from_secs(5), served).await;
                if !matches!(r, Ok(Ok(()))) {
                    debug!(%from, "status page client failed or timed out");
                }
                drop(permit);
            });
        }
    };
    tokio::select! {
        r = accept => r,
        never = sample(&web, sh.as_ref()) => match never {},
    }
}

/// Every second, a sample of the status into the history.
async fn sample(web: &Web, sh: &impl Source) -> std::convert::Infallible {
    let clock = crate::clock::Clock::new();
    let zero = clock.unix_nanos_at_zero();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let st = sh.status();
        let unix = (zero + clock.now().as_nanos()) as f64 / 1e9;
        let mut s = web.sampled.lock().unwrap_or_else(|e| e.into_inner());
        s.history.sample(&st, unix);
        s.at = Some(Instant::now());
    }
}

async fn answer(mut stream: TcpStream, web: &Web, sh: &impl Source) -> std::io::Result<()> {
    let head = crate::http::read_head(&mut stream).await?;
    let text = String::from_utf8_lossy(&head);
    let reply = web.reply(&Request::parse(&text), sh);
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n\
         Content-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'\r\n",
        reply.status,
        reply.kind,
        reply.body.len()
    );
    match reply.status {
        "401 Unauthorized" => out += "WWW-Authenticate: Bearer\r\n",
        "405 Method Not Allowed" => out += "Allow: GET\r\n",
        _ => {}
    }
    out += "\r\n";
    stream.write_all(out.as_bytes()).await?;
    stream.write_all(&reply.body).await?;
    stream.shutdown().await
}

impl Web {
    fn reply(&self, req: &Request, sh: &impl Source) -> Reply {
        if req.method != "GET" {
            return Reply::text("405 Method Not Allowed", "GET only\n");
        }
        if let Some(want) = &self.token {
            if !req.token.as_deref().is_some_and(|t| same(t, want)) {
                return Reply::text(
                    "401 Unauthorized",
                    "a token is needed: /?token=TOKEN, or Authorization: Bearer TOKEN\n",
                );
            }
        }
        let json = "application/json";
        match req.path {
            "/" | "/index.html" => Reply::ok(
                "text/html; charset=utf-8",
                assets::page(self.token.as_deref()).into_bytes(),
            ),
            "/api/status" => Reply::ok(json, to_json(&view::View::of(&sh.status()))),
            "/api/history" => {
                let s = self.sampled.lock().unwrap_or_else(|e| e.into_inner());
                let age_ms = s.at.map(|at| at.elapsed().as_millis() as u64);
                let body = HistoryReply {
                    age_ms,
                    peers: &s.history.peers,
                };
                Reply::ok(json, to_json(&body))
            }
            path => match assets::get(path) {
                Some((kind, body)) => Reply::ok(kind, body),
                None => Reply::text("404 Not Found", "not here: the page is at /\n"),
            },
        }
    }
}

fn to_json(v: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}").into_bytes())
}

/// `a == b`, in a time that does not tell how much of a guess was right: every byte is
/// compared (only the length may show).
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x);
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests;
