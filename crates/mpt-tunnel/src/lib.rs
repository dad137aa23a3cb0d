//! The mptd protocol as a sans-IO engine, in the shape of quinn-proto: an [`Endpoint`] for the
//! many peers (which connection a datagram is for, and taking initiations: mac1, cookies, load,
//! rate limits, the responder's read, the peer table), and a [`Connection`] per peer session.
//! A connection numbers and seals what we send, opens and checks what arrives, runs the
//! handshake, the replay window, per-path liveness, fences, address learning, receiver
//! reports both ways, the scheduler and the resequencer; its features (bundles, classes,
//! equalisation, path MTU discovery, resending, parity, reassembly) are types of their own.
//!
//! It does no I/O, starts no thread and never reads the clock. Every input is a call that
//! takes `now`:
//!
//! * [`Connection::handle_datagram`]: a datagram arrived (opened outside already, or not). It
//!   returns one [`Outcome`], and appends what the resequencer releases, in the order to write
//!   it to the TUN device, held as the driver's [`Payloads`] makes it.
//! * [`Connection::number_batch`] (then [`Connection::batch_sent`]): packets to send, with
//!   what else leaves before and after them ([`BatchOut`]).
//! * [`Connection::handle_timeout`], when [`Connection::poll_timeout`] says.
//!
//! and every other output is polled: [`Connection::poll_transmit`] (control datagrams, in the
//! order they go), [`Connection::poll_event`], and [`Connection::take_delivered`] (packets
//! released by timers and other calls). Randomness comes from the caller too ([`Random`]). A
//! driver that keeps the connection behind a lock shared by its sending and receiving tasks
//! can seal ([`Sealer`]) and open ([`Opener`]) outside it. The daemon (`mptd`) drives it with
//! real sockets and a TUN device; the tests drive two of them over simulated links.
#![forbid(unsafe_code)]

mod bundle;
mod class;
mod connection;
mod control;
mod counts;
mod crypto;
mod drops;
mod endpoint;
mod equalise;
mod fec;
mod handshake;
mod hc;
mod icmp;
mod liveness;
mod open;
mod path;
mod pmtu;
mod reassembly;
mod recv;
mod resend;
mod send;
mod timers;

use std::net::SocketAddr;
use std::time::Duration;

pub use bundle::{BUNDLE_MARGIN, BUNDLE_MAX_HOLD, BUNDLE_MIN_WAIT};
pub use class::{
    classify, default_classes, protocol_number, ClassRule, Mode, PacketInfo, DSCP_EF, LIGHT_HOLD,
    LIGHT_QUEUE,
};
pub use connection::Connection;
pub use crypto::PREVIOUS_SESSION_KEPT;
pub use drops::{DropCounts, DropReason, Drops};
pub use endpoint::{
    Accepted, Admission, Endpoint, PeerEntry, Route, HANDSHAKES_PER_SECOND, HANDSHAKES_PER_SOURCE,
    LOAD_PER_SECOND,
};
pub use equalise::{MAX_LAG, MIN_LAG};
pub use fec::{group_size, FecRx, FecTx, Group, ParityCounts, Solved, FEC_OFF_LOSS, FEC_ON_LOSS};
pub use icmp::ICMP_PER_SECOND;
pub use icmp::{internet_checksum, too_big};
pub use liveness::LinkState;
pub use open::{Opened, Opener};
pub use path::PathInfo;
pub use pmtu::BASE_DATAGRAM;
pub use reassembly::{Piece, Reassembly, MAX_INCOMPLETE, MAX_PIECES};
pub use resend::{ResendBuffer, ResendCounts, KEEP_AFTER_LOSS, MAX_RESEND_GAP, RESEND_KEPT};
pub use send::{Sealer, SendError, COMPRESSED_HEADERS};

use mpt_core::seal::{CipherChoice, PrivateKey, Psk, PublicKey};
use mpt_core::PathId;
use mpt_reseq::PacketMeta;
use mpt_sched::SchedulerKind;

pub use mpt_core::wire::{Overhead, FRAMING};

/// Where randomness comes from: fills the buffer with unpredictable bytes (the kernel's
/// random source in the daemon, a seeded generator in tests).
pub type Random = Box<dyn FnMut(&mut [u8]) + Send>;

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
    /// [`FRAMING`] ([`Overhead::outer_link`]).
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
    /// connection draws are `slot` ([`index_slot`]).
    pub index_slot: Option<u16>,
    /// Our paths are the peer's (a peer that comes to a listen socket): when its initiation
    /// says it has more or fewer, ours follow ([`Connection::reconfigure`]), rather than the
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
    /// Traffic classes, the first that matches a packet deciding how it is sent
    /// ([`ClassRule`]; the configured ones, then usually [`default_classes`]).
    pub classes: Vec<ClassRule>,
}

impl ConnectionConfig {
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

impl ConnectionConfig {
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
}

/// The slot of the connection a datagram's `session` field (an index drawn with
/// [`ConnectionConfig::index_slot`]) is for.
pub fn index_slot(session: u32) -> u16 {
    session as u16
}

/// What numbering a batch gives besides the batch's own datagrams
/// ([`Connection::number_batch`]), in the order it goes. Kept by the driver from batch to batch.
#[derive(Debug, Default)]
pub struct BatchOut {
    /// Datagrams (bundles the batch closed, and their parity) that leave on their paths before
    /// the batch's datagrams.
    pub before: Vec<Transmit>,
    /// Datagrams that leave once the batch's have: copies of `duplicate` classes and of small
    /// packets on a path data woke from idle, parity its packets completed, and on a path
    /// where a bundle the batch closed was numbered after datagrams already in the batch,
    /// that bundle and what the batch numbered on the path after it.
    pub after: Vec<Transmit>,
    /// ICMP "too big" answers to packets the tunnel cannot carry (a peer that takes no
    /// pieces), for the TUN device: at most [`ICMP_PER_SECOND`].
    pub icmp: Vec<Vec<u8>>,
}

impl BatchOut {
    pub fn clear(&mut self) {
        self.before.clear();
        self.after.clear();
        self.icmp.clear();
    }
}

/// What became of a datagram given to [`Connection::handle_datagram`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Data (a data datagram, a bundle, pieces), authentic and well formed: this many inner
    /// packets went to the resequencer with it (those it completed included; a piece brings
    /// none until its packet is whole).
    Data(usize),
    /// A control message (or a handshake message), acted on.
    Handled,
    /// Dropped and counted.
    Dropped(DropReason),
}

impl Outcome {
    /// What a receive step's result comes to.
    pub(crate) fn of(r: Result<Outcome, DropReason>) -> Outcome {
        r.unwrap_or_else(Outcome::Dropped)
    }
}

/// What a datagram's dispatch found, before its packets go to the resequencer.
#[derive(Debug)]
pub(crate) enum Arrived {
    /// A data datagram: its inner packet lies at `packet` in the buffer.
    Data(Incoming),
    /// A bundle's (or continued datagram's) whole packets, in the order they were packed.
    Bundle(Vec<Incoming>),
    /// A control or handshake message, acted on.
    Handled,
}

/// How the driver holds the inner packets it receives (`P`, a buffer or where one lies), for
/// [`Connection::handle_datagram`]: the resequencer may hold a packet past the batch whose
/// receive buffers the driver reuses.
pub trait Payloads<P> {
    /// The inner packet of a data datagram, at `packet` in `datagram` (the buffer handed to
    /// [`Connection::handle_datagram`]), where it may stay while the batch lasts.
    fn in_datagram(&mut self, datagram: &[u8], packet: std::ops::Range<usize>) -> P;
    /// An inner packet of its own, `packet` (the inner packet alone): a bundle's entry, a
    /// packet put together from pieces, or one a parity made again.
    fn own(&mut self, packet: &[u8]) -> P;
    /// The resequencer holds `p` past the batch: `p`, its bytes its own (`datagram` as for
    /// [`Payloads::in_datagram`]).
    fn keep(&mut self, p: P, datagram: &[u8]) -> P;
    /// A buffer for a packet the connection holds (a compressed body, rebuilt where it is
    /// released), given back with [`Payloads::adopt`]; its contents do not matter.
    fn buffer(&mut self) -> Vec<u8> {
        Vec::new()
    }
    /// The inner packet at `packet` in `buf` (from [`Payloads::buffer`]), at least
    /// [`Connection::prefix`] bytes in: `buf` held as it is, or the packet copied
    /// ([`Payloads::own`]).
    fn adopt(&mut self, buf: Vec<u8>, packet: std::ops::Range<usize>) -> P {
        self.own(&buf[packet])
    }
}

/// Inner packets held as vectors of their own bytes (for simple drivers and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct Copies;

impl Payloads<Vec<u8>> for Copies {
    fn in_datagram(&mut self, datagram: &[u8], packet: std::ops::Range<usize>) -> Vec<u8> {
        datagram[packet].to_vec()
    }

    fn own(&mut self, packet: &[u8]) -> Vec<u8> {
        packet.to_vec()
    }

    fn keep(&mut self, p: Vec<u8>, _: &[u8]) -> Vec<u8> {
        p
    }
}

/// A received data packet on its way to the resequencer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Incoming {
    pub meta: PacketMeta,
    /// Where the inner packet lies in the datagram's buffer (it always starts at
    /// [`Connection::prefix`]).
    pub packet: std::ops::Range<usize>,
    /// Sent express ([`mpt_core::wire::Kind::Express`]): delivered at once, not in order.
    pub express: bool,
    /// Sent again because we asked ([`mpt_core::wire::Kind::Resent`]): it fills its gap but
    /// says nothing of the path it came on.
    pub resent: bool,
    /// An express packet that opens a TCP connection (SYN without ACK): it waits to match the
    /// farthest path like bonded data (`equalise.rs`).
    pub opens: bool,
    /// Put together from pieces: never its flow's reference for compressed headers (the
    /// sender does not make one of a packet it cuts; [`crate::hc`]).
    pub pieces: bool,
}

/// A control datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub destination: SocketAddr,
    pub contents: Vec<u8>,
}

/// Why a path went down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownReason {
    /// Nothing valid arrived on it for this long (`dead_ms` or more).
    Silent(Duration),
    /// The peer said goodbye: it is stopping.
    PeerClosed,
    /// Our uplink for the path cannot carry anything (the driver said so:
    /// [`Connection::set_uplink`]).
    Uplink(UplinkDown),
    /// The peer's keepalives on it say that it hears nothing from us there (we hear it: the
    /// path works one way only). We send no data on it until they say otherwise.
    PeerHearsNothing,
}

/// Why our uplink for a path cannot carry anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UplinkDown {
    /// The interface does not exist (not yet, or no longer).
    Absent,
    /// The interface exists but its link is down (no carrier, or set down).
    LinkDown,
    /// The operator set the path down (`mptctl path NAME down`).
    Administrative,
}

impl DownReason {
    /// How the status document says it.
    pub fn describe(&self) -> String {
        match self {
            DownReason::Silent(d) => format!("nothing heard for {} ms", d.as_millis()),
            DownReason::PeerClosed => "the peer stopped".into(),
            DownReason::Uplink(u) => u.name().into(),
            DownReason::PeerHearsNothing => "the peer hears nothing from us on it".into(),
        }
    }
}

impl UplinkDown {
    pub fn name(self) -> &'static str {
        match self {
            UplinkDown::Absent => "interface absent",
            UplinkDown::LinkDown => "link down",
            UplinkDown::Administrative => "set down by the operator",
        }
    }
}

/// Something the daemon may want to log or act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A path delivers: for the first time (`again` false) or after being down.
    PathUp {
        path: PathId,
        again: bool,
    },
    PathDown {
        path: PathId,
        reason: DownReason,
    },
    /// We sent an initiation on every path whose remote we know (`attempt` counts from 1 since
    /// the last session was made).
    HandshakeSent {
        attempt: u32,
        /// To renew the keys of a session that works (its age reached `rekey_after`).
        rekey: bool,
    },
    /// A handshake made the first session with the peer: `session` is our index, `cipher` how
    /// data is sealed (`None`: in the clear).
    PeerAuthenticated {
        path: PathId,
        session: u32,
        cipher: Option<mpt_core::seal::Cipher>,
    },
    /// A handshake replaced the session the peer still had (a rekey, or a handshake after a
    /// silence): new keys and indices, the same sequence numbers, nothing reset.
    Rekeyed {
        path: PathId,
        old: u32,
        session: u32,
    },
    /// A handshake replaced the session with one the peer started afresh (it restarted). The
    /// resequencer was reset.
    NewSession {
        path: PathId,
        old: u32,
        session: u32,
        cipher: Option<mpt_core::seal::Cipher>,
    },
    /// The peer is under load and sent a cookie: our initiations prove our address with it
    /// (`again`: the initiation went again at once with it).
    CookieReceived {
        path: PathId,
        again: bool,
    },
    /// A handshake with the peer failed in a way the operator should hear about.
    HandshakeRefused {
        path: PathId,
        reason: DropReason,
    },
    /// The peer's initiation said it has `to` paths, not `from`: our paths follow (the peer
    /// reloaded its configuration), the session goes on.
    PeerPathsChanged {
        from: usize,
        to: usize,
    },
    /// Authenticated datagrams of a path come from a new address (NAT rebinding,
    /// renumbering); what we send on the path goes there from now on.
    AddressChanged {
        path: PathId,
        old: SocketAddr,
        new: SocketAddr,
    },
}
