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

mod transport;
pub use transport::{ports, tcp_flags, Icmp, Tcp, Udp};

#[cfg(test)]
mod tests;

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
pub(super) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(super) fn be32(b: &[u8], at: usize) -> u32 {
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
