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
//! and every other output is polled: [`Connection::poll_transmit`] (datagrams outside a batch,
//! in the order they go, each written into the caller's buffer with its [`TransmitKind`]),
//! [`Connection::poll_event`], and [`Connection::take_delivered`] (packets released by timers
//! and other calls). In steady traffic none of these allocates (`tests/allocations.rs`). Randomness comes from the caller too ([`Random`]). A
//! driver that keeps the connection behind a lock shared by its sending and receiving tasks
//! can seal ([`Sealer`]) and open ([`Opener`]) outside it. The daemon (`mptd`) drives it with
//! real sockets and a TUN device; the tests drive two of them over simulated links.
#![forbid(unsafe_code)]

mod bundle;
mod bundling;
mod class;
mod compress;
mod connection;
mod control;
mod counts;
mod crypto;
mod drops;
mod endpoint;
mod equalise;
mod events;
mod fastest;
mod fec;
mod footprint;
mod handshake;
mod hc;
mod held;
mod icmp;
mod limits;
mod liveness;
mod negotiate;
mod numbering;
mod open;
mod ordered;
mod out;
mod pace;
mod parity;
mod path;
mod pending;
mod pmtu;
mod reassembly;
mod receiving;
mod recv;
mod report;
mod resend;
mod resending;
mod send;
mod sending;
mod session;
mod settings;
mod ticks;
mod timers;

/// Drivers for the cargo-fuzz targets (`fuzz/`), also run on their corpora by the suite.
#[doc(hidden)]
pub mod fuzz;

use std::net::SocketAddr;

pub use bundle::{BUNDLE_MARGIN, BUNDLE_MAX_HOLD, BUNDLE_MIN_WAIT};
pub use class::{
    classify, default_classes, protocol_number, ClassRule, Mode, PacketInfo, DSCP_EF, LIGHT_BURST,
    LIGHT_HOLD, LIGHT_QUEUE,
};
pub use compress::{COMPRESSED_HEADERS, COMPRESSED_HEADERS_V6};
pub use connection::Connection;
pub use crypto::Sealer;
pub use crypto::PREVIOUS_SESSION_KEPT;
pub use drops::{DropCounts, DropReason, Drops};
pub use endpoint::{Accepted, Admission, Endpoint, PeerEntry, Route};
pub use equalise::{MAX_LAG, MIN_LAG};
pub use events::{DownReason, Event, UplinkDown};
pub use fec::{group_size, FecRx, FecTx, Group, ParityCounts, Solved, FEC_OFF_LOSS, FEC_ON_LOSS};
pub use footprint::{Footprint, MAX_AWAITING, MAX_REFERENCES};
pub use icmp::ICMP_PER_SECOND;
pub use icmp::{internet_checksum, too_big};
pub use limits::{HANDSHAKES_PER_SECOND, HANDSHAKES_PER_SOURCE, LOAD_PER_SECOND};
pub use liveness::LinkState;
pub use open::{Opened, Opener};
pub use pace::{PACE_HOLD_MAX, PACE_LIMIT};
pub use path::{PathInfo, STREAM_DEAD};
pub use pmtu::BASE_DATAGRAM;
pub use reassembly::{Piece, Reassembly, MAX_INCOMPLETE, MAX_PIECES};
pub use resend::{
    MaxAge, ResendBuffer, ResendCounts, KEEP_AFTER_LOSS, MAX_RESEND_GAP, RESEND_BYTES, RESEND_KEPT,
};
pub use send::SendError;
pub use settings::{
    idle_dead, ConnectionConfig, KeySettings, PathSettings, Transport, IDLE_AFTER, REKEY_AFTER,
    WAKE_COPY_MAX,
};

use mpt_core::PathId;
use mpt_reseq::PacketMeta;

pub use mpt_core::wire::{Overhead, FRAMING};

/// Where randomness comes from: fills the buffer with unpredictable bytes (the kernel's
/// random source in the daemon, a seeded generator in tests).
pub type Random = Box<dyn FnMut(&mut [u8]) + Send>;

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
    pub before: Vec<Datagram>,
    /// Datagrams that leave once the batch's have: copies of `duplicate` classes and of small
    /// packets on a path data woke from idle, parity its packets completed, and on a path
    /// where a bundle the batch closed was numbered after datagrams already in the batch,
    /// that bundle and what the batch numbered on the path after it.
    pub after: Vec<Datagram>,
    /// ICMP "too big" answers to packets the tunnel cannot carry (a peer that takes no
    /// pieces), for the TUN device: at most [`ICMP_PER_SECOND`].
    pub icmp: Vec<Vec<u8>>,
    /// The batch's bonded packets that pacing held (`crate::pace`), by index in the batch:
    /// none of them was numbered, and they are to be offered again, in this order, ahead of
    /// what is read later.
    pub held: Vec<usize>,
    /// When to offer them again (while `held` has some).
    pub paced_until: Option<mpt_core::Time>,
}

impl BatchOut {
    pub fn clear(&mut self) {
        self.before.clear();
        self.after.clear();
        self.icmp.clear();
        self.held.clear();
        self.paced_until = None;
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

/// Where a datagram arrived: on which path, and from which address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Via {
    pub path: PathId,
    pub from: std::net::SocketAddr,
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

/// What a driver that cuts TCP super-packets into segments ([`Connection::segment_sizes`])
/// needs of one peer's connection: the largest inner packet a path's datagram carries whole,
/// what a TCP segment's IP and TCP headers take there when the connection compresses them,
/// and the largest packet once every path that is up found its MTU (what a SYN's MSS is
/// clamped for). Each peer has its own: their paths may differ in MTU and in compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSizes {
    pub whole: usize,
    pub compressed: Option<usize>,
    pub settled: Option<usize>,
}

/// What a datagram carries, for the driver's byte counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransmitKind {
    /// Inner packets: a bundle, a copy, a parity.
    Data,
    /// The protocol's own: reports, keepalives and their answers, resend requests, MTU probes,
    /// goodbyes, handshake messages.
    Control,
}

/// A datagram to send that [`Connection::poll_transmit`] wrote into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub path: PathId,
    pub destination: SocketAddr,
    pub kind: TransmitKind,
}

/// A datagram to send in a buffer of its own ([`BatchOut::before`], [`BatchOut::after`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub path: PathId,
    pub destination: SocketAddr,
    pub kind: TransmitKind,
    pub contents: Vec<u8>,
}
