//! A/B: instructions per inner packet for what mptd's hot paths read, hand-written vs
//! etherparse's header slices vs etherparse's LaxSlicedPacket vs smoltcp::wire vs
//! mpt_core::inner (`run.sh` runs each driver under callgrind with --toggle-collect).
use std::hint::black_box;

#[path = "../../../crates/mpt-core/src/inner.rs"]
#[allow(dead_code)]
mod inner;

#[derive(Default, Clone, Copy)]
struct Info {
    dscp: u8,
    protocol: u8,
    ports: Option<(u16, u16)>,
    syn: bool,
    ack: bool,
    ack_only: bool,
    len: usize,
}

impl Info {
    fn fold(self) -> u64 {
        u64::from(self.dscp)
            ^ u64::from(self.protocol) << 8
            ^ self
                .ports
                .map_or(0, |(a, b)| u64::from(a) << 16 | u64::from(b) << 32)
            ^ u64::from(self.syn) << 48
            ^ u64::from(self.ack) << 49
            ^ u64::from(self.ack_only) << 50
            ^ self.len as u64
    }
}

// ---- hand-written (class.rs PacketInfo::parse, mss::tcp_ip_len + tun_read's th) ----
#[inline]
fn class_hand(p: &[u8]) -> Option<Info> {
    let (dscp, protocol, l4) = match p.first()? >> 4 {
        4 if p.len() >= 20 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let later_fragment = u16::from_be_bytes([p[6], p[7]]) & 0x1fff != 0;
            let l4 = (!later_fragment && ihl >= 20)
                .then(|| p.get(ihl..))
                .flatten();
            (p[1] >> 2, p[9], l4)
        }
        6 if p.len() >= 40 => {
            let tc = (p[0] << 4) | (p[1] >> 4);
            (tc >> 2, p[6], p.get(40..))
        }
        _ => return None,
    };
    let mut info = Info {
        dscp,
        protocol,
        len: p.len(),
        ..Info::default()
    };
    if let Some(l4) = l4 {
        if matches!(protocol, 6 | 17) && l4.len() >= 4 {
            info.ports = Some((
                u16::from_be_bytes([l4[0], l4[1]]),
                u16::from_be_bytes([l4[2], l4[3]]),
            ));
        }
        if protocol == 6 && l4.len() >= 14 {
            info.syn = l4[13] & 0x02 != 0;
            info.ack = l4[13] & 0x10 != 0;
            let header = usize::from(l4[12] >> 4) * 4;
            info.ack_only = l4[13] & 0x07 == 0 && header >= 20 && l4.len() == header;
        }
    }
    Some(info)
}

#[inline]
fn tcp_ip_len(p: &[u8]) -> Option<(usize, bool)> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let fragment = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]) & 0x3fff;
            (*p.get(9)? == 6 && fragment == 0 && ihl >= 20).then_some((ihl, ihl == 20))
        }
        6 => (*p.get(6)? == 6).then_some((40, true)),
        _ => None,
    }
}

/// (ip header len, tcp header len, payload len, flags)
#[inline]
fn tcp_hand(p: &[u8]) -> Option<(usize, usize, usize, u8)> {
    let (ip_len, _) = tcp_ip_len(p)?;
    let th = usize::from(p.get(ip_len + 12)? >> 4) * 4;
    let payload = p.len().checked_sub(ip_len + th)?;
    if !(20..=60).contains(&th) {
        return None;
    }
    Some((ip_len, th, payload, p[ip_len + 13]))
}

// ---- etherparse header slices ----
#[inline]
fn class_ep(p: &[u8]) -> Option<Info> {
    use etherparse::{Ipv4HeaderSlice, Ipv6HeaderSlice, TcpHeaderSlice, UdpHeaderSlice};
    let (dscp, protocol, l4) = match p.first()? >> 4 {
        4 => {
            let h = Ipv4HeaderSlice::from_slice(p).ok()?;
            let l4 = (h.fragments_offset().value() == 0).then(|| &p[h.slice().len()..]);
            (h.dcp().value(), h.protocol().0, l4)
        }
        6 => {
            let h = Ipv6HeaderSlice::from_slice(p).ok()?;
            (h.traffic_class() >> 2, h.next_header().0, Some(&p[40..]))
        }
        _ => return None,
    };
    let mut info = Info {
        dscp,
        protocol,
        len: p.len(),
        ..Info::default()
    };
    if let Some(l4) = l4 {
        match protocol {
            6 => {
                if let Ok(t) = TcpHeaderSlice::from_slice(l4) {
                    info.ports = Some((t.source_port(), t.destination_port()));
                    info.syn = t.syn();
                    info.ack = t.ack();
                    info.ack_only = !t.syn() && !t.fin() && !t.rst() && l4.len() == t.slice().len();
                }
            }
            17 => {
                if let Ok(u) = UdpHeaderSlice::from_slice(l4) {
                    info.ports = Some((u.source_port(), u.destination_port()));
                }
            }
            _ => {}
        }
    }
    Some(info)
}

#[inline]
fn tcp_ep(p: &[u8]) -> Option<(usize, usize, usize, u8)> {
    use etherparse::{Ipv4HeaderSlice, Ipv6HeaderSlice, TcpHeaderSlice};
    let ip_len = match p.first()? >> 4 {
        4 => {
            let h = Ipv4HeaderSlice::from_slice(p).ok()?;
            (h.protocol().0 == 6 && !h.is_fragmenting_payload()).then_some(h.slice().len())?
        }
        6 => {
            let h = Ipv6HeaderSlice::from_slice(p).ok()?;
            (h.next_header().0 == 6).then_some(40)?
        }
        _ => return None,
    };
    let t = TcpHeaderSlice::from_slice(&p[ip_len..]).ok()?;
    let th = t.slice().len();
    Some((ip_len, th, p.len() - ip_len - th, t.slice()[13]))
}

// ---- etherparse LaxSlicedPacket ----
#[inline]
fn class_lax(p: &[u8]) -> Option<Info> {
    use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
    let s = LaxSlicedPacket::from_ip(p).ok()?;
    let (dscp, protocol) = match s.net.as_ref()? {
        LaxNetSlice::Ipv4(v) => (v.header().dcp().value(), v.header().protocol().0),
        LaxNetSlice::Ipv6(v) => (v.header().traffic_class() >> 2, v.header().next_header().0),
        _ => return None,
    };
    let mut info = Info {
        dscp,
        protocol,
        len: p.len(),
        ..Info::default()
    };
    match &s.transport {
        Some(TransportSlice::Tcp(t)) => {
            info.ports = Some((t.source_port(), t.destination_port()));
            info.syn = t.syn();
            info.ack = t.ack();
            info.ack_only = !t.syn() && !t.fin() && !t.rst() && t.payload().is_empty();
        }
        Some(TransportSlice::Udp(u)) => info.ports = Some((u.source_port(), u.destination_port())),
        _ => {}
    }
    Some(info)
}

#[inline]
fn tcp_lax(p: &[u8]) -> Option<(usize, usize, usize, u8)> {
    use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
    let s = LaxSlicedPacket::from_ip(p).ok()?;
    let ip_len = match s.net.as_ref()? {
        LaxNetSlice::Ipv4(v) if !v.header().is_fragmenting_payload() => v.header().slice().len(),
        LaxNetSlice::Ipv6(_) => 40,
        _ => return None,
    };
    match &s.transport {
        Some(TransportSlice::Tcp(t)) => {
            let th = t.header_len();
            Some((ip_len, th, t.payload().len(), t.slice()[13]))
        }
        _ => None,
    }
}

// ---- smoltcp::wire ----
#[inline]
fn class_smol(p: &[u8]) -> Option<Info> {
    use smoltcp::wire::{IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket};
    let (dscp, protocol, l4) = match p.first()? >> 4 {
        4 => {
            let h = Ipv4Packet::new_checked(p).ok()?;
            let l4 = (h.frag_offset() == 0).then(|| &p[usize::from(h.header_len())..]);
            (h.dscp(), u8::from(h.next_header()), l4)
        }
        6 => {
            let h = Ipv6Packet::new_checked(p).ok()?;
            (
                h.traffic_class() >> 2,
                u8::from(h.next_header()),
                Some(&p[40..]),
            )
        }
        _ => return None,
    };
    let mut info = Info {
        dscp,
        protocol,
        len: p.len(),
        ..Info::default()
    };
    if let Some(l4) = l4 {
        match IpProtocol::from(protocol) {
            IpProtocol::Tcp => {
                if let Ok(t) = TcpPacket::new_checked(l4) {
                    info.ports = Some((t.src_port(), t.dst_port()));
                    info.syn = t.syn();
                    info.ack = t.ack();
                    info.ack_only =
                        !t.syn() && !t.fin() && !t.rst() && l4.len() == usize::from(t.header_len());
                }
            }
            IpProtocol::Udp => {
                if let Ok(u) = UdpPacket::new_checked(l4) {
                    info.ports = Some((u.src_port(), u.dst_port()));
                }
            }
            _ => {}
        }
    }
    Some(info)
}

#[inline]
fn tcp_smol(p: &[u8]) -> Option<(usize, usize, usize, u8)> {
    use smoltcp::wire::{IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket};
    let ip_len = match p.first()? >> 4 {
        4 => {
            let h = Ipv4Packet::new_checked(p).ok()?;
            (h.next_header() == IpProtocol::Tcp && h.frag_offset() == 0 && !h.more_frags())
                .then_some(usize::from(h.header_len()))?
        }
        6 => {
            let h = Ipv6Packet::new_checked(p).ok()?;
            (h.next_header() == IpProtocol::Tcp).then_some(40)?
        }
        _ => return None,
    };
    let t = TcpPacket::new_checked(&p[ip_len..]).ok()?;
    let th = usize::from(t.header_len());
    Some((ip_len, th, p.len() - ip_len - th, p[ip_len + 13]))
}

// ---- mpt_core::inner ----
#[inline]
fn class_own(p: &[u8]) -> Option<Info> {
    use inner::{Ip, Tcp, Udp};
    let ip = Ip::new_checked(p)?;
    let mut info = Info {
        dscp: ip.dscp(),
        protocol: ip.protocol(),
        len: p.len(),
        ..Info::default()
    };
    if let Some(l4) = ip.l4().filter(|_| !ip.later_fragment()) {
        match ip.protocol() {
            inner::TCP => {
                if let Some(t) = Tcp::new_checked(l4) {
                    info.ports = Some((t.src_port(), t.dst_port()));
                    info.syn = t.flags() & Tcp::SYN != 0;
                    info.ack = t.flags() & Tcp::ACK != 0;
                    info.ack_only = t.flags() & 0x07 == 0 && t.payload().is_empty();
                }
            }
            inner::UDP => {
                if let Some(u) = Udp::new_checked(l4) {
                    info.ports = Some((u.src_port(), u.dst_port()));
                }
            }
            _ => {}
        }
    }
    Some(info)
}

/// as class.rs now reads (ports and flags from a transport header's start)
#[inline]
fn class_own_lax(p: &[u8]) -> Option<Info> {
    use inner::{Ip, Tcp};
    let ip = Ip::new_checked(p)?;
    let (dscp, protocol) = (ip.dscp(), ip.protocol());
    let l4 = ip.l4().filter(|_| !ip.later_fragment());
    let mut info = Info {
        dscp,
        protocol,
        len: p.len(),
        ..Info::default()
    };
    if let Some(l4) = l4 {
        if matches!(protocol, 6 | 17) {
            info.ports = inner::ports(l4);
        }
        if let Some(flags) = inner::tcp_flags(l4).filter(|_| protocol == 6) {
            info.syn = flags & Tcp::SYN != 0;
            info.ack = flags & Tcp::ACK != 0;
            info.ack_only = flags & (Tcp::SYN | Tcp::FIN | Tcp::RST) == 0
                && Tcp::new_checked(l4).is_some_and(|t| t.payload().is_empty());
        }
    }
    Some(info)
}

#[inline]
fn tcp_own(p: &[u8]) -> Option<(usize, usize, usize, u8)> {
    let (ip_len, t) = inner::Ip::new_checked(p)?.tcp()?;
    Some((ip_len, t.header_len(), t.payload().len(), t.flags()))
}

fn fold4(r: Option<(usize, usize, usize, u8)>) -> u64 {
    r.map_or(7, |(a, b, c, d)| {
        (a as u64) ^ (b as u64) << 8 ^ (c as u64) << 16 ^ u64::from(d) << 40
    })
}

macro_rules! driver {
    ($name:ident, $f:ident, $fold:expr) => {
        #[inline(never)]
        fn $name(packets: &[Vec<u8>], n: usize) -> u64 {
            let mut acc = 0u64;
            for _ in 0..n {
                for p in packets {
                    acc = acc.wrapping_add($fold($f(black_box(p))));
                }
            }
            acc
        }
    };
}
fn fold_info(i: Option<Info>) -> u64 {
    i.map_or(3, Info::fold)
}
driver!(run_class_hand, class_hand, fold_info);
driver!(run_class_ep, class_ep, fold_info);
driver!(run_class_lax, class_lax, fold_info);
driver!(run_class_smol, class_smol, fold_info);
driver!(run_class_own, class_own, fold_info);
driver!(run_class_own_lax, class_own_lax, fold_info);
driver!(run_tcp_hand, tcp_hand, fold4);
driver!(run_tcp_ep, tcp_ep, fold4);
driver!(run_tcp_lax, tcp_lax, fold4);
driver!(run_tcp_smol, tcp_smol, fold4);
driver!(run_tcp_own, tcp_own, fold4);

fn v4(len: usize, protocol: u8, port: u16, flags: u8, th: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[1] = 46 << 2;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = protocol;
    p[20..22].copy_from_slice(&40000u16.to_be_bytes());
    p[22..24].copy_from_slice(&port.to_be_bytes());
    if protocol == 6 {
        p[32] = ((th / 4) as u8) << 4;
        p[33] = flags;
    }
    if protocol == 17 {
        p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    }
    // a right header checksum, for smoltcp's sake (it doesn't check it in new_checked)
    p
}

fn v6(len: usize, protocol: u8, port: u16, flags: u8) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    p[6] = protocol;
    p[7] = 64;
    p[40..42].copy_from_slice(&40000u16.to_be_bytes());
    p[42..44].copy_from_slice(&port.to_be_bytes());
    if protocol == 6 {
        p[52] = 5 << 4;
        p[53] = flags;
    }
    p
}

fn main() {
    let which = std::env::args().nth(1).expect("which");
    let n: usize = std::env::args()
        .nth(2)
        .map_or(100_000, |s| s.parse().expect("n"));
    let packets = vec![
        v4(1400, 6, 443, 0x10, 32), // bulk TCP, timestamps
        v4(52, 6, 443, 0x10, 32),   // a pure ACK
        v4(80, 17, 53, 0, 0),       // DNS
        v6(1400, 6, 443, 0x10),     // bulk TCP over IPv6
        v4(60, 6, 443, 0x02, 40),   // SYN with options
    ];
    let packets = black_box(packets);
    let f = match which.as_str() {
        "class_hand" => run_class_hand,
        "class_ep" => run_class_ep,
        "class_lax" => run_class_lax,
        "class_smol" => run_class_smol,
        "class_own" => run_class_own,
        "class_own_lax" => run_class_own_lax,
        "tcp_hand" => run_tcp_hand,
        "tcp_ep" => run_tcp_ep,
        "tcp_lax" => run_tcp_lax,
        "tcp_smol" => run_tcp_smol,
        "tcp_own" => run_tcp_own,
        _ => panic!("which"),
    };
    // cross-check: all variants agree on these packets
    let hand_c: Vec<_> = packets.iter().map(|p| fold_info(class_hand(p))).collect();
    for g in [class_ep, class_lax, class_smol, class_own, class_own_lax] {
        assert_eq!(
            hand_c,
            packets.iter().map(|p| fold_info(g(p))).collect::<Vec<_>>()
        );
    }
    let hand_t: Vec<_> = packets.iter().map(|p| fold4(tcp_hand(p))).collect();
    for g in [tcp_ep, tcp_lax, tcp_smol, tcp_own] {
        assert_eq!(
            hand_t,
            packets.iter().map(|p| fold4(g(p))).collect::<Vec<_>>()
        );
    }
    println!("{which} {}", f(&packets, n));
}
