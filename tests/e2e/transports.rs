//! Paths over TCP for networks that block UDP (issue 71 item 1): a carrier drops all UDP on
//! one of two uplinks, so that path is `transport = "tcp"`; it comes up within 5 s, one TCP
//! flow through the tunnel uses both paths, and a ping stream marked EF beside it keeps a
//! round trip within 20 ms of the UDP path's idle one (it keeps off the TCP path).

use std::time::{Duration, Instant};

use mpt_lab::harness::{iperf3_bps, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

/// Drop every UDP datagram in and out of A's link `i` (a carrier that blocks UDP), counting
/// them.
pub(crate) fn block_udp(lab: &Lab, i: usize) {
    let l = Lab::link(i);
    lab.sh(
        Side::A,
        &format!(
            "nft 'add table inet carrier; \
             add chain inet carrier out {{ type filter hook output priority 0; }}; \
             add chain inet carrier in {{ type filter hook input priority 0; }}; \
             add rule inet carrier out oifname {l} meta l4proto udp counter drop; \
             add rule inet carrier in iifname {l} meta l4proto udp counter drop'"
        ),
    )
    .expect("nft: block UDP");
}

/// The UDP datagrams the carrier dropped on A's link: (out, in).
pub(crate) fn udp_dropped(lab: &Lab) -> (u64, u64) {
    let out = lab
        .sh(Side::A, "nft list table inet carrier")
        .expect("nft list");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut counts = text.lines().filter(|l| l.contains("drop")).map(|l| {
        l.split("packets ")
            .nth(1)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    });
    (counts.next().unwrap_or(0), counts.next().unwrap_or(0))
}

/// The round trips of `count` pings from A to `addr`, 10 ms apart, with TOS `tos`, in ms
/// (sorted; lost ones left out), and how many were lost.
fn ping_rtts(lab: &Lab, addr: &str, count: usize, tos: &str) -> (Vec<f64>, usize) {
    let out = lab
        .cmd(Side::A, "ping")
        .args(["-n", "-i", "0.01", "-W", "1", "-Q", tos])
        .args(["-c", &count.to_string(), addr])
        .output()
        .expect("ping");
    let rtts = rtts(&String::from_utf8_lossy(&out.stdout));
    let lost = count.saturating_sub(rtts.len());
    (rtts, lost)
}

/// The round trips in ping's output, in ms, sorted.
fn rtts(text: &str) -> Vec<f64> {
    let mut rtts: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            l.split("time=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect();
    rtts.sort_by(f64::total_cmp);
    rtts
}

fn p99(sorted: &[f64]) -> f64 {
    if sorted.is_empty() {
        return f64::INFINITY;
    }
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

/// Two 20 Mbit/s links (rates configured), UDP blocked on link 1 in A's namespace, its path
/// over TCP; side A's path statuses polled until path 1 is up.
fn tcp_beside_udp() -> (Lab, TunnelOpts, Duration) {
    let links = [LinkSpec::shaped(20_000_000), LinkSpec::shaped(20_000_000)];
    let mut lab = Lab::new(&links).expect("lab");
    block_udp(&lab, 1);
    // the paths' rates configured (`rate`): with `adaptive` the TCP path took nearly all of
    // the transfer and the tunnel got half of the links' sum
    let opts = TunnelOpts {
        tcp_links: vec![1],
        ..TunnelOpts::default()
    };
    let t0 = Instant::now();
    lab.start_mptd(Side::B, &opts).expect("mptd b");
    lab.start_mptd(Side::A, &opts).expect("mptd a");
    let up = loop {
        let st = lab.status(Side::A).ok();
        let p1 = st
            .as_ref()
            .and_then(|s| s.peers.first()?.paths.get(1).cloned());
        if p1.as_ref().is_some_and(|p| p.state == "up") {
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "path 1 over TCP not up within 10 s: {p1:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    (lab, opts, up)
}

#[test]
fn a_carrier_that_drops_udp_gets_a_tcp_path() {
    need!("tcp_path", "iperf3", "nft");
    let (mut lab, _opts, up) = tcp_beside_udp();
    // the links alone, by TCP (which the carrier passes), one at a time
    let mut alone = Vec::new();
    for i in 0..2 {
        let addr = lab.path_addr(Side::B, i);
        let v = lab
            .iperf3(Side::A, &addr, 5301 + i as u16, &["-t", "5"])
            .expect("iperf3 over a link alone");
        alone.push(iperf3_bps(&v) / 1e6);
    }
    let sum: f64 = alone.iter().sum();
    let idle = ping_rtts(&lab, &lab.path_addr(Side::B, 0), 200, "0");
    let mut results = Vec::new();
    for cc in ["cubic", "bbr"] {
        let ping = {
            let (ns, addr) = (lab.ns(Side::A), tunnel_addr(Side::B));
            std::thread::spawn(move || {
                let out = std::process::Command::new("ip")
                    .args(["netns", "exec", &ns, "ping", "-n", "-i", "0.01", "-W", "1"])
                    .args(["-Q", "184", "-c", "1500", &addr])
                    .output()
                    .expect("ping");
                String::from_utf8_lossy(&out.stdout).into_owned()
            })
        };
        let v = lab
            .iperf3(
                Side::A,
                &tunnel_addr(Side::B),
                5201,
                &["-t", "20", "-C", cc],
            )
            .expect("iperf3 through the tunnel");
        let rtts = rtts(&ping.join().expect("ping thread"));
        let mbit = iperf3_bps(&v) / 1e6;
        results.push((cc, mbit, p99(&rtts), 1500 - rtts.len()));
    }
    let st = lab.status(Side::A).expect("status");
    let p = &st.peers[0].paths;
    let (out, inn) = udp_dropped(&lab);
    eprintln!(
        "RESULT tcp_path: path 1 (UDP blocked, transport tcp) up {:.2} s after start; links alone \
         by TCP {:.1} + {:.1} = {sum:.1} Mbit/s; idle ping over link 0 p99 {:.2} ms; \
         the carrier dropped {out} UDP datagrams out and {inn} in",
        up.as_secs_f64(),
        alone[0],
        alone[1],
        p99(&idle.0)
    );
    for (cc, mbit, p, lost) in &results {
        eprintln!(
            "RESULT tcp_path: {cc}: {mbit:.1} Mbit/s = {:.3} of the links' sum; EF ping beside it \
             p99 {p:.2} ms ({:+.2} ms over idle), {lost} of 1500 lost",
            mbit / sum,
            p - p99(&idle.0)
        );
    }
    eprintln!(
        "RESULT tcp_path: A's data datagrams per path {:?}, wire tx bytes {:?}, rates {:?}, \
         states {:?}; drops: stream_full {}, no_path {}, paced {}",
        p.iter().map(|p| p.tx_packets).collect::<Vec<_>>(),
        p.iter().map(|p| p.wire_tx_bytes).collect::<Vec<_>>(),
        p.iter().map(|p| p.rate_bps).collect::<Vec<_>>(),
        p.iter().map(|p| p.state.clone()).collect::<Vec<_>>(),
        st.tunnel.drops.stream_full,
        st.tunnel.drops.no_path,
        st.tunnel.drops.paced
    );
    assert!(up <= Duration::from_secs(5), "path 1 up within 5 s: {up:?}");
    assert_eq!(
        (p[0].transport.as_str(), p[1].transport.as_str()),
        ("udp", "tcp"),
        "each path's transport in the status"
    );
    assert_eq!(out, 0, "nothing went out by UDP on the blocked link");
    assert!(
        p[0].tx_packets > 1000 && p[1].tx_packets > 1000,
        "both paths carry the transfer"
    );
    for (cc, mbit, p, _) in &results {
        // The goal is 0.85 of the sum: cubic gets 0.94 and BBR 0.92-0.93 (3 runs).
        // The bound leaves room for the VM's drift; below it, the flow's queue is most likely
        // on one path again (as with bulk kept within 2 ms of the ping's path: BBR 0.80).
        assert!(
            *mbit >= 0.82 * sum,
            "{cc}: {mbit:.1} Mbit/s, at least 0.82 of {sum:.1}"
        );
        assert!(
            *p <= p99(&idle.0) + 20.0,
            "{cc}: EF ping p99 {p:.2} ms within 20 ms of the idle {:.2}",
            p99(&idle.0)
        );
    }
}
