//! The mptd wire format (specified in `docs/protocol.md`).
//!
//! Every UDP payload starts with a 16-byte [`Header`]. A data datagram carries one inner IPv4 or
//! IPv6 packet after it; control datagrams (keepalive, keepalive-ack, receiver report) carry
//! their own small bodies. [`Datagram::parse`] validates a buffer once; after that no accessor
//! can panic. The `*Repr` types build datagrams into caller-provided buffers.

mod bundle;
mod capabilities;
mod compress;
mod datagram;
mod handshake;
mod header;
mod nack;
mod parity;
mod report;

pub use bundle::{
    bundle_entries, check_bundle, check_continued, continued_entries, push_bundle_entry,
    push_continuation, BundleEntries, BundleEntry, Continuation, BUNDLE_ENTRY_LEN,
    CONTINUATION_LEN, MAX_BUNDLE, MIN_HEAD_PIECE,
};
pub use capabilities::{
    entry as capability_entry, our_features, Capabilities, CapabilityList, Feature,
    MAX_CAPABILITY_LIST,
};
pub use compress::{
    compresses, push_compressed_entry, udp4_headers, COMPRESSED, COMPRESSED_LEN, UDP4_HEADERS,
};
pub(crate) use datagram::exact_len;
pub use datagram::{check_data_body, check_inner_packet, AckRepr, Datagram};
pub use handshake::{
    handshake_len, handshake_len_ok, CipherFlags, Initiation, Response, COOKIE_REPLY_LEN,
    INITIATION_LEN, INITIATION_MACS, INITIATION_PAYLOAD_LEN, NOISE_INITIATION_LEN,
    NOISE_RESPONSE_LEN, RESPONSE_LEN, RESPONSE_PAYLOAD_LEN,
};
pub use header::{Header, HeaderRepr};
pub use nack::{
    check_nack, emit_nack, emit_nack_references, nack_len, nack_names, nack_ranges,
    nack_references, NackRange, MAX_NACK_RANGES, NACK_FIXED_LEN, NACK_PATHS, NACK_RANGE_LEN,
    NACK_REFERENCES,
};
pub use parity::{check_parity, ip_length, xor_into, MAX_PARITY_GROUP, MIN_PARITY_GROUP};
pub use report::{report_len, Report, ReportEntry, ReportRepr};
// Its public path since before it moved out: `hc` needs it too, and takes it from there.
pub use crate::checksum::internet_checksum;

/// Protocol version carried in the top three bits of byte 0: the one we speak first. 7 is
/// the last those bits hold; it says the header's layout, and features are negotiated in the
/// handshake's capability lists ([`Capabilities`]).
pub const VERSION: u8 = 7;

/// The oldest version we still speak, to a peer that has not upgraded: its datagrams are
/// taken, and a session with it uses its version (handshake, `docs/protocol.md`, "Versions").
pub const MIN_VERSION: u8 = 5;

/// The version in a datagram's header, if it has a first byte.
pub fn version_of(datagram: &[u8]) -> Option<u8> {
    datagram.first().map(|b| b >> 5)
}

/// Write `version` into the header at the start of `datagram` (its kind and sealed flag
/// kept).
pub fn set_version(datagram: &mut [u8], version: u8) {
    if let Some(b) = datagram.first_mut() {
        *b = (*b & 0x1f) | (version << 5);
    }
}

/// Length of the common header.
pub const HEADER_LEN: usize = 16;

/// Length of a keepalive: the header and a flags word ([`Datagram::Keepalive`]).
pub const KEEPALIVE_LEN: usize = HEADER_LEN + 4;

/// A keepalive's flag: the sender hears nothing from us on this path (it declared the path
/// down), so we must not send data on it either.
pub const KEEPALIVE_SILENT: u8 = 1;

/// Length of a keepalive-ack (header + echoed timestamp + hold time).
pub const ACK_LEN: usize = HEADER_LEN + 8;

/// Smallest path MTU probe: the header and the 2-byte size it claims; padding (any bytes)
/// brings it to that size.
pub const PROBE_MIN_LEN: usize = HEADER_LEN + 2;

/// Length of a probe's answer: the header and the size of the probe that arrived.
pub const PROBE_ACK_LEN: usize = HEADER_LEN + 2;

/// Length of the fixed part of a receiver report, before its entries.
pub const REPORT_FIXED_LEN: usize = HEADER_LEN + 4;

/// Length of the counter that follows the header of a sealed datagram: its low 32 bits (the
/// receiver takes the rest from the highest it has seen, [`crate::seal::expand_counter`]).
pub const COUNTER_LEN: usize = 4;

/// Length of the authentication tag at the end of a sealed datagram.
pub const TAG_LEN: usize = 16;

/// Header and counter: the associated data, before the encrypted body.
pub const SEALED_HEADER_LEN: usize = HEADER_LEN + COUNTER_LEN;

/// Bytes a sealed datagram has beyond its plain form.
pub const SEAL_OVERHEAD: usize = COUNTER_LEN + TAG_LEN;

/// Link-layer framing counted per datagram (an Ethernet header, as `tbf` counts it): a
/// configured path rate is a link rate, and a 200-byte packet is 7 % more on the wire.
pub const FRAMING: usize = 14;

/// What a datagram adds to the inner packet it carries: all the overhead arithmetic in one
/// place. The cipher does not matter (both add [`SEAL_OVERHEAD`]); sealing and the outer
/// address family do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overhead {
    sealed: bool,
    ipv6: bool,
}

impl Overhead {
    pub const fn new(sealed: bool, ipv6: bool) -> Overhead {
        Overhead { sealed, ipv6 }
    }

    /// UDP payload beyond the inner packet: the header, and the counter and tag when sealed.
    pub const fn datagram(self) -> usize {
        HEADER_LEN + if self.sealed { SEAL_OVERHEAD } else { 0 }
    }

    /// Where the inner packet starts in a datagram: after the header, and the counter when
    /// sealed (the tag follows the packet).
    pub const fn prefix(self) -> usize {
        if self.sealed {
            SEALED_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The outer IP and UDP headers.
    pub const fn outer(self) -> usize {
        if self.ipv6 {
            48
        } else {
            28
        }
    }

    /// What the path adds around a datagram on the wire: outer IP + UDP and [`FRAMING`].
    pub const fn outer_link(self) -> usize {
        self.outer() + FRAMING
    }

    /// Beyond the inner packet, in the path's IP MTU: [`datagram`](Self::datagram) +
    /// [`outer`](Self::outer).
    pub const fn ip(self) -> usize {
        self.datagram() + self.outer()
    }

    /// Beyond the inner packet on the wire, framing included: what a path's rate carries.
    pub const fn link(self) -> usize {
        self.ip() + FRAMING
    }
}

/// Length of one report entry in this version. Receivers accept longer entries (and ignore the
/// extra bytes) so that later versions can append fields.
pub const REPORT_ENTRY_LEN: usize = 44;

pub(crate) mod field {
    use std::ops::Range;
    pub const VER_TYPE: usize = 0;
    pub const PATH: usize = 1;
    pub const PATH_SEQ: Range<usize> = 2..4;
    pub const SESSION: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..12;
    pub const TIMESTAMP: Range<usize> = 12..16;
    // sealed: the counter after the header
    pub const COUNTER: Range<usize> = 16..20;
    // keepalive-ack body
    pub const ACK_ECHO: Range<usize> = 16..20;
    pub const ACK_HOLD: Range<usize> = 20..24;
    // report body
    pub const REPORT_COUNT: usize = 16;
    pub const REPORT_ENTRY_LEN: usize = 17;
    pub const REPORT_RESERVED: Range<usize> = 18..20;
    // report entry, relative to the entry's start
    pub const E_PATH: usize = 0;
    pub const E_FLAGS: usize = 1;
    pub const E_PATH_SEQ: Range<usize> = 2..4;
    pub const E_PACKETS: Range<usize> = 4..8;
    pub const E_BYTES: Range<usize> = 8..16;
    pub const E_LOST: Range<usize> = 16..20;
    pub const E_OWD_MIN: Range<usize> = 20..24;
    pub const E_JITTER: Range<usize> = 24..28;
    pub const E_OWD: Range<usize> = 28..32;
    pub const E_ECHO: Range<usize> = 32..36;
    pub const E_ECHO_AGE: Range<usize> = 36..40;
    pub const E_OWD_MIN_LEN: Range<usize> = 40..42;
    pub const E_RESERVED: Range<usize> = 42..44;
}

/// Bit 4 of byte 0: "sealed" — a counter follows the header and the body is encrypted and
/// authenticated ([`crate::seal`]). [`Datagram::parse`] takes plain datagrams only: a sealed
/// one is opened first and turned into its plain form.
pub const SEALED_FLAG: u8 = 0x10;

/// What a datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An inner IP packet follows the header.
    Data = 0,
    /// Liveness probe; the header alone.
    Keepalive = 1,
    /// Answer to a keepalive, echoing its timestamp so the prober measures RTT.
    KeepaliveAck = 2,
    /// Receiver report: per-path counters and delay figures.
    Report = 3,
    /// Handshake, first message: a Noise IKpsk2 initiation (never sealed).
    Initiation = 4,
    /// The sender is stopping: its paths are down at once. The header alone.
    Goodbye = 5,
    /// Handshake, second message: the Noise response (never sealed).
    Response = 6,
    /// A responder under load answers an initiation with a cookie the initiator must prove
    /// it received before its next initiation is read (never sealed).
    CookieReply = 7,
    /// Several inner packets, each with its global sequence and length ([`bundle_entries`]).
    Bundle = 8,
    /// An inner IP packet, as [`Kind::Data`], that the receiver delivers as soon as it
    /// arrives rather than in global order (light traffic of a `fastest` or `duplicate`
    /// class: it never waits for bulk on slower paths). Its sequence number still counts:
    /// duplicates are dropped and the resequencer does not wait for it again.
    Express = 9,
    /// The rest of an inner packet a bundle's last entry began ([`continued_entries`]), then
    /// optionally more entries as in a bundle: a packet larger than a path's datagram is
    /// carried in pieces, each datagram filled up with the next packets.
    Continued = 10,
    /// A path MTU probe: padded to the size being tried, sent with DF set ([`PROBE_MIN_LEN`]).
    Probe = 11,
    /// The answer to a probe: the size that arrived ([`PROBE_ACK_LEN`]).
    ProbeAck = 12,
    /// A resend request: the path sequences of data datagrams a path lost ([`NackRange`]).
    Nack = 13,
    /// An inner packet sent again, as [`Kind::Data`], because the peer asked for it: its
    /// global sequence is the packet's own; its path sequence is the path's next, not taken.
    Resent = 14,
    /// The XOR of a group of data datagrams' packets on one path, sent after them: a
    /// receiver that lost one of them makes it again ([`check_parity`]).
    Parity = 15,
}

impl Kind {
    /// Whether a datagram of this kind carries inner packets (or their parity): data, as
    /// opposed to control (keepalives, reports, handshakes, probes...).
    pub fn carries_data(self) -> bool {
        matches!(
            self,
            Kind::Data
                | Kind::Bundle
                | Kind::Express
                | Kind::Continued
                | Kind::Resent
                | Kind::Parity
        )
    }

    /// The kind of a datagram from its first byte (the kind is its low nibble), if known.
    pub fn of_datagram(datagram: &[u8]) -> Option<Kind> {
        datagram.first().and_then(|b| Kind::from_u8(b & 0x0f))
    }

    pub(crate) fn from_u8(v: u8) -> Option<Kind> {
        match v {
            0 => Some(Kind::Data),
            1 => Some(Kind::Keepalive),
            2 => Some(Kind::KeepaliveAck),
            3 => Some(Kind::Report),
            4 => Some(Kind::Initiation),
            5 => Some(Kind::Goodbye),
            6 => Some(Kind::Response),
            7 => Some(Kind::CookieReply),
            8 => Some(Kind::Bundle),
            9 => Some(Kind::Express),
            10 => Some(Kind::Continued),
            11 => Some(Kind::Probe),
            12 => Some(Kind::ProbeAck),
            13 => Some(Kind::Nack),
            14 => Some(Kind::Resent),
            15 => Some(Kind::Parity),
            _ => None,
        }
    }
}

/// Why a datagram was refused. Each variant has its own drop counter in the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("datagram too short: {got} bytes, need {need}")]
    Truncated { need: usize, got: usize },
    #[error("unsupported protocol version {0}")]
    BadVersion(u8),
    #[error("sealed flag set: authenticated datagrams are not supported by this version")]
    Sealed,
    #[error("unknown message type {0}")]
    UnknownKind(u8),
    #[error("data datagram carries no inner packet")]
    EmptyPayload,
    #[error("inner packet is not IPv4 or IPv6 (version nibble {0})")]
    NotIp(u8),
    #[error("inner packet length field says {claimed} bytes, datagram holds {got}")]
    InnerLength { claimed: usize, got: usize },
    #[error("report entries are {0} bytes, shorter than the {min} a version 1 entry needs", min = REPORT_ENTRY_LEN)]
    ReportEntryLen(u8),
    #[error("bundle of {0} entries, more than {max}", max = MAX_BUNDLE)]
    BundleCount(usize),
    #[error("a bundle's first entry has gap {0}, expected 0")]
    BundleGap(u8),
    #[error("a continuation at offset {offset} of {len} bytes")]
    BadPiece { offset: usize, len: usize },
    #[error("control message of {got} bytes, expected {expected}")]
    ControlLength { expected: usize, got: usize },
    #[error("resend request of {0} ranges (or an empty range)")]
    NackRanges(usize),
    #[error("resend request naming {0}: neither path sequences (0) nor references (1)")]
    NackNames(u8),
    #[error("parity over {0} packets, outside {min}..={max}", min = MIN_PARITY_GROUP, max = MAX_PARITY_GROUP)]
    ParityGroup(u32),
}

pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// `a - b` for wrapping 32-bit sequence numbers and timestamps (RFC 1982 serial arithmetic):
/// positive when `a` is after `b` by less than 2^31.
pub fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// `a - b` for wrapping 16-bit per-path sequence numbers.
pub fn seq16_diff(a: u16, b: u16) -> i16 {
    a.wrapping_sub(b) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PathId;
    use proptest::prelude::*;

    #[test]
    fn the_header_view_reads_and_writes_the_fields_in_place() {
        // version 5, sealed, keepalive; path 2, path_seq 0x0304, session, seq, timestamp,
        // then the counter's low 32 bits
        let mut b = [
            0xb1, 2, 3, 4, 0xca, 0xfe, 0xba, 0xbe, 0, 0, 1, 0, 0, 0, 0, 9, 0, 0, 0, 7,
        ];
        let h = Header::new_checked(&b[..]).expect("valid");
        assert_eq!(
            (h.kind(), h.sealed(), h.path()),
            (Kind::Keepalive, true, PathId(2))
        );
        assert_eq!(
            (h.path_seq(), h.session(), h.seq(), h.timestamp()),
            (0x0304, 0xcafe_babe, 256, 9)
        );
        assert_eq!(h.counter(), Some(7));
        let mut h = Header::new_checked(&mut b[..]).expect("valid");
        h.set_sealed(false);
        h.set_seq(257);
        h.set_counter((5 << 32) | 8).expect("room");
        assert_eq!(&b[..1], &[0xa1]);
        assert_eq!(&b[8..12], &[0, 0, 1, 1]);
        assert_eq!(&b[16..20], &[0, 0, 0, 8], "the counter's low 32 bits");
        // a plain header alone has no room for a counter
        let mut short = [0xa1u8; HEADER_LEN];
        assert_eq!(Header::new_unchecked(&short[..]).counter(), None);
        assert!(Header::new_unchecked(&mut short[..])
            .set_counter(1)
            .is_err());
        // checked once: too short, another version
        assert_eq!(
            Header::new_checked(&b[..15]),
            Err(WireError::Truncated { need: 16, got: 15 })
        );
        assert_eq!(
            Header::new_checked(&[0x21u8; 16][..]),
            Err(WireError::BadVersion(1))
        );
        // every type is known: 15 is a parity
        assert_eq!(
            Header::new_checked(&[0xafu8; 16][..]).map(|h| h.kind()),
            Ok(Kind::Parity)
        );
    }

    #[test]
    fn every_message_emits_what_buffer_len_says() {
        let h = HeaderRepr {
            kind: Kind::Report,
            path: PathId(1),
            path_seq: 5,
            session: 6,
            seq: 7,
            timestamp: 8,
        };
        let mut buf = [0u8; 256];
        assert_eq!(h.emit(&mut buf), h.buffer_len());
        let ack = AckRepr {
            header: h,
            echo: 1,
            hold_us: 2,
        };
        assert_eq!(ack.emit(&mut buf), ack.buffer_len());
        let entries = [ReportEntry::default(); 3];
        let r = ReportRepr {
            header: h,
            entries: &entries,
        };
        assert_eq!(r.emit(&mut buf), r.buffer_len());
    }

    #[test]
    fn handshake_payloads_round_trip() {
        let i = Initiation {
            index: 0xDEAD_BEEF,
            timestamp: 1_700_000_000_123_456_789,
            flags: CipherFlags::AES,
            paths: 3,
        };
        assert_eq!(Initiation::parse(&i.emit()), Some(i));
        assert_eq!(Initiation::parse(&i.emit()[1..]), None);
        let r = Response {
            index: 7,
            flags: CipherFlags::FIXED,
        };
        assert_eq!(Response::parse(&r.emit()), Some(r));
        assert_eq!(Response::parse(&[0; 6]), None);
    }

    #[test]
    fn overhead_adds_up_for_each_kind_of_datagram() {
        let plain4 = Overhead::new(false, false);
        assert_eq!(
            (
                plain4.datagram(),
                plain4.outer(),
                plain4.ip(),
                plain4.link()
            ),
            (16, 28, 44, 58)
        );
        let sealed6 = Overhead::new(true, true);
        assert_eq!(
            (
                sealed6.datagram(),
                sealed6.outer(),
                sealed6.ip(),
                sealed6.link()
            ),
            (36, 48, 84, 98)
        );
        assert_eq!(sealed6.outer_link(), 62);
    }

    /// A minimal IPv4 packet of `len` bytes (header + zero payload).
    fn ipv4(len: u16) -> Vec<u8> {
        let mut p = vec![0u8; usize::from(len)];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p
    }

    fn header(kind: Kind) -> HeaderRepr {
        HeaderRepr {
            kind,
            path: PathId(3),
            path_seq: 0xBEEF,
            session: 0x0102_0304,
            seq: 0xA0B0_C0D0,
            timestamp: 0x1122_3344,
        }
    }

    #[test]
    fn data_header_bytes_are_as_specified() {
        let mut buf = vec![0u8; HEADER_LEN];
        header(Kind::Data).emit(&mut buf);
        assert_eq!(
            buf,
            [
                0xE0, 0x03, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04, 0xA0, 0xB0, 0xC0, 0xD0, 0x11, 0x22,
                0x33, 0x44
            ]
        );
    }

    #[test]
    fn parses_data_with_ipv4_and_ipv6() {
        let mut buf = vec![0u8; HEADER_LEN];
        header(Kind::Data).emit(&mut buf);
        buf.extend(ipv4(28));
        match Datagram::parse(&buf) {
            Ok(Datagram::Data { header: h, packet }) => {
                assert_eq!(h, header(Kind::Data));
                assert_eq!(packet.len(), 28);
            }
            other => panic!("unexpected {other:?}"),
        }
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        buf.truncate(HEADER_LEN);
        buf.extend(&v6);
        assert!(matches!(Datagram::parse(&buf), Ok(Datagram::Data { .. })));
    }

    #[test]
    fn refuses_malformed() {
        let mut buf = vec![0u8; HEADER_LEN];
        header(Kind::Data).emit(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[..5]),
            Err(WireError::Truncated { need: 16, got: 5 })
        );
        assert_eq!(Datagram::parse(&buf), Err(WireError::EmptyPayload));
        let mut bad = buf.clone();
        bad.extend([0x45, 0, 0]);
        assert_eq!(
            Datagram::parse(&bad),
            Err(WireError::Truncated { need: 20, got: 3 })
        );
        let mut bad = buf.clone();
        bad.extend(ipv4(40));
        bad.push(0);
        assert_eq!(
            Datagram::parse(&bad),
            Err(WireError::InnerLength {
                claimed: 40,
                got: 41
            })
        );
        let mut bad = buf.clone();
        bad.extend([0x55; 30]);
        assert_eq!(Datagram::parse(&bad), Err(WireError::NotIp(5)));
        let mut bad = buf.clone();
        bad[0] = 1 << 5;
        assert_eq!(Datagram::parse(&bad), Err(WireError::BadVersion(1)));
        bad[0] = 4 << 5;
        assert_eq!(Datagram::parse(&bad), Err(WireError::BadVersion(4)));
        // version 5 is still spoken (MIN_VERSION): its header passes
        bad[0] = 5 << 5;
        assert_ne!(Datagram::parse(&bad), Err(WireError::BadVersion(5)));
        bad[0] = (7 << 5) | SEALED_FLAG;
        assert_eq!(Datagram::parse(&bad), Err(WireError::Sealed));
        bad[0] = (7 << 5) | 15;
        assert!(matches!(
            Datagram::parse(&bad),
            Err(WireError::ParityGroup(_)) | Ok(Datagram::Parity { .. })
        ));
        let mut ka = vec![0u8; HEADER_LEN + 1];
        header(Kind::Keepalive).emit(&mut ka);
        assert_eq!(
            Datagram::parse(&ka),
            Err(WireError::ControlLength {
                expected: 20,
                got: 17
            })
        );
    }

    #[test]
    fn keepalive_and_ack_round_trip() {
        let mut buf = vec![0u8; 64];
        header(Kind::Keepalive).emit(&mut buf);
        buf[HEADER_LEN] = KEEPALIVE_SILENT;
        assert_eq!(
            Datagram::parse(&buf[..KEEPALIVE_LEN]),
            Ok(Datagram::Keepalive {
                header: header(Kind::Keepalive),
                flags: KEEPALIVE_SILENT,
            })
        );
        let ack = AckRepr {
            header: header(Kind::KeepaliveAck),
            echo: 77,
            hold_us: 12,
        };
        let n = ack.emit(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[..n]),
            Ok(Datagram::KeepaliveAck {
                header: ack.header,
                echo: 77,
                hold_us: 12
            })
        );
    }

    #[test]
    fn report_accepts_longer_entries_from_later_versions() {
        let e = ReportEntry {
            path: PathId(1),
            packets: 9,
            bytes: 1 << 40,
            ..Default::default()
        };
        let mut buf = vec![0u8; report_len(1)];
        ReportRepr {
            header: header(Kind::Report),
            entries: &[e],
        }
        .emit(&mut buf);
        // Rewrite as a "version 1.x" report whose entries carry 4 extra bytes.
        buf[field::REPORT_ENTRY_LEN] = (REPORT_ENTRY_LEN + 4) as u8;
        buf.extend([0xEE; 4]);
        let Ok(Datagram::Report { report, .. }) = Datagram::parse(&buf) else {
            panic!("report refused")
        };
        assert_eq!(report.entries().collect::<Vec<_>>(), vec![e]);
        buf[field::REPORT_ENTRY_LEN] = 10;
        assert_eq!(Datagram::parse(&buf), Err(WireError::ReportEntryLen(10)));
    }

    #[test]
    fn serial_arithmetic_wraps() {
        assert_eq!(seq_diff(2, u32::MAX), 3);
        assert_eq!(seq_diff(u32::MAX, 2), -3);
        assert_eq!(seq16_diff(1, u16::MAX), 2);
    }

    fn any_kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Data),
            Just(Kind::Bundle),
            Just(Kind::Express),
            Just(Kind::Keepalive),
            Just(Kind::KeepaliveAck),
            Just(Kind::Report),
            Just(Kind::Initiation),
            Just(Kind::Response),
            Just(Kind::CookieReply),
            Just(Kind::Goodbye),
            Just(Kind::Continued),
            Just(Kind::Probe),
            Just(Kind::ProbeAck),
            Just(Kind::Nack),
            Just(Kind::Resent),
            Just(Kind::Parity)
        ]
    }

    prop_compose! {
        fn any_header(kind: Kind)(path: u8, path_seq: u16, session: u32, seq: u32, timestamp: u32)
            -> HeaderRepr {
            HeaderRepr { kind, path: PathId(path), path_seq, session, seq, timestamp }
        }
    }

    prop_compose! {
        fn any_entry()(path: u8, flags: u8, path_seq: u16, packets: u32, bytes: u64, lost: u32,
                       owd_min_us: u32, jitter_us: u32, owd_us: u32, echo: u32, echo_age_us: u32,
                       owd_min_len: u16)
            -> ReportEntry {
            ReportEntry {
                path: PathId(path), flags, path_seq, packets, bytes, lost, owd_min_us, jitter_us,
                owd_us, echo, echo_age_us, owd_min_len,
            }
        }
    }

    /// `control_round_trips` for a resend request: naming path sequences, then references,
    /// then neither; an empty range; none at all.
    fn nack_round_trips(h: HeaderRepr, buf: &mut [u8], fill: u8) -> Result<(), TestCaseError> {
        let n_ranges = usize::from(fill) % MAX_NACK_RANGES + 1;
        let ranges: Vec<NackRange> = (0..n_ranges)
            .map(|k| NackRange {
                path: PathId(k as u8),
                first: h.path_seq.wrapping_add(k as u16),
                count: fill.max(1),
            })
            .collect();
        let n = nack_len(n_ranges);
        h.emit(buf);
        emit_nack(&mut buf[HEADER_LEN..n], &ranges);
        let body = buf[HEADER_LEN..n].to_vec();
        prop_assert_eq!(
            Datagram::parse(&buf[..n]),
            Ok(Datagram::Nack {
                header: h,
                body: &body[..],
                count: n_ranges
            })
        );
        prop_assert_eq!(nack_ranges(&body).collect::<Vec<_>>(), ranges.clone());
        prop_assert!(Datagram::parse(&buf[..n - 1]).is_err());
        prop_assert!(Datagram::parse(&buf[..n + NACK_RANGE_LEN]).is_err());
        prop_assert_eq!(nack_names(&body), NACK_PATHS);
        // references by their global sequence numbers (any value, 0 too)
        let refs: Vec<u32> = (0..n_ranges as u32)
            .map(|k| h.seq.wrapping_add(k << 24))
            .collect();
        emit_nack_references(&mut buf[HEADER_LEN..n], &refs);
        let body = buf[HEADER_LEN..n].to_vec();
        prop_assert_eq!(
            Datagram::parse(&buf[..n]),
            Ok(Datagram::Nack {
                header: h,
                body: &body[..],
                count: n_ranges
            })
        );
        prop_assert_eq!(nack_names(&body), NACK_REFERENCES);
        prop_assert_eq!(nack_references(&body).collect::<Vec<_>>(), refs);
        // entries that name anything else
        buf[HEADER_LEN + 1] = 2 + fill % 250;
        prop_assert!(Datagram::parse(&buf[..n]).is_err());
        emit_nack(&mut buf[HEADER_LEN..n], &ranges);
        // an empty range, or none at all
        buf[HEADER_LEN + NACK_FIXED_LEN + 1] = 0;
        prop_assert!(Datagram::parse(&buf[..n]).is_err());
        buf[HEADER_LEN] = 0;
        prop_assert!(Datagram::parse(&buf[..HEADER_LEN + NACK_FIXED_LEN]).is_err());
        Ok(())
    }

    proptest! {
        #[test]
        fn express_data_round_trips(h in any_header(Kind::Express), len in 20u16..1500) {
            let mut buf = vec![0u8; HEADER_LEN];
            h.emit(&mut buf);
            let inner = ipv4(len);
            buf.extend(&inner);
            prop_assert_eq!(Datagram::parse(&buf), Ok(Datagram::Data { header: h, packet: &inner[..] }));
        }

        #[test]
        fn data_round_trips(h in any_header(Kind::Data), len in 20u16..1500) {
            let mut buf = vec![0u8; HEADER_LEN];
            h.emit(&mut buf);
            let inner = ipv4(len);
            buf.extend(&inner);
            prop_assert_eq!(Datagram::parse(&buf), Ok(Datagram::Data { header: h, packet: &inner[..] }));
        }

        #[test]
        fn control_round_trips(kind in any_kind(), h0 in any_header(Kind::Keepalive), echo: u32,
                               hold_us: u32, entries in proptest::collection::vec(any_entry(), 0..64),
                               fill: u8) {
            let h = HeaderRepr { kind, ..h0 };
            let mut buf = vec![0u8; report_len(64)];
            match kind {
                Kind::Data | Kind::Express | Kind::Resent => return Ok(()),
                Kind::Bundle => {
                    h.emit(&mut buf);
                    let mut body = Vec::new();
                    push_bundle_entry(&mut body, None, h.seq, &ipv4(20 + u16::from(fill))).expect("fits");
                    let n = HEADER_LEN + body.len();
                    buf[HEADER_LEN..n].copy_from_slice(&body);
                    prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::Bundle { header: h, body: &body[..], count: 1 }));
                    prop_assert!(Datagram::parse(&buf[..HEADER_LEN]).is_err());
                    // cut short, it is the head piece of a longer packet if long enough to be one
                    prop_assert_eq!(Datagram::parse(&buf[..n - 1]).is_err(), n - 2 - HEADER_LEN < MIN_HEAD_PIECE);
                }
                Kind::Continued => {
                    h.emit(&mut buf);
                    let mut body = Vec::new();
                    push_continuation(&mut body, 1400, &[fill; 100]);
                    push_bundle_entry(&mut body, Some(h.seq), h.seq.wrapping_add(1), &ipv4(20 + u16::from(fill))).expect("fits");
                    let n = HEADER_LEN + body.len();
                    buf[HEADER_LEN..n].copy_from_slice(&body);
                    let cont = Continuation { offset: 1400, len: 100 };
                    prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::Continued { header: h, cont, body: &body[..], count: 1 }));
                    let seqs: Vec<u32> = continued_entries(&body, h.seq).map(|e| e.unwrap().seq).collect();
                    prop_assert_eq!(seqs, vec![h.seq.wrapping_add(1)]);
                    prop_assert!(Datagram::parse(&buf[..HEADER_LEN + 3]).is_err());
                    prop_assert!(Datagram::parse(&buf[..HEADER_LEN + 50]).is_err());
                }
                Kind::Probe => {
                    let size = PROBE_MIN_LEN + usize::from(fill);
                    h.emit(&mut buf);
                    buf[HEADER_LEN..PROBE_MIN_LEN].copy_from_slice(&(size as u16).to_be_bytes());
                    prop_assert_eq!(Datagram::parse(&buf[..size]), Ok(Datagram::Probe { header: h, size: size as u16 }));
                    prop_assert!(Datagram::parse(&buf[..size + 1]).is_err());
                }
                Kind::Nack => nack_round_trips(h, &mut buf, fill)?,
                Kind::ProbeAck => {
                    h.emit(&mut buf);
                    buf[HEADER_LEN..PROBE_ACK_LEN].copy_from_slice(&[5, 220]);
                    prop_assert_eq!(Datagram::parse(&buf[..PROBE_ACK_LEN]), Ok(Datagram::ProbeAck { header: h, size: 1500 }));
                }
                Kind::Keepalive => {
                    h.emit(&mut buf);
                    buf[HEADER_LEN..KEEPALIVE_LEN].copy_from_slice(&[fill, 0, 0, 0]);
                    prop_assert_eq!(Datagram::parse(&buf[..KEEPALIVE_LEN]), Ok(Datagram::Keepalive { header: h, flags: fill }));
                    prop_assert!(Datagram::parse(&buf[..HEADER_LEN]).is_err());
                }
                Kind::Goodbye => {
                    h.emit(&mut buf);
                    prop_assert_eq!(Datagram::parse(&buf[..HEADER_LEN]), Ok(Datagram::Goodbye { header: h }));
                    prop_assert!(Datagram::parse(&buf[..HEADER_LEN + 1]).is_err());
                }
                Kind::KeepaliveAck => {
                    let n = AckRepr { header: h, echo, hold_us }.emit(&mut buf);
                    prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::KeepaliveAck { header: h, echo, hold_us }));
                }
                Kind::Report => {
                    let n = ReportRepr { header: h, entries: &entries }.emit(&mut buf);
                    prop_assert_eq!(n, report_len(entries.len()));
                    let Ok(Datagram::Report { header, report }) = Datagram::parse(&buf[..n]) else {
                        return Err(TestCaseError::fail("report refused"));
                    };
                    prop_assert_eq!(header, h);
                    prop_assert_eq!(report.entries().collect::<Vec<_>>(), entries);
                }
                Kind::Parity => {
                    let k = u32::from(fill) % 70;
                    let h = HeaderRepr { timestamp: k, ..h };
                    let n = HEADER_LEN + 20 + usize::from(fill);
                    h.emit(&mut buf);
                    let body = buf[HEADER_LEN..n].to_vec();
                    let ok = (MIN_PARITY_GROUP as u32..=MAX_PARITY_GROUP as u32).contains(&k);
                    if ok {
                        prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::Parity { header: h, body: &body[..], count: k as usize }));
                    } else {
                        prop_assert_eq!(Datagram::parse(&buf[..n]), Err(WireError::ParityGroup(k)));
                    }
                    prop_assert!(Datagram::parse(&buf[..HEADER_LEN + 19]).is_err());
                }
                Kind::Initiation | Kind::Response | Kind::CookieReply => {
                    let n = handshake_len(kind).expect("a handshake kind");
                    h.emit(&mut buf);
                    buf[HEADER_LEN..n].fill(fill);
                    prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::Handshake { header: h, message: &buf[HEADER_LEN..n] }));
                    prop_assert!(Datagram::parse(&buf[..n - 1]).is_err());
                    // an initiation or a response may be longer by a capability list, a cookie
                    // reply not
                    let longest = match kind {
                        Kind::CookieReply => n,
                        _ => n + MAX_CAPABILITY_LIST,
                    };
                    prop_assert!(Datagram::parse(&buf[..longest]).is_ok());
                    prop_assert!(Datagram::parse(&buf[..longest + 1]).is_err());
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(d) = Datagram::parse(&bytes) {
                let _ = d.header();
                if let Datagram::Report { report, .. } = d {
                    prop_assert_eq!(report.entries().count(), report.len());
                }
            }
        }

        #[test]
        fn mutated_valid_datagrams_never_panic(h in any_header(Kind::Data), pos in 0usize..64, val: u8, cut in 0usize..64) {
            let mut buf = vec![0u8; HEADER_LEN];
            h.emit(&mut buf);
            buf.extend(ipv4(48));
            let pos = pos % buf.len();
            buf[pos] = val;
            buf.truncate(buf.len() - cut.min(buf.len()));
            let _ = Datagram::parse(&buf);
        }
    }
}
