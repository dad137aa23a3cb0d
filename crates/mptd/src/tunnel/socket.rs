//! One socket of the tunnel ([`SockIo`]): a `[[path]]`'s or a `[[listen]]`'s, with its batched
//! I/O, what the uplink watcher last saw of its interface, and its send errors.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use mpt_core::PathId;
use tracing::warn;

use crate::batch::BatchSocket;
use crate::log::RateLimit;

/// One socket.
#[derive(Debug)]
pub struct SockIo {
    /// The `[[path]]` it is the socket of ([`SockIo::path`]; a reload may move it to another
    /// id), or [`NO_PATH`]: a `[[listen]]` socket, whose datagrams say their path.
    path: std::sync::atomic::AtomicU16,
    /// For logs: the path's name, or `listen <address>` ([`SockIo::name`]).
    name: Mutex<Arc<str>>,
    /// With GSO/GRO batching.
    pub io: BatchSocket,
    /// The kernel refused a GSO send on this socket (EIO: the device cannot segment): runs go
    /// one datagram per call from then on.
    pub gso_refused: AtomicBool,
    /// A path socket's interface, as the uplink watcher last saw it.
    uplink: Mutex<crate::uplinks::Uplink>,
    /// Send errors on this socket: each socket's first is logged, with its errno, then every
    /// thousandth.
    pub send_errors: RateLimit,
    /// Its streams, when it is a TCP path's or takes TCP as well ([`crate::stream`]).
    pub stream: Option<Arc<crate::stream::StreamSide>>,
    /// The bytes it carried on the wire ([`Wire`]).
    pub wire: Wire,
    /// A `transport = "auto"` path's choice of UDP or its stream.
    pub auto: Option<crate::stream::auto::AutoSide>,
}

/// The bytes a socket sent and received on the wire, the outer IP and UDP headers included
/// (what a carrier bills, and what a path's data budget counts). Relaxed atomics, added once
/// per batch.
#[derive(Debug, Default)]
pub struct Wire {
    pub tx: AtomicU64,
    pub rx: AtomicU64,
}

/// The outer IP and UDP headers of a datagram to or from `a`: 28 bytes over IPv4 (an
/// IPv4-mapped address included), 48 over IPv6.
pub fn wire_header(a: SocketAddr) -> u64 {
    match a {
        SocketAddr::V6(v6) if v6.ip().to_ipv4_mapped().is_none() => 48,
        _ => 28,
    }
}

impl Wire {
    /// `datagrams` datagrams of `bytes` bytes in all went to `to`.
    pub fn sent(&self, to: SocketAddr, datagrams: usize, bytes: usize) {
        let n = bytes as u64 + datagrams as u64 * wire_header(to);
        self.tx.fetch_add(n, Relaxed);
    }

    /// A received batch: each buffer of `metas` holds `len` bytes in datagrams of `stride`
    /// bytes (GRO), each of which came with its own headers.
    pub fn received(&self, metas: &[quinn_udp::RecvMeta]) {
        let n: u64 = metas
            .iter()
            .map(|m| {
                let segments = if m.stride == 0 {
                    1
                } else {
                    m.len.div_ceil(m.stride)
                };
                m.len as u64 + segments as u64 * wire_header(m.addr)
            })
            .sum();
        self.rx.fetch_add(n, Relaxed);
    }

    /// (sent, received) so far.
    pub fn get(&self) -> (u64, u64) {
        (self.tx.load(Relaxed), self.rx.load(Relaxed))
    }
}

/// Where a datagram from socket `s` to `to` goes: its UDP socket (an `auto` path's on UDP
/// now among them), or a stream
/// ([`crate::stream::StreamSide::way`]).
pub fn way(s: &SockIo, to: std::net::SocketAddr) -> crate::stream::Way {
    match &s.stream {
        None => crate::stream::Way::Udp,
        Some(_) if s.auto.as_ref().is_some_and(|a| !a.on_stream()) => crate::stream::Way::Udp,
        Some(side) => side.way(to),
    }
}

/// Send `datagram` the way `way` says (not [`crate::stream::Way::Udp`]): into a stream's
/// queue, which never waits; full, or with no stream up, it is dropped and counted in
/// `counters`. Whether it went.
pub fn send_on(counters: &super::Counters, way: &crate::stream::Way, datagram: &[u8]) -> bool {
    use crate::stream::Way;
    match way {
        Way::Stream(c) if c.enqueue(datagram) => true,
        Way::Stream(_) => {
            counters.io_drop(mpt_tunnel::DropReason::StreamFull, 1);
            false
        }
        Way::Nowhere | Way::Udp => {
            counters.io_drop(mpt_tunnel::DropReason::NoPath, 1);
            false
        }
    }
}

/// [`SockIo::path`] of a listen socket.
const NO_PATH: u16 = u16::MAX;

impl SockIo {
    pub(super) fn new(path: Option<PathId>, name: String, io: BatchSocket) -> SockIo {
        SockIo {
            path: std::sync::atomic::AtomicU16::new(path.map_or(NO_PATH, |p| u16::from(p.0))),
            name: Mutex::new(name.into()),
            io,
            gso_refused: AtomicBool::new(false),
            uplink: Mutex::new(crate::uplinks::Uplink::default()),
            send_errors: RateLimit::default(),
            stream: None,
            wire: Wire::default(),
            auto: None,
        }
    }

    /// The socket of the `[[path]]` `p`, bound to its interface if that is there (if not, its
    /// uplink is down until it appears).
    pub fn for_path(p: &crate::config::PathConfig) -> Result<SockIo> {
        let (sock, missing) = crate::net::path_socket(p)?;
        let io = BatchSocket::new(sock)
            .with_context(|| format!("path {:?}: cannot set up batched I/O", p.name))?;
        let mut s = SockIo::new(Some(p.id), p.name.clone(), io);
        use crate::config::PathTransport;
        if let PathTransport::Auto { dial: true } = p.transport {
            let seed = u64::from(std::process::id()) << 8 | u64::from(p.id.0);
            s.auto = Some(crate::stream::auto::AutoSide::new(
                mpt_core::Time::ZERO,
                seed,
            ));
        }
        s.stream = match p.transport {
            PathTransport::Udp | PathTransport::Auto { dial: false } => None,
            PathTransport::Tcp { dial: true }
            | PathTransport::Auto { dial: true }
            | PathTransport::Tls { dial: true, .. } => {
                let tls = match &p.transport {
                    PathTransport::Tls { server_name, .. } => Some(crate::stream::DialTls {
                        server_name: server_name.clone(),
                    }),
                    _ => None,
                };
                Some(crate::stream::StreamSide::new(
                    crate::stream::Role::Dial {
                        local: p.local,
                        interface: p.interface.clone(),
                        tls,
                    },
                    None,
                ))
            }
            // a listening side takes plain and TLS connections alike
            PathTransport::Tcp { dial: false } | PathTransport::Tls { dial: false, .. } => {
                Some(SockIo::listening(p.local, &p.name)?)
            }
        };
        {
            let mut uplink = s.lock_uplink();
            if missing {
                warn!(path = %p.name, interface = p.interface.as_deref().unwrap_or("-"),
                    "interface absent: the path stays down until it appears");
                uplink.down = Some(mpt_tunnel::UplinkDown::Absent);
            } else {
                uplink.ifindex = p.interface.as_deref().and_then(crate::uplinks::ifindex);
                if let (Some(i), true) = (&p.interface, p.dual) {
                    uplink.families = crate::families::of_interface(i);
                    if uplink.families == crate::families::Families::default() {
                        warn!(path = %p.name, interface = i,
                            "no address on the interface: the path stays down until it has one");
                        uplink.down = Some(mpt_tunnel::UplinkDown::NoAddress);
                    }
                }
            }
        }
        Ok(s)
    }

    /// A side that takes TCP connections at `at` (`what`'s address, for errors).
    pub fn listening(at: SocketAddr, what: &str) -> Result<Arc<crate::stream::StreamSide>> {
        let l = crate::stream::StreamSide::listener(at)
            .with_context(|| format!("{what}: cannot listen on TCP at {at}"))?;
        Ok(crate::stream::StreamSide::new(
            crate::stream::Role::Listen,
            Some(l),
        ))
    }

    /// The `[[path]]` it is the socket of; `None`: a `[[listen]]` socket.
    pub fn path(&self) -> Option<PathId> {
        match self.path.load(Relaxed) {
            NO_PATH => None,
            p => Some(PathId(p as u8)),
        }
    }

    /// Its name in logs.
    pub fn name(&self) -> Arc<str> {
        self.name.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A reload made it the socket of path `id`, named `name`.
    pub(super) fn assign(&self, id: PathId, name: &str) {
        self.path.store(u16::from(id.0), Relaxed);
        *self.name.lock().unwrap_or_else(|p| p.into_inner()) = name.into();
    }

    pub fn lock_uplink(&self) -> std::sync::MutexGuard<'_, crate::uplinks::Uplink> {
        self.uplink.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The tunnel's sockets: one per `[[listen]]`, then one per `[[path]]`, in order. A reload
/// replaces the list ([`Sockets::replace`]; the listen sockets, and the paths' whose address
/// and interface are unchanged, stay the same sockets) and tells the receive task
/// ([`Sockets::reloaded`]).
#[derive(Debug)]
pub struct Sockets {
    list: arc_swap::ArcSwap<Vec<Arc<SockIo>>>,
    /// How many of the sockets are `[[listen]]` sockets (they come first).
    pub listen: usize,
    /// Told when a reload replaced the sockets (the receive task waits on the new ones).
    pub reloaded: tokio::sync::Notify,
}

impl Sockets {
    pub fn new(list: Vec<Arc<SockIo>>, listen: usize) -> Sockets {
        Sockets {
            list: arc_swap::ArcSwap::from_pointee(list),
            listen,
            reloaded: tokio::sync::Notify::new(),
        }
    }

    /// The sockets now.
    pub fn all(&self) -> Arc<Vec<Arc<SockIo>>> {
        self.list.load_full()
    }

    /// Socket `i`, if there is one now (a reload may have removed it).
    pub fn get(&self, i: usize) -> Option<Arc<SockIo>> {
        self.list.load().get(i).cloned()
    }

    /// The sockets from now on (a reload's).
    pub fn replace(&self, list: Vec<Arc<SockIo>>) {
        self.list.store(Arc::new(list));
    }
}
