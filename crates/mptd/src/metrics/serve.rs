//! Serving the metrics: `GET /metrics` over HTTP, in the OpenMetrics or the classic text
//! format, from what a [`Source`] says when asked.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info};

use super::{classic, render, ReseqHistograms};
use crate::status::Status;

/// What the metrics are made of when asked for: the status and the resequencers' histograms.
pub trait Source: Send + Sync + 'static {
    fn status(&self) -> Status;
    fn reseq_histograms(&self) -> Vec<ReseqHistograms>;
}

/// Serve `GET /metrics` on `addr`, from what `sh` says when asked, until the task is aborted.
pub async fn serve(addr: SocketAddr, sh: Arc<impl Source>) -> Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("control.metrics: cannot listen on {addr}"))?;
    info!(%addr, "metrics served at http://{addr}/metrics");
    loop {
        let (stream, from) = listener.accept().await.context("metrics accept")?;
        let sh = sh.clone();
        tokio::spawn(async move {
            let r = tokio::time::timeout(Duration::from_secs(5), answer(stream, sh.as_ref())).await;
            if !matches!(r, Ok(Ok(()))) {
                debug!(%from, "metrics client failed or timed out");
            }
        });
    }
}

async fn answer(mut stream: TcpStream, sh: &impl Source) -> std::io::Result<()> {
    let head = crate::http::read_head(&mut stream).await?;
    let line = String::from_utf8_lossy(&head);
    let first = line.lines().next().unwrap_or_default();
    let mut words = first.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let openmetrics = line.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("accept:") && l.contains("application/openmetrics-text")
    });
    let (status, kind, body) = if method != "GET" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics only\n".to_owned(),
        )
    } else if target == "/metrics" || target.starts_with("/metrics?") {
        let text = render(&sh.status(), sh.reseq_histograms());
        if openmetrics {
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                text,
            )
        } else {
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                classic(&text),
            )
        }
    } else {
        (
            "404 Not Found",
            "text/plain",
            "metrics are at /metrics\n".to_owned(),
        )
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}
