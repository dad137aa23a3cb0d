//! The state the daemon's tasks share: the peers (each with its protocol engine, an
//! `Endpoint`, behind its own lock), the sockets (one per `[[path]]`, then one per
//! `[[listen]]`), the TUN device, the routes between them, and the counters of the I/O
//! around them.
//!
//! Lock rule: a peer's lock is held only to call into its endpoint, never across a system call
//! or an await, and never two at once; the AEAD work is done outside it (the endpoint's
//! `Sealer` and `Opener`). What an endpoint asks for (control datagrams to send, events to
//! log) is gathered into an [`Outputs`] under the lock and acted on after.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

use anyhow::{Context, Result};
use mpt_core::seal::{CipherChoice, PrivateKey, PublicKey};
use mpt_core::{PathId, Time};
use mpt_tunnel::{
    DownReason, DropReason, Endpoint, EndpointConfig, Event, KeySettings, Overhead, PathSettings,
    Transmit,
};
use tracing::{debug, info, warn};

use crate::batch::BatchSocket;
use crate::clock::Clock;
use crate::config::{Config, Keys, PeerConfig};
use crate::datapath::RxBuf;
use crate::log::RateLimit;
use crate::peer::Peer;
use crate::random::KeyStream;
use crate::routes::Routes;

/// Everything the tasks share.
pub struct Tunnel {
    pub cfg: Config,
    pub clock: Clock,
    /// One per `[[path]]` (in order), then one per `[[listen]]`.
    pub sockets: Vec<SockIo>,
    pub peers: Vec<Peer>,
    by_key: HashMap<PublicKey, usize>,
    pub routes: Routes,
    private: PrivateKey,
    /// What a listening peer's endpoint is made from (its paths added by its initiation).
    listening_base: Option<EndpointConfig>,
    /// The ephemeral keys of the last initiations taken: their copies on other paths cost
    /// no key exchange.
    recent: Mutex<Recent>,
    limits: Mutex<HandshakeLimits>,
    /// The TUN device's queues (one unless `tunnel.queues` says more): the tx task of each
    /// reads its own; the rx task writes to the first.
    pub tun: Vec<tun_rs::AsyncDevice>,
    /// Where the prefix before an inner packet ends (every endpoint's).
    pub prefix: usize,
    /// The largest datagram a valid peer sends.
    pub max_datagram: usize,
    /// Drops outside the endpoints (TUN reads and writes, sends, datagrams for no peer),
    /// counted and rate-limited for the log.
    io_drops: [RateLimit; DropReason::COUNT],
    /// Rate limits for logging the endpoints' drops (they count them themselves).
    drop_logs: [RateLimit; DropReason::COUNT],
    /// Receive errors on the sockets (not a drop: nothing was received).
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

/// One socket.
#[derive(Debug)]
pub struct SockIo {
    /// The `[[path]]` it is the socket of; `None`: a `[[listen]]` socket, whose datagrams say
    /// their path.
    pub path: Option<PathId>,
    /// For logs: the path's name, or `listen <address>`.
    pub name: String,
    /// With GSO/GRO batching.
    pub io: BatchSocket,
    /// The kernel refused a GSO send on this socket (EIO: the device cannot segment): runs go
    /// one datagram per call from then on.
    pub gso_refused: AtomicBool,
    /// A path socket's interface, as the uplink watcher last saw it.
    uplink: Mutex<crate::uplinks::Uplink>,
}

impl SockIo {
    pub fn lock_uplink(&self) -> std::sync::MutexGuard<'_, crate::uplinks::Uplink> {
        self.uplink.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the endpoints asked for while locked, to be done once the lock is released.
#[derive(Debug, Default)]
pub struct Outputs {
    /// (peer, datagram)
    pub transmits: Vec<(usize, Transmit)>,
    pub events: Vec<(usize, Event)>,
}

/// Bounds on the work initiations cost (two X25519 operations to read one, two more to
/// answer): in total, and from one address. A flood of forged initiations, from many
/// addresses or one, costs at most this much key exchange; established sessions do not
/// need handshakes and carry on. Sites refused by a bound retry (after 1, 2, 4, then every
/// 5 s).
#[derive(Debug)]
struct HandshakeLimits {
    total: Bucket,
    per_source: HashMap<std::net::IpAddr, Bucket>,
}

/// Initiations read per second in all, and at once.
const HANDSHAKES_PER_SECOND: f64 = 1000.0;
const HANDSHAKE_BURST: f64 = 1000.0;
/// Initiations read per second from one address (sites behind one carrier NAT share one),
/// and at once.
const HANDSHAKES_PER_SOURCE: f64 = 50.0;
const HANDSHAKE_SOURCE_BURST: f64 = 100.0;
/// Addresses remembered before the per-address buckets start again.
const SOURCES_REMEMBERED: usize = 4096;

/// A token bucket on the daemon's clock.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Time,
}

impl Bucket {
    fn full(burst: f64, now: Time) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Take one token at `now`, if there is one.
    fn take(&mut self, now: Time, rate: f64, burst: f64) -> bool {
        let dt = now.saturating_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl HandshakeLimits {
    /// Whether an initiation from `from` may be read at `now`.
    fn allow(&mut self, now: Time, from: std::net::IpAddr) -> bool {
        if self.per_source.len() >= SOURCES_REMEMBERED && !self.per_source.contains_key(&from) {
            self.per_source.clear();
        }
        let source = self
            .per_source
            .entry(from)
            .or_insert_with(|| Bucket::full(HANDSHAKE_SOURCE_BURST, now));
        source.take(now, HANDSHAKES_PER_SOURCE, HANDSHAKE_SOURCE_BURST)
            && self.total.take(now, HANDSHAKES_PER_SECOND, HANDSHAKE_BURST)
    }
}

/// The last initiations' ephemeral keys (a small ring).
#[derive(Debug, Default)]
struct Recent {
    keys: Vec<[u8; 32]>,
    next: usize,
}

const RECENT: usize = 256;

impl Recent {
    fn seen(&self, e: &[u8]) -> bool {
        self.keys.iter().any(|k| k[..] == *e)
    }

    fn add(&mut self, e: &[u8]) {
        let mut k = [0u8; 32];
        k.copy_from_slice(&e[..32]);
        if self.keys.len() < RECENT {
            self.keys.push(k);
        } else {
            self.keys[self.next] = k;
            self.next = (self.next + 1) % RECENT;
        }
    }
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("tunnel", &self.cfg.tunnel.name)
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
}

/// The settings of `peer`'s endpoint, over `paths`. `slot` goes into its indices.
#[allow(clippy::too_many_arguments)]
fn peer_endpoint_config(
    cfg: &Config,
    peer: &PeerConfig,
    private: &PrivateKey,
    psk: Option<mpt_core::seal::Psk>,
    paths: Vec<PathSettings>,
    slot: u16,
    aes_in_hardware: bool,
    unix_nanos_at_zero: u64,
) -> EndpointConfig {
    EndpointConfig {
        paths,
        scheduler: cfg.connection.scheduler,
        reorder_window: cfg.connection.reorder_window,
        reorder_timeout: cfg.connection.reorder_timeout,
        keepalive: cfg.connection.keepalive,
        dead: cfg.connection.dead,
        mtu: cfg.tunnel.mtu,
        keys: KeySettings {
            private: private.clone(),
            peer: peer.public_key,
            psk,
            encryption: cfg.security.cipher,
            aes_in_hardware,
            initiate: peer.endpoint.is_some(),
            unix_nanos_at_zero,
        },
        index_slot: Some(slot),
    }
}

/// `peer`'s paths over our `[[path]]`s: each to its `remote`, or to the peer's endpoint
/// (resolved now), or unknown until the peer is heard on it.
fn config_paths(cfg: &Config, peer: &PeerConfig) -> Result<Vec<PathSettings>> {
    // A host name that does not resolve now is not fatal: its paths wait, and the uplink
    // watcher resolves it again (`crate::uplinks`).
    let resolved = match &peer.endpoint {
        Some(e) => e.resolve().unwrap_or_else(|err| {
            warn!(peer = %peer.name, endpoint = %e, error = %err,
                "cannot resolve the peer's endpoint now: trying again every few seconds");
            Vec::new()
        }),
        None => Vec::new(),
    };
    let mut paths = Vec::with_capacity(cfg.paths.len());
    for p in &cfg.paths {
        let remote = match (p.remote, &peer.endpoint) {
            (Some(r), _) => Some(r),
            (None, Some(_)) => pick_family(&resolved, p.local.is_ipv6()),
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
    Ok(paths)
}

/// The first of `addrs` of the family a path's socket has.
pub fn pick_family(addrs: &[SocketAddr], ipv6: bool) -> Option<SocketAddr> {
    addrs.iter().find(|a| a.is_ipv6() == ipv6).copied()
}

/// The endpoint settings of a one-peer tunnel over its `[[path]]`s (what the daemon runs for
/// `peers[0]` when it does not listen; the lab's comparisons build it too).
pub fn endpoint_config(
    cfg: &Config,
    keys: &Keys,
    aes_in_hardware: bool,
    unix_nanos_at_zero: u64,
) -> Result<EndpointConfig> {
    let peer = &cfg.peers[0];
    Ok(peer_endpoint_config(
        cfg,
        peer,
        &keys.private,
        keys.psks.first().cloned().flatten(),
        config_paths(cfg, peer)?,
        1,
        aes_in_hardware,
        unix_nanos_at_zero,
    ))
}

fn random_source() -> Result<mpt_tunnel::Random> {
    let mut k = KeyStream::from_kernel()?;
    Ok(Box::new(move |b| k.fill(b)))
}

impl Tunnel {
    /// Set up the sockets, the peers and the TUN device. Fails with a message naming what is
    /// wrong.
    pub fn new(cfg: Config, keys: &Keys) -> Result<Tunnel> {
        let clock = Clock::new();
        let aes = mpt_core::seal::aes_in_hardware();
        let unix = clock.unix_nanos_at_zero();
        let mut sockets = Vec::with_capacity(cfg.paths.len() + cfg.listen.len());
        let mut absent = Vec::new();
        for p in &cfg.paths {
            let (sock, missing) = crate::net::path_socket(p)?;
            let io = BatchSocket::new(sock)
                .with_context(|| format!("path {:?}: cannot set up batched I/O", p.name))?;
            let mut uplink = crate::uplinks::Uplink::default();
            if missing {
                warn!(path = %p.name, interface = p.interface.as_deref().unwrap_or("-"),
                    "interface absent: the path stays down until it appears");
                uplink.down = Some(mpt_tunnel::UplinkDown::Absent);
                absent.push(p.id);
            } else {
                uplink.ifindex = p.interface.as_deref().and_then(crate::uplinks::ifindex);
            }
            sockets.push(SockIo {
                path: Some(p.id),
                name: p.name.clone(),
                io,
                gso_refused: AtomicBool::new(false),
                uplink: Mutex::new(uplink),
            });
        }
        for (i, &a) in cfg.listen.iter().enumerate() {
            let io = BatchSocket::new(crate::net::listen_socket(i, a)?)
                .with_context(|| format!("listen[{i}]: cannot set up batched I/O"))?;
            sockets.push(SockIo {
                path: None,
                name: format!("listen {a}"),
                io,
                gso_refused: AtomicBool::new(false),
                uplink: Mutex::new(crate::uplinks::Uplink::default()),
            });
        }
        let path_sockets: Vec<usize> = (0..cfg.paths.len()).collect();
        let mut peers = Vec::with_capacity(cfg.peers.len());
        let mut prefix_len = None;
        for (i, pc) in cfg.peers.iter().enumerate() {
            let slot = (i + 1) as u16;
            let psk = keys.psks.get(i).cloned().flatten();
            let listening = pc.endpoint.is_none() && !cfg.listen.is_empty();
            let ep = if listening {
                None
            } else {
                let ecfg = peer_endpoint_config(
                    &cfg,
                    pc,
                    &keys.private,
                    psk.clone(),
                    config_paths(&cfg, pc)?,
                    slot,
                    aes,
                    unix,
                );
                let mut ep = Endpoint::new(ecfg, clock.now(), random_source()?);
                for &path in &absent {
                    ep.set_uplink(clock.now(), path, Some(mpt_tunnel::UplinkDown::Absent));
                }
                prefix_len = Some((ep.prefix(), ep.max_datagram()));
                Some(ep)
            };
            peers.push(Peer::new(
                pc.clone(),
                slot,
                psk,
                listening,
                ep,
                &path_sockets,
            ));
        }
        let listening_base = (!cfg.listen.is_empty()).then(|| {
            let mut base = peer_endpoint_config(
                &cfg,
                &cfg.peers[0],
                &keys.private,
                None,
                Vec::new(),
                1,
                aes,
                unix,
            );
            // no rates are known for a peer's own paths: they are learned
            if base.scheduler == mpt_sched::SchedulerKind::Rate {
                base.scheduler = mpt_sched::SchedulerKind::Adaptive;
            }
            base
        });
        let overhead = Overhead::new(cfg.security.cipher.is_some(), false);
        let (prefix, max_datagram) = prefix_len.unwrap_or((
            if cfg.security.cipher.is_some() {
                mpt_core::wire::SEALED_HEADER_LEN
            } else {
                mpt_core::wire::HEADER_LEN
            },
            usize::from(cfg.tunnel.mtu) + overhead.datagram(),
        ));
        let tun = crate::net::tun_device(&cfg.tunnel)?;
        Ok(Tunnel {
            by_key: cfg
                .peers
                .iter()
                .enumerate()
                .map(|(i, p)| (p.public_key, i))
                .collect(),
            routes: Routes::new(&cfg.peers),
            private: keys.private.clone(),
            listening_base,
            recent: Mutex::new(Recent::default()),
            limits: Mutex::new(HandshakeLimits {
                total: Bucket::full(HANDSHAKE_BURST, Time::ZERO),
                per_source: HashMap::new(),
            }),
            prefix,
            max_datagram,
            clock,
            sockets,
            peers,
            tun,
            io_drops: Default::default(),
            drop_logs: Default::default(),
            recv_errors: RateLimit::default(),
            calls: Calls::default(),
            send_turn: tokio::sync::Mutex::new(()),
            cfg,
        })
    }

    /// Whether (and how) datagrams are sealed.
    pub fn sealing(&self) -> Option<CipherChoice> {
        self.cfg.security.cipher
    }

    /// The peer whose endpoint a datagram with this `session` field is for.
    pub fn peer_of_session(&self, session: u32) -> Option<usize> {
        let slot = usize::from(mpt_tunnel::index_slot(session));
        (1..=self.peers.len()).contains(&slot).then(|| slot - 1)
    }

    /// An initiation arrived at socket `s` from `from`, sent to our address `to` (the
    /// datagram `d`): find the peer by
    /// the key in it, make a listening peer's endpoint if it has none (or its paths changed),
    /// and hand it over. Returns the peer it was for, or why it was dropped.
    pub fn take_initiation(
        &self,
        now: Time,
        s: usize,
        from: SocketAddr,
        to: Option<std::net::IpAddr>,
        d: &[u8],
        out: &mut Outputs,
    ) -> Result<usize, DropReason> {
        use mpt_core::wire::{Datagram, Initiation, INITIATION_PAYLOAD_LEN};
        let (header, message) = match Datagram::parse(d) {
            Ok(Datagram::Handshake { header, message }) => (header, message),
            Ok(_) => return Err(DropReason::Unexpected),
            Err(e) => return Err(DropReason::malformed(&e)),
        };
        if self.lock_recent().seen(&message[..32]) {
            return Err(DropReason::StaleHandshake);
        }
        let allowed = self
            .limits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(now, from.ip());
        if !allowed {
            if let Some(n) = self.drop_logs[DropReason::HandshakeLimited as usize].hit() {
                warn!(%from, refused = n,
                    "more initiations than the handshake bounds allow (a flood?): refused unread");
            }
            return Err(DropReason::HandshakeLimited);
        }
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN + 16];
        let (responder, n) = mpt_core::seal::Responder::read(&self.private, message, &mut payload)
            .map_err(|_| DropReason::BadHandshake)?;
        let Some(&i) = self.by_key.get(responder.peer()) else {
            if let Some(n) = self.drop_logs[DropReason::UnknownKey as usize].hit() {
                warn!(key = %responder.peer(), %from, refused = n,
                    "a handshake from a key no [[peer]] has: refused");
            }
            return Err(DropReason::UnknownKey);
        };
        let init = Initiation::parse(&payload[..n]).ok_or(DropReason::BadHandshake)?;
        let peer = &self.peers[i];
        let path = self.sockets[s].path.unwrap_or(header.path);
        let mut guard = peer.lock();
        if peer.listening {
            let paths = usize::from(init.paths);
            if !(1..=mpt_core::MAX_PATHS).contains(&paths) || path.index() >= paths {
                return Err(DropReason::PathMismatch);
            }
            if guard.as_ref().is_none_or(|ep| ep.path_count() != paths) {
                let Some(base) = &self.listening_base else {
                    return Err(DropReason::Unexpected);
                };
                let mut ecfg = crate::peer::listening_endpoint_config(base, paths);
                ecfg.keys.peer = peer.cfg.public_key;
                ecfg.keys.psk = peer.psk.clone();
                ecfg.index_slot = Some(peer.slot);
                let random = random_source().map_err(|_| DropReason::Unexpected)?;
                *guard = Some(Endpoint::new(ecfg, now, random));
            }
        }
        let Some(ep) = guard.as_mut() else {
            return Err(DropReason::UnknownSession);
        };
        let outcome = ep.accept_initiation(now, path, from, responder, &payload[..n], message);
        Tunnel::gather(ep, now, i, out);
        peer.note_deadline(ep);
        drop(guard);
        match outcome {
            mpt_tunnel::Outcome::Dropped(r) => Err(r),
            _ => {
                peer.arrived(path, s, to);
                self.lock_recent().add(message);
                Ok(i)
            }
        }
    }

    fn lock_recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gather what peer `i`'s endpoint asks for at `now` (under its lock).
    pub fn gather(ep: &mut Endpoint<RxBuf>, now: Time, i: usize, out: &mut Outputs) {
        while let Some(t) = ep.poll_transmit(now) {
            out.transmits.push((i, t));
        }
        while let Some(e) = ep.poll_event() {
            out.events.push((i, e));
        }
    }

    /// Send the gathered control datagrams and log the events (without any lock).
    pub fn act(&self, out: &mut Outputs) {
        for (i, t) in out.transmits.drain(..) {
            let peer = &self.peers[i];
            self.send(peer, t.path, &t.contents, t.destination);
        }
        for (i, e) in out.events.drain(..) {
            self.log_event(i, &e);
        }
    }

    /// We are stopping: a goodbye on every path of every peer, so that the peers take our
    /// paths down at once rather than after `dead_ms` of silence.
    pub fn say_goodbye(&self) {
        let mut out = Outputs::default();
        let now = self.clock.now();
        for (i, p) in self.peers.iter().enumerate() {
            if let Some(ep) = p.lock().as_mut() {
                ep.close();
                Tunnel::gather(ep, now, i, &mut out);
            }
        }
        self.act(&mut out);
    }

    /// Send one datagram of `peer` on `path` now, or count it as lost (a full socket buffer
    /// drops a control datagram rather than wait).
    pub fn send(&self, peer: &Peer, path: PathId, datagram: &[u8], remote: SocketAddr) {
        let s = &self.sockets[peer.socket(path)];
        match s.io.try_send(datagram, remote, peer.source(path)) {
            Ok(()) => peer.sent(path, 1, datagram.len()),
            Err(e) => self.send_failed(peer, path, &e),
        }
    }

    pub fn send_failed(&self, peer: &Peer, path: PathId, e: &std::io::Error) {
        if let Some(n) = self.io_drop(DropReason::SendError, 1) {
            warn!(peer = %peer.cfg.name, path = %self.path_name(peer, path), error = %e,
                dropped = n, "send failed");
        }
    }

    /// Count `n` drops for `reason` outside the endpoints; `Some(count)` when one should be
    /// logged.
    pub fn io_drop(&self, reason: DropReason, n: u64) -> Option<u64> {
        self.io_drops[reason as usize].hit_n(n)
    }

    /// Drops outside the endpoints, by reason.
    pub fn io_drop_counts(&self) -> [u64; DropReason::COUNT] {
        std::array::from_fn(|i| self.io_drops[i].count())
    }

    /// The name of `peer`'s `path`: our `[[path]]`'s, or `p<N>` for a listening peer's.
    pub fn path_name(&self, peer: &Peer, path: PathId) -> String {
        match (peer.listening, self.cfg.paths.get(path.index())) {
            (false, Some(p)) => p.name.clone(),
            _ => format!("p{path}"),
        }
    }

    /// Log, rate-limited, a datagram dropped at socket `s` (by peer `peer`'s endpoint, or
    /// before one was found).
    pub fn log_drop(&self, s: usize, peer: Option<usize>, reason: DropReason) {
        let Some(n) = self.drop_logs[reason as usize].hit() else {
            return;
        };
        let at = &self.sockets[s].name;
        let peer = peer.map_or("-", |i| self.peers[i].cfg.name.as_str());
        match reason {
            DropReason::BadTag => warn!(socket = %at, peer, dropped = n,
                "a datagram failed authentication: forged, or corrupted on the way"),
            _ => {
                debug!(socket = %at, peer, reason = reason.name(), dropped = n, "datagram dropped")
            }
        }
    }

    fn log_event(&self, i: usize, e: &Event) {
        let peer = &self.peers[i];
        let pn = peer.cfg.name.as_str();
        let name = |p: &PathId| self.path_name(peer, *p);
        match e {
            Event::PathUp { path, again: false } => info!(peer = pn, path = name(path), "path up"),
            Event::PathUp { path, again: true } => {
                info!(peer = pn, path = name(path), "path up again")
            }
            Event::PathDown {
                path,
                reason: DownReason::Silent(d),
            } => warn!(
                peer = pn,
                path = name(path),
                silent_ms = d.as_millis() as u64,
                "path down: nothing heard"
            ),
            Event::PathDown {
                path,
                reason: DownReason::PeerClosed,
            } => info!(
                peer = pn,
                path = name(path),
                "path down: the peer is stopping"
            ),
            Event::PathDown {
                path,
                reason: DownReason::Uplink(r),
            } => warn!(
                peer = pn,
                path = name(path),
                reason = r.name(),
                "path down: our uplink"
            ),
            Event::PathDown {
                path,
                reason: DownReason::PeerHearsNothing,
            } => warn!(
                peer = pn,
                path = name(path),
                "path down: the peer hears nothing from us on it (it works one way only)"
            ),
            Event::HandshakeSent { attempt } => {
                let to = peer.cfg.endpoint.as_ref().map(ToString::to_string);
                if *attempt <= 1 {
                    info!(
                        peer = pn,
                        endpoint = to.as_deref().unwrap_or("-"),
                        "handshake sent"
                    );
                } else {
                    warn!(
                        peer = pn,
                        endpoint = to.as_deref().unwrap_or("-"),
                        attempt,
                        "no answer from the peer: handshake sent again"
                    );
                }
            }
            Event::PeerAuthenticated {
                path,
                session,
                cipher,
            } => info!(
                peer = pn,
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
                peer = pn,
                path = name(path),
                old = format_args!("{old:08x}"),
                new = format_args!("{session:08x}"),
                encryption = cipher.map_or("none", |c| c.name()),
                "new session with the peer (it restarted, or had not been heard): resequencer reset"
            ),
            Event::HandshakeRefused { path, reason } => warn!(
                peer = pn,
                path = name(path),
                reason = reason.name(),
                "handshake refused: {}",
                match reason {
                    DropReason::PathMismatch =>
                        "the peer lists another number of paths (both ends must list the same)",
                    _ => "the peer's encryption setting cannot meet ours",
                }
            ),
            Event::AddressChanged { path, old, new } => {
                info!(peer = pn, path = name(path), %old, %new, "peer address changed")
            }
        }
    }
}
