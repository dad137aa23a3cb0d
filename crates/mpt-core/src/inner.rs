//! Checked, zero-copy views of inner packets (the IP packets the tunnel carries), in the
//! style of smoltcp's `wire`: each view is a borrowed slice whose `new_checked` makes sure
//! that every fixed field its accessors read is there, so that they read without a check of
//! their own and never panic. Nothing is copied or allocated.
//!
//! - [`Ip`]: an IPv4 ([`Ipv4`]) or IPv6 ([`Ipv6`]) packet, its fixed header whole;
//! - [`Tcp`]: a TCP header whole, options and all; [`Udp`]: a UDP header;
//! - [`Icmp`]: an ICMP or ICMPv6 message's type and code.
//!
//! A view checks what its own accessors need and no more: an [`Ip`] view's length field may
//! disagree with the slice (where it must agree, the reader compares them), and its transport
//! header is found with [`Ip::l4`] (after IPv4 options, if the header length is sound).
//!
//! Why not a crate's: counted by callgrind per packet (the classes' read of DSCP, protocol,
//! ports and TCP flags; the TCP header found as MSS clamping and segment cutting find it),
//! the hand-written reads these views replaced took 105 and 43 instructions, etherparse
//! 0.21's header slices 101 and 53, its `LaxSlicedPacket` 288 and 243, smoltcp 0.12's
//! `wire` 113 and 60, and these views 98 and 44.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol number (next header) of ICMP.
pub const ICMP: u8 = 1;
/// IP protocol number (next header) of TCP.
pub const TCP: u8 = 6;
/// IP protocol number (next header) of UDP.
pub const UDP: u8 = 17;
/// IPv6 next header of ICMPv6.
pub const ICMPV6: u8 = 58;

/// The IP version in the first byte of `p` (4 and 6 are ours; anything else is not IP).
#[inline(always)]
pub fn version(p: &[u8]) -> Option<u8> {
    p.first().map(|b| b >> 4)
}

/// The packet's length as its IPv4 or IPv6 header gives it ([`Ip::total_len`]), read from
/// the fewest bytes that hold it (4 or 6): for the head of a packet, which may be shorter
/// than its header.
#[inline(always)]
pub fn claimed_len(p: &[u8]) -> Option<usize> {
    match version(p)? {
        4 => Some(usize::from(be16(p.get(..4)?, 2))),
        6 => Some(Ipv6::HEADER_LEN + usize::from(be16(p.get(..6)?, 4))),
        _ => None,
    }
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// An IPv4 packet: version 4 and at least the 20 bytes of a header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4<'a> {
    b: &'a [u8; 20],
    all: &'a [u8],
}

impl<'a> Ipv4<'a> {
    /// Bytes of an IPv4 header without options.
    pub const MIN_LEN: usize = 20;

    #[inline(always)]
    pub fn new_checked(p: &'a [u8]) -> Option<Self> {
        (version(p)? == 4).then(|| Self::fixed(p))?
    }
    /// The view of `p`, whose version is 4, if its fixed header is whole.
    #[inline(always)]
    fn fixed(p: &'a [u8]) -> Option<Self> {
        Some(Ipv4 {
            b: p.get(..20)?.try_into().ok()?,
            all: p,
        })
    }
    /// The whole packet (the slice it was made from).
    #[inline(always)]
    pub fn bytes(&self) -> &'a [u8] {
        self.all
    }
    /// The header's length from its IHL field (under 20 in a broken header, and it may be
    /// longer than the slice).
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        usize::from(self.b[0] & 0x0f) * 4
    }
    #[inline(always)]
    pub fn dscp(&self) -> u8 {
        self.b[1] >> 2
    }
    /// The total length field.
    #[inline(always)]
    pub fn total_len(&self) -> usize {
        usize::from(be16(self.b, 2))
    }
    #[inline(always)]
    pub fn ident(&self) -> u16 {
        be16(self.b, 4)
    }
    /// The fragment offset (in 8-byte units): not 0 in a later fragment, which carries no
    /// transport header.
    #[inline(always)]
    pub fn frag_offset(&self) -> u16 {
        be16(self.b, 6) & 0x1fff
    }
    /// A fragment: a later one, or the first with more to come.
    #[inline(always)]
    pub fn is_fragment(&self) -> bool {
        be16(self.b, 6) & 0x3fff != 0
    }
    #[inline(always)]
    pub fn protocol(&self) -> u8 {
        self.b[9]
    }
    #[inline(always)]
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.b[12], self.b[13], self.b[14], self.b[15])
    }
    #[inline(always)]
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.b[16], self.b[17], self.b[18], self.b[19])
    }
    /// What follows the header (the transport header, in all but a later fragment), if the
    /// header's length is sound: at least 20 and within the slice.
    #[inline(always)]
    pub fn l4(&self) -> Option<&'a [u8]> {
        let h = self.header_len();
        if h >= 20 {
            self.all.get(h..)
        } else {
            None
        }
    }
}

/// An IPv6 packet: version 6 and at least its 40-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6<'a> {
    b: &'a [u8; 40],
    all: &'a [u8],
}

impl<'a> Ipv6<'a> {
    /// Bytes of the IPv6 header.
    pub const HEADER_LEN: usize = 40;

    #[inline(always)]
    pub fn new_checked(p: &'a [u8]) -> Option<Self> {
        (version(p)? == 6).then(|| Self::fixed(p))?
    }
    /// The view of `p`, whose version is 6, if its header is whole.
    #[inline(always)]
    fn fixed(p: &'a [u8]) -> Option<Self> {
        Some(Ipv6 {
            b: p.get(..40)?.try_into().ok()?,
            all: p,
        })
    }
    /// The whole packet (the slice it was made from).
    #[inline(always)]
    pub fn bytes(&self) -> &'a [u8] {
        self.all
    }
    /// The DSCP: the traffic class's upper six bits.
    #[inline(always)]
    pub fn dscp(&self) -> u8 {
        ((self.b[0] << 4) | (self.b[1] >> 4)) >> 2
    }
    /// The payload length field.
    #[inline(always)]
    pub fn payload_len(&self) -> usize {
        usize::from(be16(self.b, 4))
    }
    #[inline(always)]
    pub fn next_header(&self) -> u8 {
        self.b[6]
    }
    #[inline(always)]
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(<[u8; 16]>::try_from(&self.b[8..24]).expect("16 bytes"))
    }
    #[inline(always)]
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(<[u8; 16]>::try_from(&self.b[24..40]).expect("16 bytes"))
    }
    /// What follows the fixed header (the transport header when [`Self::next_header`] is one).
    #[inline(always)]
    pub fn l4(&self) -> &'a [u8] {
        &self.all[40..]
    }
}

/// An IPv4 or IPv6 packet ([`Ipv4`], [`Ipv6`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ip<'a> {
    V4(Ipv4<'a>),
    V6(Ipv6<'a>),
}

impl<'a> Ip<'a> {
    /// The view of `p` if it starts with a whole IPv4 header (without options) or IPv6 header.
    #[inline(always)]
    pub fn new_checked(p: &'a [u8]) -> Option<Self> {
        match version(p)? {
            4 => Ipv4::fixed(p).map(Ip::V4),
            6 => Ipv6::fixed(p).map(Ip::V6),
            _ => None,
        }
    }
    /// The header length the fixed header needs (20 or 40) for IP version `v`.
    pub fn min_len(v: u8) -> Option<usize> {
        match v {
            4 => Some(Ipv4::MIN_LEN),
            6 => Some(Ipv6::HEADER_LEN),
            _ => None,
        }
    }
    #[inline(always)]
    pub fn is_v6(&self) -> bool {
        matches!(self, Ip::V6(_))
    }
    #[inline(always)]
    pub fn bytes(&self) -> &'a [u8] {
        match self {
            Ip::V4(v) => v.bytes(),
            Ip::V6(v) => v.bytes(),
        }
    }
    #[inline(always)]
    pub fn dscp(&self) -> u8 {
        match self {
            Ip::V4(v) => v.dscp(),
            Ip::V6(v) => v.dscp(),
        }
    }
    /// The IPv4 protocol or the IPv6 next header.
    #[inline(always)]
    pub fn protocol(&self) -> u8 {
        match self {
            Ip::V4(v) => v.protocol(),
            Ip::V6(v) => v.next_header(),
        }
    }
    /// The packet's length as its header gives it (IPv4's total length, IPv6's payload length
    /// and its 40 bytes of header).
    #[inline(always)]
    pub fn total_len(&self) -> usize {
        match self {
            Ip::V4(v) => v.total_len(),
            Ip::V6(v) => Ipv6::HEADER_LEN + v.payload_len(),
        }
    }
    #[inline(always)]
    pub fn src(&self) -> IpAddr {
        match self {
            Ip::V4(v) => v.src().into(),
            Ip::V6(v) => v.src().into(),
        }
    }
    #[inline(always)]
    pub fn dst(&self) -> IpAddr {
        match self {
            Ip::V4(v) => v.dst().into(),
            Ip::V6(v) => v.dst().into(),
        }
    }
    /// A later IPv4 fragment (no transport header); never for IPv6, whose fragments are
    /// behind an extension header.
    #[inline(always)]
    pub fn later_fragment(&self) -> bool {
        match self {
            Ip::V4(v) => v.frag_offset() != 0,
            Ip::V6(_) => false,
        }
    }
    /// What follows the IP header ([`Ipv4::l4`], [`Ipv6::l4`]).
    #[inline(always)]
    pub fn l4(&self) -> Option<&'a [u8]> {
        match self {
            Ip::V4(v) => v.l4(),
            Ip::V6(v) => Some(v.l4()),
        }
    }
    /// The TCP header of a TCP packet that is whole (IPv4 not a fragment, or IPv6 whose next
    /// header is TCP), and the IP header's length.
    #[inline(always)]
    pub fn tcp(&self) -> Option<(usize, Tcp<'a>)> {
        let (ip_len, l4) = match self {
            Ip::V4(v) if v.protocol() == TCP && !v.is_fragment() => (v.header_len(), v.l4()?),
            Ip::V6(v) if v.next_header() == TCP => (Ipv6::HEADER_LEN, v.l4()),
            _ => return None,
        };
        Some((ip_len, Tcp::new_checked(l4)?))
    }
}

/// The source and destination ports at the start of a TCP or UDP header `l4`, from the
/// four bytes that hold them: a header cut short (a first fragment's) or broken still has
/// them. (A view needs its whole header: [`Tcp`], [`Udp`].)
#[inline(always)]
pub fn ports(l4: &[u8]) -> Option<(u16, u16)> {
    let b = l4.get(..4)?;
    Some((be16(b, 0), be16(b, 2)))
}

/// The flags byte of the TCP header `l4` starts with ([`Tcp::flags`]), from the 14 bytes
/// that hold it: a header cut short or broken still has them.
#[inline(always)]
pub fn tcp_flags(l4: &[u8]) -> Option<u8> {
    l4.get(13).copied()
}

/// A TCP header: at least 20 bytes, and its data offset at least 20 and within the slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tcp<'a> {
    b: &'a [u8; 20],
    all: &'a [u8],
}

impl<'a> Tcp<'a> {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const CWR: u8 = 0x80;

    #[inline(always)]
    pub fn new_checked(t: &'a [u8]) -> Option<Self> {
        let b: &[u8; 20] = t.get(..20)?.try_into().ok()?;
        let h = usize::from(b[12] >> 4) * 4;
        (h >= 20 && t.len() >= h).then_some(Tcp { b, all: t })
    }
    #[inline(always)]
    pub fn src_port(&self) -> u16 {
        be16(self.b, 0)
    }
    #[inline(always)]
    pub fn dst_port(&self) -> u16 {
        be16(self.b, 2)
    }
    #[inline(always)]
    pub fn seq(&self) -> u32 {
        be32(self.b, 4)
    }
    /// The header's length, options and all (20 to 60).
    #[inline(always)]
    pub fn header_len(&self) -> usize {
        usize::from(self.b[12] >> 4) * 4
    }
    /// The flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    #[inline(always)]
    pub fn flags(&self) -> u8 {
        self.b[13]
    }
    #[inline(always)]
    pub fn urgent(&self) -> u16 {
        be16(self.b, 18)
    }
    /// The options (what the header has past its first 20 bytes).
    #[inline(always)]
    pub fn options(&self) -> &'a [u8] {
        &self.all[20..self.header_len()]
    }
    /// The segment's data: the rest of the slice after the header.
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        &self.all[self.header_len()..]
    }
}

/// A UDP header (8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp<'a> {
    b: &'a [u8; 8],
}

impl<'a> Udp<'a> {
    pub const HEADER_LEN: usize = 8;

    #[inline(always)]
    pub fn new_checked(u: &'a [u8]) -> Option<Self> {
        Some(Udp {
            b: u.get(..8)?.try_into().ok()?,
        })
    }
    #[inline(always)]
    pub fn src_port(&self) -> u16 {
        be16(self.b, 0)
    }
    #[inline(always)]
    pub fn dst_port(&self) -> u16 {
        be16(self.b, 2)
    }
    /// The length field (header and payload).
    #[inline(always)]
    pub fn len(&self) -> usize {
        usize::from(be16(self.b, 4))
    }
    /// Whether the length field says there is not even a header.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len() < Self::HEADER_LEN
    }
}

/// The start of an ICMP or ICMPv6 message: its type (at least that byte is there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmp<'a> {
    b: &'a [u8],
}

impl<'a> Icmp<'a> {
    #[inline(always)]
    pub fn new_checked(m: &'a [u8]) -> Option<Self> {
        (!m.is_empty()).then_some(Icmp { b: m })
    }
    #[inline(always)]
    pub fn msg_type(&self) -> u8 {
        self.b[0]
    }
    /// An ICMP (IPv4) error message: anything but echo and echo reply, timestamp, information
    /// request and address mask request (RFC 1812: no error answers an error).
    #[inline(always)]
    pub fn is_v4_error(&self) -> bool {
        !matches!(self.msg_type(), 0 | 8 | 13 | 15 | 17)
    }
    /// An ICMPv6 error message: a type under 128 (RFC 4443).
    #[inline(always)]
    pub fn is_v6_error(&self) -> bool {
        self.msg_type() < 128
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_tcp(payload: usize, options: &[u8]) -> Vec<u8> {
        let th = 20 + options.len();
        let len = 20 + th + payload;
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = 46 << 2;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[192, 0, 2, 1]);
        p[16..20].copy_from_slice(&[198, 51, 100, 7]);
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&443u16.to_be_bytes());
        p[24..28].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        p[32] = ((th / 4) as u8) << 4;
        p[33] = Tcp::SYN | Tcp::ACK;
        p[38..40].copy_from_slice(&7u16.to_be_bytes());
        p[40..40 + options.len()].copy_from_slice(options);
        p
    }

    fn v6_udp(payload: usize) -> Vec<u8> {
        let mut p = vec![0u8; 48 + payload];
        p[0] = 0x60 | (46 >> 2);
        p[1] = (46 & 3) << 6;
        p[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        p[6] = UDP;
        p[7] = 64;
        p[8] = 0x20;
        p[23] = 1;
        p[24] = 0x20;
        p[39] = 2;
        p[40..42].copy_from_slice(&5353u16.to_be_bytes());
        p[42..44].copy_from_slice(&53u16.to_be_bytes());
        p[44..46].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        p
    }

    #[test]
    fn an_ipv4_tcp_packet_reads_field_by_field() {
        let p = v4_tcp(10, &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        let ip = Ip::new_checked(&p).expect("IPv4");
        assert!(!ip.is_v6());
        assert_eq!(ip.dscp(), 46);
        assert_eq!(ip.protocol(), TCP);
        assert_eq!(ip.total_len(), p.len());
        assert_eq!(ip.src(), IpAddr::from([192, 0, 2, 1]));
        assert_eq!(ip.dst(), IpAddr::from([198, 51, 100, 7]));
        assert!(!ip.later_fragment());
        let Ip::V4(v4) = ip else { panic!("IPv4") };
        assert_eq!(
            (v4.header_len(), v4.ident(), v4.is_fragment()),
            (20, 0x1234, false)
        );
        let (ip_len, t) = ip.tcp().expect("TCP");
        assert_eq!(ip_len, 20);
        assert_eq!(
            (t.src_port(), t.dst_port(), t.seq()),
            (40000, 443, 0xdead_beef)
        );
        assert_eq!((t.header_len(), t.flags(), t.urgent()), (32, 0x12, 7));
        assert_eq!(claimed_len(&p[..4]), Some(p.len()));
        assert_eq!(claimed_len(&p[..3]), None);
        assert_eq!(t.options(), &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(t.payload().len(), 10);
        assert_eq!(ports(&p[20..24]), Some((40000, 443)));
        assert_eq!(ports(&p[20..23]), None);
        assert_eq!(tcp_flags(&p[20..34]), Some(0x12));
        assert_eq!(tcp_flags(&p[20..33]), None);
    }

    #[test]
    fn an_ipv6_udp_packet_reads_field_by_field() {
        let p = v6_udp(5);
        let ip = Ip::new_checked(&p).expect("IPv6");
        assert!(ip.is_v6());
        assert_eq!(ip.dscp(), 46);
        assert_eq!((ip.protocol(), ip.total_len()), (UDP, p.len()));
        assert_eq!(ip.src(), "2000::1".parse::<IpAddr>().expect("address"));
        assert_eq!(ip.dst(), "2000::2".parse::<IpAddr>().expect("address"));
        assert_eq!(ip.tcp(), None);
        assert_eq!(claimed_len(&p[..6]), Some(p.len()));
        assert_eq!(claimed_len(&p[..5]), None);
        let u = Udp::new_checked(ip.l4().expect("l4")).expect("UDP");
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (5353, 53, 13));
        assert!(!u.is_empty());
    }

    #[test]
    fn short_or_broken_headers_give_no_view() {
        let p = v4_tcp(0, &[]);
        assert_eq!(Ip::new_checked(&p[..19]), None);
        assert_eq!(Ip::new_checked(&v6_udp(0)[..39]), None);
        assert_eq!(Ip::new_checked(&[0x50; 60]), None, "not IP");
        assert_eq!(Ip::new_checked(&[]), None);
        assert_eq!(version(&[]), None);
        // a header length under 20, or past the slice: the fixed fields read, no transport
        let mut bad = p.clone();
        bad[0] = 0x44;
        let ip = Ip::new_checked(&bad).expect("fixed header");
        assert_eq!((ip.protocol(), ip.l4(), ip.tcp()), (TCP, None, None));
        bad[0] = 0x4f;
        assert_eq!(Ip::new_checked(&bad).expect("fixed header").l4(), None);
        // fragments carry no whole TCP packet
        let mut frag = p.clone();
        frag[6] = 0x20; // more fragments
        assert_eq!(Ip::new_checked(&frag).expect("IPv4").tcp(), None);
        assert!(!Ip::new_checked(&frag).expect("IPv4").later_fragment());
        frag[7] = 1;
        assert!(Ip::new_checked(&frag).expect("IPv4").later_fragment());
        // a TCP data offset under 5 or past the slice
        let mut t = p[20..].to_vec();
        assert!(Tcp::new_checked(&t).is_some());
        t[12] = 0x40;
        assert_eq!(Tcp::new_checked(&t), None);
        t[12] = 0x60;
        assert_eq!(Tcp::new_checked(&t), None);
        assert_eq!(Tcp::new_checked(&t[..19]), None);
        assert_eq!(Udp::new_checked(&[0; 7]), None);
        assert_eq!(Icmp::new_checked(&[]), None);
    }

    #[test]
    fn icmp_errors_are_told_from_queries() {
        for (t, v4, v6) in [
            (0, false, true),
            (3, true, true),
            (8, false, true),
            (128, true, false),
        ] {
            let b = [t];
            let m = Icmp::new_checked(&b).expect("type");
            assert_eq!((m.is_v4_error(), m.is_v6_error()), (v4, v6), "{t}");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(p in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100)) {
            let _ = (claimed_len(&p), ports(&p), tcp_flags(&p));
            if let Some(ip) = Ip::new_checked(&p) {
                let _ = (ip.dscp(), ip.protocol(), ip.src(), ip.dst(), ip.later_fragment());
                proptest::prop_assert_eq!(Some(ip.total_len()), claimed_len(&p));
                if let Some(l4) = ip.l4() {
                    if let Some(u) = Udp::new_checked(l4) {
                        let _ = (u.src_port(), u.dst_port(), u.len(), u.is_empty());
                    }
                    if let Some(m) = Icmp::new_checked(l4) {
                        let _ = (m.is_v4_error(), m.is_v6_error());
                    }
                }
                if let Some((ip_len, t)) = ip.tcp() {
                    proptest::prop_assert!(ip_len + t.header_len() <= p.len());
                    let _ = (t.src_port(), t.dst_port(), t.seq(), t.flags(), t.urgent());
                    proptest::prop_assert_eq!(20 + t.options().len() + t.payload().len(), p.len() - ip_len);
                }
            }
            if let Some(t) = Tcp::new_checked(&p) {
                proptest::prop_assert!((20..=60).contains(&t.header_len()));
                let _ = (t.options(), t.payload());
            }
        }
    }
}
