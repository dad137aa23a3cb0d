//! A stranger on the network sprays B's path ports during a transfer: random bytes, truncated
//! headers, forged tags, replays of captured genuine datagrams, huge counter and sequence
//! jumps, a forged session, plain datagrams. Nothing of it may reach tun0, the transfer goes
//! on, B's memory stays bounded, and each kind lands in its own drop counter.

use std::io::Read;
use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use mpt_core::rng::Rng;
use mpt_core::seal::{SEALED_HEADER_LEN, TAG_LEN};
use mpt_core::wire::{Header, HeaderRepr, Kind, HEADER_LEN};
use mpt_core::PathId;
use mpt_lab::harness::{iperf3_bps, Lab, LinkSpec, Side, TunnelOpts, STRANGER_ADDR};
use mptd::status::{DropCounts, Status};
use socket2::{Domain, Protocol, Socket, Type};

use crate::need;

/// Sealed data datagrams from `from` to `to` port 4754, as B's kernel receives them (an
/// AF_PACKET socket in B's namespace). A's datagrams may cross the veth as one UDP GSO
/// super-packet: the virtio-net header the socket asks for gives the segment size to split
/// them at.
fn capture(n: usize, from: Ipv4Addr, to: Ipv4Addr, limit: Duration) -> Vec<Vec<u8>> {
    let proto = i32::from((libc::ETH_P_IP as u16).to_be());
    // SOCK_RAW (the virtio-net header needs it): frames with their Ethernet header
    let s =
        Socket::new(Domain::PACKET, Type::RAW, Some(Protocol::from(proto))).expect("packet socket");
    mptd::net::set_int_option(&s, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)
        .expect("PACKET_VNET_HDR");
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let t0 = Instant::now();
    while out.len() < n && t0.elapsed() < limit {
        let Ok(len) = (&s).read(&mut buf) else {
            continue;
        };
        if len < VNET_HDR_LEN + ETH_HLEN {
            continue;
        }
        let gso_size = usize::from(u16::from_ne_bytes([buf[4], buf[5]]));
        let p = &buf[VNET_HDR_LEN + ETH_HLEN..len];
        if p.len() < 28 || p[0] >> 4 != 4 || p[9] != 17 {
            continue;
        }
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let (src, dst) = (&p[12..16], &p[16..20]);
        let Some(udp) = p.get(ihl..) else { continue };
        if udp.len() < 8 || src != from.octets() || dst != to.octets() {
            continue;
        }
        let dport = u16::from_be_bytes([udp[2], udp[3]]);
        if dport != 4754 {
            continue;
        }
        let payload = &udp[8..];
        let seg = if gso_size > 0 {
            gso_size
        } else {
            payload.len().max(1)
        };
        for d in payload.chunks(seg) {
            // sealed data datagrams only
            let sealed_data =
                Header::new_checked(d).is_ok_and(|h| h.sealed() && h.kind() == Kind::Data);
            if d.len() > 100 && sealed_data {
                out.push(d.to_vec());
            }
        }
    }
    out
}

/// `struct virtio_net_hdr` before each packet of a PACKET_VNET_HDR socket.
const VNET_HDR_LEN: usize = 10;
/// The Ethernet header of a veth frame.
const ETH_HLEN: usize = 14;

/// A captured datagram's counter (the lab's sessions never reach 2^32 datagrams, so its low
/// 32 bits on the wire are all of it).
fn counter(d: &[u8]) -> u64 {
    u64::from(
        Header::new_unchecked(d)
            .counter()
            .expect("a sealed datagram"),
    )
}

fn set_counter(d: &mut [u8], c: u64) {
    Header::new_unchecked(d)
        .set_counter(c)
        .expect("a sealed datagram");
}

/// Every counter a hostile datagram can land in.
fn hostile_total(d: &DropCounts) -> u64 {
    d.malformed()
        + d.unauthenticated
        + d.unknown_session
        + d.replayed
        + d.bad_tag
        + d.bad_handshake
        + d.stale_handshake
        + d.unknown_key
        + d.path_mismatch
        + d.unexpected
}

/// Count, in B's input path, the datagrams from the stranger to the path ports (nftables).
fn count_stranger_arrivals(lab: &Lab) {
    lab.sh(
        Side::B,
        &format!(
            "nft add table inet mpttest
             nft add chain inet mpttest input '{{ type filter hook input priority 0; }}'
             nft add rule inet mpttest input ip saddr {STRANGER_ADDR} udp dport 4754 counter"
        ),
    )
    .expect("nft counter");
}

/// Datagrams from the stranger that reached B's UDP layer so far.
fn stranger_arrivals(lab: &Lab) -> u64 {
    let out = lab
        .sh(Side::B, "nft list chain inet mpttest input")
        .expect("nft list");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "packets")
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("nft packet counter")
}

#[test]
fn a_stranger_spraying_the_path_ports_gets_nothing_into_tun0() {
    need!("hostile_spray", "iperf3", "nft");
    // Unshaped: the spray reaches B at full rate, beside a transfer as fast as the machine goes.
    let unshaped = LinkSpec::unshaped();
    let paths = vec![unshaped.clone(), unshaped];
    let mut lab = Lab::new(&paths).expect("lab");
    lab.add_stranger().expect("stranger namespace");
    count_stranger_arrivals(&lab);
    let opts = TunnelOpts::default();
    assert_ne!(opts.encryption, "none");
    lab.start_mptd(Side::A, &opts).expect("mptd a");
    let pid_b = lab.start_mptd(Side::B, &opts).expect("mptd b");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    let st = lab.status(Side::B).expect("status");
    assert_eq!(st.tunnel.encryption, "chacha20-poly1305");
    assert!(st.tunnel.keys_agreed);
    assert_eq!(st.tunnel.cipher.as_deref(), Some("chacha20-poly1305"));

    let (server, client) = lab.tcp_transfer_in_background(5301, 12).expect("iperf3");
    std::thread::sleep(Duration::from_secs(1));
    let (a0, b0) = (lab.path_addr(Side::A, 0), lab.path_addr(Side::B, 0));
    let (from, to): (Ipv4Addr, Ipv4Addr) = (a0.parse().expect("ip"), b0.parse().expect("ip"));
    let genuine = lab
        .in_ns(Side::B, move || {
            capture(1500, from, to, Duration::from_secs(3))
        })
        .expect("capture");
    assert!(
        genuine.len() >= 500,
        "captured only {} genuine datagrams",
        genuine.len()
    );
    let top = genuine.iter().map(|d| counter(d)).max().unwrap_or(0);
    let rss0 = crate::rss_kib(pid_b);
    let delivered0 = lab.status(Side::B).expect("status").tunnel.delivered;

    let mut rng = Rng::new(0x2545_F491_4F6C_DD1D);
    let n = 3000usize;
    let pick = |rng: &mut Rng| genuine[(rng.next_u64() % genuine.len() as u64) as usize].clone();
    type Kind2 = (&'static str, Vec<Vec<u8>>, fn(&DropCounts) -> u64);
    let mut kinds: Vec<Kind2> = Vec::new();
    kinds.push((
        "random bytes",
        (0..n)
            .map(|_| {
                let len = (rng.next_u64() % 400) as usize;
                (0..len).map(|_| rng.next_u64() as u8).collect()
            })
            .collect(),
        hostile_total,
    ));
    kinds.push((
        "truncated headers",
        (0..n)
            .map(|_| {
                let d = pick(&mut rng);
                d[..(rng.next_u64() % HEADER_LEN as u64) as usize].to_vec()
            })
            .collect(),
        |d| d.truncated,
    ));
    kinds.push((
        "bad tags",
        (0..n as u64)
            .map(|k| {
                let mut d = pick(&mut rng);
                set_counter(&mut d, top + 1_000_000 + k);
                let i =
                    SEALED_HEADER_LEN + (rng.next_u64() as usize % (d.len() - SEALED_HEADER_LEN));
                d[i] ^= 0x5a;
                d
            })
            .collect(),
        |d| d.bad_tag,
    ));
    kinds.push(("replays", genuine.clone(), |d| d.replayed));
    kinds.push((
        "huge sequence jumps",
        (0..n as u64)
            .map(|k| {
                let mut d = pick(&mut rng);
                set_counter(&mut d, top + 2_000_000 + k);
                let mut h = Header::new_unchecked(&mut d[..]);
                h.set_seq(h.seq().wrapping_add(1 << 31));
                d
            })
            .collect(),
        |d| d.bad_tag,
    ));
    kinds.push((
        "forged session",
        (0..n)
            .map(|_| {
                let mut d = pick(&mut rng);
                let mut h = Header::new_unchecked(&mut d[..]);
                h.set_session(h.session() ^ 0x8000_0000);
                d
            })
            .collect(),
        |d| d.unknown_session,
    ));
    kinds.push((
        "plain datagrams",
        (0..n as u32)
            .map(|k| {
                let mut h = vec![0u8; HEADER_LEN];
                let session = Header::new_unchecked(&genuine[0][..]).session();
                HeaderRepr {
                    kind: Kind::Keepalive,
                    path: PathId(0),
                    path_seq: 0,
                    session,
                    seq: k,
                    timestamp: 0,
                }
                .emit(&mut h);
                h
            })
            .collect(),
        |d| d.unauthenticated,
    ));
    assert!(kinds.iter().all(|(_, ds, _)| ds
        .iter()
        .all(|d| d.len() <= usize::from(opts.mtu) + SEALED_HEADER_LEN + TAG_LEN)));

    let targets = [
        format!("{}:4754", lab.path_addr(Side::B, 0)),
        format!("{}:4754", lab.path_addr(Side::B, 1)),
    ];
    for (name, datagrams, count) in &kinds {
        let before = lab.status(Side::B).expect("status").tunnel.drops;
        let total_before = hostile_total(&before);
        let kernel_before = crate::kernel_udp_drops(&lab, Side::B);
        let arrived_before = stranger_arrivals(&lab);
        let t0 = Instant::now();
        let sent = lab
            .in_stranger(|| {
                let s = UdpSocket::bind(format!("{STRANGER_ADDR}:0")).expect("bind");
                for (i, d) in datagrams.iter().enumerate() {
                    // genuine captures go to path 0, where they belong; the rest to both
                    let t = if *name == "replays" {
                        &targets[0]
                    } else {
                        &targets[i % 2]
                    };
                    s.send_to(d, t).expect("send");
                    if i % 500 == 499 {
                        // keep the receive buffers from overflowing: every datagram must be counted
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                datagrams.len() as u64
            })
            .expect("stranger");
        let rate = sent as f64 / t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(300));
        let after = lab.status(Side::B).expect("mptd b answers").tunnel.drops;
        let got = count(&after) - count(&before);
        let total = hostile_total(&after) - total_before;
        let kernel = crate::kernel_udp_drops(&lab, Side::B) - kernel_before;
        let arrived = stranger_arrivals(&lab) - arrived_before;
        eprintln!("RESULT hostile: {name}: {sent} sent at {rate:.0}/s, {arrived} reached B, {got} counted in their own counter, {total} in all, {kernel} dropped by B's kernel (socket buffer full)");
        assert!(
            arrived * 4 >= sent,
            "{name}: too few reached B to tell anything"
        );
        assert_eq!(got, total, "{name}: counted elsewhere too: {after:?}");
        assert!(
            got <= arrived && got + kernel >= arrived,
            "{name}: {arrived} arrived, {got} counted, {kernel} dropped by the kernel: {after:?}"
        );
    }
    let st: Status = lab.status(Side::B).expect("status");
    assert_eq!(
        st.paths[0].remote,
        format!("{a0}:4754"),
        "B now sends to the stranger"
    );
    let rss1 = crate::rss_kib(pid_b);
    eprintln!("RESULT hostile: mptd on B resident {rss0} KiB before the spray, {rss1} KiB after");
    crate::headline(
        "hostile",
        "a stranger sprays the path ports during a transfer: random bytes, truncated headers, bad \
         tags, replays, sequence jumps, a forged session, plain datagrams (`tests/e2e/hostile.rs`)",
        &format!(
            "every datagram counted in its own drop counter, none reaches tun0; mptd's memory \
             {rss0} KiB before, {rss1} KiB after"
        ),
    );
    assert!(
        rss1 < rss0 + 16 * 1024,
        "memory grew by {} KiB",
        rss1 - rss0
    );

    let out = client.wait_with_output().expect("iperf3 client");
    lab.reap(server);
    assert!(
        out.status.success(),
        "the transfer did not complete: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 json");
    let bps = iperf3_bps(&v);
    std::thread::sleep(Duration::from_millis(500));
    let (sa, sb) = (
        lab.status(Side::A).expect("status a"),
        lab.status(Side::B).expect("status b"),
    );
    eprintln!(
        "RESULT hostile: transfer {:.1} Mbit/s during the spray; A sent {} inner packets, B wrote {} to tun0 ({} after the capture began)",
        bps / 1e6,
        sa.tunnel.tx_packets,
        sb.tunnel.delivered,
        sb.tunnel.delivered - delivered0
    );
    assert!(bps > 10e6, "the transfer collapsed: {bps} bit/s");
    assert!(
        sb.tunnel.delivered <= sa.tunnel.tx_packets,
        "B wrote more packets to tun0 than A sent"
    );
    // A late packet (given up, then delivered) counts in both `delivered` and `skipped`.
    let late = sb.tunnel.reseq.late;
    assert!(
        sb.tunnel.delivered - late + sb.tunnel.reseq.skipped + 64 >= sa.tunnel.tx_packets,
        "packets went missing: A sent {}, B delivered {} ({late} late) and gave up {}",
        sa.tunnel.tx_packets,
        sb.tunnel.delivered,
        sb.tunnel.reseq.skipped
    );
}

/// NAT rebinding on path 0: mid-run, A's datagrams on that path start leaving from another
/// port (stateless nftables rewrite, and back for the replies). B follows, from authenticated
/// datagrams, and the path keeps carrying traffic both ways.
#[test]
fn the_peer_address_follows_a_nat_rebinding() {
    need!("nat_rebinding", "nft", "ping");
    let mut lab = Lab::new(&crate::four_paths()[..2]).expect("lab");
    lab.start_tunnel(&TunnelOpts::default()).expect("tunnel");
    let a0 = lab.path_addr(Side::A, 0);
    let st = lab.status(Side::B).expect("status");
    assert_eq!(st.paths[0].remote, format!("{a0}:4754"));

    lab.sh(
        Side::A,
        "nft add table ip rebind
         nft add chain ip rebind out '{ type filter hook output priority -300; }'
         nft add chain ip rebind pre '{ type filter hook prerouting priority -300; }'
         nft add rule ip rebind out oif p0 udp sport 4754 udp sport set 40000
         nft add rule ip rebind pre iif p0 udp dport 40000 udp dport set 4754",
    )
    .expect("nft rewrite");
    std::thread::sleep(Duration::from_secs(1));
    let st = lab.status(Side::B).expect("status b");
    assert_eq!(
        st.paths[0].remote,
        format!("{a0}:40000"),
        "B did not follow the new port"
    );
    assert_eq!(st.paths[0].state, "up");
    // B's datagrams reach A at the new port (and are rewritten back): A still hears B on
    // path 0 (keepalives and their answers), long after `dead_ms`, and the tunnel carries.
    let ping = lab
        .cmd(Side::A, "ping")
        .args([
            "-c",
            "20",
            "-i",
            "0.05",
            &mpt_lab::harness::tunnel_addr(Side::B),
        ])
        .output()
        .expect("ping");
    assert!(
        ping.status.success(),
        "ping through the tunnel failed after the rebinding"
    );
    let sa = lab.status(Side::A).expect("status a");
    let heard = sa.paths[0].last_heard_ms.expect("A heard B on path 0");
    assert!(
        sa.paths[0].state == "up" && heard < 300,
        "A no longer hears B on path 0 after the rebinding: {:?}, last heard {heard} ms ago",
        sa.paths[0].state
    );
    assert_eq!(sa.paths[0].down_events, 0, "path 0 went down on A");
    eprintln!(
        "RESULT rebinding: B now sends path 0 to {}; 2 s later A last heard B on it {heard} ms ago, never down",
        st.paths[0].remote
    );
}

/// `encryption = "auto"` (the default) takes AES-256-GCM where both ends have AES in hardware
/// and ChaCha20-Poly1305 otherwise; it meets an end configured with either cipher, which then
/// wins. Ends fixed on different ciphers, or one in the clear, refuse each other, and say so.
#[test]
fn auto_encryption_agrees_on_one_cipher_with_each_kind_of_peer() {
    need!("auto_encryption");
    let hw = if mpt_core::seal::aes_in_hardware() {
        "aes-256-gcm"
    } else {
        "chacha20-poly1305"
    };
    let with = |a: &str, b: &str| {
        let mut lab = Lab::new(&[LinkSpec::unshaped()]).expect("lab");
        for (side, enc) in [(Side::A, a), (Side::B, b)] {
            let opts = TunnelOpts {
                encryption: enc.into(),
                ..TunnelOpts::default()
            };
            lab.start_mptd(side, &opts).expect("mptd");
        }
        lab
    };
    for (a, b, agreed) in [
        ("auto", "auto", hw),
        ("auto", "chacha20-poly1305", "chacha20-poly1305"),
        ("chacha20-poly1305", "auto", "chacha20-poly1305"),
        ("auto", "aes-256-gcm", "aes-256-gcm"),
    ] {
        let lab = with(a, b);
        lab.wait_for_tunnel(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{a} with {b}: {e:#}"));
        for (side, enc) in [(Side::A, a), (Side::B, b)] {
            let t = lab.status(side).expect("status").tunnel;
            assert_eq!(t.encryption, enc);
            assert!(t.keys_agreed, "{a} with {b}: {side:?} has no keys");
            assert_eq!(t.cipher.as_deref(), Some(agreed), "{a} with {b}: {side:?}");
        }
    }
    for (a, b) in [("chacha20-poly1305", "aes-256-gcm"), ("auto", "none")] {
        let lab = with(a, b);
        std::thread::sleep(Duration::from_secs(2));
        for side in [Side::A, Side::B] {
            let t = lab.status(side).expect("status").tunnel;
            assert!(
                !t.keys_agreed && t.cipher.is_none(),
                "{a} with {b}: {side:?}: {t:?}"
            );
        }
        // B, the responder, refused A's initiations and counted them
        let t = lab.status(Side::B).expect("status").tunnel;
        assert!(
            t.drops.cipher_mismatch > 0,
            "{a} with {b}: B did not count the mismatch: {:?}",
            t.drops
        );
    }
}
