use std::time::{Duration, Instant};

use mpt_lab::harness::{iperf3_bps, Lab, Side, TunnelOpts};

use crate::{four_paths, need};

/// Poll both sides' status until path `i` is in `state` on each; returns how long each took,
/// measured from the same start.
fn wait_state(lab: &Lab, i: usize, state: &str, limit: Duration) -> [Option<Duration>; 2] {
    let t0 = Instant::now();
    let mut seen = [None, None];
    while t0.elapsed() < limit && seen.iter().any(Option::is_none) {
        for (k, side) in [Side::A, Side::B].into_iter().enumerate() {
            if seen[k].is_none() && lab.status(side).is_ok_and(|s| s.paths[i].state == state) {
                seen[k] = Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    seen
}

#[test]
fn a_path_failing_mid_transfer_is_dropped_and_readopted() {
    need!("failover", "iperf3");
    crate::measured_twice(
        "a_path_failing_mid_transfer_is_dropped_and_readopted",
        a_path_failing_mid_transfer_is_dropped_and_readopted_once,
    );
}

fn a_path_failing_mid_transfer_is_dropped_and_readopted_once() {
    let mut lab = Lab::new(&four_paths()).expect("lab");
    let opts = TunnelOpts::default();
    lab.start_tunnel(&opts).expect("tunnel");
    let limit = Duration::from_millis(opts.dead_ms + opts.keepalive_ms);

    let (server, client) = lab.tcp_transfer_in_background(5203, 12).expect("iperf3");

    std::thread::sleep(Duration::from_secs(3));
    let link = Lab::link(0);
    lab.sh(Side::A, &format!("ip link set {link} down"))
        .expect("link down");
    let [down_a, down_b] = wait_state(&lab, 0, "down", Duration::from_secs(3));
    std::thread::sleep(Duration::from_secs(2));
    lab.sh(Side::A, &format!("ip link set {link} up"))
        .expect("link up");
    let [up_a, up_b] = wait_state(&lab, 0, "up", Duration::from_secs(5));
    if up_a.is_none() || up_b.is_none() {
        for side in [Side::A, Side::B] {
            let p = lab.status(side).map(|s| s.paths[0].clone());
            eprintln!(
                "{side:?}: path 0 {:?} ({:?})",
                p.as_ref().map(|p| &p.state),
                p.as_ref().map(|p| &p.down_reason)
            );
        }
    }
    let tx_at_up = lab.status(Side::A).expect("status").paths[0].tx_bytes;

    let out = client.wait_with_output().expect("iperf3 client");
    lab.reap(server);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    assert!(v.get("error").is_none(), "transfer failed: {}", v["error"]);
    let st = lab.status(Side::A).expect("status");
    let carried_after = st.paths[0].tx_bytes - tx_at_up;
    eprintln!(
        "RESULT failover: down seen on A after {:?}, on B after {:?} (limit {:?}); up again after {:?} (A) / {:?} (B); path carried {} bytes after recovery; transfer {:.2} Mbit/s; drops no-path {} send-error {}",
        down_a, down_b, limit, up_a, up_b, carried_after, iperf3_bps(&v) / 1e6, st.tunnel.drops.no_path, st.tunnel.drops.send_error
    );
    let down_a = down_a.expect("path never went down on A");
    assert!(
        down_a <= limit,
        "A saw the path down after {down_a:?}, limit {limit:?}"
    );
    let down_b = down_b.expect("path never went down on B");
    assert!(
        down_b <= limit,
        "B saw the path down after {down_b:?}, limit {limit:?}"
    );
    assert!(
        up_a.is_some() && up_b.is_some(),
        "path did not come back up"
    );
    assert!(
        carried_after > 1_000_000,
        "path carried only {carried_after} bytes after recovery"
    );
    assert!(
        iperf3_bps(&v) > 10e6,
        "transfer collapsed: {:.2} Mbit/s",
        iperf3_bps(&v) / 1e6
    );
    assert_eq!(st.paths[0].down_events, 1);
}

/// A daemon stopped cleanly (SIGTERM) says goodbye on every path: the peer takes them down at
/// once instead of after `dead_ms` of silence, and takes the daemon back as fast as before
/// when it starts again.
#[test]
fn a_stopping_daemon_says_goodbye_and_the_peer_knows_at_once() {
    need!("goodbye");
    let mut lab = Lab::new(&four_paths()[..2]).expect("lab");
    let opts = TunnelOpts {
        dead_ms: 2_000,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let t0 = Instant::now();
    lab.stop_mptd(Side::A).expect("stop A");
    let mut down = None;
    while t0.elapsed() < Duration::from_millis(1_500) {
        let st = lab.status(Side::B).expect("B's status");
        if st.paths.iter().all(|p| p.state == "down") {
            down = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let log = lab.mptd_log(Side::B);
    println!(
        "RESULT goodbye: B took both paths down {down:?} after A's SIGTERM (dead_ms {})",
        opts.dead_ms
    );
    let down = down.unwrap_or_else(|| panic!("B never took A's paths down; B's log:\n{log}"));
    // well inside dead_ms: the goodbye, not silence, took them down
    assert!(down < Duration::from_millis(500), "down after {down:?}");
    assert!(log.contains("the peer is stopping"), "{log}");
    // back: the tunnel carries a ping again as soon as the keys are agreed
    let t1 = Instant::now();
    lab.start_mptd(Side::A, &opts).expect("restart A");
    lab.wait_for_tunnel(Duration::from_secs(5))
        .expect("the tunnel carries traffic again");
    println!(
        "RESULT goodbye: the restarted daemon carried a ping {:?} after it was started",
        t1.elapsed()
    );
}
