//! The state the daemon's tasks share: the protocol engine ([`Endpoint`], behind one lock),
//! the path sockets, the TUN device, and the counters of the I/O around them.
//!
//! Lock rule: the endpoint's lock is held only to call into it, never across a system call
//! or an await; the AEAD work is done outside it (the endpoint's `Sealer` and `Opener`). What it asks for (control datagrams to send, events to log) is gathered
//! into an [`Outputs`] under the lock and acted on after.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use crate::config::{Config, Keys, PathConfig};
use anyhow::{Context, Result};
use mpt_core::seal::CipherChoice;
use mpt_core::{PathId, Time};
use mpt_tunnel::{
    DownReason, DropReason, Endpoint, EndpointConfig, Event, KeySettings, Overhead, PathSettings,
    Transmit,
};
use tracing::{debug, info, warn};

use crate::batch::BatchSocket;
use crate::clock::Clock;
use crate::datapath::RxBuf;
use crate::log::RateLimit;
use crate::random::KeyStream;

/// Everything the tasks share.
pub struct Tunnel {
    pub cfg: Config,
    pub clock: Clock,
    endpoint: Mutex<Endpoint<RxBuf>>,
    pub paths: Vec<PathIo>,
    /// The TUN device's queues (one unless `tunnel.queues` says more): the tx task of each
    /// reads its own; the rx task writes to the first.
    pub tun: Vec<tun_rs::AsyncDevice>,
    /// Where the prefix before an inner packet ends (the endpoint's).
    pub prefix: usize,
    /// The largest datagram a valid peer sends.
    pub max_datagram: usize,
    /// Drops in the I/O around the endpoint (TUN reads and writes, sends), counted and
    /// rate-limited for the log.
    io_drops: [RateLimit; DropReason::COUNT],
    /// Rate limits for logging the endpoint's drops (it counts them itself).
    drop_logs: [RateLimit; DropReason::COUNT],
    /// Receive errors on the path sockets (not a drop: nothing was received).
    pub recv_errors: RateLimit,
    pub calls: Calls,
    /// Held by a tx task from numbering a batch until it has been sent (several TUN queues).
    pub send_turn: tokio::sync::Mutex<()>,
}

/// Datapath system calls (each may carry many packets).
#[derive(Debug, Default)]
pub struct Calls {
    pub tun_reads: AtomicU64,
    pub tun_write_batches: AtomicU64,
    pub udp_sends: AtomicU64,
    pub udp_recvs: AtomicU64,
}

/// One path's socket and what it sent.
#[derive(Debug)]
pub struct PathIo {
    pub cfg: PathConfig,
    /// The path's socket, with GSO/GRO batching.
    pub io: BatchSocket,
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    /// The kernel refused a GSO send on this path (EIO: the device cannot segment): runs go
    /// one datagram per call from then on.
    pub gso_refused: AtomicBool,
}

impl PathIo {
    /// `datagrams` datagrams of `bytes` bytes in all left on this path.
    pub fn sent(&self, datagrams: usize, bytes: usize) {
        self.tx_packets.fetch_add(datagrams as u64, Relaxed);
        self.tx_bytes.fetch_add(bytes as u64, Relaxed);
    }
}

/// What the endpoint asked for while locked, to be done once the lock is released.
#[derive(Debug, Default)]
pub struct Outputs {
    pub transmits: Vec<Transmit>,
    pub events: Vec<Event>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("tunnel", &self.cfg.tunnel.name)
            .finish_non_exhaustive()
    }
}

/// The endpoint's settings from the daemon's configuration and its keys. The peer's
/// endpoint is resolved now (a path without a `remote` of its own sends there);
/// `unix_nanos_at_zero` is the wall clock at the endpoint's `Time::ZERO`.
pub fn endpoint_config(
    cfg: &Config,
    keys: &Keys,
    aes_in_hardware: bool,
    unix_nanos_at_zero: u64,
) -> Result<EndpointConfig> {
    let peer = &cfg.peers[0];
    let resolved = match &peer.endpoint {
        Some(e) => e
            .resolve()
            .with_context(|| format!("peer {:?}: cannot resolve its endpoint {e}", peer.name))?,
        None => Vec::new(),
    };
    let mut paths = Vec::with_capacity(cfg.paths.len());
    for p in &cfg.paths {
        let remote = match (p.remote, &peer.endpoint) {
            (Some(r), _) => Some(r),
            (None, Some(e)) => Some(
                resolved
                    .iter()
                    .find(|a| a.is_ipv6() == p.local.is_ipv6())
                    .copied()
                    .with_context(|| {
                        format!(
                            "path {:?}: the peer's endpoint {e} has no {} address",
                            p.name,
                            if p.local.is_ipv6() { "IPv6" } else { "IPv4" }
                        )
                    })?,
            ),
            (None, None) => None,
        };
        paths.push(PathSettings {
            name: p.name.clone(),
            remote,
            weight: p.weight,
            rate_bps: p.rate_bps,
            backup: p.backup,
            overhead: Overhead::new(cfg.security.cipher.is_some(), p.local.is_ipv6()).outer_link(),
        });
    }
    Ok(EndpointConfig {
        paths,
        scheduler: cfg.connection.scheduler,
        reorder_window: cfg.connection.reorder_window,
        reorder_timeout: cfg.connection.reorder_timeout,
        keepalive: cfg.connection.keepalive,
        dead: cfg.connection.dead,
        mtu: cfg.tunnel.mtu,
        keys: KeySettings {
            private: keys.private.clone(),
            peer: peer.public_key,
            psk: keys.psks.first().cloned().flatten(),
            encryption: cfg.security.cipher,
            aes_in_hardware,
            initiate: peer.endpoint.is_some(),
            unix_nanos_at_zero,
        },
        index_slot: None,
    })
}

impl Tunnel {
    /// Set up the sockets and the TUN device. Fails with a message naming what is wrong.
    pub fn new(cfg: Config, keys: &Keys) -> Result<Tunnel> {
        let clock = Clock::new();
        let ecfg = endpoint_config(
            &cfg,
            keys,
            mpt_core::seal::aes_in_hardware(),
            clock.unix_nanos_at_zero(),
        )?;
        let mut paths = Vec::with_capacity(cfg.paths.len());
        for p in &cfg.paths {
            let sock = crate::net::path_socket(p)?;
            let io = BatchSocket::new(sock)
                .with_context(|| format!("path {:?}: cannot set up batched I/O", p.name))?;
            paths.push(PathIo {
                cfg: p.clone(),
                io,
                tx_packets: AtomicU64::new(0),
                tx_bytes: AtomicU64::new(0),
                gso_refused: AtomicBool::new(false),
            });
        }
        let tun = crate::net::tun_device(&cfg.tunnel)?;
        let mut random = KeyStream::from_kernel()?;
        let endpoint = Endpoint::new(ecfg, clock.now(), Box::new(move |b| random.fill(b)));
        Ok(Tunnel {
            prefix: endpoint.prefix(),
            max_datagram: endpoint.max_datagram(),
            endpoint: Mutex::new(endpoint),
            clock,
            paths,
            tun,
            io_drops: Default::default(),
            drop_logs: Default::default(),
            recv_errors: RateLimit::default(),
            calls: Calls::default(),
            send_turn: tokio::sync::Mutex::new(()),
            cfg,
        })
    }

    /// The endpoint, locked: see the module's lock rule.
    pub fn lock(&self) -> MutexGuard<'_, Endpoint<RxBuf>> {
        // A panic while holding the lock is a bug elsewhere; the state is still usable.
        self.endpoint.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether (and how) datagrams are sealed.
    pub fn sealing(&self) -> Option<CipherChoice> {
        self.cfg.security.cipher
    }

    /// Gather what the endpoint asks for at `now` (under the lock).
    pub fn gather(ep: &mut Endpoint<RxBuf>, now: Time, out: &mut Outputs) {
        while let Some(t) = ep.poll_transmit(now) {
            out.transmits.push(t);
        }
        while let Some(e) = ep.poll_event() {
            out.events.push(e);
        }
    }

    /// Send the gathered control datagrams and log the events (without the lock).
    pub fn act(&self, out: &mut Outputs) {
        for t in out.transmits.drain(..) {
            let p = &self.paths[t.path.index()];
            self.send(p, &t.contents, t.destination);
        }
        for e in out.events.drain(..) {
            self.log_event(&e);
        }
    }

    /// We are stopping: a goodbye on every path, so that the peer takes our paths down at once
    /// rather than after `dead_ms` of silence.
    pub fn say_goodbye(&self) {
        let mut out = Outputs::default();
        {
            let now = self.clock.now();
            let mut ep = self.lock();
            ep.close();
            Tunnel::gather(&mut ep, now, &mut out);
        }
        self.act(&mut out);
    }

    /// Send one datagram now, or count it as lost (a full socket buffer drops a control
    /// datagram rather than wait).
    pub fn send(&self, p: &PathIo, datagram: &[u8], remote: SocketAddr) {
        match p.io.try_send(datagram, remote) {
            Ok(()) => p.sent(1, datagram.len()),
            Err(e) => self.send_failed(p, &e),
        }
    }

    pub fn send_failed(&self, p: &PathIo, e: &std::io::Error) {
        if let Some(n) = self.io_drop(DropReason::SendError, 1) {
            warn!(path = %p.cfg.name, error = %e, dropped = n, "send failed");
        }
    }

    /// Count `n` drops for `reason` in the I/O; `Some(count)` when one should be logged.
    pub fn io_drop(&self, reason: DropReason, n: u64) -> Option<u64> {
        self.io_drops[reason as usize].hit_n(n)
    }

    /// I/O drops by reason.
    pub fn io_drop_counts(&self) -> [u64; DropReason::COUNT] {
        std::array::from_fn(|i| self.io_drops[i].count())
    }

    /// Log, rate-limited, a datagram the endpoint dropped.
    pub fn log_drop(&self, path: usize, reason: DropReason) {
        let Some(n) = self.drop_logs[reason as usize].hit() else {
            return;
        };
        let name = &self.paths[path].cfg.name;
        match reason {
            DropReason::BadTag => warn!(path = %name, dropped = n,
                "a datagram failed authentication: is the peer's key (and encryption) the same as ours?"),
            _ => debug!(path = %name, reason = reason.name(), dropped = n, "datagram dropped"),
        }
    }

    fn log_event(&self, e: &Event) {
        let name = |p: &PathId| self.paths[p.index()].cfg.name.as_str();
        match e {
            Event::PathUp { path, again: false } => info!(path = name(path), "path up"),
            Event::PathUp { path, again: true } => info!(path = name(path), "path up again"),
            Event::PathDown {
                path,
                reason: DownReason::Silent(d),
            } => warn!(
                path = name(path),
                silent_ms = d.as_millis() as u64,
                "path down"
            ),
            Event::PathDown {
                path,
                reason: DownReason::PeerClosed,
            } => info!(path = name(path), "path down: the peer is stopping"),
            Event::HandshakeSent { attempt } => {
                let peer = &self.cfg.peers[0];
                let to = peer.endpoint.as_ref().map(ToString::to_string);
                if *attempt <= 1 {
                    info!(peer = %peer.name, endpoint = to.as_deref().unwrap_or("-"), "handshake sent");
                } else {
                    warn!(peer = %peer.name, endpoint = to.as_deref().unwrap_or("-"), attempt,
                        "no answer from the peer: handshake sent again");
                }
            }
            Event::PeerAuthenticated {
                path,
                session,
                cipher,
            } => info!(
                peer = %self.cfg.peers[0].name,
                path = name(path),
                session = format_args!("{session:08x}"),
                encryption = cipher.map_or("none", |c| c.name()),
                "peer authenticated: session made"
            ),
            Event::NewSession {
                path,
                old,
                session,
                cipher,
            } => info!(
                peer = %self.cfg.peers[0].name,
                path = name(path),
                old = format_args!("{old:08x}"),
                new = format_args!("{session:08x}"),
                encryption = cipher.map_or("none", |c| c.name()),
                "new session with the peer (it restarted, or had not been heard): resequencer reset"
            ),
            Event::HandshakeRefused { path, reason } => warn!(
                peer = %self.cfg.peers[0].name,
                path = name(path),
                reason = reason.name(),
                "handshake refused: the peer's encryption setting cannot meet ours"
            ),
            Event::AddressChanged { path, old, new } => {
                info!(path = name(path), %old, %new, "peer address changed")
            }
        }
    }
}
