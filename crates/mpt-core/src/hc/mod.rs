//! Inner header compression for TCP over IPv4 and IPv6 (the format is in `docs/protocol.md`,
//! "Compressed headers").
//!
//! Each side keeps, per flow, a *reference*: the headers of the last packet of the flow that
//! went whole (not compressed) in global order, in the flow's context (a slot chosen by a hash
//! of its addresses and ports, the same at both ends). A later packet of the flow goes as a
//! *compressed* body: the context, its distance in global sequence numbers from the
//! reference, the fields that differ from the reference's (deltas or values), the TCP checksum
//! and the payload. Every [`REFRESH_EVERY`]th packet of a flow goes whole again, and becomes
//! its reference. The decompressor runs where packets leave the resequencer, in global order:
//! a reference is always stored before the packets that use it, whichever paths they took. A
//! compressed packet names its reference by global sequence number, so one whose reference
//! was lost or replaced is refused (and counted), never rebuilt against another.
//!
//! Both sides take `gseq`, the packet's global sequence number, from the caller; neither
//! reads a clock.

mod decompress;
mod encode;
mod format;

use crate::checksum::internet_checksum;
pub use decompress::{Decompressor, Refused, KEPT_REFERENCES};
use encode::{encode, Divisor, Form, RefName};
use format::*;
pub use format::{flow_hash, is_compressed, is_tcp, Format, Headers};

/// First byte of a compressed body in version 6 ([`Format::V6`]).
pub const COMPRESSED_TCP: u8 = 0x20;
/// Top two bits of the first byte of a compressed body in version 7 ([`Format::V7`]), its
/// context in the other six: no IP version.
pub const COMPACT_TCP: u8 = 0x80;
/// The shortest packet that is compressed, or becomes a reference: shorter ones (a flow's
/// acknowledgements, the tail of a burst) save little, and were each a reference, a flow's
/// references would come so often that the receiver could keep too few of them to rebuild a
/// packet resent a round trip later.
pub const COMPRESS_FROM: usize = 256;
/// Contexts each side keeps: a flow's is a hash of its addresses and ports; a flow that
/// falls in a busy one takes it over.
pub const CONTEXTS: usize = 64;
/// Packets of a flow sent against one reference before the next goes whole as a new one (a
/// reference given up by the resequencer costs at most this many of the flow's packets). A
/// flow whose compressed header has no room left to grow gets one sooner. With 128, one TCP
/// flow over four clean paths carried 1408 bytes of payload a datagram instead of 1399, but
/// paced, a BBR flow's headers outgrew their 13 bytes ten times as often (segments held
/// while the flow's fields moved on), each such packet going whole, in pieces.
pub const REFRESH_EVERY: u32 = 64;
/// The farthest a compressed packet may be from its reference, in global sequence numbers
/// (two bytes of distance).
pub const MAX_DISTANCE: u32 = 0x3fff;
/// Most bytes of headers a reference keeps: IPv6 (40) and TCP with timestamps (32).
pub const MAX_HEADERS: usize = 72;
/// Most bytes a compressed header takes: marker, context, distance (2), mask, IP ID (3),
/// sequence, acknowledgement (5 each), window (2), flags (1), timestamps (5 each), checksum (2).
pub const MAX_COMPRESSED: usize = 38;

/// A flow's reference: the headers of its last packet that went whole in order, and that
/// packet's global sequence number.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Its flow's context.
    ctx: u8,
    /// Its flow's [`flow_hash`].
    flow: u32,
    layout: Layout,
    headers: [u8; MAX_HEADERS],
    gseq: u32,
    /// Packets compressed against it.
    uses: u32,
}

impl Reference {
    /// The reference `p` makes when it goes whole in order as global sequence `gseq`, if it
    /// is TCP the scheme compresses (and, since protocol version 6, of [`COMPRESS_FROM`] bytes
    /// or more: the caller checks).
    pub fn of(gseq: u32, p: &[u8]) -> Option<Reference> {
        let layout = layout(p)?;
        let mut headers = [0; MAX_HEADERS];
        headers[..layout.headers()].copy_from_slice(&p[..layout.headers()]);
        let flow = hash_of(p, layout.ip);
        Some(Reference {
            ctx: (flow as usize % CONTEXTS) as u8,
            flow,
            layout,
            headers,
            gseq,
            uses: 0,
        })
    }

    /// Its flow's context.
    pub fn context(&self) -> usize {
        usize::from(self.ctx)
    }

    /// The global sequence number of the packet it is of.
    pub fn gseq(&self) -> u32 {
        self.gseq
    }
}

/// The references of the flows one side knows, by context: none are allocated until the
/// first is kept (a peer that is idle, or never compresses, holds none; 7 KiB once it does).
#[derive(Debug, Clone, Default)]
struct Contexts(Vec<Option<Reference>>);

impl Contexts {
    fn get(&self, ctx: u8) -> Option<&Reference> {
        self.0.get(usize::from(ctx))?.as_ref()
    }

    fn get_mut(&mut self, ctx: u8) -> Option<&mut Reference> {
        self.0.get_mut(usize::from(ctx))?.as_mut()
    }

    /// `r` becomes its flow's reference, unless its context holds a later one (a packet
    /// delivered late).
    fn store(&mut self, r: Reference) {
        if self.0.is_empty() {
            self.0 = vec![None; CONTEXTS];
        }
        let slot = &mut self.0[r.context()];
        if slot
            .as_ref()
            .is_some_and(|c| (c.gseq.wrapping_sub(r.gseq) as i32) > 0)
        {
            return;
        }
        *slot = Some(r);
    }

    fn reset(&mut self) {
        self.0.iter_mut().for_each(|c| *c = None);
    }
}

/// Counts a compressor keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxCounts {
    /// Packets sent compressed.
    pub compressed: u64,
    /// Packets that went whole in order and became their flow's reference.
    pub references: u64,
    /// Header bytes the compressed packets did not carry.
    pub saved_bytes: u64,
    /// TCP packets sent whole because of IP options, fragments, TCP options other than
    /// timestamps, or urgent data.
    pub uncompressible: u64,
    /// References the peer asked for (lost on the way), forgotten: the flow's next packet went
    /// whole as its new one.
    pub forgotten: u64,
    /// Packets of a flow with a reference that went whole because compressed they did not fit
    /// the room either (a header longer than the driver counted for it, or a smaller path).
    pub too_long: u64,
}

/// The sending side: one per connection and direction.
#[derive(Debug, Clone, Default)]
pub struct Compressor {
    contexts: Contexts,
    counts: TxCounts,
    /// The last flow compressed (its addresses and ports) and its context: a bulk flow's
    /// packets come in runs, and its context is not hashed again for each.
    last: Option<(FlowBytes, u8)>,
    /// Division by the last compressed segment's payload length.
    by: Divisor,
}

/// A flow's addresses and ports as they lie in its packets, in words (IPv4's in the first
/// two).
type FlowBytes = [u64; 5];

fn flow_bytes(p: &[u8], l: Layout) -> FlowBytes {
    let ports = u64::from(be32(p, l.ip));
    if l.v6() {
        [be64(p, 8), be64(p, 16), be64(p, 24), be64(p, 32), ports]
    } else {
        [be64(p, 12), ports, 0, 0, 0]
    }
}

impl Compressor {
    pub fn new() -> Compressor {
        Compressor::default()
    }

    pub fn counts(&self) -> TxCounts {
        self.counts
    }

    /// Forget every flow (a new session: the peer's decompressor starts empty).
    pub fn reset(&mut self) {
        self.contexts.reset();
    }

    /// The compressed header for `p`, global sequence number `gseq`, to go in place of its
    /// first bytes (its IP and TCP headers) in a body of at most `room` bytes: when
    /// its flow has a reference it may use ([`MAX_DISTANCE`]; after [`REFRESH_EVERY`] packets,
    /// once one's header took all of `pad_to` bytes before padding, or once one came out
    /// longer and did not fit, only until one comes that fits `room` whole) and the result
    /// fits. `None`: send it whole,
    /// and tell [`Compressor::sent_whole`] if it goes in order.
    /// The header is in `format` (the session's version's), padded to `pad_to` bytes if
    /// shorter: a flow's segments of one size then make datagrams of one size, which UDP
    /// segmentation offload sends as one run. It is written to `out` (the caller's, so that it
    /// is not copied on its way), and the result is how many bytes it replaces.
    pub fn compress_into(
        &mut self,
        gseq: u32,
        p: &[u8],
        room: usize,
        format: Format,
        pad_to: usize,
        out: &mut Headers,
    ) -> Option<usize> {
        if p.len() < COMPRESS_FROM {
            return None;
        }
        let (l, ctx, same_flow) = match self.of_last_reference(p) {
            Some((l, ctx)) => (l, ctx, true),
            None => {
                let (l, ctx) = self.layout_and_context(p)?;
                (l, ctx, false)
            }
        };
        let r = self.contexts.get_mut(ctx)?;
        let distance = gseq.wrapping_sub(r.gseq);
        // a reference due again waits for a packet that goes whole in one datagram: one in
        // pieces would hold the packets after it until its last piece came
        let due = r.uses >= REFRESH_EVERY && p.len() <= room;
        let usable = r.layout == l
            && !due
            && (1..=MAX_DISTANCE).contains(&distance)
            && (same_flow || static_equal(p, &r.headers, l));
        if !usable {
            return None;
        }
        let name = RefName { ctx, distance };
        let form = Form { format, pad_to };
        let natural = encode(out, p, l, &r.headers, name, form, &mut self.by);
        if out.len() + p.len() - l.headers() > room {
            if pad_to > 0 && out.len() > pad_to {
                // what changed since the reference outgrew the room the segment was cut for:
                // the flow needs a new one (the driver cuts a burst's first segment to go
                // whole only for a flow that is not ready). A path too small for the
                // segment says nothing of the reference.
                r.uses = r.uses.max(REFRESH_EVERY);
            }
            self.counts.too_long += 1;
            return None;
        }
        r.uses += 1;
        if pad_to > 0 && natural >= pad_to {
            // no room left in the header to grow: the flow gets a new reference before a
            // change outgrows it
            r.uses = r.uses.max(REFRESH_EVERY);
        }
        self.counts.compressed += 1;
        self.counts.saved_bytes += (l.headers() - out.len()) as u64;
        Some(l.headers())
    }

    /// The layout and context of `p` (of [`COMPRESS_FROM`] bytes or more) when it is of the
    /// flow of the reference in the last context compressed against (a bulk flow's packets
    /// come in runs): its fields a compressed packet does not carry are the reference's, and
    /// those [`layout`] checks that are not among them pass (lengths, header checksum, no
    /// urgent data). So it is what [`layout`] and [`context_of`] would find, without hashing.
    fn of_last_reference(&self, p: &[u8]) -> Option<(Layout, u8)> {
        let (_, ctx) = self.last?;
        let r = self.contexts.get(ctx)?;
        let l = r.layout;
        let ok = static_equal(p, &r.headers, l)
            && if l.v6() {
                usize::from(be16(p, 4)) + 40 == p.len()
            } else {
                usize::from(be16(p, 2)) == p.len() && ipv4_header_sum_ok(p)
            }
            && p[l.ip + 13] & 0x20 == 0;
        ok.then_some((l, ctx))
    }

    /// The layout and context of `p` found afresh (the context hashed unless `p` is of the
    /// last flow compressed), the flow then the last one.
    fn layout_and_context(&mut self, p: &[u8]) -> Option<(Layout, u8)> {
        let l = layout(p)?;
        let flow = flow_bytes(p, l);
        let ctx = match self.last {
            Some((last, ctx)) if last.iter().zip(&flow).fold(0, |d, (a, b)| d | (a ^ b)) == 0 => {
                ctx
            }
            _ => {
                let ctx = context_of(p, l);
                self.last = Some((flow, ctx));
                ctx
            }
        };
        Some((l, ctx))
    }

    /// As [`Compressor::compress_into`], the header returned.
    pub fn compress(
        &mut self,
        gseq: u32,
        p: &[u8],
        room: usize,
        format: Format,
        pad_to: usize,
    ) -> Option<(Headers, usize)> {
        let mut h = Headers::new();
        let replaces = self.compress_into(gseq, p, room, format, pad_to, &mut h)?;
        Some((h, replaces))
    }

    /// `p` went whole, in order (data or a bundle's entry, not express), as global sequence
    /// `gseq`: TCP the scheme compresses becomes its flow's reference (the receiver's
    /// [`Decompressor::store`] does the same when it releases it). Returns whether it did.
    pub fn sent_whole(&mut self, gseq: u32, p: &[u8]) -> bool {
        if p.len() < COMPRESS_FROM {
            return false;
        }
        match Reference::of(gseq, p) {
            Some(r) => {
                self.counts.references += 1;
                self.contexts.store(r);
                true
            }
            None if is_tcp(p) => {
                self.counts.uncompressible += 1;
                false
            }
            None => false,
        }
    }

    /// Per context, the [`flow_hash`] of the flow whose packets numbered from global sequence
    /// `next` on may be compressed against the context's reference (0: none may). Its
    /// reference is not due again ([`REFRESH_EVERY`]), and is less than half of
    /// [`MAX_DISTANCE`] behind. A driver that cuts TCP segments for compressed headers cuts a
    /// burst's first segment to go whole instead, for a flow not named here: that segment
    /// becomes its reference, and the segments after it compress against it.
    pub fn ready(&self, next: u32, out: &mut [u32; CONTEXTS]) {
        for (ctx, o) in out.iter_mut().enumerate() {
            *o = self
                .contexts
                .get(ctx as u8)
                .filter(|r| r.uses < REFRESH_EVERY && next.wrapping_sub(r.gseq) <= MAX_DISTANCE / 2)
                .map_or(0, |r| r.flow);
        }
    }

    /// The reference sent as global sequence `gseq`, if it is still some flow's, was lost:
    /// forget it, so that the flow's next packet goes whole as its new one (and nothing more
    /// hangs on its resend). Returns whether it was.
    pub fn forget(&mut self, gseq: u32) -> bool {
        let Some(slot) = self
            .contexts
            .0
            .iter_mut()
            .find(|c| c.as_ref().is_some_and(|r| r.gseq == gseq))
        else {
            return false;
        };
        *slot = None;
        self.counts.forgotten += 1;
        true
    }

    /// Whether `p`, sent whole as global sequence `gseq`, is its flow's reference now.
    pub fn is_reference(&self, gseq: u32, p: &[u8]) -> bool {
        layout(p).is_some_and(|l| {
            self.contexts
                .get(context_of(p, l))
                .is_some_and(|r| r.gseq == gseq)
        })
    }
}

pub mod fuzz;

#[cfg(test)]
mod tests;
