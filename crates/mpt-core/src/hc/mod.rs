//! Inner header compression for TCP over IPv4 and IPv6 (the format is in `docs/protocol.md`,
//! "Compressed headers").
//!
//! The compressor keeps, per flow, a *reference*: the whole headers of a packet it sent as a
//! reference datagram body (`[REFERENCE, context]` and the packet). A later packet of the flow
//! goes as a *compressed* body: the context, its distance in global sequence numbers from the
//! reference, the fields that differ from the reference's (deltas or values), the TCP checksum
//! and the payload. The decompressor runs where packets leave the resequencer, in global
//! order: a reference is always stored before the packets that use it, whichever paths they
//! took. A compressed packet names its reference by global sequence number, so one whose
//! reference was lost or replaced is refused (and counted), never rebuilt against another.
//!
//! Both sides take `gseq`, the packet's global sequence number, from the caller; neither
//! reads a clock.

use crate::wire::internet_checksum;

/// First byte of a reference body: the context number follows, then a whole IP packet.
pub const REFERENCE: u8 = 0x30;
/// First byte of a compressed body.
pub const COMPRESSED_TCP: u8 = 0x20;
/// Contexts a compressor keeps (the decompressor keeps as many): a flow past them evicts the
/// least recently used.
pub const CONTEXTS: usize = 64;
/// Packets of a flow sent against one reference before the next packet is sent as a new one
/// (a reference given up by the resequencer costs at most this many of the flow's packets).
pub const REFRESH_EVERY: u32 = 32;
/// Most bytes of headers a reference keeps: IPv6 (40) and TCP with timestamps (32).
pub const MAX_HEADERS: usize = 72;
/// Most bytes a compressed header takes: marker, context, distance (3), mask, IP ID (3),
/// sequence, acknowledgement (5 each), window (2), flags (1), timestamps (5 each), checksum (2).
pub const MAX_COMPRESSED: usize = 39;

/// A TCP flow's identity: IP version, addresses and ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    addrs: [u8; 32],
    ports: [u8; 4],
    v6: bool,
}

/// Where a compressible packet's fields lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    /// IP header length (20 for IPv4, 40 for IPv6).
    ip: usize,
    /// TCP header length (20, or 32 with only the timestamp option as NOP NOP TS).
    tcp: usize,
}

impl Layout {
    fn headers(self) -> usize {
        self.ip + self.tcp
    }
    fn v6(self) -> bool {
        self.ip == 40
    }
    fn timestamps(self) -> bool {
        self.tcp == 32
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The layout of `p` if it is a TCP packet this scheme compresses: IPv4 with a 20-byte header
/// whose checksum is right, not a fragment, or IPv6 with TCP as its next header; its length
/// field equal to its length; TCP without options or with only timestamps (NOP NOP TS), no
/// urgent data.
fn layout(p: &[u8]) -> Option<Layout> {
    let ip = match p.first()? >> 4 {
        4 => {
            let ok = p.len() >= 40
                && p[0] == 0x45
                && p[9] == 6
                && usize::from(be16(p, 2)) == p.len()
                && be16(p, 6) & 0x3fff == 0
                && internet_checksum(0, &[&p[..20]]) == 0;
            ok.then_some(20)?
        }
        6 => {
            let ok = p.len() >= 60 && p[6] == 6 && usize::from(be16(p, 4)) + 40 == p.len();
            ok.then_some(40)?
        }
        _ => return None,
    };
    let t = &p[ip..];
    let tcp = usize::from(t[12] >> 4) * 4;
    let urgent = t[13] & 0x20 != 0 || be16(t, 18) != 0;
    let options_ok = match tcp {
        20 => true,
        32 => t.len() >= 32 && t[20..24] == [1, 1, 8, 10],
        _ => false,
    };
    (options_ok && !urgent && t.len() >= tcp).then_some(Layout { ip, tcp })
}

/// Whether `p` is a TCP packet (IPv4 protocol or IPv6 next header 6).
fn is_tcp(p: &[u8]) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) => p.get(9) == Some(&6),
        Some(6) => p.get(6) == Some(&6),
        _ => false,
    }
}

fn flow_key(p: &[u8], l: Layout) -> FlowKey {
    let mut addrs = [0; 32];
    if l.v6() {
        addrs.copy_from_slice(&p[8..40]);
    } else {
        addrs[..8].copy_from_slice(&p[12..20]);
    }
    let mut ports = [0; 4];
    ports.copy_from_slice(&p[l.ip..l.ip + 4]);
    FlowKey {
        addrs,
        ports,
        v6: l.v6(),
    }
}

/// Whether `p`'s fields that a compressed packet does not carry equal `r`'s (both of layout
/// `l`): everything but the IP length, identification and checksum, and the TCP sequence,
/// acknowledgement, flags, window, checksum and timestamps.
fn same_static(p: &[u8], r: &[u8], l: Layout) -> bool {
    let ip_same = if l.v6() {
        p[..4] == r[..4] && p[6..40] == r[6..40]
    } else {
        p[0..2] == r[0..2] && p[6..10] == r[6..10] && p[12..20] == r[12..20]
    };
    let (t, u) = (&p[l.ip..], &r[l.ip..]);
    ip_same && t[..4] == u[..4] && t[12] == u[12] && t[18..20] == u[18..20]
}

/// LEB128 of `v` (at most 5 bytes) onto `out`.
fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A LEB128 value from `b` at `*at` (advanced), at most 5 bytes.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u32> {
    let mut v: u32 = 0;
    for i in 0..5 {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u32::from(byte & 0x7f).checked_shl(7 * i)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

// the mask byte: which fields follow, in this order
const M_ID: u8 = 0x01;
const M_SEQ: u8 = 0x02;
const M_ACK: u8 = 0x04;
const M_WIN: u8 = 0x08;
const M_FLAGS: u8 = 0x10;
const M_TSVAL: u8 = 0x20;
const M_TSECR: u8 = 0x40;

/// How the compressor sends a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packed {
    /// As it is: not TCP this scheme compresses.
    Plain,
    /// As a reference: `[REFERENCE, context]` before the whole packet.
    Reference { context: u8 },
    /// Compressed: `header` (at most [`MAX_COMPRESSED`] bytes) in place of the packet's first
    /// `replaces` bytes (its IP and TCP headers).
    Compressed { header: Vec<u8>, replaces: usize },
}

#[derive(Debug, Clone)]
struct TxContext {
    key: FlowKey,
    layout: Layout,
    /// The reference's headers.
    headers: [u8; MAX_HEADERS],
    /// The reference's global sequence number.
    gseq: u32,
    /// Packets compressed against it.
    uses: u32,
    /// When it was last used, in packets compressed (for eviction).
    last_used: u64,
}

/// Counts a compressor keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxCounts {
    /// Packets sent compressed.
    pub compressed: u64,
    /// Packets sent as references.
    pub references: u64,
    /// Header bytes the compressed packets did not carry.
    pub saved_bytes: u64,
    /// TCP packets sent whole because of IP options, fragments, TCP options other than
    /// timestamps or urgent data.
    pub uncompressible: u64,
}

/// The sending side: one per connection and direction.
#[derive(Debug, Clone, Default)]
pub struct Compressor {
    contexts: Vec<Option<TxContext>>,
    clock: u64,
    counts: TxCounts,
}

impl Compressor {
    pub fn new() -> Compressor {
        Compressor {
            contexts: vec![None; CONTEXTS],
            ..Compressor::default()
        }
    }

    pub fn counts(&self) -> TxCounts {
        self.counts
    }

    /// Forget every flow (a new session: the peer's decompressor starts empty).
    pub fn reset(&mut self) {
        self.contexts.iter_mut().for_each(|c| *c = None);
    }

    /// How to send `p`, a packet of global sequence number `gseq` that goes whole in a data
    /// datagram of its own (the numbers the compressor is given only grow, serially).
    pub fn pack(&mut self, gseq: u32, p: &[u8]) -> Packed {
        let Some(l) = layout(p) else {
            if is_tcp(p) {
                self.counts.uncompressible += 1;
            }
            return Packed::Plain;
        };
        self.clock += 1;
        let key = flow_key(p, l);
        let slot = match self
            .contexts
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.key == key))
        {
            Some(i) => i,
            None => self.evict(),
        };
        let ctx = self.contexts[slot].as_mut();
        let compressed = match ctx {
            Some(c)
                if c.layout == l
                    && c.uses < REFRESH_EVERY
                    && same_static(p, &c.headers, l)
                    && gseq.wrapping_sub(c.gseq).wrapping_sub(1) < 0x3fff =>
            {
                let header = encode(p, l, &c.headers, gseq.wrapping_sub(c.gseq), slot as u8);
                c.uses += 1;
                c.last_used = self.clock;
                Some(header)
            }
            _ => None,
        };
        match compressed {
            Some(header) => {
                self.counts.compressed += 1;
                self.counts.saved_bytes += (l.headers() - header.len()) as u64;
                Packed::Compressed {
                    header,
                    replaces: l.headers(),
                }
            }
            None => {
                let mut headers = [0; MAX_HEADERS];
                headers[..l.headers()].copy_from_slice(&p[..l.headers()]);
                self.contexts[slot] = Some(TxContext {
                    key,
                    layout: l,
                    headers,
                    gseq,
                    uses: 0,
                    last_used: self.clock,
                });
                self.counts.references += 1;
                Packed::Reference {
                    context: slot as u8,
                }
            }
        }
    }

    /// A free context, or the least recently used one.
    fn evict(&mut self) -> usize {
        if let Some(i) = self.contexts.iter().position(Option::is_none) {
            return i;
        }
        (0..self.contexts.len())
            .min_by_key(|&i| self.contexts[i].as_ref().map_or(0, |c| c.last_used))
            .unwrap_or(0)
    }
}

/// The compressed header of `p` (layout `l`) against reference headers `r`, `distance` global
/// sequence numbers after it, in context `ctx`.
fn encode(p: &[u8], l: Layout, r: &[u8], distance: u32, ctx: u8) -> Vec<u8> {
    let mut h = Vec::with_capacity(MAX_COMPRESSED);
    h.extend_from_slice(&[COMPRESSED_TCP, ctx]);
    put_varint(&mut h, distance);
    let mask_at = h.len();
    h.push(0);
    let mut mask = 0;
    let (t, u) = (&p[l.ip..], &r[l.ip..]);
    if !l.v6() && p[4..6] != r[4..6] {
        mask |= M_ID;
        put_varint(&mut h, u32::from(be16(p, 4).wrapping_sub(be16(r, 4))));
    }
    let fields = [
        (M_SEQ, 4, 4),
        (M_ACK, 8, 4),
        (M_WIN, 14, 2),
        (M_FLAGS, 13, 1),
        (M_TSVAL, 24, 4),
        (M_TSECR, 28, 4),
    ];
    for (bit, at, len) in fields {
        if at + len > l.tcp || t[at..at + len] == u[at..at + len] {
            continue;
        }
        mask |= bit;
        match len {
            4 => put_varint(&mut h, be32(t, at).wrapping_sub(be32(u, at))),
            _ => h.extend_from_slice(&t[at..at + len]),
        }
    }
    h[mask_at] = mask;
    h.extend_from_slice(&t[16..18]);
    h
}

#[derive(Debug, Clone)]
struct RxContext {
    layout: Layout,
    headers: [u8; MAX_HEADERS],
    gseq: u32,
}

/// Why the decompressor refused a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than its fields, an unknown mask bit, or a reference that is not a compressible
    /// TCP packet.
    Malformed,
    /// Its reference is not the one the context holds (lost, or replaced since).
    NoReference,
}

/// What a body the decompressor took stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpacked {
    /// A whole IP packet as it is.
    Plain,
    /// A reference: the packet is the body past its first 2 bytes.
    Reference,
    /// A compressed packet: `headers`, then the body past its first `skip` bytes.
    Rebuilt { headers: Vec<u8>, skip: usize },
}

/// The receiving side: one per connection and direction, fed in global order.
#[derive(Debug, Clone, Default)]
pub struct Decompressor {
    contexts: Vec<Option<RxContext>>,
}

impl Decompressor {
    pub fn new() -> Decompressor {
        Decompressor {
            contexts: vec![None; CONTEXTS],
        }
    }

    /// Forget every context (a new session).
    pub fn reset(&mut self) {
        self.contexts.iter_mut().for_each(|c| *c = None);
    }

    /// What `body`, the data of global sequence number `gseq`, stands for. A reference is
    /// stored; a compressed packet is rebuilt against its context's.
    pub fn unpack(&mut self, gseq: u32, body: &[u8]) -> Result<Unpacked, Refused> {
        match body.first().copied() {
            Some(REFERENCE) => {
                let ctx = usize::from(*body.get(1).ok_or(Refused::Malformed)?);
                let p = &body[2..];
                let l = layout(p).ok_or(Refused::Malformed)?;
                let slot = self.contexts.get_mut(ctx).ok_or(Refused::Malformed)?;
                let mut headers = [0; MAX_HEADERS];
                headers[..l.headers()].copy_from_slice(&p[..l.headers()]);
                *slot = Some(RxContext {
                    layout: l,
                    headers,
                    gseq,
                });
                Ok(Unpacked::Reference)
            }
            Some(COMPRESSED_TCP) => self.rebuild(gseq, body),
            _ => Ok(Unpacked::Plain),
        }
    }

    fn rebuild(&self, gseq: u32, b: &[u8]) -> Result<Unpacked, Refused> {
        let ctx = usize::from(*b.get(1).ok_or(Refused::Malformed)?);
        let mut at = 2;
        let distance = get_varint(b, &mut at).ok_or(Refused::Malformed)?;
        let mask = *b.get(at).ok_or(Refused::Malformed)?;
        at += 1;
        let c = self
            .contexts
            .get(ctx)
            .ok_or(Refused::Malformed)?
            .as_ref()
            .ok_or(Refused::NoReference)?;
        if gseq.wrapping_sub(distance) != c.gseq || distance == 0 {
            return Err(Refused::NoReference);
        }
        let l = c.layout;
        if mask & 0x80 != 0
            || l.v6() && mask & M_ID != 0
            || !l.timestamps() && mask & (M_TSVAL | M_TSECR) != 0
        {
            return Err(Refused::Malformed);
        }
        let mut h = c.headers[..l.headers()].to_vec();
        if mask & M_ID != 0 {
            let d = get_varint(b, &mut at).ok_or(Refused::Malformed)?;
            let id = be16(&h, 4).wrapping_add(u16::try_from(d).map_err(|_| Refused::Malformed)?);
            h[4..6].copy_from_slice(&id.to_be_bytes());
        }
        let fields = [
            (M_SEQ, 4, 4),
            (M_ACK, 8, 4),
            (M_WIN, 14, 2),
            (M_FLAGS, 13, 1),
            (M_TSVAL, 24, 4),
            (M_TSECR, 28, 4),
        ];
        for (bit, off, len) in fields {
            if mask & bit == 0 {
                continue;
            }
            let at_h = l.ip + off;
            if len == 4 {
                let d = get_varint(b, &mut at).ok_or(Refused::Malformed)?;
                let v = be32(&h, at_h).wrapping_add(d);
                h[at_h..at_h + 4].copy_from_slice(&v.to_be_bytes());
            } else {
                let v = b.get(at..at + len).ok_or(Refused::Malformed)?;
                h[at_h..at_h + len].copy_from_slice(v);
                at += len;
            }
        }
        let sum = b.get(at..at + 2).ok_or(Refused::Malformed)?;
        h[l.ip + 16..l.ip + 18].copy_from_slice(sum);
        at += 2;
        let total = l.headers() + (b.len() - at);
        if l.v6() {
            let payload = u16::try_from(total - 40).map_err(|_| Refused::Malformed)?;
            h[4..6].copy_from_slice(&payload.to_be_bytes());
        } else {
            let total = u16::try_from(total).map_err(|_| Refused::Malformed)?;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[10..12].fill(0);
            let sum = internet_checksum(0, &[&h[..20]]);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        Ok(Unpacked::Rebuilt {
            headers: h,
            skip: at,
        })
    }
}

/// Drivers for the fuzz target `hc` (and its property test).
pub mod fuzz {
    use super::*;

    /// An IPv4 TCP packet with timestamps and 64 bytes of data, its IPv4 checksum right.
    fn seed() -> Vec<u8> {
        let mut p = vec![0u8; 20 + 32 + 64];
        p[..20].copy_from_slice(&[
            0x45, 0, 0, 116, 0, 1, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
        ]);
        let sum = internet_checksum(0, &[&p[..20]]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p[20 + 12] = 0x80;
        p[20 + 13] = 0x10;
        p[40..44].copy_from_slice(&[1, 1, 8, 10]);
        p
    }

    /// Byte 0 even: the rest, cut at every 0xff, are bodies given to a decompressor holding a
    /// reference; it must never panic, and what it rebuilds is as long as its IP header says.
    /// Byte 0 odd: each 8 bytes of the rest change a packet of one flow (the first 4 are added
    /// to the field the next picks); the stream, compressed and decompressed in order, must
    /// come out as it went in.
    pub fn hc(data: &[u8]) {
        let Some((&mode, rest)) = data.split_first() else {
            return;
        };
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let mut p = seed();
        if let Packed::Reference { context } = c.pack(0, &p) {
            let body = [&[REFERENCE, context][..], &p].concat();
            assert_eq!(d.unpack(0, &body), Ok(Unpacked::Reference));
        }
        if mode % 2 == 0 {
            for (i, body) in rest.split(|&b| b == 0xff).enumerate() {
                if let Ok(Unpacked::Rebuilt { headers, skip }) = d.unpack(i as u32 + 1, body) {
                    let len = headers.len() + body.len() - skip;
                    assert_eq!(
                        usize::from(u16::from_be_bytes([headers[2], headers[3]])),
                        len
                    );
                }
            }
            return;
        }
        for (i, change) in rest.chunks_exact(8).enumerate() {
            // seq, ack, window, flags, tsval, tsecr, IP identification, TCP checksum
            let at = [24, 28, 34, 33, 44, 48, 4, 36][usize::from(change[4] % 8)];
            let width = if at == 33 {
                1
            } else if at == 34 || at == 4 || at == 36 {
                2
            } else {
                4
            };
            for k in 0..width {
                p[at + k] = p[at + k].wrapping_add(change[k]);
            }
            p[33] &= !0x20; // no urgent data
            p[10..12].fill(0);
            let sum = internet_checksum(0, &[&p[..20]]);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
            let gseq = i as u32 + 1;
            let body = match c.pack(gseq, &p) {
                Packed::Plain => p.clone(),
                Packed::Reference { context } => [&[REFERENCE, context][..], &p].concat(),
                Packed::Compressed { header, replaces } => [&header[..], &p[replaces..]].concat(),
            };
            let got = match d.unpack(gseq, &body) {
                Ok(Unpacked::Plain) => body.clone(),
                Ok(Unpacked::Reference) => body[2..].to_vec(),
                Ok(Unpacked::Rebuilt { headers, skip }) => [&headers[..], &body[skip..]].concat(),
                Err(e) => panic!("packet {gseq} refused: {e:?}"),
            };
            assert_eq!(got, p, "packet {gseq}");
        }
    }
}

#[cfg(test)]
mod tests;
