//! The receiving side: references kept per context, and headers rebuilt against them.

use super::format::*;
use super::*;

/// Why the decompressor refused a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than its fields, or an unknown mask bit.
    Malformed,
    /// Its reference is not the one the context holds (lost, or replaced since).
    NoReference,
}

/// References a decompressor keeps per context: a packet resent after its flow's next
/// reference came (or delivered late) is still rebuilt, if it was sent within this many times
/// [`REFRESH_EVERY`] packets of its flow (1024: at 90 Mbit/s, 128 ms), more than a resend's
/// round trip on a 35 ms path with a queue (covering 64 ms, such resends were refused: the
/// simulator counted 871 of a flow's packets in 5 s over the lab's lossy three paths). 112
/// bytes each: 112 KiB per peer whose packets come compressed, allocated when its first
/// reference is kept (a peer that is idle, or never compresses, holds none).
pub const KEPT_REFERENCES: usize = 16;

/// The receiving side: one per connection and direction, fed in global order (packets that
/// were resent may come late).
#[derive(Debug, Clone)]
pub struct Decompressor {
    /// Per context, its last [`KEPT_REFERENCES`] references; empty until the first is kept.
    contexts: Vec<[Option<Reference>; KEPT_REFERENCES]>,
    /// Per context, the slot of the reference stored last: a bulk flow's packets name it,
    /// and it is looked at before the others.
    last: [u8; CONTEXTS],
}

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor {
            contexts: Vec::new(),
            last: [0; CONTEXTS],
        }
    }
}

impl Decompressor {
    /// References it keeps now (at most [`CONTEXTS`] × [`KEPT_REFERENCES`]).
    pub fn kept(&self) -> usize {
        self.contexts.iter().flatten().flatten().count()
    }

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
        if self.contexts.is_empty() {
            self.contexts = vec![Default::default(); CONTEXTS];
        }
        let kept = &mut self.contexts[r.context()];
        // in one pass: whether it is kept, and the oldest kept (the first empty slot before
        // all), by how far after `r` each is
        let (mut oldest, mut after) = (0, i64::MAX);
        for (i, k) in kept.iter().enumerate() {
            let a = match k {
                Some(k) if k.gseq == r.gseq => return,
                Some(k) => i64::from(k.gseq.wrapping_sub(r.gseq) as i32),
                None => i64::MIN,
            };
            if a < after {
                (oldest, after) = (i, a);
            }
        }
        if after < 0 {
            self.last[r.context()] = oldest as u8;
            kept[oldest] = Some(r);
        }
    }

    /// The global sequence number of the reference the compressed `body` (of global sequence
    /// number `gseq`) names, when it has not come yet (it was lost, and may be resent): its
    /// context does not keep it, and it is later than the oldest kept (or the context has
    /// room). `None` for a malformed body, or one whose reference is kept or was replaced.
    pub fn awaits(&self, gseq: u32, b: &[u8]) -> Option<u32> {
        let (_, ctx, distance, _) = head(b)?;
        let want = gseq.wrapping_sub(distance);
        if ctx >= CONTEXTS {
            return None;
        }
        let Some(kept) = self.contexts.get(ctx) else {
            // nothing kept yet: every context has room
            return (distance > 0).then_some(want);
        };
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
        let mut h = Headers::new();
        let skip = self.rebuild_against(None, gseq, b, &mut h)?;
        Ok((h, skip))
    }

    /// As [`Decompressor::rebuild`], against `r` (a reference that came too late to be kept:
    /// the packets that waited for it) if it is the one the body names; the headers written to
    /// `h` (the caller's, so that they are not copied on their way), and where the payload
    /// starts returned.
    pub fn rebuild_against(
        &self,
        r: Option<&Reference>,
        gseq: u32,
        b: &[u8],
        h: &mut Headers,
    ) -> Result<usize, Refused> {
        let (format, ctx, distance, mut at) = head(b).ok_or(Refused::Malformed)?;
        let mask = *b.get(at).ok_or(Refused::Malformed)?;
        at += 1;
        let c = self.named(r, ctx, gseq.wrapping_sub(distance), distance)?;
        let l = c.layout;
        // version 6: padding after the mask; version 7: the sequence number in segments
        let segments = match format {
            Format::V6 => {
                if mask & M_PAD != 0 {
                    let n = *b.get(at).ok_or(Refused::Malformed)?;
                    at += 1 + usize::from(n);
                }
                false
            }
            Format::V7 if mask & M_SEGS != 0 && mask & M_SEQ == 0 => {
                return Err(Refused::Malformed)
            }
            Format::V7 => mask & M_SEGS != 0,
        };
        if l.v6() && mask & M_ID != 0 || !l.timestamps() && mask & (M_TSVAL | M_TSECR) != 0 {
            return Err(Refused::Malformed);
        }
        h.len = 0;
        h.extend_from_slice(&c.headers[..l.headers()]);
        let mut explicit_id = false;
        if mask & M_ID != 0 {
            let d = unzigzag(get_varint(b, &mut at).ok_or(Refused::Malformed)?);
            let d = i16::try_from(d).map_err(|_| Refused::Malformed)?;
            let id = be16(h, 4).wrapping_add(d as u16);
            h[4..6].copy_from_slice(&id.to_be_bytes());
            explicit_id = true;
        }
        // the TCP fields, in the mask's order: sequence and acknowledgement numbers (deltas),
        // window and flags (values), timestamps (deltas)
        let t = l.ip;
        // segments are counted once the payload's length is known, after the checksum
        let mut in_segments = None;
        if mask & M_SEQ != 0 && segments {
            in_segments = Some(get_varint(b, &mut at).ok_or(Refused::Malformed)?);
        } else if mask & M_SEQ != 0 {
            add_delta(h, t + 4, b, &mut at)?;
        }
        if mask & M_ACK != 0 {
            add_delta(h, t + 8, b, &mut at)?;
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
            add_delta(h, t + 24, b, &mut at)?;
        }
        if mask & M_TSECR != 0 {
            add_delta(h, t + 28, b, &mut at)?;
        }
        let sum = b.get(at..at + 2).ok_or(Refused::Malformed)?;
        h[l.ip + 16..l.ip + 18].copy_from_slice(sum);
        at += 2;
        if let Some(v) = in_segments {
            // k of this packet's segments after the start of the reference's payload (2k), or
            // after its end (2k + 1); an IPv4 identification without its field, the segments
            // since the reference after the reference's
            let payload = b.len() - at;
            if payload == 0 {
                return Err(Refused::Malformed);
            }
            let (k, from_end) = (u64::from(v >> 1), v & 1 == 1);
            let base = if from_end {
                payload_of(&c.headers, l) as u64
            } else {
                0
            };
            let d = base.wrapping_add(k * payload as u64) as u32;
            let seq = be32(h, t + 4).wrapping_add(d);
            h[t + 4..t + 8].copy_from_slice(&seq.to_be_bytes());
            if !l.v6() && !explicit_id {
                let n = k + u64::from(from_end);
                let id = be16(h, 4).wrapping_add(n as u16);
                h[4..6].copy_from_slice(&id.to_be_bytes());
            }
        }
        set_length(h, l, l.headers() + (b.len() - at))?;
        Ok(at)
    }

    /// The reference a body names by context `ctx` and `distance` back, that of global
    /// sequence number `want`: `r` if it is that one, or else the context's.
    fn named<'a>(
        &'a self,
        r: Option<&'a Reference>,
        ctx: usize,
        want: u32,
        distance: u32,
    ) -> Result<&'a Reference, Refused> {
        let named = |k: &&Reference| k.gseq == want && usize::from(k.ctx) == ctx && distance > 0;
        match r {
            Some(r) => Some(r).filter(named),
            None => {
                let kept = match self.contexts.get(ctx) {
                    Some(kept) => kept,
                    // nothing kept yet
                    None if ctx < CONTEXTS => return Err(Refused::NoReference),
                    None => return Err(Refused::Malformed),
                };
                // (a context keeps a reference once: the slot stored last first)
                let last = kept[usize::from(self.last[ctx])].as_ref().filter(named);
                last.or_else(|| kept.iter().flatten().find(named))
            }
        }
        .ok_or(Refused::NoReference)
    }
}

/// The rebuilt headers `h` (layout `l`) of a packet of `total` bytes get its length, and with
/// IPv4 their header checksum. Inlined: left to itself, the compiler made it a function of its
/// own, and rebuilding a header took 3 % more instructions.
#[inline(always)]
fn set_length(h: &mut Headers, l: Layout, total: usize) -> Result<(), Refused> {
    if l.v6() {
        let payload = u16::try_from(total - 40).map_err(|_| Refused::Malformed)?;
        h[4..6].copy_from_slice(&payload.to_be_bytes());
    } else {
        let total = u16::try_from(total).map_err(|_| Refused::Malformed)?;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[10..12].fill(0);
        let sum = ipv4_header_checksum(h);
        h[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    Ok(())
}
