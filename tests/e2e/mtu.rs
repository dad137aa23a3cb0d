//! The full 1500-byte inner MTU over paths whose MTUs are smaller, found by path MTU
//! discovery: packets in pieces, and a path MTU that drops under traffic.

use std::time::{Duration, Instant};

use mpt_lab::harness::{tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::classes::counted_udp;
use crate::{need, sha256};

const V6_B: &str = "2001:db8:19::2";

/// Set the MTU of link `i` on `sides`.
fn set_mtu(lab: &Lab, sides: &[Side], i: usize, mtu: u32) {
    for &side in sides {
        lab.sh(side, &format!("ip link set {} mtu {mtu}", Lab::link(i)))
            .expect("ip link set mtu");
    }
}

/// Each path's MTU as `side`'s daemon knows it, once every search is over (or after `limit`):
/// the MTUs and how long it took.
fn discovered(lab: &Lab, side: Side, limit: Duration) -> (Vec<usize>, Duration) {
    let t0 = Instant::now();
    loop {
        let st = lab.status(side).expect("status");
        let paths = &st.peers[0].paths;
        if paths.iter().all(|p| p.mtu_found) || t0.elapsed() > limit {
            return (paths.iter().map(|p| p.mtu).collect(), t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `ping` from A with `args`: its loss in percent (100 when it says nothing).
fn ping_loss(lab: &Lab, args: &[&str]) -> f64 {
    let out = lab.cmd(Side::A, "ping").args(args).output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(',')
        .find(|s| s.contains("packet loss"))
        .and_then(|s| s.trim().split('%').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(100.0)
}

/// A 5 MB file from B's FTP server, downloaded by A through the tunnel: intact.
fn ftp_download_is_intact(lab: &mut Lab) {
    let ftp = lab.ftp_server(Side::B, 5_000_000).expect("vsftpd");
    let got = lab.dir.join("downloaded.bin");
    let dl = lab
        .cmd(Side::A, "curl")
        .args([
            "-sS",
            "--max-time",
            "60",
            "-o",
            got.to_str().expect("a UTF-8 path"),
        ])
        .arg(format!("{}/random.bin", ftp.url))
        .output()
        .expect("curl");
    assert!(
        dl.status.success(),
        "{}",
        String::from_utf8_lossy(&dl.stderr)
    );
    assert_eq!(sha256(&got), sha256(&ftp.file), "downloaded file differs");
    lab.reap(ftp.pid);
}

/// Each `ping` from A with these arguments loses nothing.
fn pings_lose_nothing(lab: &Lab, runs: &[Vec<&str>]) {
    for args in runs {
        let loss = ping_loss(lab, args);
        eprintln!("RESULT mtu: ping {args:?}: {loss} % lost");
        assert_eq!(loss, 0.0, "ping {args:?}: {loss} % lost");
    }
}

#[test]
fn a_1500_byte_tunnel_carries_full_size_packets_over_paths_of_mtu_1500_1492_and_1280() {
    need!("mtu_three_paths", "ping", "iperf3", "vsftpd", "curl");
    let mut lab = Lab::new(&vec![LinkSpec::shaped(20_000_000); 3]).expect("lab");
    set_mtu(&lab, &[Side::A, Side::B], 1, 1492);
    set_mtu(&lab, &[Side::A, Side::B], 2, 1280);
    let opts = TunnelOpts {
        mtu: 1500,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let (mtus, took) = discovered(&lab, Side::A, Duration::from_secs(10));
    eprintln!(
        "RESULT mtu: paths' MTUs found {mtus:?} after {took:?} (interfaces 1500, 1492, 1280)"
    );
    for (got, want) in mtus.iter().zip([1500, 1492, 1280]) {
        assert!(
            *got <= want && got + 8 >= want,
            "found {mtus:?}, interfaces 1500/1492/1280"
        );
    }
    assert!(took < Duration::from_secs(5), "discovery took {took:?}");

    // full-size pings, with DF and without, both families
    let b4 = tunnel_addr(Side::B);
    let runs = [
        vec![
            "-c",
            "20",
            "-i",
            "0.05",
            "-M",
            "do",
            "-s",
            "1472",
            b4.as_str(),
        ],
        vec!["-c", "20", "-i", "0.05", "-s", "1472", b4.as_str()],
        vec![
            "-6", "-c", "20", "-i", "0.05", "-M", "do", "-s", "1452", V6_B,
        ],
        vec!["-6", "-c", "20", "-i", "0.05", "-s", "1452", V6_B],
    ];
    pings_lose_nothing(&lab, &runs);

    // UDP with 1472-byte datagrams (1500-byte packets): none lost to size. Counted at
    // both ends rather than by iperf3, whose server stops counting when the client's
    // end-of-test message is read, even if a datagram sent just before it is still unread.
    let (sent, got) = counted_udp(&lab, 5301, 8_000_000, 4, 1472);
    eprintln!("RESULT mtu: UDP 1472-byte datagrams: {got} of {sent} arrived");
    assert!(sent > 2000, "{sent} sent");
    assert_eq!(got, sent, "datagrams lost");

    // TCP with its SYN's MSS clamped to what a 1500-byte path's datagram carries (compressed
    // headers: no segment needs a cut), and a file through FTP, intact
    let v = lab
        .iperf3(Side::A, &b4, 5302, &["-t", "3"])
        .expect("iperf3 tcp");
    let mss = v["start"]["tcp_mss_default"].as_u64().unwrap_or(0);
    let bps = mpt_lab::harness::iperf3_bps(&v);
    eprintln!(
        "RESULT mtu: TCP over the 1500-byte tunnel: MSS {mss}, {:.1} Mbit/s",
        bps / 1e6
    );
    assert!(
        (1400..1448).contains(&mss),
        "MSS {mss}: not clamped to what a 1500-byte path carries"
    );
    ftp_download_is_intact(&mut lab);

    let st = lab.status(Side::B).expect("status");
    let d = &st.tunnel.drops;
    eprintln!(
        "RESULT mtu: B dropped {} overlapping and {} expired pieces",
        d.fragment_overlap, d.fragment_expired
    );
    assert_eq!(d.fragment_overlap, 0);
}

#[test]
fn a_jumbo_tunnel_mtu_of_9000_carries_its_full_size_packets_over_1500_byte_paths() {
    need!("mtu_jumbo", "ping", "iperf3", "vsftpd", "curl");
    let mut lab = Lab::new(&vec![LinkSpec::shaped(20_000_000); 2]).expect("lab");
    let opts = TunnelOpts {
        mtu: 9000,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let (mtus, _) = discovered(&lab, Side::A, Duration::from_secs(10));
    assert_eq!(mtus, [1500, 1500], "the paths' MTUs");
    // 9000-byte packets, with DF and without, both families: each in seven pieces
    let b4 = tunnel_addr(Side::B);
    let runs = [
        vec![
            "-c",
            "100",
            "-i",
            "0.02",
            "-M",
            "do",
            "-s",
            "8972",
            b4.as_str(),
        ],
        vec!["-c", "50", "-i", "0.02", "-s", "8972", b4.as_str()],
        vec![
            "-6", "-c", "50", "-i", "0.02", "-M", "do", "-s", "8952", V6_B,
        ],
    ];
    pings_lose_nothing(&lab, &runs);
    // TCP with its SYN's MSS clamped to what the paths' datagrams carry (not the jumbo LAN's),
    // and a file through FTP, intact
    let v = lab
        .iperf3(Side::A, &b4, 5303, &["-t", "3"])
        .expect("iperf3 tcp");
    let mss = v["start"]["tcp_mss_default"].as_u64().unwrap_or(0);
    let bps = mpt_lab::harness::iperf3_bps(&v);
    eprintln!(
        "RESULT mtu: TCP over the 9000-byte tunnel: MSS {mss}, {:.1} Mbit/s over 2 x 20",
        bps / 1e6
    );
    assert!(
        (1400..1448).contains(&mss),
        "MSS {mss}: not clamped to what a 1500-byte path carries"
    );
    assert!(
        bps > 20e6,
        "{:.1} Mbit/s over two 20 Mbit/s paths",
        bps / 1e6
    );
    ftp_download_is_intact(&mut lab);
    let st = lab.status(Side::B).expect("status");
    let d = &st.tunnel.drops;
    eprintln!(
        "RESULT mtu: jumbo: B dropped {} overlapping and {} expired pieces, {} too big at A",
        d.fragment_overlap,
        d.fragment_expired,
        lab.status(Side::A).expect("status").tunnel.drops.too_big
    );
    assert_eq!(d.fragment_overlap, 0);
}

#[test]
fn a_path_mtu_that_drops_under_traffic_is_noticed_within_two_seconds_and_nothing_stalls() {
    need!("mtu_drop", "iperf3");
    let mut lab = Lab::new(&vec![LinkSpec::shaped(20_000_000); 2]).expect("lab");
    let opts = TunnelOpts {
        mtu: 1500,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let (mtus, _) = discovered(&lab, Side::A, Duration::from_secs(10));
    assert_eq!(mtus, [1500, 1500]);
    let (spid, client) = lab.tcp_transfer_in_background(5303, 8).expect("iperf3");
    std::thread::sleep(Duration::from_secs(2));
    // B's end of path 0 now takes at most 1400 bytes: A's larger datagrams vanish without an
    // ICMP (a black hole); B's own fail at once with EMSGSIZE
    set_mtu(&lab, &[Side::B], 0, 1400);
    let t0 = Instant::now();
    let mut noticed = None;
    while t0.elapsed() < Duration::from_secs(4) {
        let a = lab.status(Side::A).expect("status");
        let p = &a.peers[0].paths[0];
        if noticed.is_none() && p.mtu <= 1400 {
            noticed = Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = client.wait_with_output().expect("iperf3 client");
    lab.reap(spid);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    let intervals: Vec<f64> = v["intervals"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["sum"]["bits_per_second"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    let a = lab.status(Side::A).expect("status");
    let p = &a.peers[0].paths[0];
    eprintln!(
        "RESULT mtu: path 0's MTU dropped to 1400 under TCP: noticed after {noticed:?}, now {} \
         ({} drops noticed); TCP per second {:?} Mbit/s",
        p.mtu,
        p.mtu_drops,
        intervals
            .iter()
            .map(|b| (b / 1e5).round() / 10.0)
            .collect::<Vec<_>>()
    );
    let noticed = noticed.expect("the drop was noticed");
    assert!(
        noticed <= Duration::from_secs(2),
        "noticed after {noticed:?}"
    );
    assert!(
        p.mtu <= 1400 && p.mtu + 8 >= 1400,
        "path 0's MTU now {}",
        p.mtu
    );
    // no second without traffic: the black hole lasted less than that
    assert!(intervals.len() >= 8, "{intervals:?}");
    assert!(
        intervals.iter().all(|&b| b > 1e6),
        "a second nearly without traffic: {intervals:?}"
    );
}

/// Forged pieces, in the clear, with the session's index and from the peer's own address and
/// port (the worst a stranger can do without keys): pieces of packets that never complete,
/// overlapping pieces, pieces past the MTU. Nothing reaches tun0, each is counted, and the
/// daemon's memory stays bounded (at most 64 packets of 1500 bytes wait).
#[test]
fn forged_pieces_never_reach_tun0_and_memory_stays_bounded() {
    need!("mtu_forged_pieces");
    use mpt_core::wire::{HeaderRepr, Kind, HEADER_LEN};
    use mpt_core::PathId;
    let mut lab = Lab::new(&[LinkSpec::unshaped()]).expect("lab");
    let opts = TunnelOpts {
        mtu: 1500,
        encryption: "none".into(),
        ..TunnelOpts::default()
    };
    lab.start_mptd(Side::A, &opts).expect("mptd a");
    let pid_b = lab.start_mptd(Side::B, &opts).expect("mptd b");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    lab.stop_mptd(Side::A).expect("stop a");
    let before = lab.status(Side::B).expect("status");
    let session = u32::from_str_radix(&before.tunnel.session, 16).expect("hex session");
    let rss0 = crate::rss_kib(pid_b);
    let datagram = |kind: Kind, seq: u32, body: &[u8]| {
        let mut d = vec![0u8; HEADER_LEN];
        HeaderRepr {
            kind,
            path: PathId(0),
            path_seq: seq as u16,
            session,
            seq,
            timestamp: 0,
        }
        .emit(&mut d);
        d.extend_from_slice(body);
        d
    };
    let continuation = |offset: u16, len: u16| {
        let mut b = offset.to_be_bytes().to_vec();
        b.extend_from_slice(&len.to_be_bytes());
        b.resize(4 + usize::from(len), 0x5a);
        b
    };
    let head = |total: u16, len: usize| {
        let mut b = vec![0u8; 1 + len];
        b[1] = 0x45;
        b[3..5].copy_from_slice(&total.to_be_bytes());
        b
    };
    let mut forged = Vec::new();
    // pieces of 20000 packets that never complete
    for k in 0..20_000u32 {
        forged.push(datagram(
            Kind::Continued,
            1_000_000 + k,
            &continuation(700, 700),
        ));
    }
    // a head piece, then a piece overlapping it: the packet is dropped
    for k in 0..100u32 {
        forged.push(datagram(Kind::Bundle, 5_000_000 + k, &head(1500, 800)));
        forged.push(datagram(
            Kind::Continued,
            5_000_000 + k,
            &continuation(700, 800),
        ));
    }
    // a head piece claiming more than the MTU
    forged.push(datagram(Kind::Bundle, 6_000_000, &head(9000, 800)));
    let n = forged.len();
    let target = format!("{}:4754", lab.path_addr(Side::B, 0));
    let a0 = lab.path_addr(Side::A, 0);
    lab.in_ns(Side::A, move || {
        let s = std::net::UdpSocket::bind(format!("{a0}:4754")).expect("bind as the peer");
        for (i, d) in forged.iter().enumerate() {
            s.send_to(d, &target).expect("send");
            if i % 200 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    })
    .expect("ns");
    std::thread::sleep(Duration::from_millis(2500));
    let after = lab.status(Side::B).expect("mptd on b still answers");
    let rss1 = crate::rss_kib(pid_b);
    let (d0, d1) = (&before.tunnel.drops, &after.tunnel.drops);
    eprintln!(
        "RESULT mtu: {n} forged pieces: {} overlapping, {} expired, {} more delivered; B's memory {} -> {} KiB",
        d1.fragment_overlap - d0.fragment_overlap,
        d1.fragment_expired - d0.fragment_expired,
        after.tunnel.delivered - before.tunnel.delivered,
        rss0,
        rss1
    );
    assert_eq!(
        after.tunnel.delivered, before.tunnel.delivered,
        "forged pieces reached tun0"
    );
    assert_eq!(d1.fragment_overlap - d0.fragment_overlap, 101);
    // every incomplete packet is given up, pushed out or timed out
    assert!(d1.fragment_expired - d0.fragment_expired >= 20_000 + 100 - 101);
    assert!(
        rss1 < rss0 + 8 * 1024,
        "memory grew from {rss0} to {rss1} KiB"
    );
}
