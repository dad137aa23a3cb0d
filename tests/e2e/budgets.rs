//! A path's monthly data budget (issue 71 item 3): a 5 MB budget on one of two 20 Mbit/s
//! paths is spent, the path goes below every tier and its hook runs at 80 % and 100 %; its
//! count survives a restart of the daemon (`tunnel.state_dir`), and `mptctl path NAME budget
//! reset` starts it again.

use std::process::Command;
use std::time::{Duration, Instant};

use mpt_lab::harness::{sibling_bin, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};
use mptd::status::{BudgetStatus, PathStatus};

use crate::need;

const LIMIT: u64 = 5_000_000;

/// Side A's path `i`.
fn path(lab: &Lab, i: usize) -> PathStatus {
    lab.status(Side::A).expect("status").peers[0].paths[i].clone()
}

fn budget(p: &PathStatus) -> BudgetStatus {
    p.budget.clone().expect("p1 has a budget in the status")
}

/// The hook's log: one "PERCENT USED" line a run.
fn hook_lines(log: &std::path::Path) -> Vec<(u32, u64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (p, u) = l.split_once(' ')?;
            Some((p.parse().ok()?, u.trim().parse().ok()?))
        })
        .collect()
}

/// Wait until `ok` holds of A's path 1, at most `limit`.
fn until(lab: &Lab, limit: Duration, what: &str, ok: impl Fn(&PathStatus) -> bool) -> PathStatus {
    let t0 = Instant::now();
    loop {
        let p = path(lab, 1);
        if ok(&p) {
            return p;
        }
        assert!(
            t0.elapsed() < limit,
            "p1 not {what} after {limit:?}: {:?}",
            p.budget
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mb(n: u64) -> f64 {
    n as f64 / 1e6
}

/// `iperf3 -n bytes` from A to B through the tunnel.
fn send(lab: &mut Lab, bytes: &str) {
    lab.iperf3(Side::A, &tunnel_addr(Side::B), 5201, &["-n", bytes])
        .expect("iperf3 through the tunnel");
}

#[test]
fn a_path_budget_demotes_survives_a_restart_and_runs_its_hook() {
    need!("budgets", "iperf3");
    let links = [LinkSpec::shaped(20_000_000), LinkSpec::shaped(20_000_000)];
    let mut lab = Lab::new(&links).expect("lab");
    let log = lab.dir.join("budget.log");
    let state = lab.dir.join("state");
    let opts = TunnelOpts {
        hooks_on_a: Some(mptd::config::HooksFile {
            path_budget: Some(format!(
                "echo \"$MPTD_BUDGET_PERCENT $MPTD_BUDGET_USED\" >> {}",
                log.display()
            )),
            ..Default::default()
        }),
        budgets_on_a: vec![(1, "5 MB".into(), None)],
        state_dir_on_a: Some(state.display().to_string()),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let p = path(&lab, 1);
    assert!(!p.backup && !budget(&p).exhausted, "a fresh budget: {p:?}");

    // 12 MB through the tunnel: about half of it on p1, which spends its 5 MB
    send(&mut lab, "12M");
    let spent = until(&lab, Duration::from_secs(3), "exhausted", |p| {
        p.budget.as_ref().is_some_and(|b| b.exhausted) && p.backup
    });
    let b = budget(&spent);
    let lines = hook_lines(&log);
    eprintln!(
        "RESULT budgets: after 12 MB: p1 used {:.3} MB of {:.0} MB (wire tx {:.3} MB, rx {:.3} MB), \
         exhausted {}, backup {}; hook lines {lines:?}",
        mb(b.used),
        mb(b.limit),
        mb(spent.wire_tx_bytes),
        mb(spent.wire_rx_bytes),
        b.exhausted,
        spent.backup
    );
    assert!(
        (LIMIT..=LIMIT * 11 / 10).contains(&b.used),
        "used {} within [5.0, 5.5] MB",
        b.used
    );
    assert!(lines.iter().any(|l| l.0 == 80), "an 80 line: {lines:?}");
    assert!(lines.iter().any(|l| l.0 == 100), "a 100 line: {lines:?}");

    // demoted: a further 5 MB leaves by p0 while it is up
    let before = path(&lab, 1);
    send(&mut lab, "5M");
    let after = path(&lab, 1);
    let (tx, rx) = (
        after.wire_tx_bytes - before.wire_tx_bytes,
        after.wire_rx_bytes - before.wire_rx_bytes,
    );
    eprintln!(
        "RESULT budgets: a further 5 MB with p1 demoted: p1 wire tx +{:.1} kB, rx +{:.1} kB (the \
         peer does not follow the demotion: what it sends on p1 is counted)",
        tx as f64 / 1e3,
        rx as f64 / 1e3
    );
    assert!(tx < 50_000, "p1 sends little once demoted: +{tx} bytes");

    // a restart keeps the count
    let used = budget(&path(&lab, 1)).used;
    lab.stop_mptd(Side::A).expect("stop a");
    assert!(
        state.join("budget.json").exists(),
        "budget.json written at exit"
    );
    lab.start_mptd(Side::A, &opts).expect("mptd a again");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel again");
    let again = until(&lab, Duration::from_secs(3), "demoted again", |p| p.backup);
    let b = budget(&again);
    let drift = (b.used as f64 - used as f64).abs() / used as f64;
    eprintln!(
        "RESULT budgets: restart: used {:.3} MB before, {:.3} MB after ({:.2} %), exhausted {}, \
         backup {}",
        mb(used),
        mb(b.used),
        drift * 100.0,
        b.exhausted,
        again.backup
    );
    assert!(drift <= 0.01, "the count survives a restart within 1 %");
    assert!(b.exhausted, "still exhausted after the restart");

    // the operator resets it
    let out = Command::new(sibling_bin("mptctl").expect("mptctl built"))
        .arg("-s")
        .arg(lab.control_socket(Side::A))
        .args(["path", "p1", "budget", "reset"])
        .output()
        .expect("mptctl runs");
    assert!(
        out.status.success(),
        "mptctl path p1 budget reset: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reset = until(&lab, Duration::from_secs(3), "back in its tier", |p| {
        !p.backup
    });
    let b = budget(&reset);
    let t0 = Instant::now();
    while !hook_lines(&log).iter().any(|l| l.0 == 0) && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let lines = hook_lines(&log);
    eprintln!(
        "RESULT budgets: reset: used {:.1} kB, exhausted {}, backup {}; hook lines {lines:?}",
        b.used as f64 / 1e3,
        b.exhausted,
        reset.backup
    );
    assert!(b.used < 100_000 && !b.exhausted, "reset: {b:?}");
    assert!(lines.iter().any(|l| l.0 == 0), "a 0 line: {lines:?}");
}
