//! Operating a running daemon: `mptctl show`, exit codes that tell health, a path set down and
//! up by the operator, and SIGHUP with an unchanged file that neither stops nor changes the
//! daemon.

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

    // the live view: three frames while pings flow, the later ones with some throughput
    let mut pinger = lab
        .cmd(Side::A, "ping")
        .args([
            "-c",
            "100",
            "-i",
            "0.01",
            "-s",
            "1000",
            &tunnel_addr(Side::B),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ping");
    let (code, text) = mptctl(
        &lab,
        Side::A,
        &["watch", "--count", "3", "--interval", "0.3"],
    );
    let _ = pinger.wait();
    assert_eq!(code, 0, "{text}");
    let frames: Vec<&str> = text
        .split("\n\n")
        .filter(|f| f.contains(" peers  up "))
        .collect();
    assert_eq!(frames.len(), 3, "{text}");
    for f in &frames {
        assert!(f.contains(" p0 ") && f.contains(" p1 "), "{f}");
    }
    let moving = |f: &str| {
        f.lines().filter(|l| l.contains(" up ")).any(|l| {
            l.split_whitespace()
                .any(|w| w.parse::<f64>().is_ok_and(|v| v > 0.0))
        })
    };
    assert!(moving(frames[2]), "no throughput shown:\n{}", frames[2]);

    // the running configuration, as TOML
    let (code, text) = mptctl(&lab, Side::A, &["showconf"]);
    assert_eq!(code, 0, "{text}");
    let conf: toml::Table = toml::from_str(&text).expect("showconf prints TOML");
    assert_eq!(conf["path"].as_array().map(Vec::len), Some(2), "{text}");

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
    // its scheduling changed at run time: the status shows the new rate
    let (code, text) = mptctl(&lab, Side::A, &["path", "p0", "rate", "7mbit"]);
    assert_eq!(code, 0, "{text}");
    let st = lab.status(Side::A).expect("status");
    assert_eq!(st.peers[0].paths[0].rate_bps, Some(7_000_000));
    let (code, text) = mptctl(&lab, Side::A, &["path", "p0", "weight", "0"]);
    assert_ne!(code, 0, "weight 0 is refused: {text}");

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

/// The lines of the hook log at `file` once `done` holds for them, or after `limit`.
fn hook_lines(
    file: &std::path::Path,
    done: impl Fn(&[String]) -> bool,
    limit: Duration,
) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let lines: Vec<String> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if done(&lines) || t0.elapsed() > limit {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hooks_run_with_the_event_in_their_environment_and_failures_are_logged() {
    need!("hooks", "ping");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    let log = std::env::temp_dir().join(format!("mpt-hooks-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let line = format!(
        "echo \"$MPTD_EVENT tunnel=$MPTD_TUNNEL peer=$MPTD_PEER path=$MPTD_PATH reason=$MPTD_REASON\" >> {}",
        log.display()
    );
    let opts = TunnelOpts {
        hooks_on_a: Some(mptd::config::HooksFile {
            up: Some(format!(
                "echo \"up $MPTD_TUNNEL $MPTD_ADDRESSES\" >> {}",
                log.display()
            )),
            down: Some(line.clone()),
            path_up: Some(line.clone()),
            path_down: Some(line.clone()),
            peer_up: Some(line.clone()),
            // a failing hook, then one that outlives its timeout: both logged, neither stops
            // the daemon or the next hooks
            peer_down: Some(format!("{line}; echo oops >&2; sleep 30")),
            peer_active: None,
            path_budget: None,
            timeout_ms: Some(500),
        }),
        ..TunnelOpts::default()
    };
    lab.start_mptd(Side::A, &opts).expect("mptd a");
    lab.start_mptd(Side::B, &opts).expect("mptd b");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    // peer up once, both paths up
    let b = lab.ns(Side::B);
    let up = |p: &str| format!("path_up tunnel=mpt0 peer={b} path={p} reason=");
    let (up0, up1) = (up("p0"), up("p1"));
    let lines = hook_lines(
        &log,
        |l| l.contains(&up0) && l.contains(&up1),
        Duration::from_secs(5),
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("peer_up ")).count(),
        1,
        "{lines:?}"
    );
    for p in ["p0", "p1"] {
        assert!(
            lines
                .iter()
                .any(|l| *l == format!("path_up tunnel=mpt0 peer={b} path={p} reason=")),
            "{lines:?}"
        );
    }
    let (code, _) = mptctl(&lab, Side::A, &["path", "p1", "down"]);
    assert_eq!(code, 0);
    let admin = format!("path_down tunnel=mpt0 peer={b} path=p1 reason=set down by the operator");
    let lines = hook_lines(&log, |l| l.contains(&admin), Duration::from_secs(3));
    assert!(lines.contains(&admin), "{lines:?}");
    // the peer stops: its last path goes down, and the peer with it (once)
    lab.stop_mptd(Side::B).expect("stop b");
    let stopped = format!("path_down tunnel=mpt0 peer={b} path=p0 reason=the peer stopped");
    let lines = hook_lines(
        &log,
        |l| l.contains(&stopped) && l.iter().any(|x| x.starts_with("peer_down ")),
        Duration::from_secs(3),
    );
    assert!(lines.contains(&stopped), "{lines:?}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("peer_down ")).count(),
        1,
        "{lines:?}"
    );
    std::thread::sleep(Duration::from_millis(800));
    let daemon_log = lab.mptd_log(Side::A);
    assert!(daemon_log.contains("hook timed out"), "{daemon_log}");
    assert!(lab.status(Side::A).is_ok(), "mptd on A still answers");
    // `up` ran first, with the tunnel's addresses, and `down` runs when A stops
    let first = format!(
        "up mpt0 {}/24 2001:db8:19::{}/64",
        tunnel_addr(Side::A),
        Side::A.octet()
    );
    assert_eq!(lines.first(), Some(&first), "{lines:?}");
    lab.stop_mptd(Side::A).expect("stop a");
    let lines = hook_lines(
        &log,
        |l| l.iter().any(|x| x.starts_with("down ")),
        Duration::from_secs(3),
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("down tunnel=mpt0 peer= path= reason="),
        "{lines:?}"
    );
    eprintln!("RESULT hooks: {lines:?}");
    // nothing went down before the operator set p1 down: no flap while the tunnel came up
    let first_down = lines.iter().find(|l| l.starts_with("path_down "));
    assert_eq!(first_down, Some(&admin), "{lines:?}");
    let _ = std::fs::remove_file(&log);
}

#[test]
fn metrics_are_served_for_prometheus_and_pass_promtool() {
    need!("metrics", "curl", "promtool", "ping");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    let opts = TunnelOpts {
        metrics_on_a: Some("127.0.0.1:9754".into()),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let ping = lab
        .cmd(Side::A, "ping")
        .args(["-c", "20", "-i", "0.02", &tunnel_addr(Side::B)])
        .output()
        .expect("ping");
    assert!(ping.status.success());
    let out = lab
        .cmd(Side::A, "curl")
        .args([
            "-sS",
            "--max-time",
            "5",
            "-D",
            "-",
            "http://127.0.0.1:9754/metrics",
        ])
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    let b = lab.ns(Side::B);
    for want in [
        "HTTP/1.1 200 OK".to_owned(),
        format!("mptd_path_sent_bytes_total{{peer=\"{b}\",path=\"p0\"}}"),
        format!("mptd_path_up{{peer=\"{b}\",path=\"p1\"}} 1"),
        format!("mptd_path_rtt_seconds{{peer=\"{b}\",path=\"p0\"}}"),
        "mptd_dropped_packets_total{reason=\"bad_tag\"} 0".to_owned(),
        format!("mptd_resequencer_hold_seconds_bucket{{le=\"+Inf\",peer=\"{b}\"}}"),
        format!("mptd_resequencer_occupancy_packets_count{{peer=\"{b}\"}}"),
        format!("mptd_peer_session_up{{peer=\"{b}\"}} 1"),
    ] {
        assert!(text.contains(&want), "{want} missing from:\n{text}");
    }
    // the packets the pings sent are counted
    let sent: u64 = body
        .lines()
        .filter(|l| l.starts_with("mptd_path_sent_packets_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(sent >= 20, "{sent} datagrams counted:\n{body}");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    std::io::Write::write_all(promtool.stdin.as_mut().expect("stdin"), body.as_bytes())
        .expect("to promtool");
    let checked = promtool.wait_with_output().expect("promtool");
    let said = String::from_utf8_lossy(&checked.stdout).into_owned()
        + &String::from_utf8_lossy(&checked.stderr);
    eprintln!(
        "RESULT metrics: {} lines, {} samples; promtool: {:?}",
        body.lines().count(),
        body.lines().filter(|l| !l.starts_with('#')).count(),
        said.trim()
    );
    assert!(checked.status.success(), "promtool check metrics:\n{said}");
    let out = lab
        .cmd(Side::A, "curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "http://127.0.0.1:9754/nope",
        ])
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
}
