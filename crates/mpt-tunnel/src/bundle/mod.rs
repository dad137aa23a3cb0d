//! Bundling: while a path is busy, small packets wait in a bundle for it rather than in the
//! link's queue, and leave together in one datagram (`docs/protocol.md`, "Bundle").
//!
//! A packet is bundled when the scheduler's virtual clock says a datagram sent on its path now
//! would wait at least [`BUNDLE_MIN_WAIT`] behind what the path already carries. The bundle
//! leaves when that wait is nearly over ([`BUNDLE_MARGIN`] before, at most [`BUNDLE_MAX_HOLD`]
//! after it opened), when the next packet does not fit it, or before a packet that goes on the
//! same path unbundled. Its packets therefore wait no longer than the link's queue would have
//! kept them, and share one header, seal and outer header instead of paying one each.

mod recv;

pub(crate) use recv::Entries;

use std::time::Duration;

use mpt_core::seal::TAG_LEN;
use mpt_core::wire::{
    compresses, push_bundle_entry, push_compressed_entry, push_continuation, udp4_headers, Kind,
    BUNDLE_ENTRY_LEN, COMPRESSED_LEN, CONTINUATION_LEN, MAX_BUNDLE, MIN_HEAD_PIECE, UDP4_HEADERS,
};
use mpt_core::Time;

/// A packet is bundled when its path's queue would hold it at least this long anyway.
pub const BUNDLE_MIN_WAIT: Duration = Duration::from_millis(4);
/// A bundle leaves this long before its path's queue is expected to run empty, so that the
/// link does not idle while the driver's timer is late.
pub const BUNDLE_MARGIN: Duration = Duration::from_millis(2);
/// Longest a bundle is held, however far the path's virtual clock runs ahead.
pub const BUNDLE_MAX_HOLD: Duration = Duration::from_millis(100);

/// Packets waiting for a busy path.
#[derive(Debug, Clone)]
pub(crate) struct OpenBundle {
    /// Room for the header (and counter), then the entries.
    buf: Vec<u8>,
    /// The header's global sequence: the first entry's, or the continued packet's.
    first_seq: u32,
    /// The last entry's global sequence number (the continued packet's before any entry).
    last_seq: u32,
    /// Entries (each takes a path sequence; a continuation takes none).
    count: usize,
    /// It starts with a continuation ([`Kind::Continued`]).
    continued: bool,
    /// Its last entry is a head piece: it is full.
    head: bool,
    /// The last entry's headers, if the next packet may be compressed against them
    /// ([`mpt_core::wire::udp4_headers`]).
    prev: Option<[u8; UDP4_HEADERS]>,
    /// When it leaves at the latest.
    pub(crate) due: Time,
    /// Its send timestamp, where it was fixed when the bundle opened
    /// (`Sending::bundle_stamp`); otherwise the time it leaves.
    stamp: Option<Time>,
}

/// How the next packet goes into a bundle it fits: compressed against the entry before it
/// (`squeeze`), and its own headers, once looked at.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Entry {
    squeeze: bool,
    own: Option<Option<[u8; UDP4_HEADERS]>>,
}

/// What [`OpenBundle::push`] added.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pushed {
    /// The packet's bytes in this bundle: all of it, or its head piece.
    pub(crate) head: usize,
    /// The bytes it added to the datagram.
    pub(crate) bytes: usize,
    /// It is the bundle's first entry (it pays for the datagram).
    pub(crate) first: bool,
    /// It went without its IPv4 and UDP headers.
    pub(crate) squeezed: bool,
    /// Its index among the bundle's entries (its path sequence is the bundle's first plus it).
    pub(crate) index: usize,
}

/// A bundle's datagram, closed: its kind, its header's global sequence, its entries, and its
/// buffer (room for the header, then the body).
#[derive(Debug)]
pub(crate) struct Closed {
    pub(crate) kind: Kind,
    pub(crate) first_seq: u32,
    pub(crate) count: usize,
    pub(crate) buf: Vec<u8>,
    /// Its send timestamp, if fixed when it opened.
    pub(crate) stamp: Option<Time>,
}

/// A datagram's room: `prefix` bytes of header (and counter), then at most `cap` of body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    pub(crate) prefix: usize,
    pub(crate) cap: usize,
}

/// When a bundle leaves: its send timestamp, if fixed when it opens (else when it leaves), and
/// when it is due at the latest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    pub(crate) stamp: Option<Time>,
    pub(crate) due: Time,
}

/// How a packet goes into a bundle: in pieces, and whether the peer takes compressed entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct How {
    pub(crate) pieces: bool,
    pub(crate) compress: bool,
}

impl OpenBundle {
    /// An empty bundle, leaving as `times` says, of a datagram with `room`: one that continues
    /// packet `continues` (its last pieces), or one whose first entry will be global sequence
    /// `seq`.
    pub(crate) fn new(room: Room, seq: u32, continues: Option<u32>, times: Times) -> OpenBundle {
        let Room { prefix, cap } = room;
        let Times { stamp, due } = times;
        let mut buf = Vec::with_capacity(prefix + cap + TAG_LEN);
        buf.resize(prefix, 0);
        OpenBundle {
            buf,
            first_seq: continues.unwrap_or(seq),
            last_seq: continues.unwrap_or(seq),
            count: 0,
            continued: continues.is_some(),
            head: false,
            prev: None,
            due,
            stamp,
        }
    }

    /// Its entries (a continuation not counted).
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Whether `packet`, global sequence `seq`, fits as the next entry of a datagram with
    /// `room` (as `how` says it goes: in pieces, it needs room for its head piece only), and
    /// how it goes: compressed against the entry before it when the peer takes compressed
    /// entries and their headers allow. `None` when it does not fit.
    pub(crate) fn fits(&self, seq: u32, packet: &[u8], how: How, room: Room) -> Option<Entry> {
        let How { pieces, compress } = how;
        let Room { prefix, cap } = room;
        let mut entry = Entry::default();
        if let (false, true, Some(prev)) = (pieces, compress, &self.prev) {
            let h = udp4_headers(packet);
            entry.squeeze = h.as_ref().is_some_and(|h| compresses(prev, h));
            entry.own = Some(h);
        }
        let gap = seq.wrapping_sub(self.last_seq).wrapping_sub(1);
        let room = cap.saturating_sub(self.buf.len() - prefix);
        let need = BUNDLE_ENTRY_LEN
            + if pieces {
                MIN_HEAD_PIECE
            } else if entry.squeeze {
                COMPRESSED_LEN + packet.len() - UDP4_HEADERS
            } else {
                packet.len()
            };
        let fits =
            !self.head && need <= room && self.count < MAX_BUNDLE && gap <= u32::from(u8::MAX);
        fits.then_some(entry)
    }

    /// Add `packet`, global sequence `seq`, as the next entry, as `entry` says (from
    /// [`OpenBundle::fits`]; the default for a bundle it was not tried in): whole, or as much
    /// of it as the room left (`room` as for `fits`) takes, its head piece.
    pub(crate) fn push(
        &mut self,
        seq: u32,
        packet: &[u8],
        entry: Entry,
        room: Room,
    ) -> Option<Pushed> {
        let Room { prefix, cap } = room;
        let first_entry = !self.continued && self.count == 0;
        let last = (!first_entry).then_some(self.last_seq);
        let room = cap.saturating_sub(self.buf.len() - prefix + BUNDLE_ENTRY_LEN);
        let before = self.buf.len();
        let squeezed = last.is_some() && entry.squeeze;
        // a compressed entry is whole: it fitted as such (the room may be short of the
        // packet's own length)
        let head = if squeezed {
            packet.len()
        } else {
            packet.len().min(room)
        };
        match last {
            Some(last) if squeezed => push_compressed_entry(&mut self.buf, last, seq, packet),
            _ => push_bundle_entry(&mut self.buf, last, seq, &packet[..head]),
        }?;
        self.prev = if head == packet.len() {
            entry.own.unwrap_or_else(|| udp4_headers(packet))
        } else {
            None
        };
        self.last_seq = seq;
        self.count += 1;
        self.head = head < packet.len();
        Some(Pushed {
            head,
            bytes: self.buf.len() - before,
            first: before == prefix,
            squeezed,
            index: self.count - 1,
        })
    }

    /// Add the piece of a packet that starts at `offset`, as much of `rest` (the packet from
    /// there on) as a datagram of `cap` bytes of body takes, to a bundle that continues it;
    /// returns the bytes taken.
    pub(crate) fn push_rest(&mut self, offset: usize, rest: &[u8], cap: usize) -> usize {
        let n = rest.len().min(cap - CONTINUATION_LEN);
        push_continuation(&mut self.buf, offset, &rest[..n]);
        self.head = n < rest.len();
        n
    }

    /// Close the bundle: a bundle of one whole packet is sent as the data datagram it would
    /// have been (its gap byte out).
    pub(crate) fn close(self, prefix: usize) -> Closed {
        let mut buf = self.buf;
        let kind = if self.continued {
            Kind::Continued
        } else if self.count == 1 && !self.head {
            buf.remove(prefix);
            Kind::Data
        } else {
            Kind::Bundle
        };
        Closed {
            kind,
            first_seq: self.first_seq,
            count: self.count,
            buf,
            stamp: self.stamp,
        }
    }
}
