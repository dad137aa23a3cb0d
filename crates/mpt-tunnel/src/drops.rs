//! Why a datagram or packet was dropped: every reason is spelled once, in [`drop_reasons!`],
//! which makes the [`DropReason`] enum, the counter array [`Drops`] indexed by it and the
//! status document's [`DropCounts`].

use mpt_core::wire::WireError;
use serde::{Deserialize, Serialize};

macro_rules! drop_reasons {
    ($( $(#[doc = $doc:literal])* $variant:ident => $field:ident, )*) => {
        /// Why a datagram (or an inner packet) was dropped.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum DropReason {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// Number of reasons (the length of a counter array).
            pub const COUNT: usize = Self::ALL.len();

            /// The reason's name in the status document (`drops.NAME`).
            pub fn name(self) -> &'static str {
                match self {
                    $( DropReason::$variant => stringify!($field), )*
                }
            }
        }

        /// Drop counters by reason, as the status document shows them.
        #[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
        #[serde(default)]
        pub struct DropCounts {
            $( $(#[doc = $doc])* pub $field: u64, )*
        }

        impl DropCounts {
            /// The counts of a counter array.
            pub fn from_counts(c: &[u64; DropReason::COUNT]) -> DropCounts {
                let mut it = c.iter().copied();
                DropCounts {
                    $( $field: it.next().unwrap_or(0), )*
                }
            }

            /// The count of one reason.
            pub fn get(&self, reason: DropReason) -> u64 {
                match reason {
                    $( DropReason::$variant => self.$field, )*
                }
            }
        }
    };
}

drop_reasons! {
    /// Outbound packets with no path up.
    NoPath => no_path,
    /// Outbound bonded packets the pacing queue dropped: they waited there longer than its
    /// CoDel rule lets a queue stand (`connection.pace`).
    Paced => paced,
    /// Outbound datagrams the kernel refused to send.
    SendError => send_error,
    /// Inner packets the TUN device refused.
    TunWriteError => tun_write_error,
    /// Reads from the TUN device that failed (e.g. a super-packet that could not be split).
    TunReadError => tun_read_error,
    /// Inner packets read from the TUN device whose destination no peer's `allowed` covers.
    NoRoute => no_route,
    /// Inner packets from a peer whose source address is outside its `allowed`.
    SourceNotAllowed => source_not_allowed,
    /// Initiations from a key that is not our peer's (a stranger, or a host configured for
    /// another server).
    UnknownKey => unknown_key,
    /// Initiations refused unread because handshake work is over its bound, in total or from
    /// one address (a flood): their senders retry.
    HandshakeLimited => handshake_limited,
    /// Datagrams whose path id is not the path they arrived on.
    PathMismatch => path_mismatch,
    /// Datagrams larger than the largest valid one (tunnel MTU + header).
    Oversize => oversize,
    /// Datagrams shorter than their header or their contents say.
    Truncated => truncated,
    /// Datagrams of another protocol version.
    BadVersion => bad_version,
    /// Sealed datagrams given to the plain parser.
    Sealed => sealed,
    /// Datagrams of an unknown kind.
    UnknownKind => unknown_kind,
    /// Data datagrams without an inner packet.
    Empty => empty,
    /// Data datagrams whose inner packet is not IPv4 or IPv6.
    NotIp => not_ip,
    /// Data datagrams whose inner packet's length field disagrees with the datagram.
    InnerLength => inner_length,
    /// Control messages of a wrong length.
    BadControl => bad_control,
    /// Plain datagrams while sealing is required.
    Unauthenticated => unauthenticated,
    /// Datagrams for a session we do not have: before the handshake, for an earlier session
    /// of ours, or forged.
    UnknownSession => unknown_session,
    /// Sealed datagrams whose counter was seen before or is too old (replay window).
    Replayed => replayed,
    /// Sealed datagrams that failed authentication.
    BadTag => bad_tag,
    /// Handshake messages that did not decrypt (not for our key, or forged) or whose payload
    /// is malformed.
    BadHandshake => bad_handshake,
    /// Initiations no later than the last one taken from the peer (replays, or a copy that
    /// came on another path), and responses to no initiation of ours.
    StaleHandshake => stale_handshake,
    /// Handshakes with a peer whose encryption setting cannot meet ours.
    CipherMismatch => cipher_mismatch,
    /// Outbound packets dropped because the handshake has not agreed on keys yet.
    NoSession => no_session,
    /// Valid datagrams of a kind not expected here.
    Unexpected => unexpected,
    /// Data packets received twice (resequencer).
    Duplicate => duplicate,
    /// Data packets too old to tell from a duplicate (far behind the resequencer's release
    /// point).
    TooOld => too_old,
    /// Pieces of a packet that overlap a piece of it that arrived before (the packet is
    /// dropped), or whose packet is longer than the tunnel MTU.
    FragmentOverlap => fragment_overlap,
    /// Packets sent in pieces whose other pieces did not arrive in time (or that were pushed
    /// out by newer ones while too many were incomplete).
    FragmentExpired => fragment_expired,
    /// Outbound packets larger than the paths can carry (the peer does not take pieces, or a
    /// packet needs more than 64): the sender gets an ICMP "too big" for each.
    TooBig => too_big,
    /// Outbound packets that would go in pieces on a slow path (below 1 Mbit/s) with a
    /// configured rate whose queue is full (its clock runs more than two datagrams, or 50 ms,
    /// ahead): dropped whole at the sender rather than in pieces by the link, where losing
    /// one piece loses the packet.
    QueueFull => queue_full,
    /// Compressed TCP packets whose reference the resequencer gave up (or that a newer one
    /// replaced): refused, never rebuilt against another.
    NoReference => no_reference,
    /// Outbound datagrams a stream path's queue had no room for (TCP or TLS: the scheduler
    /// sends elsewhere once it sees the queue; these came before it did).
    StreamFull => stream_full,
    /// Streams closed because they sent a length the tunnel never sends (garbage, or a
    /// stranger speaking another protocol).
    StreamGarbage => stream_garbage,
    /// Streams closed because no authentic datagram came on them within 10 s of connecting.
    StreamUnauthenticated => stream_unauthenticated,
    /// Streams closed because they read nothing we wrote for 5 s (a slow or stuck reader).
    StreamSlowReader => stream_slow_reader,
    /// Stream connections refused because the listener had as many as it takes.
    StreamRefused => stream_refused,
    /// Stream connections closed before they carried a frame: their TLS handshake failed or
    /// took more than 5 s, or they sent too little in 10 s to be told plain or TLS.
    StreamHandshake => stream_handshake,
}

impl DropReason {
    /// The reason a sealed datagram that did not open is counted under.
    pub fn unsealed(e: &mpt_core::seal::SealError) -> DropReason {
        match e {
            mpt_core::seal::SealError::BadTag => DropReason::BadTag,
            _ => DropReason::Truncated,
        }
    }

    /// The reason a datagram refused by the parser is counted under.
    pub fn malformed(e: &WireError) -> DropReason {
        match e {
            WireError::Truncated { .. } => DropReason::Truncated,
            WireError::BadVersion(_) => DropReason::BadVersion,
            WireError::Sealed => DropReason::Sealed,
            WireError::UnknownKind(_) => DropReason::UnknownKind,
            WireError::EmptyPayload => DropReason::Empty,
            WireError::NotIp(_) => DropReason::NotIp,
            WireError::InnerLength { .. }
            | WireError::BundleCount(_)
            | WireError::BundleGap(_)
            | WireError::BadPiece { .. } => DropReason::InnerLength,
            WireError::ReportEntryLen(_)
            | WireError::ControlLength { .. }
            | WireError::NackRanges(_)
            | WireError::NackNames(_)
            | WireError::ParityGroup(_) => DropReason::BadControl,
        }
    }
}

/// One counter per [`DropReason`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drops([u64; DropReason::COUNT]);

impl Default for Drops {
    fn default() -> Self {
        Drops([0; DropReason::COUNT])
    }
}

impl Drops {
    pub fn add(&mut self, reason: DropReason, n: u64) {
        self.0[reason as usize] += n;
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason as usize]
    }

    pub fn counts(&self) -> &[u64; DropReason::COUNT] {
        &self.0
    }
}

impl DropCounts {
    /// Datagrams refused as malformed, all reasons together.
    pub fn malformed(&self) -> u64 {
        self.oversize
            + self.truncated
            + self.bad_version
            + self.sealed
            + self.unknown_kind
            + self.empty
            + self.not_ip
            + self.inner_length
            + self.bad_control
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_reasons_in_order() {
        let mut d = Drops::default();
        d.add(DropReason::BadTag, 3);
        d.add(DropReason::TooOld, 1);
        let c = DropCounts::from_counts(d.counts());
        assert_eq!(c.bad_tag, 3);
        assert_eq!(c.too_old, 1);
        for &r in DropReason::ALL {
            assert_eq!(c.get(r), d.get(r), "{}", r.name());
        }
        assert_eq!(DropReason::COUNT, 41);
        assert_eq!(DropReason::NoPath.name(), "no_path");
    }
}
