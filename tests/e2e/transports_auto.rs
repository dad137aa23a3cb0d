//! `transport = "auto"` (issue 71): a carrier starts dropping all UDP on one of two uplinks in
//! the middle of a download. The path moves to TCP within 3 s, the download survives intact
//! (SHA-256), and once UDP passes again the path moves back to it within 90 s.

use std::time::{Duration, Instant};

use mpt_lab::harness::{Lab, LinkSpec, Side, TunnelOpts};
use mptd::status::PathStatus;

use crate::transports::{block_udp, udp_dropped};
use crate::{need, sha256};

/// A's path `i` as its status says now.
fn path(lab: &Lab, i: usize) -> Option<PathStatus> {
    let st = lab.status(Side::A).ok()?;
    st.peers.first()?.paths.get(i).cloned()
}

/// Poll A's path 1 every 50 ms until `ok` holds, for at most `limit`: how long it took.
fn until(lab: &Lab, limit: Duration, what: &str, ok: impl Fn(&PathStatus) -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        let p = path(lab, 1);
        if p.as_ref().is_some_and(&ok) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < limit, "{what} not within {limit:?}: {p:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn udp_blocked_mid_transfer_moves_the_path_to_tcp_and_back() {
    need!("auto_transport", "nft", "vsftpd", "curl");
    let links = [LinkSpec::shaped(20_000_000), LinkSpec::shaped(20_000_000)];
    let mut lab = Lab::new(&links).expect("lab");
    let opts = TunnelOpts {
        tcp_on_b: vec![1],
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    until(&lab, Duration::from_secs(5), "path 1 up by UDP", |p| {
        p.state == "up" && p.transport == "udp"
    });
    // a download of 100 MB at 10 Mbit/s: 80 s, across the block and the way back
    let ftp = lab.ftp_server(Side::B, 100_000_000).expect("vsftpd");
    let got = lab.dir.join("downloaded.bin");
    let curl = lab
        .cmd(Side::A, "curl")
        .args(["-sS", "--max-time", "200", "--limit-rate", "1250k", "-o"])
        .arg(&got)
        .arg(format!("{}/random.bin", ftp.url))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    std::thread::sleep(Duration::from_secs(5));
    let before = path(&lab, 1).expect("path 1");
    block_udp(&lab, 1);
    let moved = until(&lab, Duration::from_secs(10), "path 1 on TCP", |p| {
        p.transport == "tcp" && p.state == "up"
    });
    let on_tcp = path(&lab, 1).expect("path 1");
    std::thread::sleep(Duration::from_secs(15).saturating_sub(moved));
    let (dropped_out, dropped_in) = udp_dropped(&lab);
    lab.sh(Side::A, "nft delete table inet carrier")
        .expect("nft: unblock");
    let back = until(&lab, Duration::from_secs(120), "path 1 back on UDP", |p| {
        p.transport == "udp" && p.state == "up"
    });
    let on_udp = path(&lab, 1).expect("path 1");
    let done = curl.wait_with_output().expect("curl");
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    let intact = done.status.success() && sha256(&got) == sha256(&ftp.file);
    std::thread::sleep(Duration::from_secs(2));
    let end = path(&lab, 1).expect("path 1");
    eprintln!(
        "RESULT auto_transport: UDP blocked on link 1 mid-download: on TCP and up {:.2} s \
         later ({}); the carrier dropped {dropped_out} UDP datagrams out, {dropped_in} in; \
         unblocked 15 s after the block: back on UDP {:.1} s later ({}); moves {}; \
         100 MB download {}",
        moved.as_secs_f64(),
        on_tcp.transport_why.as_deref().unwrap_or("-"),
        back.as_secs_f64(),
        on_udp.transport_why.as_deref().unwrap_or("-"),
        end.transport_changes,
        if intact {
            "intact (SHA-256 equal)"
        } else {
            "BROKEN"
        },
    );
    eprintln!(
        "RESULT auto_transport: path 1 datagrams sent: {} before the block, {} on TCP, {} back \
         on UDP, {} at the end",
        before.tx_packets, on_tcp.tx_packets, on_udp.tx_packets, end.tx_packets
    );
    assert!(intact, "the download survives intact: {stderr}");
    assert!(
        moved <= Duration::from_secs(3),
        "to TCP within 3 s: {moved:?}"
    );
    assert!(
        back <= Duration::from_secs(90),
        "back to UDP within 90 s: {back:?}"
    );
    assert_eq!(end.transport_changes, 2, "two moves: {end:?}");
    assert!(
        end.tx_packets > on_udp.tx_packets,
        "path 1 carries on by UDP"
    );
    lab.reap(ftp.pid);
}
