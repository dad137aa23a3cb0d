//! Bundles: several inner packets in one data datagram ([`Kind::Bundle`]).
//!
//! The body after the header is a sequence of entries, each a 4-byte entry header — the
//! packet's global sequence number as an offset from the header's, and its length — and the
//! packet itself:
//!
//! ```text
//! | seq offset (16) | length (16) | inner IP packet (length bytes) | next entry ...
//! ```
//!
//! The header's global sequence is the first entry's (its offset is 0); its path sequence is
//! the first entry's too, and the entries take consecutive path sequences, so that a lost
//! bundle counts as the packets it carried.

use super::*;

/// Bytes an entry adds before its packet.
pub const BUNDLE_ENTRY_LEN: usize = 4;

/// Most entries a bundle may carry.
pub const MAX_BUNDLE: usize = 64;

/// One packet of a bundle: its global sequence number and where it lies in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleEntry {
    pub seq: u32,
    /// Offset of the packet from the start of the body.
    pub start: usize,
    pub len: usize,
}

/// Check a bundle body: at least one entry, at most [`MAX_BUNDLE`], each a whole IPv4 or IPv6
/// packet whose length field matches, and nothing after the last. Returns the number of
/// entries.
pub fn check_bundle(body: &[u8]) -> Result<usize, WireError> {
    if body.is_empty() {
        return Err(WireError::EmptyPayload);
    }
    let mut n = 0;
    for e in bundle_entries(body, 0) {
        let e = e?;
        n += 1;
        if n > MAX_BUNDLE {
            return Err(WireError::BundleCount(n));
        }
        check_inner_packet(&body[e.start..e.start + e.len])?;
    }
    Ok(n)
}

/// The entries of a bundle body whose header carries global sequence `seq`. Yields an error
/// (and then nothing) where an entry runs past the end. Check the body with [`check_bundle`]
/// first to know every packet is whole.
pub fn bundle_entries(body: &[u8], seq: u32) -> BundleEntries<'_> {
    BundleEntries { body, at: 0, seq }
}

/// Iterator of [`bundle_entries`].
#[derive(Debug, Clone)]
pub struct BundleEntries<'a> {
    body: &'a [u8],
    at: usize,
    seq: u32,
}

impl Iterator for BundleEntries<'_> {
    type Item = Result<BundleEntry, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.body.len() - self.at;
        if rest == 0 {
            return None;
        }
        if rest < BUNDLE_ENTRY_LEN {
            self.at = self.body.len();
            return Some(Err(WireError::Truncated {
                need: BUNDLE_ENTRY_LEN,
                got: rest,
            }));
        }
        let h = &self.body[self.at..self.at + BUNDLE_ENTRY_LEN];
        let offset = be16(&h[0..2]);
        let len = usize::from(be16(&h[2..4]));
        let start = self.at + BUNDLE_ENTRY_LEN;
        if len > self.body.len() - start {
            self.at = self.body.len();
            return Some(Err(WireError::Truncated {
                need: len,
                got: self.body.len() - start,
            }));
        }
        self.at = start + len;
        Some(Ok(BundleEntry {
            seq: self.seq.wrapping_add(u32::from(offset)),
            start,
            len,
        }))
    }
}

/// Append an entry for `packet`, global sequence `seq`, to a bundle body whose first entry has
/// global sequence `first` (`None` when the entry's offset does not fit 16 bits).
pub fn push_bundle_entry(body: &mut Vec<u8>, first: u32, seq: u32, packet: &[u8]) -> Option<()> {
    let offset = u16::try_from(seq.wrapping_sub(first)).ok()?;
    let len = u16::try_from(packet.len()).ok()?;
    body.extend_from_slice(&offset.to_be_bytes());
    body.extend_from_slice(&len.to_be_bytes());
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

    #[test]
    fn entries_come_back_as_pushed() {
        let mut body = Vec::new();
        push_bundle_entry(&mut body, 100, 100, &ipv4(28, 1)).unwrap();
        push_bundle_entry(&mut body, 100, 103, &ipv4(60, 2)).unwrap();
        assert_eq!(check_bundle(&body), Ok(2));
        let e: Vec<_> = bundle_entries(&body, 100).map(Result::unwrap).collect();
        assert_eq!((e[0].seq, e[0].start, e[0].len), (100, 4, 28));
        assert_eq!((e[1].seq, e[1].start, e[1].len), (103, 36, 60));
        assert_eq!(body[e[1].start + 1], 2);
    }

    #[test]
    fn offsets_wrap_with_the_sequence_and_refuse_what_16_bits_cannot_say() {
        let mut body = Vec::new();
        push_bundle_entry(&mut body, u32::MAX, u32::MAX, &ipv4(20, 0)).unwrap();
        push_bundle_entry(&mut body, u32::MAX, 1, &ipv4(20, 0)).unwrap();
        let seqs: Vec<u32> = bundle_entries(&body, u32::MAX)
            .map(|e| e.unwrap().seq)
            .collect();
        assert_eq!(seqs, [u32::MAX, 1]);
        assert_eq!(push_bundle_entry(&mut body, 0, 70_000, &ipv4(20, 0)), None);
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(check_bundle(&[]), Err(WireError::EmptyPayload));
        let mut body = Vec::new();
        push_bundle_entry(&mut body, 0, 0, &ipv4(20, 0)).unwrap();
        // a stray byte after the last entry
        let mut extra = body.clone();
        extra.push(0);
        assert!(matches!(
            check_bundle(&extra),
            Err(WireError::Truncated { .. })
        ));
        // an entry longer than what is left
        let mut long = body.clone();
        long[3] = 21;
        assert!(matches!(
            check_bundle(&long),
            Err(WireError::Truncated { .. })
        ));
        // an entry that is no IP packet
        let mut not_ip = body.clone();
        not_ip[4] = 0x15;
        assert_eq!(check_bundle(&not_ip), Err(WireError::NotIp(1)));
        // too many entries
        let mut many = Vec::new();
        for s in 0..=MAX_BUNDLE as u32 {
            push_bundle_entry(&mut many, 0, s, &ipv4(20, 0)).unwrap();
        }
        assert_eq!(
            check_bundle(&many),
            Err(WireError::BundleCount(MAX_BUNDLE + 1))
        );
    }

    proptest! {
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
            gaps in proptest::collection::vec(0u32..40, MAX_BUNDLE),
        ) {
            let mut body = Vec::new();
            let mut seq = first;
            let mut want = Vec::new();
            for (k, &len) in lens.iter().enumerate() {
                let p = ipv4(len, k as u8);
                push_bundle_entry(&mut body, first, seq, &p).unwrap();
                want.push((seq, p));
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
