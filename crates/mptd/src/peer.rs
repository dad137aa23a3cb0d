//! One peer: its configuration, its protocol engine ([`Connection`], behind its own lock, made
//! at start or, for a peer that comes to our `[[listen]]` sockets, by its first initiation),
//! and which socket each of its paths leaves by.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use mpt_core::seal::Psk;
use mpt_core::{PathId, Time, MAX_PATHS};
use mpt_tunnel::Connection;

use crate::config::PeerConfig;

/// A peer of the tunnel.
#[derive(Debug)]
pub struct Peer {
    /// Its `[[peer]]` ([`Peer::cfg`]): a reload may change its name, `allowed` or endpoint.
    cfg: ArcSwap<PeerConfig>,
    /// A reload removed it: its slot holds this until a new peer takes it (no endpoint, no
    /// routes, not in the status).
    pub retired: bool,
    /// Its position in the config, plus one: the low 16 bits of every index its endpoint draws.
    pub slot: u16,
    pub psk: Option<Psk>,
    /// It comes to our `[[listen]]` sockets with paths of its own (as many as its initiation
    /// says); otherwise it uses our `[[path]]`s.
    pub listening: bool,
    ep: Mutex<Option<Connection<RxBuf>>>,
    /// Per path: the socket it leaves by (a listening peer's: where it last arrived).
    path_socket: Vec<AtomicUsize>,
    /// Per path of a listening peer: the local address its datagrams were sent to, which
    /// answers leave from (a listen socket bound to a wildcard address may have several).
    path_source: Mutex<Vec<Option<std::net::IpAddr>>>,
    /// Per path: datagrams and bytes sent.
    tx: Vec<(AtomicU64, AtomicU64)>,
    /// Per path: of those, control datagrams (keepalives, reports, handshakes, probes...) and
    /// their bytes.
    tx_control: Vec<(AtomicU64, AtomicU64)>,
    /// When the endpoint's next timer is due (nanoseconds of [`Time`]; `u64::MAX`: none), kept
    /// so that the receive task finds the next deadline without taking every peer's lock.
    deadline: AtomicU64,
    /// The peer is up (it made a session, or a path of it is up) as the hooks and a full
    /// tunnel's route were last told; it is down again when no path of it is left up.
    pub up: std::sync::atomic::AtomicBool,
    /// When it last went up (the clock's milliseconds), and whether it went down after it had
    /// been up: for the failback hold of a peer that shares a prefix ([`crate::standby`]).
    pub up_since_ms: AtomicU64,
    pub failed: std::sync::atomic::AtomicBool,
    /// Datagrams the kernel refused as too big (EMSGSIZE): path and size, for the endpoint's
    /// path MTU discovery the next time it is locked ([`Peer::apply_too_big`]).
    too_big: std::sync::Mutex<Vec<(PathId, usize)>>,
    /// What the TUN reads routed to it cut TCP super-packets to: what its connection said
    /// when it last numbered a batch ([`mpt_tunnel::Connection::segment_sizes`]).
    pub fit: crate::fit::Fit,
    /// Its endpoint's host name as last looked up, and when its paths' addresses were
    /// chosen (`crate::families`).
    pub resolved: Mutex<crate::families::Resolved>,
}

impl Peer {
    /// A peer of slot `slot`; `ep` is its endpoint when made at start, `sockets` the socket of
    /// each of its paths then.
    pub fn new(
        cfg: PeerConfig,
        slot: u16,
        psk: Option<Psk>,
        listening: bool,
        ep: Option<Connection<RxBuf>>,
        sockets: &[usize],
    ) -> Peer {
        let n = MAX_PATHS;
        let p = Peer {
            cfg: ArcSwap::from_pointee(cfg),
            retired: false,
            slot,
            psk,
            listening,
            path_socket: (0..n)
                .map(|i| AtomicUsize::new(sockets.get(i).copied().unwrap_or(0)))
                .collect(),
            tx: (0..n)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            tx_control: (0..n)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            path_source: Mutex::new(if listening { vec![None; n] } else { Vec::new() }),
            deadline: AtomicU64::new(u64::MAX),
            up: std::sync::atomic::AtomicBool::new(false),
            up_since_ms: AtomicU64::new(0),
            failed: std::sync::atomic::AtomicBool::new(false),
            too_big: std::sync::Mutex::new(Vec::new()),
            fit: crate::fit::Fit::default(),
            resolved: Mutex::new(crate::families::Resolved::default()),
            ep: Mutex::new(None),
        };
        if let Some(ep) = ep {
            p.deadline.store(ep.poll_timeout().as_nanos(), Relaxed);
            *p.lock() = Some(ep);
        }
        p
    }

    /// A slot whose peer a reload removed: nothing reaches it, until a new peer takes the slot.
    pub fn retired(cfg: PeerConfig, slot: u16) -> Peer {
        Peer {
            retired: true,
            ..Peer::new(cfg, slot, None, false, None, &[])
        }
    }

    /// The kernel refused a datagram of `size` bytes on `path` as larger than its route's MTU.
    pub fn note_too_big(&self, path: PathId, size: usize) {
        let mut v = self.too_big.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() < 64 {
            v.push((path, size));
        }
    }

    /// Tell the endpoint (locked by the caller) what the kernel refused as too big.
    pub fn apply_too_big(&self, ep: &mut Connection<RxBuf>, now: mpt_core::Time) {
        let taken = std::mem::take(&mut *self.too_big.lock().unwrap_or_else(|p| p.into_inner()));
        for (path, size) in taken {
            ep.datagram_too_big(now, path, size);
        }
    }

    /// Its `[[peer]]` now.
    pub fn cfg(&self) -> arc_swap::Guard<Arc<PeerConfig>> {
        self.cfg.load()
    }

    /// A reload changed its `[[peer]]` (its key, preshared key and mode stay).
    pub fn set_cfg(&self, cfg: PeerConfig) {
        self.cfg.store(Arc::new(cfg));
    }

    /// The endpoint, locked (`None` until a listening peer's first initiation): see the lock
    /// rule in [`crate::tunnel`].
    pub fn lock(&self) -> MutexGuard<'_, Option<Connection<RxBuf>>> {
        // A panic while holding the lock is a bug elsewhere; the state is still usable.
        self.ep.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Note the endpoint's next deadline (call with the lock held, after using it).
    /// Keep `ep`'s next timer; returns whether it moved earlier.
    pub fn note_deadline(&self, ep: &Connection<RxBuf>) -> bool {
        let next = ep.poll_timeout().as_nanos();
        self.deadline.swap(next, Relaxed) > next
    }

    pub fn deadline(&self) -> Time {
        Time::from_nanos(self.deadline.load(Relaxed))
    }

    /// The socket `path` leaves by.
    pub fn socket(&self, path: PathId) -> usize {
        self.path_socket
            .get(path.index())
            .map_or(0, |s| s.load(Relaxed))
    }

    /// A listening peer's `path` was heard at socket `s`, sent to our address `to`: answers go
    /// out there, from that address.
    pub fn arrived(&self, path: PathId, s: usize, to: Option<std::net::IpAddr>) {
        if let Some(slot) = self.path_socket.get(path.index()) {
            slot.store(s, Relaxed);
        }
        if to.is_some() && self.listening {
            let mut src = self.path_source.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(x) = src.get_mut(path.index()).filter(|x| **x != to) {
                *x = to;
            }
        }
    }

    /// Our `[[path]]`s' sockets now (a reload changed them): path `i` leaves by `sockets[i]`;
    /// what was counted as sent on a path that is new at its id starts again.
    pub fn set_path_sockets(&self, sockets: &[usize], fresh: &[usize]) {
        for (i, slot) in self.path_socket.iter().enumerate() {
            slot.store(sockets.get(i).copied().unwrap_or(0), Relaxed);
        }
        for &i in fresh {
            if let Some((d, b)) = self.tx_control.get(i) {
                d.store(0, Relaxed);
                b.store(0, Relaxed);
            }
            if let Some((d, b)) = self.tx.get(i) {
                d.store(0, Relaxed);
                b.store(0, Relaxed);
            }
        }
    }

    /// The address answers on `path` leave from (a listening peer's), if one is known.
    pub fn source(&self, path: PathId) -> Option<std::net::IpAddr> {
        if !self.listening {
            // our own paths' sockets send from their own addresses: no lock on the hot path
            return None;
        }
        let src = self.path_source.lock().unwrap_or_else(|p| p.into_inner());
        src.get(path.index()).copied().flatten()
    }

    /// `n` datagrams of `bytes` bytes in all left on `path`.
    pub fn sent(&self, path: PathId, n: usize, bytes: usize) {
        if let Some((d, b)) = self.tx.get(path.index()) {
            d.fetch_add(n as u64, Relaxed);
            b.fetch_add(bytes as u64, Relaxed);
        }
    }

    /// A datagram of `bytes` of `kind` sent on `path`: counted as sent, and as control
    /// when it is.
    pub fn sent_one(&self, path: PathId, kind: mpt_tunnel::TransmitKind, bytes: usize) {
        self.sent(path, 1, bytes);
        if kind == mpt_tunnel::TransmitKind::Control {
            if let Some((d, b)) = self.tx_control.get(path.index()) {
                d.fetch_add(1, Relaxed);
                b.fetch_add(bytes as u64, Relaxed);
            }
        }
    }

    /// Control datagrams and their bytes sent on `path` (of [`Peer::tx`]).
    pub fn tx_control(&self, path: PathId) -> (u64, u64) {
        self.tx_control
            .get(path.index())
            .map_or((0, 0), |(d, b)| (d.load(Relaxed), b.load(Relaxed)))
    }

    /// Datagrams and bytes sent on `path`.
    pub fn tx(&self, path: PathId) -> (u64, u64) {
        self.tx
            .get(path.index())
            .map_or((0, 0), |(d, b)| (d.load(Relaxed), b.load(Relaxed)))
    }
}

/// A received data datagram on its way to the TUN device, the inner packet at `start..end` of
/// it. In order, it stays in the receive slice it arrived in and is written out before that
/// slice is reused; only a datagram the resequencer holds is copied into a buffer of its own.
#[derive(Debug)]
pub enum RxBuf {
    /// At `at` in receive slice `slice`.
    Slice {
        slice: usize,
        at: usize,
        start: usize,
        end: usize,
    },
    Own {
        buf: Vec<u8>,
        start: usize,
        end: usize,
    },
}

impl RxBuf {
    /// The datagram up to the inner packet's end (the prefix before the packet included).
    pub fn bytes<'a>(&'a self, slices: &'a [Vec<u8>]) -> &'a [u8] {
        match self {
            RxBuf::Slice { slice, at, end, .. } => &slices[*slice][*at..*at + *end],
            RxBuf::Own { buf, end, .. } => &buf[..*end],
        }
    }

    pub fn start(&self) -> usize {
        match self {
            RxBuf::Slice { start, .. } | RxBuf::Own { start, .. } => *start,
        }
    }
}
