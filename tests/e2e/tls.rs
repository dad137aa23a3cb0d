//! Paths over TLS for networks that pass only HTTPS (issue 71 item 1, its TLS case): a
//! carrier lets nothing but TCP to port 443 through on one of two uplinks, so that path is
//! `transport = "tls"` to the server's port 443. It comes up, one TCP flow through the tunnel
//! uses both paths, both ends' status give the path's transport as "tls", a capture of the
//! uplink shows a TLS 1.3 handshake (a ServerHello whose supported_versions selects 0x0304),
//! and a stranger's bad TLS hello to the server's port is closed and counted.

use std::time::{Duration, Instant};

use mpt_lab::harness::{iperf3_bps, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::capture::server_hellos;
use crate::need;

/// A's link `i` passes only TCP to and from port 443 (a carrier that lets only HTTPS
/// through): every UDP datagram and every other TCP segment is dropped, and counted.
fn only_https(lab: &Lab, i: usize) {
    let l = Lab::link(i);
    lab.sh(
        Side::A,
        &format!(
            "nft 'add table inet carrier; \
             add chain inet carrier out {{ type filter hook output priority 0; }}; \
             add chain inet carrier in {{ type filter hook input priority 0; }}; \
             add rule inet carrier out oifname {l} meta l4proto udp counter drop; \
             add rule inet carrier out oifname {l} tcp dport != 443 counter drop; \
             add rule inet carrier in iifname {l} meta l4proto udp counter drop; \
             add rule inet carrier in iifname {l} tcp sport != 443 counter drop'"
        ),
    )
    .expect("nft: only HTTPS");
}

/// The packets the carrier dropped on A's link, rule by rule: UDP out, other TCP out, UDP in,
/// other TCP in.
fn dropped(lab: &Lab) -> Vec<u64> {
    let out = lab
        .sh(Side::A, "nft list table inet carrier")
        .expect("nft list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("drop"))
        .map(|l| {
            l.split("packets ")
                .nth(1)
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        })
        .collect()
}

/// Start tcpdump on A's link `i`, writing TCP port 443 to `file`; back once it listens.
fn capture(lab: &mut Lab, i: usize, file: &std::path::Path) -> u32 {
    let mut cmd = lab.cmd(Side::A, "tcpdump");
    cmd.args(["-i", &Lab::link(i), "-U", "-Z", "root", "-w"])
        .arg(file)
        .arg("tcp port 443");
    let pid = lab.spawn(Side::A, "tcpdump", &mut cmd).expect("tcpdump");
    let t0 = Instant::now();
    while !lab.log("tcpdump").contains("listening on") {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "tcpdump not listening within 10 s: {}",
            lab.log("tcpdump")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    pid
}

/// Poll `side`'s status until path `i` is up; how long that took from `t0`.
fn path_up(lab: &Lab, side: Side, i: usize, t0: Instant) -> Duration {
    loop {
        let st = lab.status(side).ok();
        let p = st
            .as_ref()
            .and_then(|s| s.peers.first()?.paths.get(i).cloned());
        if p.as_ref().is_some_and(|p| p.state == "up") {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "path {i} over TLS not up within 10 s on {side:?}: {p:?}\n--- a ---\n{}\n--- b ---\n{}",
            lab.mptd_log(Side::A),
            lab.mptd_log(Side::B)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stranger on A's side sends B's TLS port a handshake record that is no ClientHello (an
/// empty ServerHello), which the server refuses at once.
fn bad_hello(lab: &Lab, to: &str) {
    use std::io::{Read, Write};
    let to: std::net::SocketAddr = to.parse().expect("addr");
    lab.in_ns(Side::A, || {
        let mut s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(3))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        s.write_all(&[0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00])?;
        let mut buf = [0u8; 256];
        // the server answers with an alert and closes, or resets: either way, nothing more
        while s.read(&mut buf).is_ok_and(|n| n > 0) {}
        std::io::Result::Ok(())
    })
    .expect("in A's namespace")
    .expect("a stranger's connection");
}

#[test]
fn a_carrier_that_passes_only_https_gets_a_tls_path() {
    need!("tls_path", "iperf3", "nft", "tcpdump");
    let links = [LinkSpec::shaped(20_000_000), LinkSpec::shaped(20_000_000)];
    let mut lab = Lab::new(&links).expect("lab");
    only_https(&lab, 1);
    let pcap = lab.dir.join("p1.pcap");
    let tcpdump = capture(&mut lab, 1, &pcap);
    let opts = TunnelOpts {
        tls_links: vec![1],
        ..TunnelOpts::default()
    };
    lab.start_mptd(Side::B, &opts).expect("mptd b");
    let t0 = Instant::now();
    lab.start_mptd(Side::A, &opts).expect("mptd a");
    let up = path_up(&lab, Side::A, 1, t0);
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    let v = lab
        .iperf3(Side::A, &tunnel_addr(Side::B), 5201, &["-t", "10"])
        .expect("iperf3 through the tunnel");
    let mbit = iperf3_bps(&v) / 1e6;
    bad_hello(&lab, &format!("{}:443", lab.path_addr(Side::B, 1)));
    let t1 = Instant::now();
    let handshake_drops = loop {
        let n = lab
            .status(Side::B)
            .map_or(0, |s| s.tunnel.drops.stream_handshake);
        if n > 0 || t1.elapsed() > Duration::from_secs(5) {
            break n;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (a, b) = (
        lab.status(Side::A).expect("status a"),
        lab.status(Side::B).expect("status b"),
    );
    let (pa, pb) = (&a.peers[0].paths, &b.peers[0].paths);
    // SAFETY: kill on the pid of a child this test spawned (still ours: the lab reaps it).
    unsafe { libc::kill(tcpdump as libc::pid_t, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(300));
    let hellos = server_hellos(&std::fs::read(&pcap).expect("pcap"), 443).expect("pcap");
    let drops = dropped(&lab);
    eprintln!(
        "RESULT tls_path: path 1 (only TCP 443 passes, transport tls) up {:.2} s after the \
         site started; one TCP flow through the tunnel {mbit:.1} Mbit/s over 20 + 20 Mbit/s \
         links, A's datagrams per path {:?}, wire tx bytes {:?}; transports A {:?} B {:?}",
        up.as_secs_f64(),
        pa.iter().map(|p| p.tx_packets).collect::<Vec<_>>(),
        pa.iter().map(|p| p.wire_tx_bytes).collect::<Vec<_>>(),
        pa.iter().map(|p| p.transport.clone()).collect::<Vec<_>>(),
        pb.iter().map(|p| p.transport.clone()).collect::<Vec<_>>(),
    );
    eprintln!(
        "RESULT tls_path: the capture of link 1 has {} ServerHello(s): {:x?}; the carrier \
         dropped (udp out, other tcp out, udp in, other tcp in) {drops:?}; a stranger's bad \
         hello counted as stream_handshake {handshake_drops} on B",
        hellos.len(),
        hellos
    );
    assert!(up <= Duration::from_secs(5), "path 1 up within 5 s: {up:?}");
    assert_eq!(
        (pa[0].transport.as_str(), pa[1].transport.as_str()),
        ("udp", "tls"),
        "A's paths' transports"
    );
    assert_eq!(pb[1].transport, "tls", "B tells the TLS stream it took");
    assert!(
        pa[0].tx_packets > 1000 && pa[1].tx_packets > 1000,
        "both paths carry the transfer"
    );
    assert!(mbit > 20.0, "{mbit:.1} Mbit/s: more than one link alone");
    assert_eq!(drops.first(), Some(&0), "nothing went out by UDP on link 1");
    assert!(!hellos.is_empty(), "a ServerHello in the capture");
    for h in &hellos {
        assert_eq!(
            h.selected_version,
            Some(0x0304),
            "TLS 1.3 selected in supported_versions: {h:x?}"
        );
    }
    assert!(handshake_drops >= 1, "the stranger's bad hello is counted");
    assert_eq!(
        lab.status(Side::A).expect("status").peers[0].paths[1].state,
        "up",
        "the stranger left the path alone"
    );
}
