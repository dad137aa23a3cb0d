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
