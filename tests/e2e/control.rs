//! Operating a running daemon: `mptctl show`, exit codes that tell health, a path set down and
//! up by the operator, and SIGHUP that neither stops nor changes the daemon.

use std::process::Command;
use std::time::{Duration, Instant};

use mpt_lab::harness::{sibling_bin, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

/// `mptctl -s <A's socket> args...`: exit code and standard output.
fn mptctl(lab: &Lab, side: Side, args: &[&str]) -> (i32, String) {
    let out = Command::new(sibling_bin("mptctl").expect("mptctl built"))
        .arg("-s")
        .arg(lab.control_socket(side))
        .args(args)
        .output()
        .expect("mptctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Poll `side`'s status until path `i` is in `state`; how long it took.
fn until_path(lab: &Lab, side: Side, i: usize, state: &str, limit: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let st = lab.status(side).expect("status");
        if st.peers[0].paths[i].state == state {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < limit,
            "{side:?}: path {i} not {state} after {limit:?}: {:?}",
            st.peers[0].paths[i]
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn mptctl_shows_sets_a_path_down_and_up_and_its_exit_code_tells_health() {
    need!("mptctl_control", "ping");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    let opts = TunnelOpts::default();
    let pid_a = lab.start_mptd(Side::A, &opts).expect("mptd a");
    lab.start_mptd(Side::B, &opts).expect("mptd b");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    until_path(&lab, Side::A, 1, "up", Duration::from_secs(5));
    until_path(&lab, Side::B, 1, "up", Duration::from_secs(5));

    let (code, text) = mptctl(&lab, Side::A, &["show"]);
    assert_eq!(code, 0, "healthy: {text}");
    for want in [
        "peer: ",
        "path: p0",
        "path: p1",
        "state: up",
        "rtt: ",
        "transfer: ",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }

    // the operator sets p1 down: down at once here, silent at the peer, traffic carries on
    let (code, text) = mptctl(&lab, Side::A, &["path", "p1", "down"]);
    assert_eq!(code, 0, "{text}");
    let here = until_path(&lab, Side::A, 1, "down", Duration::from_secs(1));
    let there = until_path(&lab, Side::B, 1, "down", Duration::from_secs(3));
    let st = lab.status(Side::A).expect("status");
    assert_eq!(
        st.peers[0].paths[1].down_reason.as_deref(),
        Some("set down by the operator")
    );
    let (code, text) = mptctl(&lab, Side::A, &["status"]);
    assert_eq!(code, 1, "degraded: {text}");
    let ping = lab
        .cmd(Side::A, "ping")
        .args(["-c", "3", "-i", "0.2", &tunnel_addr(Side::B)])
        .output()
        .expect("ping");
    assert!(ping.status.success(), "no ping on the other path");
    let (code, _) = mptctl(&lab, Side::A, &["path", "nope", "down"]);
    assert_ne!(code, 0, "an unknown path is refused");

    // SIGHUP: the daemon goes on, with the path still down
    // SAFETY: a signal to a daemon this test started, by its pid.
    assert_eq!(unsafe { libc::kill(pid_a as i32, libc::SIGHUP) }, 0);
    std::thread::sleep(Duration::from_millis(300));
    let st = lab
        .status(Side::A)
        .expect("mptd still answers after SIGHUP");
    assert_eq!(st.peers[0].paths[1].state, "down");
    assert!(
        lab.mptd_log(Side::A).contains("SIGHUP"),
        "SIGHUP not logged:\n{}",
        lab.mptd_log(Side::A)
    );

    // set up again: back at both ends
    let (code, text) = mptctl(&lab, Side::A, &["path", "p1", "up"]);
    assert_eq!(code, 0, "{text}");
    let back_here = until_path(&lab, Side::A, 1, "up", Duration::from_secs(3));
    let back_there = until_path(&lab, Side::B, 1, "up", Duration::from_secs(3));
    eprintln!(
        "RESULT control: path set down: down here {here:?}, at the peer {there:?}; set up: up here {back_here:?}, at the peer {back_there:?}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let (code, text) = mptctl(&lab, Side::A, &["show"]);
    assert_eq!(code, 0, "healthy again: {text}");

    // the peer gone: down; no daemon: 3
    lab.stop_mptd(Side::B).expect("stop b");
    until_path(&lab, Side::A, 0, "down", Duration::from_secs(3));
    until_path(&lab, Side::A, 1, "down", Duration::from_secs(3));
    let (code, text) = mptctl(&lab, Side::A, &["status"]);
    assert_eq!(code, 2, "down: {text}");
    let (code, text) = mptctl(&lab, Side::B, &["status"]);
    assert_eq!(code, 3, "no daemon: {text}");
}
