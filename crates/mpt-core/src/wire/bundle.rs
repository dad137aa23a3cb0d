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
//!
//! An entry may be *compressed*: an IPv4 UDP packet whose headers are those of the entry just
//! before it in the same body but for its length, identification and checksums (a voice
//! call's, a game's, a stream's next datagram) is carried as its UDP payload after 7 bytes
//! instead of its 28 header bytes:
//!
//! ```text
//! | gap (8) | 0x10 (8) | payload length (16) | IP identification (16) | UDP checksum (16) | UDP payload |
//! ```
//!
//! The receiver rebuilds the headers from the previous entry's: total and UDP length from the
//! payload's, the identification and UDP checksum as carried, the IPv4 header checksum
//! computed. The sender compresses only packets whose IPv4 header is 20 bytes and checksums
//! right, that are not fragments, and whose UDP length is theirs, so that the rebuilt packet
//! is the one sent, byte for byte.

use super::compress::rebuild;
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
    /// Offset of the packet from the start of the body (of a compressed entry: of its UDP
    /// payload).
    pub start: usize,
    /// Bytes of it in this datagram (of a compressed entry: its UDP payload's).
    pub len: usize,
    /// The whole packet's length: more than `len` for a head piece (and for a compressed
    /// entry, by its headers).
    pub total: usize,
    /// A compressed entry's IPv4 and UDP headers, rebuilt: the packet is these, then the
    /// `len` bytes at `start`.
    pub headers: Option<[u8; UDP4_HEADERS]>,
}

impl BundleEntry {
    /// Only the start of its packet: the rest comes in continuations.
    pub fn is_head(&self) -> bool {
        self.headers.is_none() && self.total > self.len
    }

    /// The whole packet of an entry of `body` that is no head piece: borrowed from the body,
    /// or rebuilt with its headers.
    pub fn packet<'a>(&self, body: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        let bytes = &body[self.start..self.start + self.len];
        match &self.headers {
            None => std::borrow::Cow::Borrowed(bytes),
            Some(h) => {
                let mut p = Vec::with_capacity(UDP4_HEADERS + bytes.len());
                p.extend_from_slice(h);
                p.extend_from_slice(bytes);
                std::borrow::Cow::Owned(p)
            }
        }
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
        prev: Prev::None,
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
        prev: Prev::None,
    }
}

/// Iterator of [`bundle_entries`].
#[derive(Debug, Clone)]
pub struct BundleEntries<'a> {
    body: &'a [u8],
    at: usize,
    /// The sequence number of the next entry if its gap is 0.
    next: u32,
    /// The entry before, which a compressed entry's headers are rebuilt from.
    prev: Prev,
}

/// What a compressed entry's headers are rebuilt from: the entry before it, as found in the
/// body (its headers read only when needed) or as rebuilt.
#[derive(Debug, Clone, Copy)]
enum Prev {
    None,
    Whole { start: usize, len: usize },
    Rebuilt([u8; UDP4_HEADERS]),
}

impl BundleEntries<'_> {
    /// The entry after the gap at `self.at`, global sequence `seq`.
    fn entry(&self, seq: u32) -> Result<BundleEntry, WireError> {
        let start = self.at + BUNDLE_ENTRY_LEN;
        if self.body.get(start) == Some(&COMPRESSED) {
            let (start, len, headers) = self.compressed()?;
            return Ok(BundleEntry {
                seq,
                start,
                len,
                total: UDP4_HEADERS + len,
                headers: Some(headers),
            });
        }
        let rest = &self.body[start..];
        let (len, total) = match inner_len(rest)? {
            len if len <= rest.len() => (len, len),
            // the last entry, the start of a longer packet
            total if rest.len() >= MIN_HEAD_PIECE && total <= MAX_INNER => (rest.len(), total),
            len => {
                return Err(WireError::Truncated {
                    need: len,
                    got: rest.len(),
                })
            }
        };
        if len == total {
            check_inner_packet(&rest[..len])?;
        }
        Ok(BundleEntry {
            seq,
            start,
            len,
            total,
            headers: None,
        })
    }

    /// The compressed entry after the gap at `self.at`: its payload's start and length, and
    /// its headers rebuilt.
    fn compressed(&self) -> Result<(usize, usize, [u8; UDP4_HEADERS]), WireError> {
        let at = self.at + BUNDLE_ENTRY_LEN;
        let fixed = self
            .body
            .get(at..at + COMPRESSED_LEN)
            .ok_or(WireError::Truncated {
                need: COMPRESSED_LEN,
                got: self.body.len() - at,
            })?;
        let prev = match self.prev {
            Prev::Whole { start, len } => udp4_headers(&self.body[start..start + len]),
            Prev::Rebuilt(h) => Some(h),
            Prev::None => None,
        };
        // compressed against nothing: no IP packet
        let prev = prev.ok_or(WireError::NotIp(COMPRESSED >> 4))?;
        let len = usize::from(be16(&fixed[1..3]));
        let start = at + COMPRESSED_LEN;
        if len > MAX_INNER - UDP4_HEADERS || start + len > self.body.len() {
            return Err(WireError::InnerLength {
                claimed: UDP4_HEADERS + len,
                got: UDP4_HEADERS + self.body.len() - start,
            });
        }
        let headers = rebuild(&prev, len, [fixed[3], fixed[4]], [fixed[5], fixed[6]]);
        Ok((start, len, headers))
    }
}

impl Iterator for BundleEntries<'_> {
    type Item = Result<BundleEntry, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == self.body.len() {
            return None;
        }
        let gap = self.body[self.at];
        let seq = self.next.wrapping_add(u32::from(gap));
        let e = match self.entry(seq) {
            Ok(e) => e,
            Err(e) => {
                // nothing more from a body found broken
                self.at = self.body.len();
                return Some(Err(e));
            }
        };
        self.next = seq.wrapping_add(1);
        self.at = e.start + e.len;
        self.prev = match e.headers {
            Some(h) => Prev::Rebuilt(h),
            None if e.len == e.total => Prev::Whole {
                start: e.start,
                len: e.len,
            },
            None => Prev::None,
        };
        Some(Ok(e))
    }
}

/// The length an inner packet's IP header gives (the packet may be cut short).
fn inner_len(p: &[u8]) -> Result<usize, WireError> {
    match crate::inner::version(p) {
        None => Err(WireError::EmptyPayload),
        Some(4 | 6) => crate::inner::claimed_len(p).ok_or(WireError::Truncated {
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

    /// An IPv4 UDP packet of `payload` bytes from 198.18.0.1:4000 to 198.18.0.2:5000, with
    /// identification `id` and valid checksums (the UDP one over the payload only: any value
    /// is carried as it is).
    fn udp4(payload: &[u8], id: u16) -> Vec<u8> {
        let len = 28 + payload.len();
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 18, 0, 1]);
        p[16..20].copy_from_slice(&[198, 18, 0, 2]);
        let sum = internet_checksum(0, &[&p[..20]]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p[20..22].copy_from_slice(&4000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5000u16.to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        let usum = internet_checksum(0, &[payload]);
        p[26..28].copy_from_slice(&usum.to_be_bytes());
        p[28..].copy_from_slice(payload);
        p
    }

    /// Pack `packets` (global sequences from 1) as the sender does: compressed where the
    /// entry before allows it.
    fn pack(packets: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = None;
        for (k, p) in packets.iter().enumerate() {
            let seq = k as u32 + 1;
            match prev {
                Some(h) if k > 0 && udp4_headers(p).is_some_and(|own| compresses(&h, &own)) => {
                    push_compressed_entry(&mut body, seq - 1, seq, p).unwrap()
                }
                _ => push_bundle_entry(&mut body, (k > 0).then_some(seq - 1), seq, p).unwrap(),
            }
            prev = udp4_headers(p);
        }
        body
    }

    #[test]
    fn a_udp_packet_like_the_one_before_goes_without_its_headers_and_comes_back_whole() {
        let packets = [
            udp4(&[1; 160], 7),
            udp4(&[2; 160], 8),
            udp4(&[3; 100], 9000),
        ];
        let body = pack(&packets);
        // 1 + 188, then 1 + 7 + 160 and 1 + 7 + 100: 21 bytes less for each after the first
        assert_eq!(body.len(), 189 + 168 + 108);
        assert_eq!(body[190], COMPRESSED);
        assert_eq!(check_bundle(&body), Ok(3));
        let back: Vec<Vec<u8>> = bundle_entries(&body, 1)
            .map(|e| e.unwrap().packet(&body).into_owned())
            .collect();
        assert_eq!(back, packets);
    }

    #[test]
    fn what_the_receiver_could_not_rebuild_byte_for_byte_goes_whole() {
        let first = udp4(&[1; 40], 1);
        let h = udp4_headers(&first).unwrap();
        // another flow, another TTL, a fragment, a bad header checksum, IP options, TCP
        let mut other_port = udp4(&[2; 40], 2);
        other_port[22] = 9;
        let mut ttl = udp4(&[2; 40], 2);
        ttl[8] = 63;
        let sum = internet_checksum(
            0,
            &[&{
                let mut z = ttl[..20].to_vec();
                z[10..12].fill(0);
                z
            }],
        );
        ttl[10..12].copy_from_slice(&sum.to_be_bytes());
        let mut bad_sum = udp4(&[2; 40], 2);
        bad_sum[10] ^= 1;
        let mut fragment = udp4(&[2; 40], 2);
        fragment[6] = 0x20; // MF
        for p in [&other_port, &ttl, &bad_sum, &fragment] {
            assert!(!udp4_headers(p).is_some_and(|own| compresses(&h, &own)));
        }
        assert!(compresses(&h, &udp4_headers(&udp4(&[9; 3], 500)).unwrap()));
        assert!(udp4_headers(&ipv6(8)).is_none());
    }

    #[test]
    fn a_compressed_entry_with_nothing_to_rebuild_from_or_cut_short_is_refused() {
        let body = pack(&[udp4(&[1; 20], 1), udp4(&[2; 20], 2)]);
        // the first entry a head piece, or not UDP: nothing to rebuild the second from
        let alone = body[49..].to_vec();
        assert_eq!(check_bundle(&alone), Err(WireError::NotIp(1)));
        let mut after_ipv6 = Vec::new();
        push_bundle_entry(&mut after_ipv6, None, 1, &ipv6(8)).unwrap();
        after_ipv6.extend_from_slice(&body[49..]);
        assert_eq!(check_bundle(&after_ipv6), Err(WireError::NotIp(1)));
        // its payload longer than the body, or its fixed part cut
        for cut in [1, 20, 26] {
            let short = &body[..body.len() - cut];
            assert!(check_bundle(short).is_err(), "cut by {cut}");
        }
        let mut long = body.clone();
        long.push(0);
        assert!(check_bundle(&long).is_err());
    }

    proptest! {
        #[test]
        fn any_run_of_udp_and_other_packets_comes_back_byte_for_byte(
            runs in proptest::collection::vec((0u8..4, 0usize..200, any::<u16>(), any::<u8>()), 1..20)
        ) {
            let packets: Vec<Vec<u8>> = runs
                .iter()
                .map(|&(kind, len, id, fill)| match kind {
                    0 => ipv6(len),
                    1 => ipv4(20 + len, fill),
                    _ => udp4(&vec![fill; len], id),
                })
                .collect();
            let body = pack(&packets);
            prop_assert_eq!(check_bundle(&body), Ok(packets.len()));
            let back: Vec<Vec<u8>> = bundle_entries(&body, 1)
                .map(|e| e.unwrap().packet(&body).into_owned())
                .collect();
            prop_assert_eq!(back, packets);
        }
    }
}
