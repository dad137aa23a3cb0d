//! Views of the transport header an inner packet carries: TCP, UDP and ICMP.

use super::{be16, be32};

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
