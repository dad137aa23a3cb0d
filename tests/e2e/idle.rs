//! An idle tunnel on defaults costs each path little (`connection.idle_keepalive_ms`), and a
//! path that died while the tunnel was idle costs the traffic that wakes it almost nothing.

use std::time::{Duration, Instant};

use mpt_lab::harness::{tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

/// Per path of `side`: (datagrams, bytes) sent so far, an outer IPv4 and UDP header (28
/// bytes) counted with each datagram.
fn sent(lab: &Lab, side: Side) -> Vec<(u64, u64)> {
    lab.status(side)
        .expect("status")
        .paths
        .iter()
        .map(|p| (p.tx_packets, p.tx_bytes + 28 * p.tx_packets))
        .collect()
}

/// Per path of `side`: control bytes sent so far (with the same 28 bytes each).
fn control_sent(lab: &Lab, side: Side) -> Vec<u64> {
    lab.status(side)
        .expect("status")
        .paths
        .iter()
        .map(|p| p.tx_control_bytes + 28 * p.tx_control_packets)
        .collect()
}

#[test]
fn an_idle_tunnel_costs_each_path_under_250_bit_s_each_way() {
    need!("idle", "ping");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    lab.start_tunnel(&TunnelOpts::default()).expect("tunnel");
    let ping = lab
        .cmd(Side::A, "ping")
        .args(["-c", "20", "-i", "0.05", &tunnel_addr(Side::B)])
        .output()
        .expect("ping");
    assert!(ping.status.success());
    // the paths go idle 2 s after the last data
    std::thread::sleep(Duration::from_secs(4));
    let before = [sent(&lab, Side::A), sent(&lab, Side::B)];
    let control_before = control_sent(&lab, Side::A);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(40));
    let secs = t0.elapsed().as_secs_f64();
    let after = [sent(&lab, Side::A), sent(&lab, Side::B)];
    let (mut worst, mut least) = (0.0f64, f64::MAX);
    let mut line = Vec::new();
    for (k, side) in ["A", "B"].iter().enumerate() {
        for i in 0..2 {
            let (d, b) = (
                after[k][i].0 - before[k][i].0,
                after[k][i].1 - before[k][i].1,
            );
            let bits = b as f64 * 8.0 / secs;
            worst = worst.max(bits);
            least = least.min(bits);
            line.push(format!("{side} p{i} {d} datagrams {bits:.0} bit/s"));
        }
    }
    eprintln!(
        "RESULT idle: over {secs:.0} s on defaults: {}",
        line.join(", ")
    );
    assert!(
        worst <= 250.0,
        "an idle path costs at most 250 bit/s each way: {line:?}"
    );
    crate::headline(
        "idle",
        "an idle tunnel on defaults, two paths (`tests/e2e/idle.rs`)",
        &format!("**{least:.0}–{worst:.0} bit/s per path each way**"),
    );
    let st = lab.status(Side::A).expect("status");
    // what an idle tunnel sends is control, and counted as such
    let control: Vec<u64> = control_sent(&lab, Side::A)
        .iter()
        .zip(&control_before)
        .map(|(a, b)| a - b)
        .collect();
    for i in 0..2 {
        assert_eq!(
            control[i],
            after[0][i].1 - before[0][i].1,
            "path {i}: all control"
        );
    }
    assert!(
        st.paths.iter().all(|p| p.state == "up"),
        "idle paths stay up"
    );
}

#[test]
fn a_path_that_died_while_idle_costs_a_ping_stream_at_most_10_pings() {
    need!("idle_wake", "ping", "nft");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    lab.start_tunnel(&TunnelOpts::default()).expect("tunnel");
    let warm = lab
        .cmd(Side::A, "ping")
        .args(["-c", "10", "-i", "0.05", &tunnel_addr(Side::B)])
        .output()
        .expect("ping");
    assert!(warm.status.success());
    std::thread::sleep(Duration::from_secs(15));
    // path 0 dies silently (no link event) during a 30 s idle
    let link = Lab::link(0);
    lab.sh(
        Side::B,
        &format!(
            "nft 'add table inet idle; add chain inet idle in {{ type filter hook input priority 0; }}; \
             add chain inet idle out {{ type filter hook output priority 0; }}; \
             add rule inet idle in iifname {link} drop; add rule inet idle out oifname {link} drop'"
        ),
    )
    .expect("blackhole path 0");
    std::thread::sleep(Duration::from_secs(15));
    let out = lab
        .cmd(Side::A, "ping")
        .args(["-c", "300", "-i", "0.01", "-W", "1", &tunnel_addr(Side::B)])
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let received: u32 = text
        .lines()
        .find_map(|l| {
            let l = l.split(" received").next()?;
            l.rsplit(", ").next()?.trim().parse().ok()
        })
        .expect("ping summary");
    let st = lab.status(Side::A).expect("status");
    eprintln!(
        "RESULT idle wake: 300 pings at 100/s after 30 s idle with path 0 dead: {} lost; path 0 {} ({:?})",
        300 - received,
        st.paths[0].state,
        st.paths[0].down_reason
    );
    assert!(300 - received <= 10, "at most 10 pings lost: {text}");
    assert_eq!(st.paths[0].state, "down", "the dead path is found down");
}
