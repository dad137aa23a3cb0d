//! Losses recovered inside the tunnel: receiver-driven resending (`docs/protocol.md`, "Resend
//! requests").
//!
//! The receiver sees a path lose data datagrams as gaps in that path's sequence (paths are
//! FIFO). It names them in a resend request ([`Kind::Nack`]) on its fastest path at once; its
//! resequencer gives a gap up as soon as the progress rule does, and a resent packet that comes
//! after that is delivered late ([`crate::Connection::update_repair_wait`] says why), after the
//! TCP behind it and before the rest, which waits for it ([`crate::ordered`]). The
//! sender keeps the packets it sent lately, by path and path sequence, and sends each requested
//! one once more as [`Kind::Resent`] on the path where it arrives soonest (a large one on
//! another path than the one that lost it, when one carries it). A packet comes again only if it is still kept and not older than
//! the hold time: after that the receiver has given its gap up. A flow's reference (compressed
//! headers) comes again up to [`crate::hc::AWAIT_FOR`] old, as long as the packets compressed
//! against it wait for it, on two paths; and a reference asked for is forgotten, so that the
//! flow's next packet goes whole as its new one. The receiver also asks for a reference by its
//! global sequence number when a packet compressed against it comes and it has not
//! ([`crate::hc`]): its path sequence may never have been asked for. A packet sent in pieces is
//! kept whole by its head piece's path sequence, and goes again whole, on a path it fits.
//!
//! Keeping a copy of every packet costs the sender a copy into memory that is cold by the
//! time it is written again (a tenth of an unshaped AES-GCM tunnel's throughput): a path's
//! packets are kept only while the path loses some, from its first resend request on until
//! [`KEEP_AFTER_LOSS`] without one. The first loss of a path that lost nothing for that long
//! is not recovered.

use std::time::Duration;

use mpt_core::wire::{self, HeaderRepr, Kind, NackRange};
use mpt_core::{PathId, Time};
use mpt_reseq::{Gap, Resequencer};

/// Most packets kept for resending (the latest ones sent), small ones; large ones are
/// bounded by [`RESEND_BYTES`] first.
pub const RESEND_KEPT: usize = 4096;

/// Most bytes the kept packets' buffers take: 2730 packets of 1500 bytes, at 1 Gbit/s the
/// last 33 ms, at 100 Mbit/s the last 330 ms (the receiver asks for a loss within about its
/// path's round trip). It bounds a router's memory at full rate: 4 MiB, where 4096 full-size
/// packets took 6.
pub const RESEND_BYTES: usize = 4 << 20;

/// A path sequence gap longer than this is an outage, not a loss: it is not asked for (the
/// resend would come as a burst on top of the traffic that failed over).
pub const MAX_RESEND_GAP: u16 = 32;

/// How long a path's packets are kept for resending after the peer last asked for one of them.
pub const KEEP_AFTER_LOSS: Duration = Duration::from_secs(60);

/// The sender keeps a path's packets from the moment the first request for its losses reaches
/// it: what the path loses from then on is given up at the receiver the path's round trip
/// after that request went, and this later still covers the request's own wait on its way
/// (the receiver waits for the packets given up from then on: [`Resend::peer_keeps`]).
pub const KEEP_SETTLES: Duration = Duration::from_millis(10);

/// Per path, the path sequences whose global sequence is remembered (a power of two).
const PATH_SLOTS: usize = 4096;

/// A kept packet's buffer grows in steps of this many bytes ([`ResendBuffer::keep`]).
const KEPT_ROOM: usize = 512;

/// One packet kept: where it went first, when, and its bytes.
#[derive(Debug, Default)]
struct Kept {
    valid: bool,
    path: u8,
    path_seq: u16,
    seq: u32,
    sent: Time,
    /// Its flow's reference when sent: packets compressed against it wait for it.
    reference: bool,
    packet: Vec<u8>,
}

/// The packets sent lately, in a ring of slots filled in turn, and per path which slot each
/// path sequence's packet went to. The ring grows as it fills (an idle peer costs nothing),
/// to at most [`RESEND_KEPT`] slots and [`RESEND_BYTES`] in their buffers: at either bound it
/// goes round, and a packet that makes the buffers larger than that ends the ring after its
/// own slot (the oldest go). A slot's buffer is used again by the packets kept after it, so
/// that a steady stream allocates nothing once the ring went round.
#[derive(Debug, Default)]
pub struct ResendBuffer {
    kept: Vec<Kept>,
    /// The slot the next packet kept goes to (`kept.len()`: the ring grows, or goes round).
    next: usize,
    /// The bytes the slots' buffers take.
    bytes: usize,
    /// Per path: the slot of each path sequence's packet (modulo [`PATH_SLOTS`]).
    by_path: Vec<Vec<u16>>,
}

impl ResendBuffer {
    /// Packets kept to be sent again (at most [`RESEND_KEPT`]).
    pub fn kept(&self) -> usize {
        self.kept.iter().filter(|k| k.valid).count()
    }

    /// The bytes the kept packets' buffers take (at most [`RESEND_BYTES`]).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `packet`, global sequence `seq`, was sent at `now` on `path` as its path sequence
    /// `path_seq`; `reference`: as its flow's reference (compressed headers).
    pub fn keep(
        &mut self,
        path: PathId,
        path_seq: u16,
        seq: u32,
        now: Time,
        packet: &[u8],
        reference: bool,
    ) {
        let slot = self.slot_for(packet.len());
        let i = path.index();
        if self.by_path.len() <= i {
            self.by_path.resize_with(i + 1, Vec::new);
        }
        let map = &mut self.by_path[i];
        if map.is_empty() {
            map.resize(PATH_SLOTS, 0);
        }
        map[usize::from(path_seq) % PATH_SLOTS] = slot as u16;
        let k = &mut self.kept[slot];
        k.valid = true;
        k.path = path.0;
        k.path_seq = path_seq;
        k.seq = seq;
        k.sent = now;
        k.reference = reference;
        k.packet.clear();
        // room in steps of KEPT_ROOM: a slot that held a short packet has room for a longer
        // one next time round
        let had = k.packet.capacity();
        if had < packet.len() {
            k.packet
                .reserve_exact(packet.len().next_multiple_of(KEPT_ROOM));
        }
        k.packet.extend_from_slice(packet);
        self.bytes += k.packet.capacity() - had;
        if self.bytes > RESEND_BYTES {
            // the ring ends here: the slots after this one hold the oldest packets
            for k in self.kept.drain(slot + 1..) {
                self.bytes -= k.packet.capacity();
            }
        }
    }

    /// The slot a packet of `len` bytes goes to: the next, or a new one at the ring's end
    /// while it is within its bounds, or the first.
    fn slot_for(&mut self, len: usize) -> usize {
        let mut slot = self.next;
        if slot >= self.kept.len() {
            let room = len.next_multiple_of(KEPT_ROOM);
            if self.kept.len() < RESEND_KEPT && self.bytes + room <= RESEND_BYTES {
                self.kept.push(Kept::default());
                slot = self.kept.len() - 1;
            } else {
                slot = 0;
            }
        }
        self.next = slot + 1;
        slot
    }

    /// The slot of the packet `path` carried as `path_seq`, while it is there.
    fn slot(&self, path: PathId, path_seq: u16) -> Option<usize> {
        let map = self.by_path.get(path.index())?;
        let slot = usize::from(*map.get(usize::from(path_seq) % PATH_SLOTS)?);
        let k = self.kept.get(slot)?;
        (k.path == path.0 && k.path_seq == path_seq).then_some(slot)
    }

    /// The packet sent on `path` as `path_seq`, if still kept and sent within `max_age` of
    /// `now`: its global sequence, whether it was its flow's reference, and its bytes. Taken:
    /// it is resent once.
    pub fn take(
        &mut self,
        path: PathId,
        path_seq: u16,
        now: Time,
        max_age: MaxAge,
    ) -> Option<(u32, bool, &[u8])> {
        let slot = self.slot(path, path_seq)?;
        let k = &mut self.kept[slot];
        // a reference is waited for longer: the packets compressed against it wait for it
        let max_age = if k.reference {
            max_age.packet.max(max_age.reference)
        } else {
            max_age.packet
        };
        let fresh = now.saturating_since(k.sent) <= max_age;
        if !k.valid || !fresh {
            return None;
        }
        k.valid = false;
        Some((k.seq, k.reference, &k.packet))
    }

    /// The global sequence `path` carried as `path_seq`, while the buffer has its packet
    /// (resent or not).
    pub fn seq_of(&self, path: PathId, path_seq: u16) -> Option<u32> {
        self.slot(path, path_seq).map(|s| self.kept[s].seq)
    }

    /// Where the flow's reference of global sequence `seq` went, if it is still kept (and
    /// not resent yet): its path and path sequence. (Asked for only when a peer lost a
    /// reference: a search of the ring, newest first.)
    pub fn reference_sent(&self, seq: u32) -> Option<(PathId, u16)> {
        let n = self.kept.len();
        (1..=n)
            .map(|back| &self.kept[(self.next + n - back) % n])
            .find(|k| k.valid && k.reference && k.seq == seq)
            .map(|k| (PathId(k.path), k.path_seq))
    }
}

/// What resending did, per path (by the path that lost the packets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResendCounts {
    /// Path sequences the peer asked for.
    pub requested: u64,
    /// Packets sent again, and the bytes that cost on the links (outer headers included).
    pub resent: u64,
    pub resent_bytes: u64,
    /// Asked for but no longer kept (or older than the hold time): not sent again.
    pub missed: u64,
    /// Parities sent on the path (`fec/`), and their bytes on the links.
    pub parity_sent: u64,
    pub parity_bytes: u64,
}

/// What resending keeps per connection: the packets sent lately (the sender's half), the
/// gaps to ask for (the receiver's half), and what both did.
#[derive(Debug, Default)]
pub(crate) struct Resend {
    /// Packets sent lately, for the peer's resend requests.
    pub(crate) buffer: ResendBuffer,
    /// Path sequence gaps taken from the resequencer (a buffer kept between calls).
    gaps: Vec<Gap>,
    /// Gaps to ask for in the next resend request.
    asked: Vec<Gap>,
    /// What resending did, per path that lost the packets.
    per_path: Vec<ResendCounts>,
    /// Per path, the receiver's mirror of what the sender keeps: since when we have asked
    /// for its losses (the first request of a run of them, none [`KEEP_AFTER_LOSS`] apart),
    /// and when we last did.
    asking: Vec<Option<(Time, Time)>>,
    /// Resend requests sent, the path sequences they named, and their bytes on the links.
    nacks_sent: u64,
    nacked: u64,
    nack_bytes: u64,
}

impl Resend {
    /// Gaps to ask for and gaps asked for, not yet settled.
    pub(crate) fn gaps_held(&self) -> usize {
        self.gaps.len() + self.asked.len()
    }

    /// The gaps `reseq` saw since the last call are to be asked for: not those longer than
    /// [`MAX_RESEND_GAP`] (an outage), nor those `unasked` says need no asking (a one-packet
    /// gap a parity made again before the gap was seen; a gap on a stream path, whose
    /// transport resends its losses: its only gaps are what a broken connection took).
    pub(crate) fn collect_gaps<P>(
        &mut self,
        now: Time,
        reseq: &mut Resequencer<P>,
        unasked: impl Fn(&mpt_reseq::Gap) -> bool,
    ) {
        reseq.take_gaps(&mut self.gaps);
        for g in self.gaps.drain(..) {
            if g.count > MAX_RESEND_GAP || unasked(&g) {
                continue;
            }
            self.asked.push(g);
            let p = g.path.index();
            if self.asking.len() <= p {
                self.asking.resize(p + 1, None);
            }
            let a = &mut self.asking[p];
            *a = match *a {
                Some((since, last)) if now.saturating_since(last) <= KEEP_AFTER_LOSS => {
                    Some((since, now))
                }
                _ => Some((now, now)),
            };
        }
    }

    /// Whether a packet lost lately may come again: the sender keeps the packets of some path
    /// for resending (as far as the receiver can tell: it has asked for that path's losses
    /// for at least `settled` of that path, and last did less than [`KEEP_AFTER_LOSS`] ago),
    /// and one lost there is asked for soon enough to be sent again (`near`: the sender sends
    /// none older than the hold time). A path's first loss is not kept.
    pub(crate) fn peer_keeps(
        &self,
        now: Time,
        settled: impl Fn(usize) -> Duration,
        near: impl Fn(usize) -> bool,
    ) -> bool {
        self.asking.iter().enumerate().any(|(p, a)| {
            a.is_some_and(|(since, last)| {
                now.saturating_since(since) >= settled(p)
                    && now.saturating_since(last) <= KEEP_AFTER_LOSS
                    && near(p)
            })
        })
    }

    /// The gaps to ask for now, as ranges (none: `None`).
    pub(crate) fn take_asked(&mut self) -> Option<Vec<NackRange>> {
        if self.asked.is_empty() {
            return None;
        }
        Some(
            self.asked
                .drain(..)
                .map(|g| NackRange {
                    path: g.path,
                    first: g.first,
                    count: g.count as u8,
                })
                .collect(),
        )
    }

    /// A resend request naming `ranges` is sent.
    pub(crate) fn requested(&mut self, ranges: &[NackRange]) {
        self.nacks_sent += 1;
        self.nacked += ranges.iter().map(|r| u64::from(r.count)).sum::<u64>();
    }

    /// A resend request for `n` references, by their global sequence numbers, is going.
    pub(crate) fn references_requested(&mut self, n: usize) {
        self.nacks_sent += 1;
        self.nacked += n as u64;
    }

    /// A resend request took `bytes` on the link.
    pub(crate) fn request_sent(&mut self, bytes: usize) {
        self.nack_bytes += bytes as u64;
    }

    /// What resending did for the packets first sent on path `i`, of `paths`, to count in.
    pub(crate) fn counts_mut(&mut self, i: usize, paths: usize) -> &mut ResendCounts {
        if self.per_path.len() < paths {
            self.per_path.resize(paths, ResendCounts::default());
        }
        &mut self.per_path[i]
    }

    /// What resending did for the packets first sent on `path`.
    pub(crate) fn counts(&self, path: PathId) -> ResendCounts {
        self.per_path.get(path.index()).copied().unwrap_or_default()
    }

    /// Resend requests sent, and the path sequences they named; their bytes on the links.
    pub(crate) fn request_counts(&self) -> (u64, u64, u64) {
        (self.nacks_sent, self.nacked, self.nack_bytes)
    }
}

/// The whole packets of a data, bundle or continued datagram with `header` and plain `body`,
/// in the order of their path sequences: `f(path sequence, global sequence, packet)` for
/// each. A head piece (and a continuation) is no whole packet: the rest of it went in other
/// datagrams.
pub(crate) fn whole_packets(header: &HeaderRepr, body: &[u8], mut f: impl FnMut(u16, u32, &[u8])) {
    let entries = match header.kind {
        Kind::Data => return f(header.path_seq, header.seq, body),
        Kind::Bundle => wire::bundle_entries(body, header.seq),
        Kind::Continued => wire::continued_entries(body, header.seq),
        _ => return,
    };
    for (k, e) in entries.flatten().enumerate() {
        if !e.is_head() {
            let path_seq = header.path_seq.wrapping_add(k as u16);
            f(path_seq, e.seq, &e.packet(body));
        }
    }
}

/// How old a kept packet may be and still go again: any packet, and a flow's reference (the
/// packets compressed against it wait for it longer: 500 ms, `hc::AWAIT_FOR`).
#[derive(Debug, Clone, Copy)]
pub struct MaxAge {
    pub packet: Duration,
    pub reference: Duration,
}

#[cfg(test)]
mod tests;
