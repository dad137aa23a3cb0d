//! Writing a compressed header (`docs/protocol.md`, "Compressed headers"): the fields that
//! differ from the reference's, in version 6's format or version 7's, padded to a size.

use super::format::*;
use super::{COMPACT_TCP, COMPRESSED_TCP, MAX_HEADERS};

/// LEB128 of `v` (at most 5 bytes) onto `out`.
pub(super) fn put_varint(out: &mut Headers, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The fields of a packet that differ from its reference's, as a compressed header carries
/// them: deltas ZigZag-encoded (0 when the same), window and flags when they changed.
struct Changes {
    id: u32,
    seq: u32,
    ack: u32,
    tsval: u32,
    tsecr: u32,
    window: Option<[u8; 2]>,
    flags: Option<u8>,
}

impl Changes {
    /// The mask bits of the window and flags when they changed, and the bytes they take.
    fn values(&self) -> (u8, usize) {
        let window = if self.window.is_some() {
            (M_WIN, 2)
        } else {
            (0, 0)
        };
        let flags = if self.flags.is_some() {
            (M_FLAGS, 1)
        } else {
            (0, 0)
        };
        (window.0 | flags.0, window.1 + flags.1)
    }

    fn between(p: &[u8], l: Layout, r: &[u8]) -> Changes {
        let (t, u) = (&p[l.ip..], &r[l.ip..]);
        let delta = |at: usize| zigzag(be32(t, at).wrapping_sub(be32(u, at)) as i32);
        let id = if l.v6() {
            0
        } else {
            zigzag(i32::from(be16(p, 4).wrapping_sub(be16(r, 4)) as i16))
        };
        let (tsval, tsecr) = if l.timestamps() {
            (delta(24), delta(28))
        } else {
            (0, 0)
        };
        Changes {
            id,
            seq: delta(4),
            ack: delta(8),
            tsval,
            tsecr,
            window: (be16(t, 14) != be16(u, 14)).then(|| [t[14], t[15]]),
            flags: (t[13] != u[13]).then_some(t[13]),
        }
    }
}

// `encode`'s arguments that go together: two fields each, so that each struct is passed as the
// two arguments it replaces were. With a third field a struct is passed by reference, and
// compressing a header took 3-6 % more instructions.

/// How a compressed header names its reference: by its flow's context, and by how many global
/// sequence numbers the packet comes after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RefName {
    pub(super) ctx: u8,
    pub(super) distance: u32,
}

/// The form of a compressed header: the session's format, and the length it is padded to if
/// shorter.
#[derive(Debug, Clone, Copy)]
pub(super) struct Form {
    pub(super) format: Format,
    pub(super) pad_to: usize,
}

/// The compressed header of `p` (layout `l`) against reference headers `r`, which it names
/// `name`, in `form` (padded to at most [`MAX_HEADERS`]; version 7 pads as far as its LEB128
/// values stretch, which is further than a header it pads ever needs), written to `h`. Its
/// length is known before a byte is written, so that the padding goes in its place at once.
/// Returns that length before padding.
pub(super) fn encode(
    h: &mut Headers,
    p: &[u8],
    l: Layout,
    r: &[u8],
    name: RefName,
    form: Form,
    by: &mut Divisor,
) -> usize {
    let c = Changes::between(p, l, r);
    let pad_to = form.pad_to.min(MAX_HEADERS);
    let sum = [p[l.ip + 16], p[l.ip + 17]];
    match form.format {
        Format::V6 => encode_v6(h, &c, name, pad_to, sum),
        Format::V7 => {
            let payload = p.len() - l.headers();
            let segments = in_segments(c.seq, payload, payload_of(r, l), by);
            encode_v7(h, &c, l, segments, name, pad_to, sum)
        }
    }
}

/// Version 6: marker, context, distance, mask, padding, fields, checksum.
fn encode_v6(h: &mut Headers, c: &Changes, name: RefName, pad_to: usize, sum: [u8; 2]) -> usize {
    let RefName { ctx, distance } = name;
    let mut mask = 0;
    let mut len = 2 + varint_len(distance) + 1 + 2;
    for (v, bit) in [
        (c.id, M_ID),
        (c.seq, M_SEQ),
        (c.ack, M_ACK),
        (c.tsval, M_TSVAL),
        (c.tsecr, M_TSECR),
    ] {
        if v != 0 {
            mask |= bit;
            len += varint_len(v);
        }
    }
    let (value_bits, value_bytes) = c.values();
    mask |= value_bits;
    len += value_bytes;
    h.len = 0;
    h.extend_from_slice(&[COMPRESSED_TCP, ctx]);
    put_varint(h, distance);
    if len < pad_to {
        // the mask, the padding's length byte, and zeros
        let extra = pad_to - len;
        h.push(mask | M_PAD);
        h.push((extra - 1) as u8);
        h.bytes[h.len..h.len + extra - 1].fill(0);
        h.len += extra - 1;
    } else {
        h.push(mask);
    }
    // in the mask's order: IP identification, sequence and acknowledgement numbers (deltas),
    // window and flags (values), timestamps (deltas)
    for (v, bit) in [(c.id, M_ID), (c.seq, M_SEQ), (c.ack, M_ACK)] {
        if mask & bit != 0 {
            put_varint(h, v);
        }
    }
    put_values(h, c);
    for (v, bit) in [(c.tsval, M_TSVAL), (c.tsecr, M_TSECR)] {
        if mask & bit != 0 {
            put_varint(h, v);
        }
    }
    h.extend_from_slice(&sum);
    len
}

/// The window and flags, when they changed.
fn put_values(h: &mut Headers, c: &Changes) {
    if let Some(w) = c.window {
        h.extend_from_slice(&w);
    }
    if let Some(f) = c.flags {
        h.push(f);
    }
}

/// Division by a segment's payload length, by multiplication: a bulk flow's segments are of
/// one length, and the multiplier is worked out once for it (D. Lemire, O. Kaser, N. Kurz,
/// "Faster remainder by direct computation", 2019): two divisions by instruction made
/// compressing a header 4 % slower.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Divisor {
    d: u32,
    /// `ceil(2^64 / d)`; 0 for 0 and 1, which divide by instruction.
    m: u64,
}

impl Divisor {
    pub(super) fn new(d: u32) -> Divisor {
        let m = if d > 1 {
            u64::MAX / u64::from(d) + 1
        } else {
            0
        };
        Divisor { d, m }
    }

    /// `n / d` if `d` divides `n` (`d` not 0).
    #[inline(always)]
    fn exact(self, n: u32) -> Option<u32> {
        if self.m == 0 {
            return (n % self.d == 0).then(|| n / self.d);
        }
        // n is a multiple of d exactly when n * m, modulo 2^64, is below m
        (self.m.wrapping_mul(u64::from(n)) < self.m)
            .then(|| ((u128::from(self.m) * u128::from(n)) >> 64) as u32)
    }
}

/// The sequence number `seq` (a delta from the reference's, ZigZag-encoded) in segments of
/// `len` bytes: the smaller of `2k` (`k` segments after the start of the reference's
/// payload) and `2k + 1` (after its end, the reference's payload `ref_len` bytes), and the
/// segments since the reference (`k`, or `k + 1`). `None` when neither is whole, or the
/// sequence number is behind the reference's. `by` is the last length's [`Divisor`], made
/// anew for another.
fn in_segments(seq: u32, len: usize, ref_len: usize, by: &mut Divisor) -> Option<(u32, u32)> {
    // 32-bit: a delta ahead of the reference is below 2^31, a payload below 2^16
    let d = u32::try_from(unzigzag(seq)).ok()?;
    let (len, ref_len) = (u32::try_from(len).ok()?, u32::try_from(ref_len).ok()?);
    if len == 0 {
        return None;
    }
    if by.d != len {
        *by = Divisor::new(len);
    }
    let from_end = d
        .checked_sub(ref_len)
        .and_then(|e| by.exact(e))
        .map(|k| (k << 1 | 1, k + 1));
    let from_start = by.exact(d).map(|k| (k << 1, k));
    match (from_end, from_start) {
        (Some(e), Some(s)) => Some(e.min(s)),
        (e, s) => e.or(s),
    }
}

/// Version 7: marker with the context, distance, mask, fields, checksum. When the packet's
/// sequence number is a whole number `k` of its own segments after the start of the
/// reference's payload, or after its end (`segments`, as [`in_segments`] gives them), and that
/// is shorter, the field carries `2k`, or `2k + 1` from the end ("in segments"); an IPv4
/// identification that is then the reference's plus the segments since it (`k`, or `k + 1`
/// from the end; as a sender that cuts segments numbers them) goes without its field. Padded by
/// writing the distance, then the other LEB128 fields present, then absent ones as zero deltas
/// (acknowledgement, sequence, identification with IPv4 unless it goes without, timestamps
/// with them), longer.
fn encode_v7(
    h: &mut Headers,
    c: &Changes,
    l: Layout,
    segments: Option<(u32, u32)>,
    name: RefName,
    pad_to: usize,
    sum: [u8; 2],
) -> usize {
    let RefName { ctx, distance } = name;
    let mut mask = 0;
    let (mut seq, mut id) = (c.seq, c.id);
    let mut implied_id = false;
    if let Some((v, n)) = segments {
        if c.seq != 0 && varint_len(v) <= varint_len(c.seq) {
            seq = v;
            mask |= M_SEGS | M_SEQ;
            implied_id = !l.v6() && id == zigzag(i32::from(n as u16 as i16));
            if implied_id {
                id = 0;
            } else if !l.v6() {
                // any other identification goes in its field, a delta of 0 too
                mask |= M_ID;
            }
        }
    }
    // the LEB128 values in wire order: distance, identification, sequence, acknowledgement,
    // then (after window and flags) the timestamps
    const DISTANCE: usize = 0;
    let bits = [0, M_ID, M_SEQ, M_ACK, M_TSVAL, M_TSECR];
    let values = [distance, id, seq, c.ack, c.tsval, c.tsecr];
    let mut width = [0usize; 6];
    width[DISTANCE] = varint_len(distance);
    for i in 1..6 {
        if values[i] != 0 || mask & bits[i] != 0 {
            mask |= bits[i];
            width[i] = varint_len(values[i]);
        }
    }
    let mut len = 1 + 1 + 2 + width.iter().sum::<usize>();
    let (value_bits, value_bytes) = c.values();
    mask |= value_bits;
    len += value_bytes;
    let mut extra = pad_to.saturating_sub(len);
    for w in &mut width {
        if *w > 0 {
            let more = (MAX_VARINT - *w).min(extra);
            *w += more;
            extra -= more;
        }
    }
    // then absent fields the layout has, as zero deltas: acknowledgement, sequence, IPv4
    // identification (unless it goes without), timestamps
    let absent = [
        (3, true),
        (2, true),
        (1, !l.v6() && !implied_id),
        (4, l.timestamps()),
        (5, l.timestamps()),
    ];
    for (i, fits) in absent {
        if extra > 0 && fits && width[i] == 0 {
            width[i] = extra.min(MAX_VARINT);
            mask |= bits[i];
            extra -= width[i];
        }
    }
    // written with a local index (the length in `h` set once: stored and loaded back for
    // every byte, it cost a store-forwarding stall each)
    let b = &mut h.bytes;
    b[0] = COMPACT_TCP | ctx;
    let mut at = put_varint_in(b, 1, distance, width[DISTANCE]);
    b[at] = mask;
    at += 1;
    for i in 1..4 {
        at = put_varint_in(b, at, values[i], width[i]);
    }
    if let Some(w) = c.window {
        b[at..at + 2].copy_from_slice(&w);
        at += 2;
    }
    if let Some(f) = c.flags {
        b[at] = f;
        at += 1;
    }
    for i in 4..6 {
        at = put_varint_in(b, at, values[i], width[i]);
    }
    b[at..at + 2].copy_from_slice(&sum);
    h.len = at + 2;
    len
}

/// Most bytes a LEB128 value of 32 bits takes.
const MAX_VARINT: usize = 5;

/// LEB128 of `v` in exactly `width` bytes (nothing for 0, at most [`MAX_VARINT`]) into `out`
/// at `at`, at least the bytes it needs: the bytes before the last carry the continuation
/// bit, those beyond the value's own zeros. Returns where the next byte goes. Written as one
/// 8-byte store, whatever the width, without a branch: the bytes past the width are
/// overwritten by what follows (`out` has room past the longest header).
#[inline(always)]
fn put_varint_in(out: &mut [u8; MAX_HEADERS], at: usize, v: u32, width: usize) -> usize {
    /// The continuation bits of a value `width` bytes long.
    const CONTINUED: [u64; MAX_VARINT + 1] = [0, 0, 0x80, 0x8080, 0x80_8080, 0x8080_8080];
    let v = u64::from(v);
    // the value's 7-bit groups, one to a byte
    let groups = (v & 0x7f)
        | (v << 1 & 0x7f00)
        | (v << 2 & 0x7f_0000)
        | (v << 3 & 0x7f00_0000)
        | (v << 4 & 0x7f_0000_0000);
    let word = groups | CONTINUED[width.min(MAX_VARINT)];
    out[at..at + 8].copy_from_slice(&word.to_le_bytes());
    at + width
}

/// Bytes LEB128 takes for `v`.
#[inline(always)]
fn varint_len(v: u32) -> usize {
    /// By leading zeros: 1 for 0 to 7 significant bits, 2 for 8 to 14, and so on.
    const LEN: [u8; 33] = {
        let mut len = [0; 33];
        let mut zeros = 0;
        while zeros <= 32 {
            let bits = 32 - zeros;
            len[zeros] = if bits == 0 { 1 } else { bits.div_ceil(7) as u8 };
            zeros += 1;
        }
        len
    };
    usize::from(LEN[v.leading_zeros() as usize])
}

#[cfg(test)]
mod tests {
    use super::Divisor;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_divisor_finds_the_multiples_the_instruction_finds(
            d in prop_oneof![1 => 1u32..4, 3 => 1u32..70_000, 1 => 1u32..],
            n in any::<u32>(),
            k in any::<u32>(),
        ) {
            let by = Divisor::new(d);
            for n in [n, d.wrapping_mul(k), d.saturating_mul(k / d.max(1)), 0, d, d - 1] {
                prop_assert_eq!(by.exact(n), (n % d == 0).then(|| n / d), "{} / {}", n, d);
            }
        }
    }
}
