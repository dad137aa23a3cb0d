//! The state the daemon's tasks share: the peers (each with its protocol engine, an
//! `Endpoint`, behind its own lock), the sockets (one per `[[path]]`, then one per
//! `[[listen]]`), the TUN device, the routes between them, and the counters of the I/O
//! around them.
//!
//! Lock rule: a peer's lock is held only to call into its endpoint, never across a system call
//! or an await, and never two at once; the AEAD work is done outside it (the endpoint's
//! `Sealer` and `Opener`). What an endpoint asks for (control datagrams to send, events to
//! log) is gathered into an [`Outputs`] under the lock and acted on after.
//!
//! Here the state and sending; taking initiations in `accept.rs`, the endpoints' settings in
//! `settings.rs`, logging what the endpoints report in `events.rs`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;

use anyhow::{Context, Result};
use mpt_core::seal::CipherChoice;
use mpt_core::{PathId, Time};
use mpt_tunnel::{DropReason, Endpoint, Event, Overhead, Transmit};
use tracing::warn;

use crate::batch::BatchSocket;
use crate::clock::Clock;
use crate::config::{Config, Keys};
use crate::datapath::RxBuf;
use crate::log::RateLimit;
use crate::peer::Peer;
use crate::routes::Routes;

mod accept;
mod events;
mod settings;

use accept::Acceptor;
pub use settings::pick_family;
use settings::{config_paths, peer_endpoint_config, random_source};

/// Everything the tasks share.
pub struct Tunnel {
    pub cfg: Config,
    pub clock: Clock,
    /// One per `[[path]]` (in order), then one per `[[listen]]`.
    pub sockets: Vec<SockIo>,
    pub peers: Vec<Peer>,
    pub routes: Routes,
    /// What taking the peers' initiations needs (`accept.rs`).
    acceptor: Acceptor,
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
    /// When the receive loop last turned (the clock's milliseconds): the systemd watchdog is
    /// fed only while it does.
    pub rx_beat: AtomicU64,
    /// The operator's `[hooks]`, and the queue their task takes (once) at start.
    pub hooks: Option<crate::hooks::Hooks>,
    pub hook_queue: Mutex<Option<tokio::sync::mpsc::Receiver<crate::hooks::HookRun>>>,
}

/// Datapath system calls (each may carry many packets).
#[derive(Debug, Default)]
pub struct Calls {
    pub tun_reads: AtomicU64,
    pub tun_write_batches: AtomicU64,
    pub udp_sends: AtomicU64,
    pub udp_recvs: AtomicU64,
    /// Cookie replies sent (one send each) while under handshake load.
    pub cookie_replies: AtomicU64,
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
    /// Send errors on this socket: each socket's first is logged, with its errno, then every
    /// thousandth.
    pub send_errors: RateLimit,
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

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("tunnel", &self.cfg.tunnel.name)
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
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
                send_errors: RateLimit::default(),
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
                send_errors: RateLimit::default(),
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
                    config_paths(&cfg, pc),
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
        let (hooks, hook_queue) = match crate::hooks::Hooks::new(&cfg.hooks) {
            Some((h, q)) => (Some(h), Some(q)),
            None => (None, None),
        };
        Ok(Tunnel {
            acceptor: Acceptor::new(
                &cfg.peers,
                keys.private.clone(),
                listening_base,
                random_source()?,
            ),
            routes: Routes::new(&cfg.peers),
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
            rx_beat: AtomicU64::new(0),
            hooks,
            hook_queue: Mutex::new(hook_queue),
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
        self.io_drop(DropReason::SendError, 1);
        let s = &self.sockets[peer.socket(path)];
        if let Some(n) = s.send_errors.hit() {
            warn!(peer = %peer.cfg.name, path = %self.path_name(peer, path), socket = %s.name,
                error = %e, errno = e.raw_os_error().unwrap_or(0), failed = n, "send failed");
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
}

impl Tunnel {
    /// With `-v`: every 5 s, a line per path (state, RTT, loss, rate and throughput each way),
    /// so that an operator sees the tunnel work without asking. Idle without debug logging.
    pub async fn summaries(self: std::sync::Arc<Self>) -> anyhow::Result<()> {
        if tracing::level_filters::LevelFilter::current() < tracing::Level::DEBUG {
            return std::future::pending().await;
        }
        let every = std::time::Duration::from_secs(5);
        let mut throughput = crate::status::Throughput::default();
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            let st = self.status();
            for r in throughput.rates(&st, every.as_secs_f64()) {
                let p = r.path;
                tracing::debug!(
                    peer = %r.peer.name,
                    path = %p.name,
                    state = %p.state,
                    rtt_ms = p.rtt_us.map_or(-1.0, |r| r as f64 / 1000.0),
                    loss_pct = p.loss_pct,
                    rate_mbps = p.rate_bps.map_or(-1.0, |r| r as f64 / 1e6),
                    tx_mbps = r.tx_bps / 1e6,
                    rx_mbps = r.rx_bps / 1e6,
                    "path summary"
                );
            }
        }
    }

    /// Every peer's resequencer hold times and occupancy (for the metrics' histograms).
    pub fn reseq_histograms(&self) -> Vec<crate::metrics::ReseqHistograms> {
        self.peers
            .iter()
            .filter_map(|p| {
                let ep = p.lock();
                let t = &ep.as_ref()?.stats().total;
                Some((
                    p.cfg.name.clone(),
                    t.hold_time_ns.clone(),
                    t.occupancy.clone(),
                ))
            })
            .collect()
    }

    /// Feed the systemd watchdog (`WatchdogSec=`) every half of its interval, while the
    /// receive loop turns; a stalled datapath goes unfed, and systemd restarts the service.
    /// Returns at once without a watchdog.
    pub async fn watchdog(self: std::sync::Arc<Self>) -> anyhow::Result<()> {
        let mut usec = 0u64;
        if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
            return std::future::pending().await;
        }
        let every = std::time::Duration::from_micros(usec / 2);
        let stale_ms = (usec / 2000).max(2000);
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let now_ms = self.clock.now().as_nanos() / 1_000_000;
            let beat = self.rx_beat.load(std::sync::atomic::Ordering::Relaxed);
            if now_ms.saturating_sub(beat) <= stale_ms {
                notify_nonblocking(b"WATCHDOG=1");
            } else {
                warn!(
                    stalled_ms = now_ms - beat,
                    "the receive loop has not turned: the watchdog is not fed"
                );
            }
        }
    }
}

/// Send `msg` to systemd's notify socket without ever blocking a worker: a manager that does
/// not read (or a full queue) loses the message, as a missed watchdog ping would be.
fn notify_nonblocking(msg: &[u8]) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let addr = match path.to_str().and_then(|p| p.strip_prefix('@')) {
        Some(abstract_name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name.as_bytes())
        }
        None => SocketAddr::from_pathname(&path),
    };
    let Ok(addr) = addr else { return };
    if let Ok(sock) = UnixDatagram::unbound() {
        if sock.set_nonblocking(true).is_ok() {
            let _ = sock.send_to_addr(msg, &addr);
        }
    }
}
