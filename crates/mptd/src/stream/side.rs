//! A socket's streams ([`StreamSide`]): a `[[path]]` with `transport = "tcp"` or `"tls"` dials
//! its peers ([`Role::Dial`]: one connection per peer's address, made again when it breaks,
//! after a backoff), and a `[[listen]]` with `tcp = true` (or `tls = true`) or a responder
//! `[[path]]` with `transport = "tcp"` or `"tls"` takes connections on its address as well
//! ([`Role::Listen`], in `listen.rs`: plain or TLS, told by their first bytes). What goes to an
//! address with a stream goes on it; a dialling side sends nothing by UDP.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mpt_core::Time;

use tokio::sync::mpsc;
use tracing::{debug, info};

use super::conn::{Closed, Frames, Probe, StreamConn};
use super::frame::Sizes;

/// The most streams a listening side takes at once; more are refused.
pub const MAX_STREAMS: usize = 1024;

/// A stream on which no authentic datagram came within this long of connecting is closed.
pub const AUTHENTICATE_WITHIN: Duration = Duration::from_secs(10);

/// How long a dial may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits before dialling an address again after its stream broke or a dial failed: the
/// first, and then each doubled up to the last.
pub const BACKOFF: [Duration; 5] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
];

/// What a side does.
#[derive(Debug, Clone)]
pub enum Role {
    /// Dials the peers' addresses, from `local`'s address (port 0: any) on `interface`; in
    /// TLS when `tls` says so.
    Dial {
        local: SocketAddr,
        interface: Option<String>,
        tls: Option<DialTls>,
    },
    /// Takes connections on the socket's own address.
    Listen,
}

/// A dialling side's TLS: the name its hello gives (SNI; `None`: none, as a client that
/// dials an address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialTls {
    pub server_name: Option<String>,
}

/// The streams of one socket.
#[derive(Debug)]
pub struct StreamSide {
    /// Told to each stream, so that the receive task finds the socket its frames are for.
    pub id: usize,
    pub role: Role,
    conns: Mutex<HashMap<SocketAddr, Arc<StreamConn>>>,
    /// Dials under way or waiting for their backoff: address → (failures in a row, not before).
    dialing: Mutex<HashMap<SocketAddr, (usize, Option<Time>)>>,
    /// Connections made (dialled or taken), and closed by why.
    pub connects: AtomicU64,
    pub closes: Counts,
    /// The listener, until its task takes it.
    pub(super) listener: Mutex<Option<std::net::TcpListener>>,
    /// Connections taken whose first bytes or TLS handshake are still awaited.
    pub(super) pending: AtomicUsize,
}

/// Streams closed, by why. The keeper takes those that are drops into the tunnel's drop
/// counters ([`Counts::take_drops`]).
#[derive(Debug, Default)]
pub struct Counts {
    pub ended: AtomicU64,
    pub garbage: AtomicU64,
    pub slow_reader: AtomicU64,
    pub unauthenticated: AtomicU64,
    pub refused: AtomicU64,
    pub local: AtomicU64,
    /// Connections whose TLS handshake failed or did not finish within
    /// [`super::tls::HANDSHAKE_TIMEOUT`], or that sent too little to be told plain or TLS
    /// within [`AUTHENTICATE_WITHIN`].
    pub handshake: AtomicU64,
}

impl Counts {
    /// The closes that are drops, by their reason in the drop counters, since the last call.
    pub fn take_drops(&self) -> [(mpt_tunnel::DropReason, u64); 5] {
        use mpt_tunnel::DropReason as R;
        [
            (R::StreamGarbage, self.garbage.swap(0, Relaxed)),
            (R::StreamSlowReader, self.slow_reader.swap(0, Relaxed)),
            (
                R::StreamUnauthenticated,
                self.unauthenticated.swap(0, Relaxed),
            ),
            (R::StreamRefused, self.refused.swap(0, Relaxed)),
            (R::StreamHandshake, self.handshake.swap(0, Relaxed)),
        ]
    }
}

/// Where a datagram to an address goes from a socket with a stream side.
#[derive(Debug)]
pub enum Way {
    /// Its UDP socket.
    Udp,
    /// This stream.
    Stream(Arc<StreamConn>),
    /// Nowhere yet: a dialling side whose stream to that address is not up.
    Nowhere,
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

impl StreamSide {
    /// A side of `role`; a listening one takes connections on `listener`.
    pub fn new(role: Role, listener: Option<std::net::TcpListener>) -> Arc<StreamSide> {
        Arc::new(StreamSide {
            id: NEXT_ID.fetch_add(1, Relaxed),
            role,
            conns: Mutex::new(HashMap::new()),
            dialing: Mutex::new(HashMap::new()),
            connects: AtomicU64::new(0),
            closes: Counts::default(),
            listener: Mutex::new(listener),
            pending: AtomicUsize::new(0),
        })
    }

    /// Where a datagram to `to` goes.
    pub fn way(&self, to: SocketAddr) -> Way {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        match (conns.get(&to), &self.role) {
            (Some(c), _) => Way::Stream(c.clone()),
            (None, Role::Listen) => Way::Udp,
            (None, Role::Dial { .. }) => Way::Nowhere,
        }
    }

    /// Whether a stream to `to` is up.
    pub fn has(&self, to: SocketAddr) -> bool {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&to)
    }

    /// Streams up now, and the bytes waiting in them (queued and unsent in the kernel).
    pub fn backlog(&self) -> (usize, usize) {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        (conns.len(), conns.values().map(|c| c.backlog()).sum())
    }

    /// The stream to `to`, if one is up.
    pub fn conn(&self, to: SocketAddr) -> Option<Arc<StreamConn>> {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&to)
            .cloned()
    }

    /// Dial `to` at `clock`'s now unless a stream to it is up, a dial is under way, or its
    /// backoff holds; frames go to `inbox`, of `sizes`.
    pub fn dial(
        self: &Arc<Self>,
        to: SocketAddr,
        clock: crate::clock::Clock,
        inbox: &mpsc::Sender<Frames>,
        sizes: Sizes,
    ) {
        let Role::Dial {
            local,
            interface,
            tls,
        } = &self.role
        else {
            return;
        };
        if self.has(to) {
            return;
        }
        {
            let mut dialing = self.dialing.lock().unwrap_or_else(|p| p.into_inner());
            let e = dialing.entry(to).or_insert((0, None));
            let now = clock.now();
            match e.1 {
                Some(at) if now < at => return,
                // a dial under way holds its entry at a time far ahead
                _ => e.1 = Some(now + Duration::from_secs(3600)),
            }
        }
        let (side, inbox) = (self.clone(), inbox.clone());
        let (local, interface, tls) = (*local, interface.clone(), tls.clone());
        tokio::spawn(async move {
            let made = connect(to, local, interface.as_deref()).await;
            let (stream, probe) = match made {
                Ok(s) => s,
                Err(e) => {
                    debug!(%to, error = %e, "stream path: cannot connect");
                    side.backoff(clock.now(), to, false);
                    return;
                }
            };
            let conn = StreamConn::new(to);
            conn.origin.store(side.id, Relaxed);
            let why = match tls {
                None => {
                    info!(%to, "stream path connected");
                    side.insert(&conn);
                    conn.clone().run(stream, inbox, sizes, probe).await
                }
                Some(tls) => {
                    let name = super::tls::server_name(tls.server_name.as_deref(), to);
                    match super::tls::connect(stream, name).await {
                        Ok(stream) => {
                            info!(%to, "stream path connected in TLS");
                            conn.tls.store(true, Relaxed);
                            side.insert(&conn);
                            conn.clone().run(stream, inbox, sizes, probe).await
                        }
                        Err(e) => {
                            debug!(%to, error = %e, "stream path: TLS handshake failed");
                            side.closes.handshake.fetch_add(1, Relaxed);
                            side.backoff(clock.now(), to, false);
                            return;
                        }
                    }
                }
            };
            side.remove(&conn, why);
            side.backoff(clock.now(), to, conn.authenticated.load(Relaxed));
        });
    }

    /// A dial of `to` ended at `now` (`fresh`: its stream had carried an authentic datagram,
    /// so the backoff starts again from the first step).
    fn backoff(&self, now: Time, to: SocketAddr, fresh: bool) {
        let mut dialing = self.dialing.lock().unwrap_or_else(|p| p.into_inner());
        let e = dialing.entry(to).or_insert((0, None));
        if fresh {
            e.0 = 0;
        }
        e.1 = Some(now + BACKOFF[e.0.min(BACKOFF.len() - 1)]);
        e.0 += 1;
    }

    pub(super) fn insert(&self, conn: &Arc<StreamConn>) {
        self.connects.fetch_add(1, Relaxed);
        let old = self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(conn.peer, conn.clone());
        if let Some(old) = old {
            old.close(Closed::Local);
        }
    }

    pub(super) fn remove(&self, conn: &Arc<StreamConn>, why: Closed) {
        {
            let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
            if conns.get(&conn.peer).is_some_and(|c| Arc::ptr_eq(c, conn)) {
                conns.remove(&conn.peer);
            }
        }
        let c = &self.closes;
        let counter = match why {
            Closed::Ended => &c.ended,
            Closed::Garbage(_) => &c.garbage,
            Closed::SlowReader => &c.slow_reader,
            Closed::Local if !conn.authenticated.load(Relaxed) => &c.unauthenticated,
            Closed::Local => &c.local,
        };
        counter.fetch_add(1, Relaxed);
        debug!(peer = %conn.peer, ?why, "stream closed");
    }

    /// The bytes on the wire each way that its streams counted since the last call.
    pub fn take_wire(&self) -> (u64, u64) {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.values().fold((0, 0), |(tx, rx), c| {
            (
                tx + c.wire_tx.swap(0, Relaxed),
                rx + c.wire_rx.swap(0, Relaxed),
            )
        })
    }

    /// Close every stream (the socket is going).
    pub fn close_all(&self) {
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            c.close(Closed::Local);
        }
    }
}

/// Connect to `to` from `local`'s address on `interface`, set up as a stream path's socket.
async fn connect(
    to: SocketAddr,
    local: SocketAddr,
    interface: Option<&str>,
) -> std::io::Result<(tokio::net::TcpStream, Probe)> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    super::sockopt::configure(&s, interface)?;
    if !local.ip().is_unspecified() && local.is_ipv4() == to.is_ipv4() {
        s.bind(&SocketAddr::new(local.ip(), 0).into())?;
    }
    s.set_nonblocking(true)?;
    let socket = tokio::net::TcpSocket::from_std_stream(s.into());
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(to))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let probe = Probe::of(&stream, to);
    Ok((stream, probe))
}
