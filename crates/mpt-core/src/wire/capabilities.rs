//! What a session can do: one [`Capabilities`] value, made by the handshake, with a named
//! predicate per feature, in place of comparisons of the protocol version. A feature that
//! needs the peer's word is told in the handshake's capability list (`docs/protocol.md`,
//! "Capabilities"): entries of type, length and value after the fixed payload, where an entry
//! of an unknown type is skipped, as QUIC's transport parameters are. A session made without a
//! list (a peer of 0.1.0, or one of an older protocol version) has what its version implies.

use super::CipherFlags;
use crate::hc::Format;

/// The capability list's entry types.
pub mod entry {
    /// The features the sender takes, a bit each ([`super::Feature`]), little-endian in 1 to
    /// 8 bytes.
    pub const FEATURES: u8 = 1;
}

/// The most bytes a capability list may take: a longer one is refused with its handshake.
pub const MAX_CAPABILITY_LIST: usize = 64;

/// A feature of the capability list's [`entry::FEATURES`] bitmap: its bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Feature {
    /// TCP headers compressed against a flow's reference, in version 7's format.
    CompressedTcp = 0,
    /// Resend requests that name a lost flow's reference by its global sequence number.
    ReferenceRequests = 1,
}

impl Feature {
    /// Every feature this build has.
    pub const ALL: [Feature; 2] = [Feature::CompressedTcp, Feature::ReferenceRequests];

    const fn bit(self) -> u64 {
        1 << self as u8
    }
}

/// The features of this build, as its capability list says them.
pub fn our_features() -> u64 {
    Feature::ALL.iter().fold(0, |b, f| b | f.bit())
}

/// What a session can do: its protocol version (the header's layout), both ends' feature
/// flags ([`CipherFlags`]), and the features both ends' capability lists named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    version: u8,
    /// The feature flags both ends' handshake messages set.
    flags: u8,
    /// The features both ends' capability lists named.
    features: u64,
    /// The handshake carried capability lists.
    listed: bool,
}

impl Capabilities {
    /// A session of protocol `version` made without capability lists, where both ends'
    /// handshake messages set `flags` (the bits each set, ANDed): what the version implies.
    pub fn of_version(version: u8, flags: u8) -> Capabilities {
        let mut features = 0;
        if version >= 6 {
            features |= Feature::CompressedTcp.bit();
        }
        if version >= 7 {
            features |= Feature::ReferenceRequests.bit();
        }
        Capabilities {
            version,
            flags,
            features,
            listed: false,
        }
    }

    /// A session of protocol `version` whose handshake carried capability lists: ours and the
    /// peer's features, and both ends' `flags`.
    pub fn negotiated(version: u8, flags: u8, ours: u64, theirs: u64) -> Capabilities {
        Capabilities {
            version,
            flags,
            features: ours & theirs,
            listed: true,
        }
    }

    /// The handshake carried capability lists (a session with a peer that sends none, 0.1.0
    /// or older, is renewed once to try ours).
    pub fn listed(&self) -> bool {
        self.listed
    }

    /// The protocol version of the session's datagrams.
    pub fn version(&self) -> u8 {
        self.version
    }

    fn has(&self, f: Feature) -> bool {
        self.features & f.bit() != 0
    }

    /// TCP headers may go compressed ([`Capabilities::compressed_format`]).
    pub fn compresses_tcp(&self) -> bool {
        self.has(Feature::CompressedTcp)
    }

    /// The format of compressed headers: version 6's in a session of version 6, else 7's.
    pub fn compressed_format(&self) -> Format {
        Format::of_version(self.version)
    }

    /// A resend request may name a lost reference by its global sequence number.
    pub fn requests_references(&self) -> bool {
        self.has(Feature::ReferenceRequests)
    }

    /// The receiver keeps flows' references, and takes compressed packets against them
    /// (version 5 and later).
    pub fn keeps_references(&self) -> bool {
        self.version >= 5
    }

    /// Only a whole bulk packet (not express, not put together from pieces, at least
    /// `mpt_core::hc::COMPRESS_FROM` bytes) is its flow's reference; in version 5 every packet
    /// that is not express data is.
    pub fn references_whole_bulk_only(&self) -> bool {
        self.version >= 6
    }

    /// A parity's header carries the XOR of its group's lengths (every version spoken).
    pub fn parity_carries_lengths(&self) -> bool {
        self.version >= 5
    }

    /// Bundles may carry a UDP packet as its payload after the one before it (every version
    /// spoken).
    pub fn compresses_bundled_udp(&self) -> bool {
        self.version >= 4
    }

    /// Both ends take bundles and express data.
    pub fn express(&self) -> bool {
        self.flags & CipherFlags::EXPRESS != 0
    }

    /// Both ends take packets in pieces and answer MTU probes.
    pub fn pieces(&self) -> bool {
        self.flags & CipherFlags::PIECES != 0
    }

    /// Both ends ask for and resend lost packets.
    pub fn resend(&self) -> bool {
        self.flags & CipherFlags::RESEND != 0
    }

    /// Both ends send and use parity.
    pub fn parity(&self) -> bool {
        self.resend() && self.flags & CipherFlags::PARITY != 0
    }
}

/// A capability list: what it says of the features (`None`: no features entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapabilityList {
    pub features: Option<u64>,
}

impl CapabilityList {
    /// Ours: this build's features.
    pub fn ours() -> CapabilityList {
        CapabilityList {
            features: Some(our_features()),
        }
    }

    /// Write the list into `out`; returns its length (at most [`MAX_CAPABILITY_LIST`]).
    /// `out` must have room for it (11 bytes hold a features entry).
    pub fn emit(&self, out: &mut [u8]) -> usize {
        let mut at = 0;
        if let Some(f) = self.features {
            let bytes = f.to_le_bytes();
            let len = 8 - (f.leading_zeros() as usize / 8).min(7);
            out[at] = entry::FEATURES;
            out[at + 1] = len as u8;
            out[at + 2..at + 2 + len].copy_from_slice(&bytes[..len]);
            at += 2 + len;
        }
        at
    }

    /// Read a list: `None` when it is longer than [`MAX_CAPABILITY_LIST`], an entry runs past
    /// its end, or a features entry is empty or longer than 8 bytes. Entries of unknown types
    /// are skipped; of two features entries, the last counts.
    pub fn parse(b: &[u8]) -> Option<CapabilityList> {
        if b.len() > MAX_CAPABILITY_LIST {
            return None;
        }
        let mut list = CapabilityList::default();
        let mut at = 0;
        while at < b.len() {
            let kind = b[at];
            let len = usize::from(*b.get(at + 1)?);
            let value = b.get(at + 2..at + 2 + len)?;
            if kind == entry::FEATURES {
                if !(1..=8).contains(&len) {
                    return None;
                }
                let mut bytes = [0u8; 8];
                bytes[..len].copy_from_slice(value);
                list.features = Some(u64::from_le_bytes(bytes));
            }
            at += 2 + len;
        }
        Some(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_without_lists_has_what_its_version_implies() {
        let all = CipherFlags::EXPRESS | CipherFlags::PIECES | CipherFlags::RESEND;
        let v7 = Capabilities::of_version(7, all);
        assert!(v7.compresses_tcp() && v7.requests_references());
        assert_eq!(v7.compressed_format(), Format::V7);
        assert!(v7.express() && v7.pieces() && v7.resend() && !v7.parity());
        let v6 = Capabilities::of_version(6, all | CipherFlags::PARITY);
        assert!(v6.compresses_tcp() && !v6.requests_references() && v6.parity());
        assert_eq!(v6.compressed_format(), Format::V6);
        let v5 = Capabilities::of_version(5, 0);
        assert!(!v5.compresses_tcp() && v5.parity_carries_lengths() && !v5.express());
    }

    #[test]
    fn negotiated_features_are_those_both_lists_name() {
        let ours = our_features();
        let both = Capabilities::negotiated(7, 0, ours, ours | 1 << 40);
        assert!(both.listed() && !Capabilities::of_version(7, 0).listed());
        assert!(both.compresses_tcp() && both.requests_references());
        let no_refs = Capabilities::negotiated(7, 0, ours, Feature::CompressedTcp.bit());
        assert!(no_refs.compresses_tcp() && !no_refs.requests_references());
        let none = Capabilities::negotiated(7, 0, ours, 0);
        assert!(!none.compresses_tcp() && !none.requests_references());
    }

    #[test]
    fn a_list_round_trips_and_unknown_entries_are_skipped() {
        let mut b = [0u8; MAX_CAPABILITY_LIST];
        let n = CapabilityList::ours().emit(&mut b);
        assert_eq!(n, 3, "our features fit one byte");
        assert_eq!(CapabilityList::parse(&b[..n]), Some(CapabilityList::ours()));
        // an entry of a type this build does not know, before and after ours
        let mut with = vec![200, 3, 9, 9, 9];
        with.extend_from_slice(&b[..n]);
        with.extend_from_slice(&[77, 0]);
        assert_eq!(CapabilityList::parse(&with), Some(CapabilityList::ours()));
        let wide = CapabilityList {
            features: Some(1 << 63 | 1),
        };
        let n = wide.emit(&mut b);
        assert_eq!(n, 10);
        assert_eq!(CapabilityList::parse(&b[..n]), Some(wide));
        assert_eq!(CapabilityList::parse(&[]), Some(CapabilityList::default()));
    }

    #[test]
    fn a_malformed_list_is_refused() {
        // an entry that runs past the end, a features entry empty or too long, a list too long
        assert_eq!(CapabilityList::parse(&[1, 4, 1, 2]), None);
        assert_eq!(CapabilityList::parse(&[9]), None);
        assert_eq!(CapabilityList::parse(&[1, 0]), None);
        assert_eq!(
            CapabilityList::parse(&[1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None
        );
        assert_eq!(
            CapabilityList::parse(&[50, 0].repeat(MAX_CAPABILITY_LIST / 2 + 1)),
            None
        );
    }

    #[test]
    fn handshake_payloads_carry_a_list_or_none() {
        use crate::wire::{Initiation, Response, INITIATION_PAYLOAD_LEN};
        let init = Initiation {
            index: 7,
            timestamp: 1 << 40,
            flags: CipherFlags::EXPRESS,
            paths: 3,
        };
        let mut b = [0u8; INITIATION_PAYLOAD_LEN + MAX_CAPABILITY_LIST];
        let n = init.emit_with(&CapabilityList::ours(), &mut b);
        assert_eq!(
            Initiation::parse_with(&b[..n]),
            Some((init, Some(CapabilityList::ours())))
        );
        assert_eq!(
            Initiation::parse_with(&b[..INITIATION_PAYLOAD_LEN]),
            Some((init, None))
        );
        assert_eq!(Initiation::parse_with(&b[..n - 1]), None, "a cut entry");
        let resp = Response { index: 9, flags: 0 };
        let n = resp.emit_with(&CapabilityList::ours(), &mut b);
        assert_eq!(
            Response::parse_with(&b[..n]),
            Some((resp, Some(CapabilityList::ours())))
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_without_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = CapabilityList::parse(&b);
        }
    }
}
