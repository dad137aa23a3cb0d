//! MSS clamping: a TCP SYN or SYN-ACK that goes into the tunnel announces no larger a maximum
//! segment size than the far end's full segments can have and still fit a path's datagram
//! whole, as a router that knows the path MTU does (`docs/protocol.md`, "Packets in pieces").
//! The far end's TSO bursts are then whole multiples of a segment that fits: none is cut, and
//! none leaves a short tail that takes a datagram (and its 64 bytes of tunnel headers) of its
//! own.

use mpt_core::inner::Ip;
use mpt_tunnel::internet_checksum;

const TCP_SYN: u8 = 0x02;
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_TIMESTAMPS: u8 = 8;
/// What the timestamp option takes in every segment once it is agreed (NOP NOP TS).
const TIMESTAMPS_LEN: usize = 12;

/// The IP header length of a TCP packet `p` (IPv4 not a fragment, or IPv6 whose next header
/// is TCP) whose TCP header is whole, that header's length, and whether the IP header
/// compresses (IPv4 without options, or IPv6).
pub(super) fn tcp_headers(p: &[u8]) -> Option<(usize, usize, bool)> {
    let ip = Ip::new_checked(p)?;
    let (ip_len, t) = ip.tcp()?;
    Some((ip_len, t.header_len(), ip.is_v6() || ip_len == 20))
}

/// The TCP checksum of `p` (IP header `ip_len` bytes) over its pseudo-header and segment, its
/// checksum field as it is: 0 when it is right.
pub(super) fn tcp_sum(p: &[u8], ip_len: usize) -> u16 {
    let len = (p.len() - ip_len) as u32;
    let (addrs, pseudo) = if ip_len == 40 {
        (&p[8..40], [&len.to_be_bytes()[..], &[0, 0, 0, 6]].concat())
    } else {
        (
            &p[12..20],
            [&[0, 6][..], &(len as u16).to_be_bytes()].concat(),
        )
    };
    internet_checksum(0, &[addrs, &pseudo, &p[ip_len..]])
}

/// Lower the MSS option of the TCP SYN (or SYN-ACK) `p` to what a full segment may carry in a
/// packet of `max_packet` bytes: its headers take `compressed` bytes where the connection
/// compresses them (`None`: it does not), their own length otherwise, the timestamp option
/// counted in them when the SYN offers it. Nothing changes when the MSS is already that low,
/// when the clamp would fall under `floor` bytes of payload (the path is too small to be
/// worth it: the far end's segments go in pieces), or when `p` is not a TCP SYN with an MSS
/// option and a right checksum. Returns the MSS it set.
pub fn clamp(
    p: &mut [u8],
    max_packet: usize,
    compressed: Option<usize>,
    floor: usize,
) -> Option<u16> {
    let (ip_len, th, plain_ip) = tcp_headers(p)?;
    if p[ip_len + 13] & TCP_SYN == 0 {
        return None;
    }
    // the options: where the MSS value lies, and whether timestamps are offered
    let (mut at, end) = (ip_len + 20, ip_len + th);
    let (mut mss_at, mut timestamps) = (None, false);
    while at < end {
        match p[at] {
            OPT_END => break,
            OPT_NOP => at += 1,
            kind => {
                let len = usize::from(*p.get(at + 1)?);
                if len < 2 || at + len > end {
                    return None;
                }
                if kind == OPT_MSS && len == 4 {
                    mss_at = Some(at + 2);
                }
                timestamps |= kind == OPT_TIMESTAMPS;
                at += len;
            }
        }
    }
    let mss_at = mss_at?;
    let options = if timestamps { TIMESTAMPS_LEN } else { 0 };
    let headers = match compressed {
        Some(c) if plain_ip => c,
        _ => ip_len + 20 + options,
    };
    let payload = max_packet.checked_sub(headers).filter(|&n| n >= floor)?;
    let limit = u16::try_from(payload + options).ok()?;
    let mss = u16::from_be_bytes([p[mss_at], p[mss_at + 1]]);
    if mss <= limit || tcp_sum(p, ip_len) != 0 {
        return None;
    }
    p[mss_at..mss_at + 2].copy_from_slice(&limit.to_be_bytes());
    let sum_at = ip_len + 16;
    p[sum_at..sum_at + 2].fill(0);
    let sum = tcp_sum(p, ip_len);
    p[sum_at..sum_at + 2].copy_from_slice(&sum.to_be_bytes());
    Some(limit)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A TCP SYN over IPv4 (or IPv6) offering `mss`, with timestamps or not, its checksums
    /// right.
    pub(in crate::datapath) fn syn(v6: bool, mss: u16, timestamps: bool) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5201u16.to_be_bytes());
        t[4..8].copy_from_slice(&12345u32.to_be_bytes());
        t[13] = TCP_SYN;
        t[14..16].copy_from_slice(&64240u16.to_be_bytes());
        t.extend_from_slice(&[OPT_MSS, 4]);
        t.extend_from_slice(&mss.to_be_bytes());
        t.extend_from_slice(&[4, 2]); // SACK permitted
        if timestamps {
            t.extend_from_slice(&[OPT_TIMESTAMPS, 10, 0, 0, 0, 1, 0, 0, 0, 0]);
        } else {
            t.extend_from_slice(&[OPT_NOP, OPT_NOP]);
        }
        t.extend_from_slice(&[OPT_NOP, 3, 3, 7]); // window scale
        t[12] = ((t.len() / 4) as u8) << 4;
        let addr6 =
            |host: u16| std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, host).octets();
        // version, class, flow label; payload length, next header TCP, hop limit; addresses
        // (IPv6); version and header length, length, DF, TTL 64, TCP, addresses (IPv4, whose
        // header checksum the clamp does not read)
        let mut p: Vec<u8> = if v6 {
            [
                &[0x60, 0, 0, 0][..],
                &(t.len() as u16).to_be_bytes(),
                &[6, 64],
            ]
            .into_iter()
            .chain([&addr6(1)[..], &addr6(2)[..]])
            .flatten()
            .copied()
            .collect()
        } else {
            [
                &[0x45, 0][..],
                &((20 + t.len()) as u16).to_be_bytes(),
                &[0, 0, 0x40, 0],
            ]
            .into_iter()
            .chain([&[64, 6, 0, 0][..], &[198, 18, 0, 1], &[198, 18, 0, 2]])
            .flatten()
            .copied()
            .collect()
        };
        let ip = p.len();
        p.extend_from_slice(&t);
        let sum = tcp_sum(&p, ip);
        p[ip + 16..ip + 18].copy_from_slice(&sum.to_be_bytes());
        p
    }

    fn mss_of(p: &[u8], ip: usize) -> u16 {
        u16::from_be_bytes([p[ip + 22], p[ip + 23]])
    }

    #[test]
    fn a_syn_announces_what_fits_a_datagram_and_keeps_a_right_checksum() {
        // 1436-byte packets: compressed headers of 16 bytes leave 1420 bytes of payload, which
        // a segment with timestamps carries under an MSS of 1432
        for (v6, ts, compressed, want) in [
            (false, true, Some(16), 1432),
            (true, true, Some(16), 1432),
            (false, false, Some(16), 1420),
            // whole headers: 20 + 20 + 12 (IPv4), 40 + 20 + 12 (IPv6), the options counted in
            (false, true, None, 1396),
            (true, true, None, 1376),
            (false, false, None, 1396),
        ] {
            let mut p = syn(v6, 1460, ts);
            let ip = if v6 { 40 } else { 20 };
            assert_eq!(
                clamp(&mut p, 1436, compressed, 1000),
                Some(want),
                "{v6} {ts}"
            );
            assert_eq!(mss_of(&p, ip), want);
            assert_eq!(tcp_sum(&p, ip), 0, "the checksum is right again");
            // the rest of the packet as it was
            let mut again = syn(v6, want, ts);
            let at = ip + 16;
            again[at..at + 2].copy_from_slice(&p[at..at + 2]);
            assert_eq!(p, again);
        }
    }

    #[test]
    fn a_low_mss_a_small_path_a_bad_checksum_and_anything_but_a_syn_stay_as_they_are() {
        let clamped = |mut p: Vec<u8>, max: usize| {
            let before = p.clone();
            let r = clamp(&mut p, max, Some(16), 1000);
            assert!(r.is_some() || p == before, "changed without a clamp");
            r
        };
        assert_eq!(clamped(syn(false, 1400, true), 1436), None);
        assert_eq!(
            clamped(syn(false, 1460, true), 1000),
            None,
            "under the floor"
        );
        let mut bad = syn(false, 1460, true);
        bad[36] ^= 1;
        assert_eq!(
            clamped(bad, 1436),
            None,
            "a wrong checksum is not made right"
        );
        let mut ack = syn(false, 1460, true);
        ack[33] = 0x10;
        assert_eq!(clamped(ack, 1436), None, "not a SYN");
        let mut udp = syn(false, 1460, true);
        udp[9] = 17;
        assert_eq!(clamped(udp, 1436), None);
        let mut cut = syn(false, 1460, true);
        cut.truncate(30);
        assert_eq!(clamped(cut, 1436), None);
        // options that run past the header
        let mut odd = syn(false, 1460, true);
        odd[20 + 24] = 9;
        odd[20 + 25] = 40;
        assert_eq!(clamped(odd, 1436), None);
        // a SYN-ACK is clamped as a SYN is
        let mut syn_ack = syn(false, 1460, true);
        syn_ack[33] = TCP_SYN | 0x10;
        let sum = {
            syn_ack[36..38].fill(0);
            tcp_sum(&syn_ack, 20)
        };
        syn_ack[36..38].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(clamped(syn_ack, 1436), Some(1432));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(mut p in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120), max in 0usize..2000) {
            let _ = clamp(&mut p, max, Some(16), 1000);
            let _ = clamp(&mut p, max, None, 0);
        }
    }
}
