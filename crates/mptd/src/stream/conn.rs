//! One stream (a TCP connection, plain or in TLS) carrying a path's sealed datagrams as
//! frames ([`super::frame`]): a bounded queue the tx side puts datagrams in without waiting
//! ([`StreamConn::enqueue`]; full, it drops and counts), a writer task that empties it onto the
//! stream, and a reader task that cuts the frames out and hands them to the receive task
//! through the shared, bounded inbox ([`Inbox`]; full, it holds back this stream only).

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Notify};

use super::frame::{encode, Deframer, FrameError, Sizes, FRAME_HEADER};

/// What a stream's queue holds at most, in bytes, once the peer is authenticated on it: at
/// 20 Mbit/s, 100 ms (the scheduler sees the queue and sends elsewhere long before).
pub const QUEUE_LIMIT: usize = 256 * 1024;

/// What it holds before: a stranger's connection costs little.
pub const QUEUE_LIMIT_UNAUTHENTICATED: usize = 4 * 1024;

/// A write that makes no progress for this long means a reader that does not read: closed.
pub const STALL: Duration = Duration::from_secs(5);

/// While the kernel holds bytes not yet acknowledged and nothing is written, the writer looks
/// at them this often.
pub const RESAMPLE: Duration = Duration::from_millis(2);

/// Frames the inbox holds (batches of frames, one per read) before readers wait.
pub const INBOX: usize = 256;

/// Why a stream was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The other end closed it, or it broke (reset, timeout).
    Ended,
    /// It sent a length the tunnel never sends.
    Garbage(FrameError),
    /// It read nothing we wrote for [`STALL`].
    SlowReader,
    /// The daemon closed it (unauthenticated, idle, replaced, a reload).
    Local,
}

/// The frames one read of a stream gave, for the receive task: the datagrams back to back in
/// `bytes`, each `lens` long, and the stream they came on.
#[derive(Debug)]
pub struct Frames {
    pub conn: Arc<StreamConn>,
    pub bytes: Vec<u8>,
    pub lens: Vec<usize>,
}

/// The receive task's end of every stream: frames, as they come.
pub type Inbox = mpsc::Receiver<Frames>;

/// One stream.
#[derive(Debug)]
pub struct StreamConn {
    /// The other end's address: where its datagrams come from, as the engine sees them.
    pub peer: SocketAddr,
    /// The side it belongs to ([`super::side::StreamSide::id`]; 0: none).
    pub origin: AtomicUsize,
    /// Frames waiting for the writer.
    out: Mutex<Vec<u8>>,
    wake: Notify,
    /// Bytes in `out` and in the write under way.
    queued: AtomicUsize,
    /// What the kernel held unsent when the writer last looked.
    unsent: AtomicUsize,
    /// An authentic datagram of a session came on it: its queue may grow to [`QUEUE_LIMIT`].
    pub authenticated: AtomicBool,
    /// It runs in TLS ([`super::tls`]).
    pub tls: AtomicBool,
    closed: Mutex<Option<Closed>>,
    closing: Notify,
    /// Datagrams queued, dropped because the queue was full, and received.
    pub sent: AtomicU64,
    pub full: AtomicU64,
    pub received: AtomicU64,
    /// Bytes on the wire each way (payload and TCP/IP headers), as `TCP_INFO` last said.
    pub wire_tx: AtomicU64,
    pub wire_rx: AtomicU64,
}

impl StreamConn {
    pub fn new(peer: SocketAddr) -> Arc<StreamConn> {
        Arc::new(StreamConn {
            peer,
            origin: AtomicUsize::new(0),
            out: Mutex::new(Vec::new()),
            wake: Notify::new(),
            queued: AtomicUsize::new(0),
            unsent: AtomicUsize::new(0),
            authenticated: AtomicBool::new(false),
            tls: AtomicBool::new(false),
            closed: Mutex::new(None),
            closing: Notify::new(),
            sent: AtomicU64::new(0),
            full: AtomicU64::new(0),
            received: AtomicU64::new(0),
            wire_tx: AtomicU64::new(0),
            wire_rx: AtomicU64::new(0),
        })
    }

    /// Queue `datagram` to go; `false` (counted) when the queue has no room or the stream is
    /// closed. Never waits.
    pub fn enqueue(&self, datagram: &[u8]) -> bool {
        if self.closed().is_some() {
            return false;
        }
        let limit = if self.authenticated.load(Relaxed) {
            QUEUE_LIMIT
        } else {
            QUEUE_LIMIT_UNAUTHENTICATED
        };
        let need = FRAME_HEADER + datagram.len();
        if self.queued.load(Relaxed) + need > limit {
            self.full.fetch_add(1, Relaxed);
            return false;
        }
        encode(
            datagram,
            &mut self.out.lock().unwrap_or_else(|p| p.into_inner()),
        );
        self.queued.fetch_add(need, Relaxed);
        self.sent.fetch_add(1, Relaxed);
        self.wake.notify_one();
        true
    }

    /// Bytes waiting to go: in the daemon's queue, and unsent in the kernel.
    pub fn backlog(&self) -> usize {
        self.queued.load(Relaxed) + self.unsent.load(Relaxed)
    }

    /// Close it (the first reason given stays); its tasks end.
    pub fn close(&self, why: Closed) {
        let mut c = self.closed.lock().unwrap_or_else(|p| p.into_inner());
        if c.is_none() {
            *c = Some(why);
        }
        drop(c);
        self.closing.notify_waiters();
        self.wake.notify_one();
    }

    /// Why it was closed, once it is.
    pub fn closed(&self) -> Option<Closed> {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Until it is closed.
    pub async fn wait_closed(&self) -> Closed {
        loop {
            let notified = self.closing.notified();
            if let Some(c) = self.closed() {
                return c;
            }
            notified.await;
        }
    }

    /// Run the stream `io` until it closes: the writer empties the queue onto it, the reader
    /// sends what it cuts out to `inbox`, frames of `sizes`. `fd` is the TCP
    /// socket under it, for what the kernel holds unsent and its counts on the wire, whose
    /// segments' headers are `header` bytes.
    pub async fn run<S>(
        self: Arc<Self>,
        io: S,
        inbox: mpsc::Sender<Frames>,
        sizes: Sizes,
        probe: Probe,
    ) -> Closed
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (r, w) = tokio::io::split(io);
        let reader = tokio::spawn(self.clone().read(r, inbox, sizes));
        let writer = tokio::spawn(self.clone().write(w, probe));
        let why = self.wait_closed().await;
        reader.abort();
        writer.abort();
        why
    }

    async fn read<R: AsyncRead + Unpin>(
        self: Arc<Self>,
        mut r: R,
        inbox: mpsc::Sender<Frames>,
        sizes: Sizes,
    ) {
        let mut d = Deframer::new(sizes.min, sizes.max);
        loop {
            let n = tokio::select! {
                n = r.read(d.spare()) => n,
                _ = self.wait_closed() => return,
            };
            let n = match n {
                Ok(0) | Err(_) => return self.close(Closed::Ended),
                Ok(n) => n,
            };
            d.filled(n);
            let mut frames = Frames {
                conn: self.clone(),
                bytes: Vec::with_capacity(n),
                lens: Vec::new(),
            };
            loop {
                match d.next() {
                    Ok(Some(f)) => {
                        frames.bytes.extend_from_slice(f);
                        frames.lens.push(f.len());
                    }
                    Ok(None) => break,
                    Err(e) => return self.close(Closed::Garbage(e)),
                }
            }
            if frames.lens.is_empty() {
                continue;
            }
            self.received.fetch_add(frames.lens.len() as u64, Relaxed);
            // a full inbox holds back this stream alone: its reader waits here
            if inbox.send(frames).await.is_err() {
                return self.close(Closed::Local);
            }
        }
    }

    async fn write<W: AsyncWrite + Unpin>(self: Arc<Self>, mut w: W, probe: Probe) {
        let mut buf = Vec::new();
        let mut last = super::sockopt::TcpWire::default();
        loop {
            buf.clear();
            std::mem::swap(
                &mut buf,
                &mut self.out.lock().unwrap_or_else(|p| p.into_inner()),
            );
            if self.closed().is_some() {
                return;
            }
            if buf.is_empty() {
                self.sample(&probe, &mut last);
                if self.unsent.load(Relaxed) == 0 {
                    self.wake.notified().await;
                } else {
                    // what the kernel holds drains without us: look again soon, or the
                    // scheduler would see the path as full long after it is not
                    let _ = tokio::time::timeout(RESAMPLE, self.wake.notified()).await;
                }
                continue;
            }
            let mut at = 0;
            while at < buf.len() {
                match tokio::time::timeout(STALL, w.write(&buf[at..])).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return self.close(Closed::Ended),
                    Ok(Ok(n)) => at += n,
                    Err(_) => return self.close(Closed::SlowReader),
                }
            }
            if w.flush().await.is_err() {
                return self.close(Closed::Ended);
            }
            self.queued.fetch_sub(buf.len(), Relaxed);
            self.sample(&probe, &mut last);
        }
    }

    /// What the kernel holds unsent, and the bytes on the wire since `last`.
    fn sample(&self, probe: &Probe, last: &mut super::sockopt::TcpWire) {
        let Some(fd) = probe.fd else { return };
        // SAFETY: the fd is the stream's socket, open while its tasks run (`run` ends them
        // before the stream is dropped).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        self.unsent.store(super::sockopt::unacked(&fd), Relaxed);
        if let Some(now) = super::sockopt::wire(&fd) {
            let (tx, rx) = now.since(last, probe.header);
            self.wire_tx.fetch_add(tx, Relaxed);
            self.wire_rx.fetch_add(rx, Relaxed);
            *last = now;
        }
    }
}

/// Where the writer looks at the kernel's view of the stream: its TCP socket, if it has one
/// (a test's in-memory stream has none), and a segment's headers.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub fd: Option<std::os::fd::RawFd>,
    pub header: u64,
}

impl Probe {
    /// For the TCP socket `s` to `peer`.
    pub fn of(s: &impl std::os::fd::AsRawFd, peer: SocketAddr) -> Probe {
        Probe {
            fd: Some(s.as_raw_fd()),
            header: if peer.is_ipv4() || peer.ip().to_canonical().is_ipv4() {
                52
            } else {
                72
            },
        }
    }
}

#[cfg(test)]
mod tests;
