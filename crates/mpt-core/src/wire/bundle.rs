//! Bundles: several inner packets in one data datagram ([`Kind::Bundle`]).
//!
//! The body after the header is a sequence of entries, each one byte — how many global
//! sequence numbers lie between this packet's and the previous entry's (0: the next one) —
//! and the packet itself, whose length its own IP header gives:
//!
//! ```text
//! | gap (8) | inner IPv4 or IPv6 packet | gap (8) | packet | ...
//! ```
//!
//! The first entry's sequence number is the header's (its gap is 0); each next one is the
//! previous one's plus 1 plus its gap. The header's path sequence is the first entry's, and the
//! entries take consecutive path sequences, so that a lost bundle counts as the packets it
//! carried.
//!
//! The last entry may be a *head piece*: the start of a packet longer than the datagram had
//! room for (its IP header says more bytes than are left, at least [`MIN_HEAD_PIECE`] are).
//! The rest follows in [`Kind::Continued`] datagrams, whose body starts with a continuation —
//! offset and length, then those bytes of the packet whose sequence number the header carries
//! — and goes on with entries as a bundle's, numbered from the header's sequence plus 1:
//!
//! ```text
//! | offset (16) | length (16) | bytes | gap (8) | packet | ... | gap (8) | head piece |
//! ```
//!
//! A continuation takes no path sequence: a packet's is its head's.

use super::*;

/// Bytes an entry adds before its packet.
pub const BUNDLE_ENTRY_LEN: usize = 1;

/// Most entries a bundle may carry.
pub const MAX_BUNDLE: usize = 64;

/// Fewest bytes of a packet a head piece carries (every IPv4 and IPv6 header whole).
pub const MIN_HEAD_PIECE: usize = 64;

/// Bytes before a continuation's own: its offset and length.
pub const CONTINUATION_LEN: usize = 4;

/// One packet of a bundle: its global sequence number and where it lies in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleEntry {
    pub seq: u32,
    /// Offset of the packet from the start of the body.
    pub start: usize,
    /// Bytes of it in this datagram.
    pub len: usize,
    /// The whole packet's length: more than `len` for a head piece.
    pub total: usize,
}

impl BundleEntry {
    /// Only the start of its packet: the rest comes in continuations.
    pub fn is_head(&self) -> bool {
        self.total > self.len
    }
}

/// The continuation a [`Kind::Continued`] body starts with: bytes `offset..offset + len` of
/// the packet whose sequence number the header carries, at `CONTINUATION_LEN` in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continuation {
    pub offset: usize,
    pub len: usize,
}

/// Check a [`Kind::Continued`] body: a continuation of at least one byte at a nonzero offset,
/// within an IP packet's largest size, then entries as in a bundle (none is fine). Returns
/// the continuation and the number of entries.
pub fn check_continued(body: &[u8]) -> Result<(Continuation, usize), WireError> {
    if body.len() < CONTINUATION_LEN {
        return Err(WireError::Truncated {
            need: CONTINUATION_LEN,
            got: body.len(),
        });
    }
    let offset = usize::from(be16(&body[0..2]));
    let len = usize::from(be16(&body[2..4]));
    if offset == 0 || len == 0 || offset + len > MAX_INNER || CONTINUATION_LEN + len > body.len() {
        return Err(WireError::BadPiece { offset, len });
    }
    let mut n = 0;
    for e in continued_entries(body, 0) {
        e?;
        n += 1;
        if n > MAX_BUNDLE {
            return Err(WireError::BundleCount(n));
        }
    }
    Ok((Continuation { offset, len }, n))
}

/// The entries after the continuation of a [`Kind::Continued`] body (checked by
/// [`check_continued`]) whose header carries global sequence `seq`.
pub fn continued_entries(body: &[u8], seq: u32) -> BundleEntries<'_> {
    let at = body
        .get(2..4)
        .map_or(body.len(), |l| CONTINUATION_LEN + usize::from(be16(l)))
        .min(body.len());
    BundleEntries {
        body,
        at,
        next: seq.wrapping_add(1),
    }
}

/// Start a [`Kind::Continued`] body in `body`: bytes `offset..` of a packet, `piece`.
pub fn push_continuation(body: &mut Vec<u8>, offset: usize, piece: &[u8]) {
    body.extend_from_slice(&(offset as u16).to_be_bytes());
    body.extend_from_slice(&(piece.len() as u16).to_be_bytes());
    body.extend_from_slice(piece);
}

/// Largest inner packet the format can carry in pieces (an IPv6 packet's 40-byte header and
/// largest payload length; offsets are 16 bits).
const MAX_INNER: usize = u16::MAX as usize;

/// Check a bundle body: at least one entry, at most [`MAX_BUNDLE`], the first with gap 0,
/// each a whole IPv4 or IPv6 packet, and nothing after the last. Returns the number of
/// entries.
pub fn check_bundle(body: &[u8]) -> Result<usize, WireError> {
    if body.is_empty() {
        return Err(WireError::EmptyPayload);
    }
    if body[0] != 0 {
        return Err(WireError::BundleGap(body[0]));
    }
    let mut n = 0;
    for e in bundle_entries(body, 0) {
        e?;
        n += 1;
        if n > MAX_BUNDLE {
            return Err(WireError::BundleCount(n));
        }
    }
    Ok(n)
}

/// The entries of a bundle body whose header carries global sequence `seq`. Yields an error
/// (and then nothing) where an entry is not a whole IP packet.
pub fn bundle_entries(body: &[u8], seq: u32) -> BundleEntries<'_> {
    BundleEntries {
        body,
        at: 0,
        // the first entry's gap (0) brings it to `seq`
        next: seq,
    }
}

/// Iterator of [`bundle_entries`].
#[derive(Debug, Clone)]
pub struct BundleEntries<'a> {
    body: &'a [u8],
    at: usize,
    /// The sequence number of the next entry if its gap is 0.
    next: u32,
}

impl Iterator for BundleEntries<'_> {
    type Item = Result<BundleEntry, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == self.body.len() {
            return None;
        }
        let gap = self.body[self.at];
        let start = self.at + BUNDLE_ENTRY_LEN;
        let rest = &self.body[start..];
        let len = match inner_len(rest) {
            Ok(len) if len <= rest.len() => Ok((len, len)),
            // the last entry, the start of a longer packet
            Ok(total) if rest.len() >= MIN_HEAD_PIECE && total <= MAX_INNER => {
                Ok((rest.len(), total))
            }
            Ok(len) => Err(WireError::Truncated {
                need: len,
                got: rest.len(),
            }),
            Err(e) => Err(e),
        }
        .and_then(|(len, total)| {
            if len == total {
                check_inner_packet(&rest[..len])?;
            }
            Ok((len, total))
        });
        let (len, total) = match len {
            Ok(l) => l,
            Err(e) => {
                // nothing more from a body found broken
                self.at = self.body.len();
                return Some(Err(e));
            }
        };
        let seq = self.next.wrapping_add(u32::from(gap));
        self.next = seq.wrapping_add(1);
        self.at = start + len;
        Some(Ok(BundleEntry {
            seq,
            start,
            len,
            total,
        }))
    }
}

/// The length an inner packet's IP header gives (the packet may be cut short).
fn inner_len(p: &[u8]) -> Result<usize, WireError> {
    match p.first().map(|b| b >> 4) {
        None => Err(WireError::EmptyPayload),
        Some(4) if p.len() >= 4 => Ok(usize::from(be16(&p[2..4]))),
        Some(6) if p.len() >= 6 => Ok(40 + usize::from(be16(&p[4..6]))),
        Some(4 | 6) => Err(WireError::Truncated {
            need: 6,
            got: p.len(),
        }),
        Some(v) => Err(WireError::NotIp(v)),
    }
}

/// Append an entry for `packet` (a whole IP packet), global sequence `seq`, to a bundle body
/// whose last entry has global sequence `last` (`None` for the first entry, which must have
/// the header's). `None` when the gap does not fit a byte.
pub fn push_bundle_entry(
    body: &mut Vec<u8>,
    last: Option<u32>,
    seq: u32,
    packet: &[u8],
) -> Option<()> {
    let gap = match last {
        None => 0,
        Some(l) => u8::try_from(seq.wrapping_sub(l).wrapping_sub(1)).ok()?,
    };
    body.push(gap);
    body.extend_from_slice(packet);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ipv4(len: usize, fill: u8) -> Vec<u8> {
        let mut p = vec![fill; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p
    }

    fn ipv6(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 40 + payload];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
        p
    }

    #[test]
    fn entries_come_back_as_pushed() {
        let mut body = Vec::new();
        push_bundle_entry(&mut body, None, 100, &ipv4(28, 1)).unwrap();
        push_bundle_entry(&mut body, Some(100), 103, &ipv4(60, 2)).unwrap();
        push_bundle_entry(&mut body, Some(103), 104, &ipv6(8)).unwrap();
        assert_eq!(body.len(), 3 + 28 + 60 + 48);
        assert_eq!(check_bundle(&body), Ok(3));
        let e: Vec<_> = bundle_entries(&body, 100).map(Result::unwrap).collect();
        assert_eq!((e[0].seq, e[0].start, e[0].len), (100, 1, 28));
        assert_eq!((e[1].seq, e[1].start, e[1].len), (103, 30, 60));
        assert_eq!((e[2].seq, e[2].start, e[2].len), (104, 91, 48));
        assert_eq!(body[e[1].start + 1], 2);
    }

    #[test]
    fn gaps_wrap_with_the_sequence_and_refuse_what_a_byte_cannot_say() {
        let mut body = Vec::new();
        push_bundle_entry(&mut body, None, u32::MAX, &ipv4(20, 0)).unwrap();
        push_bundle_entry(&mut body, Some(u32::MAX), 1, &ipv4(20, 0)).unwrap();
        let seqs: Vec<u32> = bundle_entries(&body, u32::MAX)
            .map(|e| e.unwrap().seq)
            .collect();
        assert_eq!(seqs, [u32::MAX, 1]);
        assert_eq!(
            push_bundle_entry(&mut body, Some(1), 258, &ipv4(20, 0)),
            None
        );
        assert_eq!(
            push_bundle_entry(&mut body, Some(1), 257, &ipv4(20, 0)),
            Some(())
        );
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(check_bundle(&[]), Err(WireError::EmptyPayload));
        let mut body = Vec::new();
        push_bundle_entry(&mut body, None, 0, &ipv4(20, 0)).unwrap();
        assert_eq!(check_bundle(&body), Ok(1));
        // a first entry with a gap
        let mut gap = body.clone();
        gap[0] = 3;
        assert_eq!(check_bundle(&gap), Err(WireError::BundleGap(3)));
        // a stray byte after the last entry
        let mut extra = body.clone();
        extra.push(0);
        assert!(check_bundle(&extra).is_err());
        // an entry whose IP header claims more than is left
        let mut long = body.clone();
        long[4] = 21;
        assert!(matches!(
            check_bundle(&long),
            Err(WireError::Truncated { .. })
        ));
        // or less than an IP header
        let mut short = body.clone();
        short[4] = 8;
        assert!(check_bundle(&short).is_err());
        // an entry that is no IP packet
        let mut not_ip = body.clone();
        not_ip[1] = 0x15;
        assert_eq!(check_bundle(&not_ip), Err(WireError::NotIp(1)));
        // too many entries
        let mut many = Vec::new();
        for s in 0..=MAX_BUNDLE as u32 {
            push_bundle_entry(&mut many, s.checked_sub(1), s, &ipv4(20, 0)).unwrap();
        }
        assert_eq!(
            check_bundle(&many),
            Err(WireError::BundleCount(MAX_BUNDLE + 1))
        );
    }

    #[test]
    fn a_last_entry_longer_than_the_body_is_a_head_piece_and_its_rest_a_continuation() {
        let big = ipv4(1500, 7);
        let mut body = Vec::new();
        push_bundle_entry(&mut body, None, 10, &ipv4(40, 1)).unwrap();
        push_bundle_entry(&mut body, Some(10), 11, &big[..1000]).unwrap();
        assert_eq!(check_bundle(&body), Ok(2));
        let e: Vec<_> = bundle_entries(&body, 10).map(Result::unwrap).collect();
        assert!(!e[0].is_head());
        assert_eq!((e[1].seq, e[1].len, e[1].total), (11, 1000, 1500));
        assert!(e[1].is_head());
        // a piece shorter than any IP header is refused
        let mut short = Vec::new();
        push_bundle_entry(&mut short, None, 10, &big[..MIN_HEAD_PIECE - 1]).unwrap();
        assert!(check_bundle(&short).is_err());

        let mut cont = Vec::new();
        push_continuation(&mut cont, 1000, &big[1000..]);
        push_bundle_entry(&mut cont, Some(11), 13, &ipv4(60, 2)).unwrap();
        assert_eq!(
            check_continued(&cont),
            Ok((
                Continuation {
                    offset: 1000,
                    len: 500
                },
                1
            ))
        );
        let e: Vec<_> = continued_entries(&cont, 11).map(Result::unwrap).collect();
        assert_eq!((e[0].seq, e[0].start, e[0].len), (13, 505, 60));
        // a continuation alone
        let mut only = Vec::new();
        push_continuation(&mut only, 1000, &big[1000..]);
        assert_eq!(check_continued(&only).map(|c| c.1), Ok(0));
        // at offset 0, empty, past the body, or past an IP packet's size
        for (offset, len) in [(0u16, 10u16), (10, 0), (10, 600), (65000, 536)] {
            let mut bad = only.clone();
            bad[0..2].copy_from_slice(&offset.to_be_bytes());
            bad[2..4].copy_from_slice(&len.to_be_bytes());
            assert!(check_continued(&bad).is_err(), "{offset} {len}");
        }
    }

    proptest! {
        #[test]
        fn any_continued_body_parses_without_panic(
            body in proptest::collection::vec(any::<u8>(), 0..600),
            seq in any::<u32>(),
        ) {
            let _ = check_continued(&body);
            for e in continued_entries(&body, seq).flatten() {
                prop_assert!(e.start + e.len <= body.len());
            }
        }

        #[test]
        fn any_body_parses_without_panic_and_entries_stay_inside(
            body in proptest::collection::vec(any::<u8>(), 0..600),
            seq in any::<u32>(),
        ) {
            let _ = check_bundle(&body);
            for e in bundle_entries(&body, seq).flatten() {
                prop_assert!(e.start + e.len <= body.len());
            }
        }

        #[test]
        fn packed_packets_round_trip(
            lens in proptest::collection::vec(20usize..300, 1..MAX_BUNDLE),
            first in any::<u32>(),
            gaps in proptest::collection::vec(0u32..=255, MAX_BUNDLE),
        ) {
            let mut body = Vec::new();
            let mut seq = first;
            let mut last = None;
            let mut want = Vec::new();
            for (k, &len) in lens.iter().enumerate() {
                let p = ipv4(len, k as u8);
                push_bundle_entry(&mut body, last, seq, &p).unwrap();
                want.push((seq, p));
                last = Some(seq);
                seq = seq.wrapping_add(1 + gaps[k]);
            }
            prop_assert_eq!(check_bundle(&body), Ok(lens.len()));
            let got: Vec<(u32, Vec<u8>)> = bundle_entries(&body, first)
                .map(|e| { let e = e.unwrap(); (e.seq, body[e.start..e.start + e.len].to_vec()) })
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
