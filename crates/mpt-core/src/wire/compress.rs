//! Compressed bundle entries: an IPv4 UDP packet carried as its payload after the headers of
//! the entry before it (the format is in [`super::bundle`]'s documentation).

use super::*;
use crate::inner::{self, Ipv4, Udp};

/// The first byte after a compressed entry's gap (an IP packet's is 0x4_ or 0x6_).
pub const COMPRESSED: u8 = 0x10;
/// Bytes a compressed entry carries before its UDP payload (after its gap): the marker, the
/// payload's length, the IP identification and the UDP checksum.
pub const COMPRESSED_LEN: usize = 7;
/// An IPv4 header of 20 bytes and a UDP header: what a compressed entry rebuilds.
pub const UDP4_HEADERS: usize = 28;

/// The headers of `p` if a packet after it may be compressed against them, and `p` itself
/// may be rebuilt from another's: IPv4 with a 20-byte header whose checksum is right, its
/// total length `p`'s, no fragment, UDP whose length is the rest.
pub fn udp4_headers(p: &[u8]) -> Option<[u8; UDP4_HEADERS]> {
    let h: &[u8; UDP4_HEADERS] = p.get(..UDP4_HEADERS)?.try_into().ok()?;
    let ip = Ipv4::new_checked(h)?;
    let udp = Udp::new_checked(&h[20..])?;
    let whole = ip.header_len() == 20
        && ip.protocol() == inner::UDP
        && ip.total_len() == p.len()
        && !ip.is_fragment()
        && udp.len() == p.len() - 20
        && internet_checksum(0, &[&h[..20]]) == 0;
    whole.then_some(*h)
}

/// Whether a packet whose headers are `own` may be sent as a compressed entry after a packet
/// whose headers are `prev` (both as [`udp4_headers`] gives them): the receiver rebuilds
/// `own` byte for byte (they differ from `prev` only in lengths, identification and
/// checksums).
pub fn compresses(prev: &[u8; UDP4_HEADERS], own: &[u8; UDP4_HEADERS]) -> bool {
    let payload = usize::from(be16(&own[2..4])) - UDP4_HEADERS;
    rebuild(prev, payload, [own[4], own[5]], [own[26], own[27]]) == *own
}

/// The headers of a compressed entry's packet of `payload` bytes, with identification `id`
/// and UDP checksum `udp_sum`, after a packet whose headers are `prev`.
pub(super) fn rebuild(
    prev: &[u8; UDP4_HEADERS],
    payload: usize,
    id: [u8; 2],
    udp_sum: [u8; 2],
) -> [u8; UDP4_HEADERS] {
    let mut h = *prev;
    h[2..4].copy_from_slice(&((UDP4_HEADERS + payload) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id);
    h[10..12].fill(0);
    let sum = internet_checksum(0, &[&h[..20]]);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    h[26..28].copy_from_slice(&udp_sum);
    h
}

/// Append `packet` (for which [`compresses`] holds against the previous entry's headers), global
/// sequence `seq`, as a compressed entry to a bundle body whose last entry has global sequence
/// `last`. `None` when the gap does not fit a byte.
pub fn push_compressed_entry(body: &mut Vec<u8>, last: u32, seq: u32, packet: &[u8]) -> Option<()> {
    let gap = u8::try_from(seq.wrapping_sub(last).wrapping_sub(1)).ok()?;
    let payload = &packet[UDP4_HEADERS..];
    body.push(gap);
    body.push(COMPRESSED);
    body.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    body.extend_from_slice(&packet[4..6]);
    body.extend_from_slice(&packet[26..28]);
    body.extend_from_slice(payload);
    Some(())
}
