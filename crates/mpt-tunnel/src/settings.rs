//! A connection's settings ([`ConnectionConfig`]): its paths, keys, timers and features, and
//! the constants their defaults come from.

use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::seal::{CipherChoice, PrivateKey, Psk, PublicKey};
use mpt_sched::SchedulerKind;

use crate::{ClassRule, Overhead};

/// What a connection needs to know about one path.
#[derive(Debug, Clone)]
pub struct PathSettings {
    pub name: String,
    /// Where the peer's socket for this path is, until authenticated datagrams say otherwise;
    /// `None`: unknown until the peer is heard on the path (the path is not used until then).
    pub remote: Option<SocketAddr>,
    pub weight: u32,
    pub rate_bps: Option<u64>,
    /// Used only while no other path is up.
    pub backup: bool,
    /// Its tier, 1 the highest ([`mpt_sched::PathSpec::priority`]).
    pub priority: u8,
    /// Bytes a datagram costs on the link beyond its UDP payload: outer IP + UDP and
    /// [`FRAMING`](crate::FRAMING) ([`Overhead::outer_link`]).
    pub overhead: usize,
    /// The user's cap on the path's MTU (outer IP packet bytes): discovery never goes above
    /// it. `None`: found by discovery alone.
    pub mtu: Option<u16>,
}

impl PathSettings {
    /// Its tier, backups last ([`mpt_sched::PathSpec::tier`]).
    pub fn tier(&self) -> u8 {
        if self.backup {
            u8::MAX
        } else {
            self.priority
        }
    }
}

/// How a path's datagrams travel, as the driver carries them ([`crate::Connection::set_path_transport`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// One UDP datagram each: they may be lost, reordered or cut by the path's MTU.
    #[default]
    Datagram,
    /// Length-prefixed on a TCP connection (or TLS on one): delivered whole and in order, any
    /// size, and resent by the transport. The engine resends nothing there, asks for nothing
    /// lost there, sends no parity there, does not search the path's MTU, waits longer before
    /// it calls the path dead ([`crate::path::STREAM_DEAD`]), and keeps light traffic off it
    /// while a datagram path is up.
    Stream,
}

/// Who we are, who the peer is, and how the session is sealed.
#[derive(Debug, Clone)]
pub struct KeySettings {
    /// Our host's private key.
    pub private: PrivateKey,
    /// The peer's public key: the only one whose handshakes we take.
    pub peer: PublicKey,
    /// The peer's pre-shared key, mixed into the handshake.
    pub psk: Option<Psk>,
    /// How data is sealed; `None`: in the clear (`encryption = "none"`; the handshake still
    /// authenticates both hosts).
    pub encryption: Option<CipherChoice>,
    /// This CPU has AES in hardware (an `auto` connection then offers AES-256-GCM).
    pub aes_in_hardware: bool,
    /// We start handshakes (we know where the peer is), and start again when the peer falls
    /// silent; otherwise we wait for the peer's.
    pub initiate: bool,
    /// Nanoseconds since the Unix epoch at `Time::ZERO`: handshake timestamps are wall-clock
    /// time, so that a restarted initiator's are later than its previous life's.
    pub unix_nanos_at_zero: u64,
    /// An initiator makes new keys when its session is this old ([`REKEY_AFTER`] by default),
    /// so that a key never seals more than this much time's traffic (forward secrecy within
    /// a long-lived tunnel). Not in the clear: there are no keys to renew.
    pub rekey_after: Duration,
}

/// A path that carried no data either way for this long is idle
/// ([`ConnectionConfig::idle_keepalive`]).
pub const IDLE_AFTER: Duration = Duration::from_secs(2);

/// Packets of at most this many bytes sent on a path data woke from idle are copied onto
/// another path until the peer is heard on it (pings, DNS, TCP handshakes, voice, a TLS
/// hello); larger ones are not.
pub const WAKE_COPY_MAX: usize = 600;

/// How long an idle path may be silent before it is down: three idle keepalives missed, and
/// `dead` besides.
pub fn idle_dead(idle_keepalive: Duration, dead: Duration) -> Duration {
    idle_keepalive * 3 + dead
}

/// The default of [`KeySettings::rekey_after`] (WireGuard's too).
pub const REKEY_AFTER: Duration = Duration::from_secs(120);

/// An connection's settings.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    pub paths: Vec<PathSettings>,
    pub scheduler: SchedulerKind,
    pub reorder_window: usize,
    pub reorder_timeout: Duration,
    pub keepalive: Duration,
    pub dead: Duration,
    /// A path that has carried no data either way for [`IDLE_AFTER`] is idle: one keepalive
    /// crosses it this often (from whichever end's turn comes first; the other answers), it is
    /// down after [`idle_dead`] of silence, and no MTU probe confirms its size. Data sent on an
    /// idle path wakes it: a keepalive goes at once, and until the peer is heard on it again
    /// (down if not within `dead`) a copy of each packet of up to [`WAKE_COPY_MAX`] bytes it
    /// carries goes on another path. `None`:
    /// paths are never idle (a keepalive every `keepalive` on every path without data).
    pub idle_keepalive: Option<Duration>,
    /// Largest inner packet. One larger than a path's datagram goes in pieces.
    pub mtu: u16,
    pub keys: KeySettings,
    /// A driver with many connections behind one socket finds a datagram's connection by the index
    /// in its `session` field: with `Some(slot)`, the low 16 bits of every index this
    /// connection draws are `slot` ([`index_slot`](crate::index_slot)).
    pub index_slot: Option<u16>,
    /// Our paths are the peer's (a peer that comes to a listen socket): when its initiation
    /// says it has more or fewer, ours follow ([`Connection::reconfigure`](crate::Connection::reconfigure)), rather than the
    /// handshake being refused.
    pub follow_peer_paths: bool,
    /// Pack small packets into bundles while their path is busy ([`mpt_core::wire::Kind::Bundle`]).
    pub bundle: bool,
    /// Recover what a path lost inside the tunnel: ask the peer for it, and send it again when
    /// the peer asks ([`mpt_core::wire::Kind::Nack`]). Used when both ends' handshakes say so.
    pub resend: bool,
    /// Send parity on paths that lose packets, and make lost packets again from it
    /// ([`mpt_core::wire::Kind::Parity`]). Used when both ends' handshakes say so, with
    /// `resend`.
    pub parity: bool,
    /// Bonded data that arrives on a nearer path waits to match the farthest path up
    /// (`equalise.rs`).
    pub equalise: bool,
    /// Send bulk TCP with its headers compressed ([`mpt_core::hc`]), in a session of version
    /// 6 (a receiver of version 6 always takes it).
    pub compress: bool,
    /// Pace bonded traffic: while every path it may take holds [`crate::PACE_LIMIT`] on the
    /// scheduler's clock, it waits in the sender (`rate` and `adaptive` only).
    pub pace: bool,
    /// Traffic classes, the first that matches a packet deciding how it is sent
    /// ([`ClassRule`]; the configured ones, then usually [`default_classes`](crate::default_classes)).
    pub classes: Vec<ClassRule>,
}

impl ConnectionConfig {
    /// Data is sealed.
    pub(crate) fn sealing(&self) -> bool {
        self.keys.encryption.is_some()
    }

    /// What a datagram adds to its inner packet, outer headers as over IPv4.
    pub(crate) fn overhead(&self) -> Overhead {
        Overhead::new(self.sealing(), false)
    }

    /// The largest datagram a valid peer sends: a full inner packet with its header (and
    /// counter and tag).
    pub(crate) fn max_datagram(&self) -> usize {
        usize::from(self.mtu) + self.overhead().datagram()
    }

    /// These settings over `n` paths of the peer's own (a peer that comes to our listen
    /// sockets): named `p0`, `p1`, ..., weight 1, no rate (learned), their remotes unknown
    /// until heard; the outer overhead our first path has, if any.
    pub fn with_peer_paths(&self, n: usize) -> ConnectionConfig {
        let overhead = self
            .paths
            .first()
            .map_or(Overhead::new(true, false).outer_link(), |p| p.overhead);
        ConnectionConfig {
            paths: (0..n)
                .map(|i| PathSettings {
                    name: format!("p{i}"),
                    remote: None,
                    weight: 1,
                    rate_bps: None,
                    backup: false,
                    priority: 1,
                    overhead,
                    mtu: None,
                })
                .collect(),
            ..self.clone()
        }
    }
}

impl PathSettings {
    /// The operator changed the path's weight, rate or backup flag (`None`: unchanged; a rate
    /// of `Some(None)`: none configured).
    pub(crate) fn set_spec(
        &mut self,
        weight: Option<u32>,
        rate_bps: Option<Option<u64>>,
        backup: Option<bool>,
    ) {
        if let Some(w) = weight {
            self.weight = w.max(1);
        }
        if let Some(r) = rate_bps {
            self.rate_bps = r;
        }
        if let Some(b) = backup {
            self.backup = b;
        }
    }
}

impl ConnectionConfig {
    /// The configuration a reload to `new` gives a running connection: `new`, but for what
    /// does not change without a restart (keys, `mtu`, the reorder window, the index slot);
    /// and whether its classes changed (by name, in order).
    pub(crate) fn reloaded(&self, new: ConnectionConfig) -> (ConnectionConfig, bool) {
        let names =
            |c: &ConnectionConfig| c.classes.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        let classes_changed = names(self) != names(&new);
        let keep = ConnectionConfig {
            keys: self.keys.clone(),
            mtu: self.mtu,
            reorder_window: self.reorder_window,
            index_slot: self.index_slot,
            ..new
        };
        (keep, classes_changed)
    }

    /// The largest datagram (UDP payload) worth having on path `i`: a whole inner packet of
    /// `mtu` bytes with its header (and counter and tag), below the path's MTU cap if any.
    pub fn datagram_ceiling(&self, i: usize) -> usize {
        let most =
            usize::from(self.mtu) + Overhead::new(self.keys.encryption.is_some(), false).datagram();
        let Some(p) = self.paths.get(i) else {
            return most;
        };
        let outer = match p.remote {
            Some(SocketAddr::V6(_)) => 48,
            _ => 28,
        };
        p.mtu
            .map_or(most, |m| most.min(usize::from(m).saturating_sub(outer)))
            .max(mpt_core::wire::HEADER_LEN + 64)
    }

    /// The scheduler of the paths (all usable until told otherwise).
    pub(crate) fn scheduler(&self) -> Box<dyn mpt_sched::Scheduler> {
        let cfg = self;
        let header = Overhead::new(cfg.keys.encryption.is_some(), false).datagram();
        let specs: Vec<mpt_sched::PathSpec> = cfg
            .paths
            .iter()
            .map(|p| {
                mpt_sched::PathSpec::new(p.weight, p.rate_bps, p.backup)
                    .with_priority(p.priority)
                    .with_overhead(header + p.overhead)
            })
            .collect();
        let mut sched = mpt_sched::build(cfg.scheduler, &specs);
        // The peer equalises what this end sends as this end equalises what it receives (the
        // same setting, on by default at both ends).
        if cfg.equalise && cfg.reorder_window > 0 {
            sched.equalised(crate::equalise::MAX_LAG);
        }
        if cfg.pace {
            sched.pace(Some(crate::pace::PACE_LIMIT));
        }
        sched
    }
}
