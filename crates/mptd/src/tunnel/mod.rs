//! The state the daemon's tasks share: the peers (each with its protocol engine, an
//! `Connection`, behind its own lock), the sockets (one per `[[listen]]`, then one per
//! `[[path]]`), the TUN device, the routes between them, and the counters of the I/O
//! around them.
//!
//! Lock rule: a peer's lock is held only to call into its endpoint, never across a system call
//! or an await, and never two at once; the AEAD work is done outside it (the endpoint's
//! `Sealer` and `Opener`). What an endpoint asks for (control datagrams to send, events to
//! log) is gathered into an [`Outputs`] under the lock and acted on after.
//!
//! Each part has one owner: the sockets ([`Sockets`], `socket.rs`), the peers and the routes to
//! them ([`Peers`], `peers.rs`), the kernel's routes and which peer carries a shared prefix
//! ([`KernelRoutes`], `kernel.rs`), the counters ([`Counters`], `counters.rs`). Here the
//! wiring between them and sending; taking initiations in `accept.rs`, the endpoints' settings
//! in `settings.rs`, logging what the endpoints report in `events.rs`, applying a changed
//! configuration in `reload.rs`, the status in `status.rs`, uplinks in `uplinks.rs`, the
//! watchdog and `-v` summaries in `service.rs`.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use anyhow::{Context, Result};
use mpt_core::seal::CipherChoice;
use mpt_core::{PathId, Time};
use mpt_tunnel::{Connection, DropReason, Event, Overhead, Transmit};
use tracing::warn;

use crate::batch::BatchSocket;
use crate::clock::Clock;
use crate::config::{Config, Keys};
use crate::peer::Peer;
use crate::peer::RxBuf;

mod accept;
mod budget;
mod counters;
mod events;
mod kernel;
mod peers;
mod reload;
mod resolve;
mod service;
mod settings;
mod socket;
mod status;
mod uplinks;

pub use accept::Arrival;
pub use budget::Budgets;
pub use counters::{Calls, Counters};
pub use kernel::{DefaultRoute, KernelRoutes};
pub use peers::{PeerTable, Peers};
use settings::{config_paths, random_source, Placement, Settings};
pub use socket::{send_on, way, SockIo, Sockets};

/// Everything the tasks share.
pub struct Tunnel {
    /// The configuration running now ([`Tunnel::cfg`]): the one read at start, or the last
    /// reload's.
    config: ArcSwap<Config>,
    pub clock: Clock,
    /// One per `[[listen]]`, then one per `[[path]]` ([`Sockets`]).
    pub socks: Sockets,
    /// The tx task moved an endpoint's next timer earlier (a bundle is due): the rx task,
    /// which runs the timers, looks again.
    pub timers_moved: tokio::sync::Notify,
    /// The address families of a dual-stack path's interface changed: the resolver looks
    /// the peers' names up and chooses their paths' addresses again at once.
    pub resolve_now: tokio::sync::Notify,
    /// One reload at a time.
    reload_turn: Mutex<()>,
    /// The peers, the routes to them, and the many-peer side of the protocol ([`Peers`]).
    pub peers: Peers,
    /// What follows the peers going up and down: the kernel's routes, a full tunnel's default
    /// route, and which peer carries each shared prefix ([`KernelRoutes`]).
    pub kernel: KernelRoutes,
    /// The TUN device's queues (one unless `tunnel.queues` says more): the tx task of each
    /// reads its own; the rx task writes to the first.
    pub tun: Vec<tun_rs::AsyncDevice>,
    /// Where the prefix before an inner packet ends (every endpoint's).
    pub prefix: usize,
    /// The largest datagram a valid peer sends.
    pub max_datagram: usize,
    /// What the tunnel counts outside the endpoints ([`Counters`]).
    pub counters: Counters,
    /// Held by a tx task from numbering a batch until it has been sent (several TUN queues).
    pub send_turn: tokio::sync::Mutex<()>,
    /// When the receive loop last turned (the clock's milliseconds): the systemd watchdog is
    /// fed only while it does.
    pub rx_beat: AtomicU64,
    /// The operator's `[hooks]`, and the queue their task takes (once) at start.
    pub hooks: crate::hooks::Hooks,
    /// Where the stream paths' frames meet ([`crate::stream::Hub`]).
    pub streams: crate::stream::Hub,
    /// The paths' data budgets (`budget.rs`).
    pub budgets: Budgets,
}

/// What the endpoints asked for while locked, to be done once the lock is released.
#[derive(Debug, Default)]
pub struct Outputs {
    /// (peer, what to send, its bytes)
    pub transmits: Vec<(usize, Transmit, Vec<u8>)>,
    /// Buffers of datagrams sent, for the next ones.
    pub spare: Vec<Vec<u8>>,
    pub events: Vec<(usize, Event)>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("tunnel", &self.cfg().tunnel.name)
            .field("peers", &self.peers.list().len())
            .finish_non_exhaustive()
    }
}

impl Tunnel {
    /// Set up the sockets, the peers and the TUN device. Fails with a message naming what is
    /// wrong.
    pub fn new(cfg: Config, keys: &Keys) -> Result<Tunnel> {
        let clock = Clock::new();
        let socks = open_sockets(&cfg)?;
        let settings = Settings {
            cfg: &cfg,
            private: &keys.private,
            aes_in_hardware: mpt_core::seal::aes_in_hardware(),
            unix_nanos_at_zero: clock.unix_nanos_at_zero(),
        };
        let mut peers = Vec::with_capacity(cfg.peers.len());
        let mut prefix_len = None;
        for i in 0..cfg.peers.len() {
            let psk = keys.psks.get(i).cloned().flatten();
            let random = match cfg.listening(&cfg.peers[i]) {
                true => None,
                false => Some(random_source()?),
            };
            let at = Placement {
                position: i,
                entry: i,
            };
            let peer = settings.build_peer(at, psk, random, &socks, clock.now());
            if let Some(c) = peer.lock().as_ref() {
                prefix_len = Some((c.prefix(), c.max_datagram()));
            }
            peers.push(Arc::new(peer));
        }
        let mut endpoint = mpt_tunnel::Endpoint::new(keys.private.clone(), random_source()?);
        endpoint.set_listening(settings.listening());
        let overhead = Overhead::new(cfg.security.cipher.is_some(), false);
        let (prefix, max_datagram) = prefix_len.unwrap_or((
            overhead.prefix(),
            usize::from(cfg.tunnel.mtu) + overhead.datagram(),
        ));
        let tun = crate::net::tun_device(&cfg.tunnel)?;
        let hooks = crate::hooks::Hooks::new(&cfg.hooks);
        let slots: Vec<(usize, &crate::config::PeerConfig)> =
            cfg.peers.iter().enumerate().collect();
        let shared = crate::standby::shared(&slots, &[]);
        Ok(Tunnel {
            peers: Peers::new(peers, endpoint, &shared),
            kernel: KernelRoutes::new(shared, crate::fulltunnel::FullTunnel::of(&cfg)),
            prefix,
            max_datagram,
            clock,
            socks,
            timers_moved: tokio::sync::Notify::new(),
            resolve_now: tokio::sync::Notify::new(),
            reload_turn: Mutex::new(()),
            tun,
            counters: Counters::default(),
            send_turn: tokio::sync::Mutex::new(()),
            rx_beat: AtomicU64::new(0),
            hooks,
            streams: crate::stream::Hub::default(),
            budgets: Budgets::default(),
            config: ArcSwap::from_pointee(cfg),
        })
    }

    /// The configuration running now.
    pub fn cfg(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.load()
    }

    /// The sockets now: the `[[listen]]` sockets, then the `[[path]]`s' in order.
    pub fn sockets(&self) -> Arc<Vec<Arc<SockIo>>> {
        self.socks.all()
    }

    /// Socket `i` of [`Tunnel::sockets`], if there is one now (a reload may have removed it).
    pub fn socket(&self, i: usize) -> Option<Arc<SockIo>> {
        self.socks.get(i)
    }

    /// Whether (and how) datagrams are sealed.
    pub fn sealing(&self) -> Option<CipherChoice> {
        self.cfg().security.cipher
    }

    /// Gather what peer `i`'s endpoint asks for at `now` (under its lock).
    pub fn gather(ep: &mut Connection<RxBuf>, now: Time, i: usize, out: &mut Outputs) {
        let mut buf = out.spare.pop().unwrap_or_default();
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            out.transmits.push((i, t, buf));
            buf = out.spare.pop().unwrap_or_default();
        }
        out.spare.push(buf);
        while let Some(e) = ep.poll_event() {
            out.events.push((i, e));
        }
    }

    /// Send the gathered control datagrams and log the events (without any lock).
    pub fn act(&self, out: &mut Outputs) {
        let peers = self.peers.list();
        for (i, t, buf) in out.transmits.drain(..) {
            if let Some(peer) = peers.get(i) {
                self.send(peer, &t, &buf);
            }
            out.spare.push(buf);
        }
        for (i, e) in out.events.drain(..) {
            self.log_event(i, &e);
        }
    }

    /// We are stopping: a goodbye on every path of every peer, so that the peers take our
    /// paths down at once rather than after `dead_ms` of silence.
    pub fn say_goodbye(&self) {
        let peers = self.peers.list();
        self.goodbye(&peers, 0..peers.len(), self.clock.now());
    }

    /// A goodbye at `now` on every path of the peers at slot positions `which` of `peers`.
    fn goodbye(&self, peers: &[Arc<Peer>], which: impl IntoIterator<Item = usize>, now: Time) {
        let mut out = Outputs::default();
        for i in which {
            if let Some(ep) = peers[i].lock().as_mut() {
                ep.close(now);
                Tunnel::gather(ep, now, i, &mut out);
            }
        }
        self.act(&mut out);
    }

    /// Send one datagram of `peer` on `path` now, or count it as lost (a full socket buffer
    /// drops a control datagram rather than wait).
    pub fn send(&self, peer: &Peer, t: &Transmit, datagram: &[u8]) {
        let path = t.path;
        let Some(s) = self.socket(peer.socket(path)) else {
            self.io_drop(DropReason::SendError, 1);
            return;
        };
        let way = socket::way(&s, t.destination);
        if !matches!(way, crate::stream::Way::Udp) {
            if socket::send_on(&self.counters, &way, datagram) {
                peer.sent_one(path, t.kind, datagram.len());
            }
            return;
        }
        match s.io.try_send(datagram, t.destination, peer.source(path)) {
            Ok(()) => {
                s.wire.sent(t.destination, 1, datagram.len());
                peer.sent_one(path, t.kind, datagram.len());
            }
            // a control datagram too big for the route is a path MTU probe of a size that
            // does not pass: discovery's answer, not a drop
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                peer.note_too_big(path, datagram.len());
            }
            Err(e) => self.send_failed(peer, path, datagram.len(), &e),
        }
    }

    /// Sending a datagram of `len` bytes on `path` failed with `e`: counted (and logged now and
    /// then); one the kernel found too big goes to path MTU discovery.
    pub fn send_failed(&self, peer: &Peer, path: PathId, len: usize, e: &std::io::Error) {
        self.io_drop(DropReason::SendError, 1);
        if e.raw_os_error() == Some(libc::EMSGSIZE) {
            peer.note_too_big(path, len);
        }
        let Some(s) = self.socket(peer.socket(path)) else {
            return;
        };
        if let Some(n) = s.send_errors.hit() {
            warn!(peer = %peer.cfg().name, path = %self.path_name(peer, path), socket = %s.name(),
                error = %e, errno = e.raw_os_error().unwrap_or(0), failed = n, "send failed");
        }
    }

    /// Count `n` drops for `reason` outside the endpoints ([`Counters::io_drop`]).
    pub fn io_drop(&self, reason: DropReason, n: u64) -> Option<u64> {
        self.counters.io_drop(reason, n)
    }

    /// The clock's milliseconds now.
    fn now_ms(&self) -> u64 {
        self.clock.now().as_nanos() / 1_000_000
    }

    /// Ask again which peer carries each shared prefix ([`KernelRoutes::reconsider`]).
    pub fn reconsider_shared(&self) {
        let failback = self.cfg().tunnel.failback;
        self.kernel
            .reconsider(&self.peers, failback, self.now_ms(), &self.hooks);
    }

    /// Install the kernel's routes that the peers up want, remove the others
    /// ([`KernelRoutes::sync`]). Runs `ip`: call it off the datapath.
    pub fn sync_kernel_routes(&self) {
        self.kernel.sync(&self.cfg().tunnel, &self.peers.list());
    }

    /// The name of `peer`'s `path`: our `[[path]]`'s, or `p<N>` for a listening peer's.
    pub fn path_name(&self, peer: &Peer, path: PathId) -> String {
        match (peer.listening, self.cfg().paths.get(path.index())) {
            (false, Some(p)) => p.name.clone(),
            _ => format!("p{path}"),
        }
    }
}

/// The sockets of `cfg`: one per `[[listen]]`, then one per `[[path]]`.
fn open_sockets(cfg: &Config) -> Result<Sockets> {
    let mut sockets = Vec::with_capacity(cfg.paths.len() + cfg.listen.len());
    for (i, &a) in cfg.listen.iter().enumerate() {
        let io = BatchSocket::new(crate::net::listen_socket(i, a)?)
            .with_context(|| format!("listen[{i}]: cannot set up batched I/O"))?;
        let mut s = SockIo::new(None, format!("listen {a}"), io);
        if cfg.listen_tcp.contains(&a) {
            s.stream = Some(SockIo::listening(a, &format!("listen[{i}]"))?);
        }
        sockets.push(Arc::new(s));
    }
    let listen_sockets = sockets.len();
    for p in &cfg.paths {
        sockets.push(Arc::new(SockIo::for_path(p)?));
    }
    Ok(Sockets::new(sockets, listen_sockets))
}
