//! "Too big" answers for packets the tunnel cannot carry (`docs/protocol.md`, "Packets in
//! pieces"): an ICMP "fragmentation needed" (IPv4) or ICMPv6 "packet too big" to the packet's
//! sender, from the address it was sent to, carrying the largest packet that passes, so that
//! the sender's path MTU discovery takes it.

use std::time::Duration;

use mpt_core::inner::{Icmp, Ip, Ipv4, Ipv6, ICMP, ICMPV6};
use mpt_core::Time;

/// Most bytes of an IPv4 answer (RFC 1812: as much of the packet as fits in 576).
const V4_MAX: usize = 576;
/// Most bytes of an ICMPv6 answer (RFC 4443: as much as fits in the minimum MTU, 1280).
const V6_MAX: usize = 1280;

/// The answer to `packet` (an inner IPv4 or IPv6 packet read from the TUN device) that the
/// largest packet passing is `mtu` bytes; `None` for a packet that gets none (an ICMP error
/// itself, or from an address an answer cannot go to).
pub fn too_big(packet: &[u8], mtu: u16) -> Option<Vec<u8>> {
    match Ip::new_checked(packet)? {
        Ip::V4(v) => too_big_v4(v, mtu),
        Ip::V6(v) => too_big_v6(v, mtu),
    }
}

fn too_big_v4(v: Ipv4<'_>, mtu: u16) -> Option<Vec<u8>> {
    let l4 = v.l4()?;
    let (p, src, dst) = (v.bytes(), v.src().octets(), v.dst().octets());
    // never to 0.0.0.0, multicast or broadcast; never about an ICMP error or a later fragment
    if src == [0; 4] || src[0] >= 224 || dst[0] >= 224 {
        return None;
    }
    if v.frag_offset() != 0
        || (v.protocol() == ICMP && Icmp::new_checked(l4).is_some_and(|m| m.is_v4_error()))
    {
        return None;
    }
    let quoted = &p[..p.len().min(V4_MAX - 28)];
    let len = 28 + quoted.len();
    let mut out = vec![0u8; len];
    out[0] = 0x45;
    out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    out[8] = 64;
    out[9] = 1;
    out[12..16].copy_from_slice(&dst);
    out[16..20].copy_from_slice(&src);
    let sum = checksum(&[&out[..20]]);
    out[10..12].copy_from_slice(&sum.to_be_bytes());
    out[20] = 3; // destination unreachable
    out[21] = 4; // fragmentation needed and DF set
    out[26..28].copy_from_slice(&mtu.to_be_bytes());
    out[28..].copy_from_slice(quoted);
    let sum = checksum(&[&out[20..]]);
    out[22..24].copy_from_slice(&sum.to_be_bytes());
    Some(out)
}

fn too_big_v6(v: Ipv6<'_>, mtu: u16) -> Option<Vec<u8>> {
    let (p, src, dst) = (v.bytes(), v.src().octets(), v.dst().octets());
    // never to ::, to multicast, about multicast, or about an ICMPv6 error
    if src == [0; 16] || src[0] == 0xff || dst[0] == 0xff {
        return None;
    }
    if v.next_header() == ICMPV6 && Icmp::new_checked(v.l4()).is_some_and(|m| m.is_v6_error()) {
        return None;
    }
    let quoted = &p[..p.len().min(V6_MAX - 48)];
    let body = 8 + quoted.len();
    let mut out = vec![0u8; 40 + body];
    out[0] = 0x60;
    out[4..6].copy_from_slice(&(body as u16).to_be_bytes());
    out[6] = 58;
    out[7] = 64;
    out[8..24].copy_from_slice(&dst);
    out[24..40].copy_from_slice(&src);
    out[40] = 2; // packet too big
    out[44..48].copy_from_slice(&u32::from(mtu).to_be_bytes());
    out[48..].copy_from_slice(quoted);
    // the pseudo-header: addresses, upper-layer length, next header
    let mut pseudo = [0u8; 8];
    pseudo[0..4].copy_from_slice(&(body as u32).to_be_bytes());
    pseudo[7] = 58;
    let sum = checksum(&[&out[8..40], &pseudo, &out[40..]]);
    out[42..44].copy_from_slice(&sum.to_be_bytes());
    Some(out)
}

pub use mpt_core::wire::internet_checksum;

fn checksum(parts: &[&[u8]]) -> u16 {
    internet_checksum(0, parts)
}

/// Most "too big" answers a connection makes a second.
pub const ICMP_PER_SECOND: u32 = 20;

/// "Too big" answers for the TUN device, at most [`ICMP_PER_SECOND`].
#[derive(Debug)]
pub(crate) struct IcmpAnswers {
    queue: Vec<Vec<u8>>,
    /// The second the answers are limited in: its start, and how many were made in it.
    second: (Time, u32),
}

impl IcmpAnswers {
    pub(crate) fn new(now: Time) -> IcmpAnswers {
        IcmpAnswers {
            queue: Vec::new(),
            second: (now, 0),
        }
    }

    /// Answer `packet`, which the tunnel cannot carry, at `now` (within the rate limit) with
    /// the largest inner packet that passes, `most` bytes.
    pub(crate) fn answer(&mut self, now: Time, packet: &[u8], most: usize) {
        let (start, n) = &mut self.second;
        if now.saturating_since(*start) >= Duration::from_secs(1) {
            *start = now;
            *n = 0;
        }
        if *n >= ICMP_PER_SECOND {
            return;
        }
        if let Some(answer) = too_big(packet, most.min(usize::from(u16::MAX)) as u16) {
            *n += 1;
            self.queue.push(answer);
        }
    }

    /// The answers made since the last call.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<Vec<u8>>) {
        out.append(&mut self.queue);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(len: usize, proto: u8) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p
    }

    fn v6(len: usize, next: u8) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p[6] = next;
        p[8] = 0x20;
        p[23] = 1;
        p[24] = 0x20;
        p[39] = 2;
        p
    }

    #[test]
    fn an_ipv4_answer_is_a_valid_fragmentation_needed_back_to_the_sender() {
        let a = too_big(&v4(1500, 6), 1432).expect("an answer");
        assert_eq!(a.len(), 576);
        assert_eq!(checksum(&[&a[..20]]), 0, "IP header checksum");
        assert_eq!(checksum(&[&a[20..]]), 0, "ICMP checksum");
        assert_eq!((a[9], a[20], a[21]), (1, 3, 4));
        assert_eq!(&a[12..16], &[10, 0, 0, 2]);
        assert_eq!(&a[16..20], &[10, 0, 0, 1]);
        assert_eq!(u16::from_be_bytes([a[26], a[27]]), 1432);
        assert_eq!(&a[28..48], &v4(1500, 6)[..20]);
    }

    #[test]
    fn an_ipv6_answer_is_a_valid_packet_too_big_back_to_the_sender() {
        let p = v6(1500, 17);
        let a = too_big(&p, 1432).expect("an answer");
        assert_eq!(a.len(), 1280);
        let mut pseudo = [0u8; 8];
        pseudo[0..4].copy_from_slice(&((a.len() - 40) as u32).to_be_bytes());
        pseudo[7] = 58;
        assert_eq!(checksum(&[&a[8..40], &pseudo, &a[40..]]), 0);
        assert_eq!((a[6], a[40]), (58, 2));
        assert_eq!(&a[8..24], &p[24..40]);
        assert_eq!(u32::from_be_bytes([a[44], a[45], a[46], a[47]]), 1432);
    }

    #[test]
    fn errors_multicast_and_later_fragments_get_no_answer() {
        let mut e = v4(600, 1);
        e[20] = 3;
        assert_eq!(too_big(&e, 1400), None);
        let mut echo = v4(600, 1);
        echo[20] = 8;
        assert!(too_big(&echo, 1400).is_some());
        let mut m = v4(600, 17);
        m[16] = 239;
        assert_eq!(too_big(&m, 1400), None);
        let mut frag = v4(600, 17);
        frag[7] = 10;
        assert_eq!(too_big(&frag, 1400), None);
        assert_eq!(too_big(&v6(600, 58), 1400), None);
        let mut ping6 = v6(600, 58);
        ping6[40] = 128;
        assert!(too_big(&ping6, 1400).is_some());
        assert_eq!(too_big(&[0x45, 0, 0], 1400), None);
        assert_eq!(too_big(&[], 1400), None);
    }
}
