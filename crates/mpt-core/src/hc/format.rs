//! The format of compressed headers (`docs/protocol.md`, "Compressed headers"): which packets
//! compress and where their fields lie, a flow's context, the mask, and how a compressed
//! header's fields are read back (written: `encode.rs`). The state of each side is in the
//! parent module.

use super::{Refused, COMPACT_TCP, COMPRESSED_TCP, CONTEXTS, MAX_HEADERS};
use crate::inner::{self, Ip, Ipv6, Tcp};

/// Where a compressible packet's fields lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// IP header length (20 for IPv4, 40 for IPv6).
    pub(super) ip: usize,
    /// TCP header length (20, or 32 with only the timestamp option as NOP NOP TS).
    pub(super) tcp: usize,
}

impl Layout {
    pub(super) fn headers(self) -> usize {
        self.ip + self.tcp
    }
    pub(super) fn v6(self) -> bool {
        self.ip == 40
    }
    pub(super) fn timestamps(self) -> bool {
        self.tcp == 32
    }
}

// one load and one bounds check each (a slice of a known length)
#[inline(always)]
pub(super) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
#[inline(always)]
pub(super) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline(always)]
pub(super) fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The layout of `p` if it is a TCP packet this scheme compresses: IPv4 with a 20-byte header
/// whose checksum is right, not a fragment, or IPv6 with TCP as its next header; its length
/// field equal to its length; TCP without options or with only timestamps (NOP NOP TS), no
/// urgent data.
pub(super) fn layout(p: &[u8]) -> Option<Layout> {
    let ip = match Ip::new_checked(p)? {
        Ip::V4(v) => {
            let ok = p.len() >= 40
                && v.header_len() == 20
                && v.protocol() == inner::TCP
                && v.total_len() == p.len()
                && !v.is_fragment()
                && ipv4_header_sum_ok(p);
            ok.then_some(20)?
        }
        Ip::V6(v) => {
            let ok = p.len() >= 60
                && v.next_header() == inner::TCP
                && Ipv6::HEADER_LEN + v.payload_len() == p.len();
            ok.then_some(40)?
        }
    };
    let t = Tcp::new_checked(&p[ip..])?;
    let tcp = t.header_len();
    let urgent = t.flags() & Tcp::URG != 0 || t.urgent() != 0;
    let options_ok = match tcp {
        20 => true,
        32 => t.options().starts_with(&[1, 1, 8, 10]),
        _ => false,
    };
    (options_ok && !urgent).then_some(Layout { ip, tcp })
}

/// The ones' complement sum of the 16-bit words of the IPv4 header `p` starts with (20
/// bytes), summed as five 32-bit words with their carries folded back: the same sum, in fewer
/// steps.
fn ipv4_header_sum(p: &[u8]) -> u16 {
    let mut sum: u64 = (0..5).map(|k| u64::from(be32(p, 4 * k))).sum();
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Whether the checksum of the IPv4 header `p` starts with is right.
pub(super) fn ipv4_header_sum_ok(p: &[u8]) -> bool {
    ipv4_header_sum(p) == 0xffff
}

/// The checksum of the IPv4 header `p` starts with, its checksum field zero.
pub(super) fn ipv4_header_checksum(p: &[u8]) -> u16 {
    !ipv4_header_sum(p)
}

/// Whether `p` is a TCP packet (IPv4 protocol or IPv6 next header 6).
pub fn is_tcp(p: &[u8]) -> bool {
    Ip::new_checked(p).is_some_and(|ip| ip.protocol() == inner::TCP)
}

/// A flow's context: its [`flow_hash`] modulo [`CONTEXTS`].
pub(super) fn context_of(p: &[u8], l: Layout) -> u8 {
    (hash_of(p, l.ip) as usize % CONTEXTS) as u8
}

/// FNV-1a (32 bits) over the source and destination addresses and ports of `p`, whose IP
/// header is `ip` bytes, as they lie in the packet.
pub(super) fn hash_of(p: &[u8], ip: usize) -> u32 {
    let addrs = if ip == 40 { &p[8..40] } else { &p[12..20] };
    let mut h: u32 = 0x811c_9dc5;
    for &b in addrs.iter().chain(&p[ip..ip + 4]) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
}

/// The hash that picks the context of the TCP flow `p` is of (FNV-1a over its addresses and
/// ports, [`CONTEXTS`] times the context number apart), from its IP header alone: IPv4 of 20
/// bytes or IPv6, with TCP next. It takes a super-packet's headers too, whose lengths and
/// checksums its segments' rewrite. `None` for anything else.
pub fn flow_hash(p: &[u8]) -> Option<u32> {
    let ip = match Ip::new_checked(p)? {
        Ip::V4(v) => (v.header_len() == 20 && v.protocol() == inner::TCP).then_some(20)?,
        Ip::V6(v) => (v.next_header() == inner::TCP).then_some(40)?,
    };
    (p.len() >= ip + 4).then(|| hash_of(p, ip))
}

/// Whether `p`'s fields that a compressed packet does not carry equal `r`'s (both of layout
/// `l`): everything but the IP length, identification and checksum, and the TCP sequence,
/// acknowledgement, flags, window, checksum and timestamps. So `p` is of `r`'s flow. (The
/// compressor asks [`static_equal`], the same in fewer steps: this says what it compares.)
#[cfg(test)]
pub(super) fn same_static(p: &[u8], r: &[u8], l: Layout) -> bool {
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

/// The bytes of the first 64 of a packet of each layout (IPv4 and IPv6, TCP without options
/// and with timestamps) that [`same_static`] compares, and the timestamp option's kind and
/// length ([`layout`]'s): 0xff, the others 0.
const STATIC_BYTES: [[u8; 64]; 4] = {
    let mut masks = [[0u8; 64]; 4];
    let mut k = 0;
    while k < 4 {
        let (ip, ts) = (if k < 2 { 20 } else { 40 }, k % 2 == 1);
        let mut ranges = [(0, 0); 8];
        if ip == 20 {
            ranges[0] = (0, 2); // version, header length, TOS
            ranges[1] = (6, 10); // flags and fragment offset, TTL, protocol
            ranges[2] = (12, 20); // addresses
        } else {
            ranges[0] = (0, 4); // version, traffic class, flow label
            ranges[1] = (6, 40); // next header, hop limit, addresses
        }
        ranges[3] = (ip, ip + 4); // ports
        ranges[4] = (ip + 12, ip + 13); // data offset
        ranges[5] = (ip + 18, ip + 20); // urgent pointer
        if ts {
            ranges[6] = (ip + 20, ip + 24); // NOP NOP TS 10
        }
        let mut i = 0;
        while i < ranges.len() {
            let mut b = ranges[i].0;
            while b < ranges[i].1 {
                masks[k][b] = 0xff;
                b += 1;
            }
            i += 1;
        }
        k += 1;
    }
    masks
};

/// [`same_static`], and the timestamp option's kind and length the same (for
/// [`Layout::timestamps`]), in four masked compares of 16 bytes (`p` and `r` of 64 bytes or
/// more).
#[inline]
pub(super) fn static_equal(p: &[u8], r: &[u8], l: Layout) -> bool {
    let mask = &STATIC_BYTES[usize::from(l.v6()) * 2 + usize::from(l.timestamps())];
    let word =
        |b: &[u8], at: usize| u128::from_le_bytes(b[at..at + 16].try_into().expect("16 bytes"));
    let (p, r) = (&p[..64], &r[..64]);
    let differ = (0..4).fold(0, |d, i| {
        d | ((word(p, 16 * i) ^ word(r, 16 * i)) & word(mask, 16 * i))
    });
    differ == 0
}

/// Headers a side writes: a compressed header, or the IP and TCP headers rebuilt from one (at
/// most [`MAX_HEADERS`] bytes, on the stack).
#[derive(Clone, Copy)]
pub struct Headers {
    pub(super) bytes: [u8; MAX_HEADERS],
    pub(super) len: usize,
}

impl Default for Headers {
    fn default() -> Self {
        Headers::new()
    }
}

impl Headers {
    pub fn new() -> Headers {
        Headers {
            bytes: [0; MAX_HEADERS],
            len: 0,
        }
    }

    pub(super) fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    pub(super) fn extend_from_slice(&mut self, b: &[u8]) {
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

/// A LEB128 value from `b` at `*at` (advanced), at most 5 bytes.
pub(super) fn get_varint(b: &[u8], at: &mut usize) -> Option<u32> {
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
pub(super) const M_ID: u8 = 0x01;
pub(super) const M_SEQ: u8 = 0x02;
pub(super) const M_ACK: u8 = 0x04;
pub(super) const M_WIN: u8 = 0x08;
pub(super) const M_FLAGS: u8 = 0x10;
pub(super) const M_TSVAL: u8 = 0x20;
pub(super) const M_TSECR: u8 = 0x40;
/// Version 6: padding follows the mask, a byte `n`, then `n` zeros.
pub(super) const M_PAD: u8 = 0x80;
/// Version 7: the sequence number's field (whose bit is set too) counts this packet's TCP
/// payload lengths after the start of the reference's payload (`2k`) or after its end
/// (`2k + 1`), not bytes; an IPv4 identification without its field is then the reference's
/// plus the segments since it (`k`, or `k + 1`).
pub(super) const M_SEGS: u8 = 0x80;

/// How a compressed header lies on the wire (`docs/protocol.md`, "Compressed headers"): the
/// form of the session's protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Version 6: a marker byte ([`COMPRESSED_TCP`]) and the context's, and padding as a
    /// counted run of zeros.
    V6,
    /// Version 7: the context in the marker byte ([`COMPACT_TCP`] | context), a sequence
    /// number that moved by whole segments counted in segments, and padding as LEB128 values
    /// written longer than they need (no byte of its own).
    V7,
}

impl Format {
    /// The format of a session of protocol `version` (6 or later).
    pub fn of_version(version: u8) -> Format {
        if version >= 7 {
            Format::V7
        } else {
            Format::V6
        }
    }
}

/// Whether `body` is a compressed TCP packet (of either format), by its first byte.
pub fn is_compressed(body: &[u8]) -> bool {
    body.first()
        .is_some_and(|&b| b == COMPRESSED_TCP || b & 0xc0 == COMPACT_TCP)
}

/// A compressed body's format, context and distance, and where its mask is.
pub(super) fn head(b: &[u8]) -> Option<(Format, usize, u32, usize)> {
    let (format, ctx, mut at) = match *b.first()? {
        COMPRESSED_TCP => (Format::V6, usize::from(*b.get(1)?), 2),
        m if m & 0xc0 == COMPACT_TCP => (Format::V7, usize::from(m & 0x3f), 1),
        _ => return None,
    };
    let distance = get_varint(b, &mut at)?;
    Some((format, ctx, distance, at))
}

/// The TCP payload length of the packet whose headers (layout `l`) `r` holds, from its IP
/// length field.
pub(super) fn payload_of(r: &[u8], l: Layout) -> usize {
    let total = if l.v6() {
        usize::from(be16(r, 4)) + 40
    } else {
        usize::from(be16(r, 2))
    };
    total.saturating_sub(l.headers())
}

/// A signed delta as an unsigned one, small either way (ZigZag: 0, -1, 1, -2... as 0, 1, 2, 3...):
/// a retransmission behind its reference costs as little as a segment ahead of it.
pub(super) fn zigzag(d: i32) -> u32 {
    ((d << 1) ^ (d >> 31)) as u32
}

pub(super) fn unzigzag(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// The 32-bit field at `at_h` in `h` plus the delta at `*at` in `b` (advanced past it).
pub(super) fn add_delta(
    h: &mut Headers,
    at_h: usize,
    b: &[u8],
    at: &mut usize,
) -> Result<(), Refused> {
    let d = unzigzag(get_varint(b, at).ok_or(Refused::Malformed)?);
    let v = be32(h, at_h).wrapping_add(d as u32);
    h[at_h..at_h + 4].copy_from_slice(&v.to_be_bytes());
    Ok(())
}
