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

use crate::wire::internet_checksum;

/// First byte of a compressed body.
pub const COMPRESSED_TCP: u8 = 0x20;
/// The shortest packet that is compressed, or becomes a reference: shorter ones (a flow's
/// acknowledgements, the tail of a burst) save little, and were each a reference, a flow's
/// references would come so often that the receiver could keep too few of them to rebuild a
/// packet resent a round trip later.
pub const COMPRESS_FROM: usize = 256;
/// Contexts each side keeps: a flow's is [`context_of`] its addresses and ports; a flow that
/// falls in a busy one takes it over.
pub const CONTEXTS: usize = 64;
/// Packets of a flow sent against one reference before the next goes whole as a new one (a
/// reference given up by the resequencer costs at most this many of the flow's packets).
pub const REFRESH_EVERY: u32 = 64;
/// The farthest a compressed packet may be from its reference, in global sequence numbers
/// (two bytes of distance).
pub const MAX_DISTANCE: u32 = 0x3fff;
/// Most bytes of headers a reference keeps: IPv6 (40) and TCP with timestamps (32).
pub const MAX_HEADERS: usize = 72;
/// Most bytes a compressed header takes: marker, context, distance (2), mask, IP ID (3),
/// sequence, acknowledgement (5 each), window (2), flags (1), timestamps (5 each), checksum (2).
pub const MAX_COMPRESSED: usize = 38;

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
fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
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

/// A flow's context: FNV-1a (32 bits) over the source and destination addresses and ports of
/// `p` (layout `l`), as they lie in the packet, modulo [`CONTEXTS`].
fn context_of(p: &[u8], l: Layout) -> u8 {
    let addrs = if l.v6() { &p[8..40] } else { &p[12..20] };
    let mut h: u32 = 0x811c_9dc5;
    for &b in addrs.iter().chain(&p[l.ip..l.ip + 4]) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h as usize % CONTEXTS) as u8
}

/// Whether `p`'s fields that a compressed packet does not carry equal `r`'s (both of layout
/// `l`): everything but the IP length, identification and checksum, and the TCP sequence,
/// acknowledgement, flags, window, checksum and timestamps. So `p` is of `r`'s flow.
fn same_static(p: &[u8], r: &[u8], l: Layout) -> bool {
    let ip_same = if l.v6() {
        be32(p, 0) == be32(r, 0)
            && be16(p, 6) == be16(r, 6)
            && be64(p, 8) == be64(r, 8)
            && be64(p, 16) == be64(r, 16)
            && be64(p, 24) == be64(r, 24)
            && be64(p, 32) == be64(r, 32)
    } else {
        be16(p, 0) == be16(r, 0) && be32(p, 6) == be32(r, 6) && be64(p, 12) == be64(r, 12)
    };
    let (t, u) = (&p[l.ip..], &r[l.ip..]);
    ip_same && be32(t, 0) == be32(u, 0) && t[12] == u[12] && be16(t, 18) == be16(u, 18)
}

/// Headers a side writes: a compressed header, or the IP and TCP headers rebuilt from one (at
/// most [`MAX_HEADERS`] bytes, on the stack).
#[derive(Clone, Copy)]
pub struct Headers {
    bytes: [u8; MAX_HEADERS],
    len: usize,
}

impl Headers {
    fn new() -> Headers {
        Headers {
            bytes: [0; MAX_HEADERS],
            len: 0,
        }
    }

    fn of(b: &[u8]) -> Headers {
        let mut h = Headers::new();
        h.extend_from_slice(b);
        h
    }

    fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    fn extend_from_slice(&mut self, b: &[u8]) {
        self.bytes[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }
}

impl std::ops::Deref for Headers {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::ops::DerefMut for Headers {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }
}

impl std::fmt::Debug for Headers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Headers {
    fn eq(&self, other: &Headers) -> bool {
        **self == **other
    }
}

impl Eq for Headers {}

/// LEB128 of `v` (at most 5 bytes) onto `out`.
fn put_varint(out: &mut Headers, mut v: u32) {
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
/// Padding follows the mask: a byte `n`, then `n` zeros.
const M_PAD: u8 = 0x80;

/// A flow's reference: the headers of its last packet that went whole in order, and that
/// packet's global sequence number.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Its flow's context.
    ctx: u8,
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
        Some(Reference {
            ctx: context_of(p, layout),
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

/// The references of the flows one side knows, by context.
#[derive(Debug, Clone)]
struct Contexts(Vec<Option<Reference>>);

impl Default for Contexts {
    fn default() -> Self {
        Contexts(vec![None; CONTEXTS])
    }
}

impl Contexts {
    /// `r` becomes its flow's reference, unless its context holds a later one (a packet
    /// delivered late).
    fn store(&mut self, r: Reference) {
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
}

/// The sending side: one per connection and direction.
#[derive(Debug, Clone, Default)]
pub struct Compressor {
    contexts: Contexts,
    counts: TxCounts,
    /// The last flow compressed (its addresses and ports) and its context: a bulk flow's
    /// packets come in runs, and its context is not hashed again for each.
    last: Option<(FlowBytes, u8)>,
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
    /// first `replaces` bytes (its IP and TCP headers) in a body of at most `room` bytes: when
    /// its flow has a reference it may use ([`MAX_DISTANCE`]; after [`REFRESH_EVERY`] packets,
    /// only until one comes that fits `room` whole) and the result fits. `None`: send it whole,
    /// and tell [`Compressor::sent_whole`] if it goes in order.
    /// The header is padded to `pad_to` bytes, if shorter: a flow's segments of one size then
    /// make datagrams of one size, which UDP segmentation offload sends as one run.
    pub fn compress(
        &mut self,
        gseq: u32,
        p: &[u8],
        room: usize,
        pad_to: usize,
    ) -> Option<(Headers, usize)> {
        if p.len() < COMPRESS_FROM {
            return None;
        }
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
        let r = self.contexts.0[usize::from(ctx)].as_mut()?;
        let distance = gseq.wrapping_sub(r.gseq);
        // a reference due again waits for a packet that goes whole in one datagram: one in
        // pieces would hold the packets after it until its last piece came
        let due = r.uses >= REFRESH_EVERY && p.len() <= room;
        let usable = r.layout == l
            && !due
            && (1..=MAX_DISTANCE).contains(&distance)
            && same_static(p, &r.headers, l);
        if !usable {
            return None;
        }
        let mut header = encode(p, l, &r.headers, distance, ctx);
        if header.len() < pad_to {
            pad(&mut header, pad_to.min(MAX_HEADERS));
        }
        if header.len() + p.len() - l.headers() > room {
            return None;
        }
        r.uses += 1;
        self.counts.compressed += 1;
        self.counts.saved_bytes += (l.headers() - header.len()) as u64;
        Some((header, l.headers()))
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

    /// Whether `p`, sent whole as global sequence `gseq`, is its flow's reference now.
    pub fn is_reference(&self, gseq: u32, p: &[u8]) -> bool {
        layout(p).is_some_and(|l| {
            self.contexts.0[usize::from(context_of(p, l))]
                .as_ref()
                .is_some_and(|r| r.gseq == gseq)
        })
    }
}

/// The compressed header of `p` (layout `l`) against reference headers `r`, `distance` global
/// sequence numbers after it, in context `ctx`.
fn encode(p: &[u8], l: Layout, r: &[u8], distance: u32, ctx: u8) -> Headers {
    let mut h = Headers::new();
    h.extend_from_slice(&[COMPRESSED_TCP, ctx]);
    put_varint(&mut h, distance);
    let mask_at = h.len();
    h.push(0);
    let mut mask = 0;
    let (t, u) = (&p[l.ip..], &r[l.ip..]);
    if !l.v6() && be16(p, 4) != be16(r, 4) {
        mask |= M_ID;
        let d = be16(p, 4).wrapping_sub(be16(r, 4)) as i16;
        put_varint(&mut h, zigzag(i32::from(d)));
    }
    // the TCP fields, in the mask's order: sequence and acknowledgement numbers (deltas),
    // window and flags (values), timestamps (deltas)
    mask |= put_delta(&mut h, M_SEQ, t, u, 4);
    mask |= put_delta(&mut h, M_ACK, t, u, 8);
    if be16(t, 14) != be16(u, 14) {
        mask |= M_WIN;
        h.extend_from_slice(&t[14..16]);
    }
    if t[13] != u[13] {
        mask |= M_FLAGS;
        h.push(t[13]);
    }
    if l.timestamps() {
        mask |= put_delta(&mut h, M_TSVAL, t, u, 24);
        mask |= put_delta(&mut h, M_TSECR, t, u, 28);
    }
    h[mask_at] = mask;
    h.extend_from_slice(&t[16..18]);
    h
}

/// The delta of the 32-bit field at `at` in `t` from `u`'s onto `h`, if not 0: `bit`, or 0.
#[inline(always)]
fn put_delta(h: &mut Headers, bit: u8, t: &[u8], u: &[u8], at: usize) -> u8 {
    let d = be32(t, at).wrapping_sub(be32(u, at));
    if d == 0 {
        return 0;
    }
    put_varint(h, zigzag(d as i32));
    bit
}

/// A signed delta as an unsigned one, small either way (ZigZag: 0, -1, 1, -2... as 0, 1, 2, 3...):
/// a retransmission behind its reference costs as little as a segment ahead of it.
fn zigzag(d: i32) -> u32 {
    ((d << 1) ^ (d >> 31)) as u32
}

fn unzigzag(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// Pad the compressed header `h` to `len` bytes (more than it has, at most [`MAX_HEADERS`]):
/// [`M_PAD`] in its mask, and the padding after the mask.
fn pad(h: &mut Headers, len: usize) {
    let mut at = 2;
    if get_varint(h, &mut at).is_none() || at >= h.len() {
        return;
    }
    h[at] |= M_PAD;
    let (old, extra) = (h.len(), len - h.len());
    h.len = len;
    h.bytes.copy_within(at + 1..old, at + 1 + extra);
    h.bytes[at + 1] = (extra - 1) as u8;
    h.bytes[at + 2..at + 1 + extra].fill(0);
}

/// Why the decompressor refused a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than its fields, or an unknown mask bit.
    Malformed,
    /// Its reference is not the one the context holds (lost, or replaced since).
    NoReference,
}

/// References a decompressor keeps per context: a packet resent after its flow's next
/// reference came (or delivered late) is still rebuilt.
pub const KEPT_REFERENCES: usize = 8;

/// The receiving side: one per connection and direction, fed in global order (packets that
/// were resent may come late).
#[derive(Debug, Clone)]
pub struct Decompressor {
    /// Per context, its last [`KEPT_REFERENCES`] references.
    contexts: Vec<[Option<Reference>; KEPT_REFERENCES]>,
}

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor {
            contexts: vec![Default::default(); CONTEXTS],
        }
    }
}

impl Decompressor {
    pub fn new() -> Decompressor {
        Decompressor::default()
    }

    /// Forget every context (a new session).
    pub fn reset(&mut self) {
        self.contexts
            .iter_mut()
            .for_each(|c| c.iter_mut().for_each(|r| *r = None));
    }

    /// A packet that came whole was released ([`Reference::of`] it, taken where it arrived):
    /// it becomes a reference of its context, in place of the oldest kept (unless all those
    /// kept are later, or it is one of them).
    pub fn store(&mut self, r: Reference) {
        let kept = &mut self.contexts[r.context()];
        if kept.iter().flatten().any(|k| k.gseq == r.gseq) {
            return;
        }
        let oldest = kept.iter_mut().min_by_key(|k| {
            k.as_ref()
                .map_or(i64::MIN, |k| i64::from(k.gseq.wrapping_sub(r.gseq) as i32))
        });
        if let Some(slot) = oldest {
            if slot
                .as_ref()
                .is_none_or(|k| (k.gseq.wrapping_sub(r.gseq) as i32) < 0)
            {
                *slot = Some(r);
            }
        }
    }

    /// The global sequence number of the reference the compressed `body` (of global sequence
    /// number `gseq`) names, when it has not come yet (it was lost, and may be resent): its
    /// context does not keep it, and it is later than the oldest kept (or the context has
    /// room). `None` for a malformed body, or one whose reference is kept or was replaced.
    pub fn awaits(&self, gseq: u32, b: &[u8]) -> Option<u32> {
        let ctx = usize::from(*b.get(1)?);
        let mut at = 2;
        let distance = get_varint(b, &mut at)?;
        let want = gseq.wrapping_sub(distance);
        let kept = self.contexts.get(ctx)?;
        let absent = kept.iter().flatten().all(|k| k.gseq != want);
        // a reference is only ever put out for a later one, the oldest first: one later
        // than the oldest kept (or any, while there is room) that is not kept has not come
        let room = kept.iter().any(Option::is_none);
        let after_oldest = kept
            .iter()
            .flatten()
            .any(|k| (want.wrapping_sub(k.gseq) as i32) > 0);
        (distance > 0 && absent && (room || after_oldest)).then_some(want)
    }

    /// The headers of the compressed `body` of global sequence number `gseq`, rebuilt against
    /// its context's reference, and where its payload starts in it.
    pub fn rebuild(&self, gseq: u32, b: &[u8]) -> Result<(Headers, usize), Refused> {
        self.rebuild_against(None, gseq, b)
    }

    /// As [`Decompressor::rebuild`], against `r` (a reference that came too late to be kept:
    /// the packets that waited for it) if it is the one the body names.
    pub fn rebuild_against(
        &self,
        r: Option<&Reference>,
        gseq: u32,
        b: &[u8],
    ) -> Result<(Headers, usize), Refused> {
        if b.first() != Some(&COMPRESSED_TCP) {
            return Err(Refused::Malformed);
        }
        let ctx = usize::from(*b.get(1).ok_or(Refused::Malformed)?);
        let mut at = 2;
        let distance = get_varint(b, &mut at).ok_or(Refused::Malformed)?;
        let mask = *b.get(at).ok_or(Refused::Malformed)?;
        at += 1;
        let want = gseq.wrapping_sub(distance);
        let named = |k: &&Reference| k.gseq == want && usize::from(k.ctx) == ctx && distance > 0;
        let c = match r {
            Some(r) => Some(r).filter(named),
            None => self
                .contexts
                .get(ctx)
                .ok_or(Refused::Malformed)?
                .iter()
                .flatten()
                .find(named),
        }
        .ok_or(Refused::NoReference)?;
        let l = c.layout;
        if mask & M_PAD != 0 {
            let n = *b.get(at).ok_or(Refused::Malformed)?;
            at += 1 + usize::from(n);
        }
        if l.v6() && mask & M_ID != 0 || !l.timestamps() && mask & (M_TSVAL | M_TSECR) != 0 {
            return Err(Refused::Malformed);
        }
        let mut h = Headers::of(&c.headers[..l.headers()]);
        if mask & M_ID != 0 {
            let d = unzigzag(get_varint(b, &mut at).ok_or(Refused::Malformed)?);
            let d = i16::try_from(d).map_err(|_| Refused::Malformed)?;
            let id = be16(&h, 4).wrapping_add(d as u16);
            h[4..6].copy_from_slice(&id.to_be_bytes());
        }
        // the TCP fields, in the mask's order: sequence and acknowledgement numbers (deltas),
        // window and flags (values), timestamps (deltas)
        let t = l.ip;
        if mask & M_SEQ != 0 {
            add_delta(&mut h, t + 4, b, &mut at)?;
        }
        if mask & M_ACK != 0 {
            add_delta(&mut h, t + 8, b, &mut at)?;
        }
        if mask & M_WIN != 0 {
            let v = b.get(at..at + 2).ok_or(Refused::Malformed)?;
            h[t + 14..t + 16].copy_from_slice(v);
            at += 2;
        }
        if mask & M_FLAGS != 0 {
            h[t + 13] = *b.get(at).ok_or(Refused::Malformed)?;
            at += 1;
        }
        if mask & M_TSVAL != 0 {
            add_delta(&mut h, t + 24, b, &mut at)?;
        }
        if mask & M_TSECR != 0 {
            add_delta(&mut h, t + 28, b, &mut at)?;
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
        Ok((h, at))
    }
}

/// The 32-bit field at `at_h` in `h` plus the delta at `*at` in `b` (advanced past it).
fn add_delta(h: &mut Headers, at_h: usize, b: &[u8], at: &mut usize) -> Result<(), Refused> {
    let d = unzigzag(get_varint(b, at).ok_or(Refused::Malformed)?);
    let v = be32(h, at_h).wrapping_add(d as u32);
    h[at_h..at_h + 4].copy_from_slice(&v.to_be_bytes());
    Ok(())
}

/// Drivers for the fuzz target `hc` (and its property test).
pub mod fuzz {
    use super::*;

    /// An IPv4 TCP packet with timestamps and 300 bytes of data, its IPv4 checksum right.
    fn seed() -> Vec<u8> {
        let mut p = vec![0u8; 20 + 32 + 300];
        p[..20].copy_from_slice(&[
            0x45, 0, 1, 96, 0, 1, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
        ]);
        let sum = internet_checksum(0, &[&p[..20]]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p[20 + 12] = 0x80;
        p[20 + 13] = 0x10;
        p[40..44].copy_from_slice(&[1, 1, 8, 10]);
        p
    }

    /// Byte 0 even: the rest, cut at every 0xff, are compressed bodies given to a
    /// decompressor holding a reference; it must never panic, and what it rebuilds is as long
    /// as its IP header says. Byte 0 odd: each 8 bytes of the rest change a packet of one flow
    /// (the first 4 are added to the field the fifth picks); the stream, compressed and
    /// decompressed in order, must come out as it went in.
    pub fn hc(data: &[u8]) {
        let Some((&mode, rest)) = data.split_first() else {
            return;
        };
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let mut p = seed();
        c.sent_whole(0, &p);
        d.store(Reference::of(0, &p).expect("a reference"));
        if mode % 2 == 0 {
            for (i, body) in rest.split(|&b| b == 0xff).enumerate() {
                let mut body = body.to_vec();
                if let Some(first) = body.first_mut() {
                    *first = COMPRESSED_TCP;
                }
                if let Ok((headers, skip)) = d.rebuild(i as u32 + 1, &body) {
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
            let width = match at {
                33 => 1,
                34 | 4 | 36 => 2,
                _ => 4,
            };
            for k in 0..width {
                p[at + k] = p[at + k].wrapping_add(change[k]);
            }
            p[33] &= !0x20; // no urgent data
            p[10..12].fill(0);
            let sum = internet_checksum(0, &[&p[..20]]);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
            let gseq = i as u32 + 1;
            let got = match c.compress(gseq, &p, usize::MAX, usize::from(change[5] % 24)) {
                Some((header, replaces)) => {
                    let body = [&header[..], &p[replaces..]].concat();
                    let (headers, skip) = d
                        .rebuild(gseq, &body)
                        .unwrap_or_else(|e| panic!("packet {gseq} refused: {e:?}"));
                    [&headers[..], &body[skip..]].concat()
                }
                None => {
                    c.sent_whole(gseq, &p);
                    d.store(Reference::of(gseq, &p).expect("a reference"));
                    p.clone()
                }
            };
            assert_eq!(got, p, "packet {gseq}");
        }
    }
}

#[cfg(test)]
mod tests;
