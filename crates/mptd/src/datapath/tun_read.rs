//! One read from the TUN device, split into packets: a super-packet (TSO, USO) into its
//! segments, and a TCP super-packet into segments that each fit a path's datagram whole, so
//! that bulk TCP through a tunnel whose MTU is larger than the paths' (1500 over 1500) is not
//! sent in pieces (`docs/protocol.md`, "Packets in pieces"): the inner TCP negotiated its MSS
//! from the tunnel's MTU, and gets segments a little shorter than that, as it would behind a
//! router that segments for it.

use std::io;

use crate::fit::Fit;
use mpt_core::inner::{self, Ip, Tcp};

use tun_rs::{
    VirtioNetHdr, VIRTIO_NET_HDR_GSO_TCPV4, VIRTIO_NET_HDR_GSO_TCPV6, VIRTIO_NET_HDR_LEN,
};

const GSO_NONE: u8 = 0;
const GSO_ECN: u8 = 0x80;
const NEEDS_CSUM: u8 = 1;

/// TCP segments are cut no shorter than this to fit a path (a path that carries less sends
/// the kernel's segments in pieces): a super-packet never needs more than
/// [`max_segments`] buffers.
pub const MIN_SEGMENT: usize = 1000;

/// Most packets one read can split into.
pub fn max_segments() -> usize {
    65_535 / MIN_SEGMENT + 2
}

/// Most packets [`split`] can make of `raw` (the virtio-net header and what follows it, as
/// read): how many buffers to have ready for it. Segments are no shorter than the kernel's
/// `gso_size` or than [`MIN_SEGMENT`], whichever is less, plus a first one and a last one.
pub fn segments_at_most(raw: &[u8]) -> usize {
    let len = raw.len().saturating_sub(VIRTIO_NET_HDR_LEN);
    let step = match VirtioNetHdr::decode(raw) {
        Ok(h) if h.gso_type != GSO_NONE => usize::from(h.gso_size).clamp(1, MIN_SEGMENT),
        _ => MIN_SEGMENT,
    };
    len / step + 2
}

/// Split `raw` (the virtio-net header and the packet or super-packet after it, as read) into
/// packets at `offset` in `bufs`, their lengths in `sizes`; returns how many. TCP segments are
/// cut to take at most `fit`'s largest packet in a datagram when the kernel's are longer and
/// at least [`MIN_SEGMENT`] bytes of payload are left: their headers count as what they take
/// compressed where the connection compresses them (IPv4 without options or IPv6 without
/// extension headers, TCP without options or with timestamps only), as they are otherwise.
/// The first segment of a flow that has no reference to compress against is cut to go whole:
/// it becomes the reference of the segments after it.
pub fn split<B: AsRef<[u8]> + AsMut<[u8]>>(
    raw: &mut [u8],
    bufs: &mut [B],
    sizes: &mut [usize],
    offset: usize,
    fit: &Fit,
) -> io::Result<usize> {
    let compressed = fit.compressed();
    if raw.len() <= VIRTIO_NET_HDR_LEN {
        return Err(io::Error::other(format!(
            "a read of {} bytes, no longer than the virtio-net header",
            raw.len()
        )));
    }
    let mut hdr = VirtioNetHdr::decode(raw)?;
    let input = &mut raw[VIRTIO_NET_HDR_LEN..];
    let len = input.len();
    if hdr.gso_type == GSO_NONE {
        if hdr.flags & NEEDS_CSUM != 0 {
            finish_checksum(
                input,
                usize::from(hdr.csum_start),
                usize::from(hdr.csum_offset),
            )?;
        }
        // a SYN announces no larger segments than fit a datagram (once the paths' MTUs are
        // known)
        let settled = fit.settled();
        if settled > 0 {
            super::mss::clamp(input, settled, compressed, MIN_SEGMENT);
        }
        // one TCP segment too long for the paths (a retransmission, or a sender without
        // offloads), or too long to go whole for a flow that needs a reference, is cut as a
        // super-packet of itself would be
        if let Some(h) = too_long_tcp(input, fit) {
            hdr = h;
        }
    }
    if hdr.gso_type == GSO_NONE {
        let room = bufs
            .first_mut()
            .and_then(|b| b.as_mut().get_mut(offset..offset + len))
            .ok_or_else(|| {
                io::Error::other(format!("a packet of {len} bytes overflows its buffer"))
            })?;
        room.copy_from_slice(input);
        sizes[0] = len;
        return Ok(1);
    }
    let is_v6 = match inner::version(input) {
        Some(4) => false,
        Some(6) => true,
        v => {
            return Err(io::Error::other(format!(
                "a super-packet of IP version {v:?}"
            )))
        }
    };
    let csum_start = usize::from(hdr.csum_start);
    // the header lengths from the headers themselves (the kernel's hdr_len may be the whole
    // first segment on the forwarding path), and the payload of a first segment cut to go
    // whole, if it is
    let (hdr_len, first_whole) = match hdr.gso_type & !GSO_ECN {
        VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_TCPV6 => cut_tcp(input, &mut hdr, fit)?,
        _ => (csum_start + 8, None),
    };
    if len < hdr_len || csum_start + usize::from(hdr.csum_offset) + 2 > len {
        return Err(io::Error::other("a super-packet shorter than its headers"));
    }
    hdr.hdr_len = u16::try_from(hdr_len).map_err(io::Error::other)?;
    match first_whole {
        Some(first) if len - hdr_len > first => {
            split_first_whole(input, hdr, first, bufs, sizes, offset, is_v6)
        }
        // all of it fits in one segment that goes whole
        Some(first) => {
            hdr.gso_size = first as u16;
            tun_rs::gso_split(input, hdr, bufs, sizes, offset, is_v6)
        }
        None => tun_rs::gso_split(input, hdr, bufs, sizes, offset, is_v6),
    }
}

/// The TCP super-packet `input`'s segments cut to fit (`hdr.gso_size` lowered where they are
/// longer than `fit`'s largest packet takes): its headers' length, and the payload of a first
/// segment cut to go whole (a flow with no reference to compress against), if it is.
fn cut_tcp(input: &[u8], hdr: &mut VirtioNetHdr, fit: &Fit) -> io::Result<(usize, Option<usize>)> {
    let (max_packet, compressed) = (fit.max_packet(), fit.compressed());
    let csum_start = usize::from(hdr.csum_start);
    let th = input
        .get(csum_start..)
        .and_then(Tcp::new_checked)
        .map(|t| t.header_len())
        .ok_or_else(|| io::Error::other("a TCP super-packet without a valid TCP header"))?;
    let hdr_len = csum_start + th;
    let cost = header_cost(input, csum_start, th, compressed);
    let fit_size = max_packet.saturating_sub(cost);
    if fit_size >= MIN_SEGMENT && fit_size < usize::from(hdr.gso_size) {
        hdr.gso_size = fit_size as u16;
    }
    // segments that fit compressed but not whole (cut so here, or sent so by a flow whose MSS
    // was clamped for compressed headers)
    let whole = max_packet.saturating_sub(hdr_len);
    let first_whole = (cost < hdr_len
        && whole >= MIN_SEGMENT
        && whole < usize::from(hdr.gso_size)
        && !fit.ready(input))
    .then_some(whole);
    Ok((hdr_len, first_whole))
}

const TCP_CWR: u8 = 0x80;
const TCP_PSH: u8 = 0x08;
const TCP_FIN: u8 = 0x01;

/// Split the TCP super-packet `input` (virtio-net header `hdr`, its `hdr_len` checked) into a
/// first segment of `first` bytes of payload, then segments of `hdr.gso_size`: each part as a
/// super-packet of its own, the second's headers moved up to where its payload starts, its
/// sequence number (and IPv4 identification) where the kernel's segments would have them.
/// The flags that belong to the last segment (FIN, PSH) stay off the first, and the one that
/// belongs to the first (CWR) off the rest.
fn split_first_whole<B: AsRef<[u8]> + AsMut<[u8]>>(
    input: &mut [u8],
    hdr: VirtioNetHdr,
    first: usize,
    bufs: &mut [B],
    sizes: &mut [usize],
    offset: usize,
    is_v6: bool,
) -> io::Result<usize> {
    let (hdr_len, tcp) = (usize::from(hdr.hdr_len), usize::from(hdr.csum_start));
    let flags = input[tcp + 13];
    input[tcp + 13] = flags & !(TCP_FIN | TCP_PSH);
    let head = VirtioNetHdr {
        gso_size: first as u16,
        ..hdr
    };
    let n = tun_rs::gso_split(
        &mut input[..hdr_len + first],
        head,
        bufs,
        sizes,
        offset,
        is_v6,
    )?;
    input.copy_within(..hdr_len, first);
    let rest = &mut input[first..];
    rest[tcp + 13] = flags & !TCP_CWR;
    let seq = u32::from_be_bytes([rest[tcp + 4], rest[tcp + 5], rest[tcp + 6], rest[tcp + 7]]);
    rest[tcp + 4..tcp + 8].copy_from_slice(&seq.wrapping_add(first as u32).to_be_bytes());
    if !is_v6 {
        let id = u16::from_be_bytes([rest[4], rest[5]]).wrapping_add(n as u16);
        rest[4..6].copy_from_slice(&id.to_be_bytes());
    }
    let more = tun_rs::gso_split(rest, hdr, &mut bufs[n..], &mut sizes[n..], offset, is_v6)?;
    Ok(n + more)
}

/// A plain TCP packet longer than `fit`'s largest packet that cutting would bring under it (at
/// least [`MIN_SEGMENT`] bytes of payload a piece), counting its headers compressed where they
/// compress and its flow has a reference, whole otherwise: the virtio-net header of a
/// super-packet of one segment, whose split recomputes every checksum. `None` for anything
/// else (IPv4 fragments, IPv6 with extension headers, other protocols).
fn too_long_tcp(p: &[u8], fit: &Fit) -> Option<VirtioNetHdr> {
    let (max_packet, compressed) = (fit.max_packet(), fit.compressed());
    let ip = Ip::new_checked(p)?;
    let (ip_len, t) = ip.tcp()?;
    let gso_type = if ip.is_v6() {
        VIRTIO_NET_HDR_GSO_TCPV6
    } else {
        VIRTIO_NET_HDR_GSO_TCPV4
    };
    let (th, payload) = (t.header_len(), t.payload().len());
    let cost = header_cost(p, ip_len, th, compressed);
    let whole = ip_len + th + payload <= max_packet;
    if payload + cost <= max_packet && (whole || fit.ready(p))
        || max_packet.saturating_sub(cost) < MIN_SEGMENT
    {
        return None;
    }
    Some(VirtioNetHdr {
        flags: NEEDS_CSUM,
        gso_type,
        hdr_len: (ip_len + th) as u16,
        gso_size: u16::try_from(payload).ok()?,
        csum_start: ip_len as u16,
        csum_offset: 16,
    })
}

/// What the IP and TCP headers of `p` (`ip_len` and `th` bytes) take in a datagram: `compressed`
/// where the connection compresses them, their length otherwise.
fn header_cost(p: &[u8], ip_len: usize, th: usize, compressed: Option<usize>) -> usize {
    let plain_ip = match Ip::new_checked(p) {
        Some(Ip::V4(_)) => ip_len == 20,
        Some(Ip::V6(v)) => ip_len == 40 && v.next_header() == inner::TCP,
        None => false,
    };
    match compressed {
        Some(c) if plain_ip && (th == 20 || th == 32) => c,
        _ => ip_len + th,
    }
}

/// Complete a checksum the kernel left partial (`CHECKSUM_PARTIAL`): the field at
/// `start + at` holds the pseudo-header's sum; the checksum covers everything from `start`.
fn finish_checksum(p: &mut [u8], start: usize, at: usize) -> io::Result<()> {
    let field = start + at;
    if field + 2 > p.len() {
        return Err(io::Error::other("a checksum field past the packet"));
    }
    let partial = u32::from(u16::from_be_bytes([p[field], p[field + 1]]));
    p[field] = 0;
    p[field + 1] = 0;
    let sum = mpt_tunnel::internet_checksum(partial, &[&p[start..]]);
    p[field..field + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::hc::{flow_hash, CONTEXTS};

    /// A TCP/IPv4 super-packet of `payload` bytes in segments of `mss`, as the kernel hands it
    /// over: its virtio-net header, then the packet.
    fn super_packet(payload: usize, mss: u16) -> Vec<u8> {
        let hdr = VirtioNetHdr {
            flags: NEEDS_CSUM,
            gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
            hdr_len: 40,
            gso_size: mss,
            csum_start: 20,
            csum_offset: 16,
        };
        let mut raw = vec![0u8; VIRTIO_NET_HDR_LEN + 40 + payload];
        hdr.encode(&mut raw).expect("header");
        let p = &mut raw[VIRTIO_NET_HDR_LEN..];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 6;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[32] = 5 << 4;
        for (k, b) in p[40..].iter_mut().enumerate() {
            *b = k as u8;
        }
        raw
    }

    fn run(raw: &mut [u8], max_packet: usize) -> Vec<usize> {
        run_compressed(raw, (max_packet, None))
    }

    /// A fit of packets of `max_packet` bytes, TCP headers taking `compressed`, no flow ready.
    fn fit((max_packet, compressed): (usize, Option<usize>)) -> Fit {
        let f = Fit::default();
        f.set(mpt_tunnel::SegmentSizes {
            whole: max_packet,
            compressed,
            settled: None,
        });
        f
    }

    fn run_compressed(raw: &mut [u8], cut: (usize, Option<usize>)) -> Vec<usize> {
        run_fit(raw, &fit(cut))
    }

    fn run_fit(raw: &mut [u8], fit: &Fit) -> Vec<usize> {
        let mut bufs = vec![vec![0u8; 24 + 1500]; 80];
        let mut sizes = vec![0usize; 80];
        let n = split(raw, &mut bufs, &mut sizes, 24, fit).expect("split");
        sizes[..n].to_vec()
    }

    #[test]
    fn tcp_super_packets_are_cut_to_fit_a_path_and_no_shorter_than_the_floor() {
        // the kernel's own segments when they fit
        assert_eq!(run(&mut super_packet(4000, 1448), 1500), [1488, 1488, 1144]);
        // cut to fit 1432-byte packets: 1392 bytes of payload each
        assert_eq!(run(&mut super_packet(4000, 1448), 1432), [1432, 1432, 1256]);
        // never below the floor: a path that small gets the kernel's segments in pieces
        assert_eq!(run(&mut super_packet(4000, 1448), 900), [1488, 1488, 1144]);
        // headers the connection compresses count as what they take compressed (20 bytes):
        // 1412 bytes of payload in 1432, after a first segment that goes whole (the flow has
        // no reference yet)
        assert_eq!(
            run_compressed(&mut super_packet(4000, 1448), (1432, Some(20))),
            [1432, 1452, 1236]
        );
    }

    /// The payload of TCP/IPv4 `segments` (20-byte headers), each checked: its length field,
    /// its IPv4 and TCP checksums, its sequence number where the one before it ended.
    fn payload_of(segments: &[&[u8]]) -> Vec<u8> {
        let mut payload = Vec::new();
        let mut next_seq = None;
        for p in segments {
            let len = p.len();
            assert_eq!(usize::from(u16::from_be_bytes([p[2], p[3]])), len);
            assert_eq!(
                mpt_tunnel::internet_checksum(0, &[&p[..20]]),
                0,
                "IPv4 checksum"
            );
            let pseudo = [&p[12..20], &[0, 6], &((len - 20) as u16).to_be_bytes()[..]].concat();
            assert_eq!(
                mpt_tunnel::internet_checksum(0, &[&pseudo, &p[20..]]),
                0,
                "TCP checksum"
            );
            let seq = u32::from_be_bytes([p[24], p[25], p[26], p[27]]);
            assert_eq!(*next_seq.get_or_insert(seq), seq, "sequence number");
            next_seq = Some(seq.wrapping_add((len - 40) as u32));
            payload.extend_from_slice(&p[40..]);
        }
        payload
    }

    #[test]
    fn a_flow_without_a_reference_gets_its_first_segment_cut_to_go_whole() {
        let f = fit((1432, Some(20)));
        let burst = || {
            let mut raw = super_packet(4000, 1448);
            let p = &mut raw[VIRTIO_NET_HDR_LEN..];
            p[4..6].copy_from_slice(&7u16.to_be_bytes());
            p[24..28].copy_from_slice(&0xffff_fc00u32.to_be_bytes());
            p[33] = 0x10 | TCP_CWR | TCP_PSH | TCP_FIN;
            raw
        };
        let mut raw = burst();
        let mut bufs = vec![vec![0u8; 1500]; 8];
        let mut sizes = vec![0usize; 8];
        let n = split(&mut raw, &mut bufs, &mut sizes, 0, &f).expect("split");
        // 1392 bytes of payload whole in 1432, then 1412 with headers compressed to 20
        assert_eq!(sizes[..n], [1432, 1452, 1236]);
        let segments: Vec<&[u8]> = (0..n).map(|k| &bufs[k][..sizes[k]]).collect();
        assert_eq!(
            payload_of(&segments),
            (0..4000).map(|k| k as u8).collect::<Vec<_>>()
        );
        let ids: Vec<u16> = segments
            .iter()
            .map(|p| u16::from_be_bytes([p[4], p[5]]))
            .collect();
        assert_eq!(ids, [7, 8, 9]);
        let flags: Vec<u8> = segments.iter().map(|p| p[33]).collect();
        assert_eq!(flags, [0x10 | TCP_CWR, 0x10, 0x10 | TCP_PSH | TCP_FIN]);
        // a burst no longer than a whole segment goes whole, in one
        assert_eq!(run_fit(&mut super_packet(1300, 1448), &f), [1340]);
        // once the flow has a reference, every segment is cut for compressed headers
        let mut ready = [0; CONTEXTS];
        let flow = flow_hash(&raw[VIRTIO_NET_HDR_LEN..]).expect("TCP");
        ready[flow as usize % CONTEXTS] = flow;
        f.set_ready(&ready);
        assert_eq!(run_fit(&mut burst(), &f), [1452, 1452, 1216]);
        // another flow in that context is not ready
        let mut other = burst();
        other[VIRTIO_NET_HDR_LEN + 15] = 9;
        assert_ne!(flow_hash(&other[VIRTIO_NET_HDR_LEN..]), Some(flow));
        assert_eq!(run_fit(&mut other, &f)[0], 1432);
    }

    #[test]
    fn a_syn_is_clamped_once_every_path_found_its_mtu() {
        let f = fit((1436, Some(16)));
        let read = |f: &Fit| {
            let syn = crate::datapath::mss::tests::syn(false, 1460, true);
            let mut raw = vec![0u8; VIRTIO_NET_HDR_LEN];
            raw.extend_from_slice(&syn);
            let mut bufs = vec![vec![0u8; 200]; 2];
            let mut sizes = vec![0usize; 2];
            let n = split(&mut raw, &mut bufs, &mut sizes, 0, f).expect("split");
            assert_eq!(n, 1);
            u16::from_be_bytes([bufs[0][42], bufs[0][43]])
        };
        // the paths still search: the base size is no size to clamp a flow's segments for
        assert_eq!(read(&f), 1460);
        f.set(mpt_tunnel::SegmentSizes {
            whole: 1436,
            compressed: Some(16),
            settled: Some(1436),
        });
        assert_eq!(read(&f), 1432);
    }

    #[test]
    fn a_clamped_flow_s_segments_go_uncut_once_it_has_a_reference() {
        // segments of 1396 bytes (an MSS clamped for 20-byte compressed headers in 1432-byte
        // packets) fit compressed but not whole
        let f = fit((1432, Some(20)));
        // no reference yet: the first is cut to go whole
        assert_eq!(
            run_fit(&mut super_packet(3 * 1412, 1412), &f),
            [1432, 1452, 1452, 60]
        );
        // a single segment, as a retransmission comes, too
        let mut one = super_packet(1412, 1412);
        let mut plain = VirtioNetHdr::decode(&one).expect("header");
        plain.gso_type = GSO_NONE;
        plain.flags = 0;
        plain.encode(&mut one).expect("header");
        let p = &mut one[VIRTIO_NET_HDR_LEN..];
        let sum = crate::datapath::mss::tcp_sum(p, 20);
        p[36..38].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(run_fit(&mut one.clone(), &f), [1432, 60]);
        // with a reference, the kernel's segments go as they are
        let mut ready = [0; CONTEXTS];
        let flow = flow_hash(&one[VIRTIO_NET_HDR_LEN..]).expect("TCP");
        ready[flow as usize % CONTEXTS] = flow;
        f.set_ready(&ready);
        assert_eq!(
            run_fit(&mut super_packet(3 * 1412, 1412), &f),
            [1452, 1452, 1452]
        );
        assert_eq!(run_fit(&mut one, &f), [1452]);
    }

    #[test]
    fn one_tcp_segment_too_long_for_the_paths_is_cut_with_valid_checksums() {
        // a single 1448-byte segment, its checksums complete, as a retransmission comes
        let mut raw = super_packet(1448, 1448);
        let mut plain = VirtioNetHdr::decode(&raw).expect("header");
        plain.gso_type = GSO_NONE;
        plain.flags = 0;
        plain.encode(&mut raw).expect("header");
        let mut bufs = vec![vec![0u8; 1500]; 4];
        let mut sizes = vec![0usize; 4];
        let n = split(&mut raw, &mut bufs, &mut sizes, 0, &fit((1432, None))).expect("split");
        assert_eq!(sizes[..n], [1432, 96]);
        let segments: Vec<&[u8]> = (0..n).map(|k| &bufs[k][..sizes[k]]).collect();
        assert_eq!(
            payload_of(&segments),
            (0..1448).map(|k| k as u8).collect::<Vec<_>>()
        );
        // one that fits, or that would be cut below the floor, is left whole
        let mut raw = super_packet(1448, 1448);
        plain.encode(&mut raw).expect("header");
        assert_eq!(run(&mut raw, 1500), [1488]);
        assert_eq!(run(&mut raw, 900), [1488]);
    }

    #[test]
    fn a_plain_packet_is_copied_whole_and_a_broken_read_is_refused() {
        let mut raw = vec![0u8; VIRTIO_NET_HDR_LEN + 60];
        raw[VIRTIO_NET_HDR_LEN] = 0x45;
        assert_eq!(run(&mut raw, 1400), [60]);
        let mut short = vec![0u8; VIRTIO_NET_HDR_LEN];
        let mut bufs = vec![vec![0u8; 100]];
        let mut sizes = vec![0];
        assert!(split(&mut short, &mut bufs, &mut sizes, 0, &fit((1400, None))).is_err());
        let mut bad = super_packet(4000, 1448);
        bad[VIRTIO_NET_HDR_LEN + 32] = 2 << 4; // a TCP header of 8 bytes
        assert!(split(&mut bad, &mut bufs, &mut sizes, 0, &fit((1400, None))).is_err());
    }
}
