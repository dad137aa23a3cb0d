//! A listening side ([`Role::Listen`](super::Role::Listen)): its TCP listener, and the
//! connections it takes. Each is told plain or TLS by its first bytes ([`super::tls::sniff`]),
//! so one port serves `transport = "tcp"` and `"tls"` paths alike; a TLS one is answered with
//! the daemon's certificate. Only then is it a stream of the side: a connection that sends
//! nothing, or fails its TLS handshake, never is, and is counted ([`super::side::Counts`]).
//! Connections whose first bytes or handshake are awaited count towards [`MAX_STREAMS`].

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::conn::{Closed, Frames, Probe, StreamConn};
use super::frame::Sizes;
use super::side::{StreamSide, AUTHENTICATE_WITHIN, MAX_STREAMS};
use super::tls::{self, Sniffed};

impl StreamSide {
    /// A TCP listener on `at` (the socket's own address), set up as a stream path's
    /// sockets are.
    pub fn listener(at: SocketAddr) -> std::io::Result<std::net::TcpListener> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(at),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        if at.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.set_reuse_address(true)?;
        s.bind(&at.into())?;
        s.listen(128)?;
        s.set_nonblocking(true)?;
        Ok(s.into())
    }

    /// Take connections on the listener until `alive` says the socket is gone; frames go to
    /// `inbox`, of `sizes`.
    pub async fn accept(
        self: Arc<Self>,
        inbox: mpsc::Sender<Frames>,
        sizes: Sizes,
        alive: impl Fn() -> bool,
    ) {
        let Some(std) = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            return;
        };
        let listener = match tokio::net::TcpListener::from_std(std) {
            Ok(l) => l,
            Err(e) => return warn!(error = %e, "stream listener: cannot register"),
        };
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let got = tokio::select! {
                got = listener.accept() => got,
                _ = tick.tick() => {
                    if alive() { continue } else { return }
                }
            };
            let Ok((stream, from)) = got else { continue };
            let from = SocketAddr::new(from.ip().to_canonical(), from.port());
            if self.backlog().0 + self.pending.load(Relaxed) >= MAX_STREAMS {
                self.closes.refused.fetch_add(1, Relaxed);
                continue;
            }
            let sock = socket2::SockRef::from(&stream);
            if let Err(e) = super::sockopt::configure(&sock, None) {
                debug!(%from, error = %e, "stream listener: cannot set up a connection");
            }
            self.pending.fetch_add(1, Relaxed);
            tokio::spawn(self.clone().take(stream, from, inbox.clone(), sizes));
        }
    }

    /// A connection taken from `from`: plain or TLS, by its first bytes; then a stream of the
    /// side until it closes.
    async fn take(
        self: Arc<Self>,
        stream: TcpStream,
        from: SocketAddr,
        inbox: mpsc::Sender<Frames>,
        sizes: Sizes,
    ) {
        let probe = Probe::of(&stream, from);
        let ready = opening(stream).await;
        self.pending.fetch_sub(1, Relaxed);
        let conn = StreamConn::new(from);
        conn.origin.store(self.id, Relaxed);
        match ready {
            Ok(Opened::Plain(stream)) => self.serve(conn, stream, inbox, sizes, probe).await,
            Ok(Opened::Tls(stream)) => {
                conn.tls.store(true, Relaxed);
                self.serve(conn, *stream, inbox, sizes, probe).await
            }
            Err(e) => {
                debug!(%from, error = %e, "stream listener: no plain or TLS stream opened");
                self.closes.handshake.fetch_add(1, Relaxed);
            }
        }
    }

    /// Run `conn` on `io` as one of the side's streams, closed unless an authentic datagram
    /// comes on it within [`AUTHENTICATE_WITHIN`].
    async fn serve<S>(
        self: Arc<Self>,
        conn: Arc<StreamConn>,
        io: S,
        inbox: mpsc::Sender<Frames>,
        sizes: Sizes,
        probe: Probe,
    ) where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        self.insert(&conn);
        let run = conn.clone().run(io, inbox, sizes, probe);
        let watch = async {
            tokio::time::sleep(AUTHENTICATE_WITHIN).await;
            if !conn.authenticated.load(Relaxed) {
                conn.close(Closed::Local);
            }
            std::future::pending::<()>().await
        };
        let why = tokio::select! {
            why = run => why,
            _ = watch => Closed::Local,
        };
        self.remove(&conn, why);
    }
}

/// A connection, ready to carry frames.
enum Opened {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// Tell `stream` plain or TLS by its first bytes (which must come within
/// [`AUTHENTICATE_WITHIN`]), and make the TLS handshake of a TLS one (within
/// [`tls::HANDSHAKE_TIMEOUT`]).
async fn opening(stream: TcpStream) -> std::io::Result<Opened> {
    match tls::sniff(&stream, AUTHENTICATE_WITHIN).await? {
        Sniffed::Plain => Ok(Opened::Plain(stream)),
        Sniffed::Tls => Ok(Opened::Tls(Box::new(tls::accept(stream).await?))),
    }
}

#[cfg(test)]
mod tests;
