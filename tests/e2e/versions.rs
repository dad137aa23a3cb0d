//! Upgrades without lockstep: this mptd and a real build of the protocol version before it
//! (a git worktree of the last commit before `mpt_core::wire::VERSION` took its value, built
//! here once and kept in `/var/cache/mptd-tests`) make a tunnel, whichever of them starts the
//! handshake, and carry TCP through it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpt_lab::harness::{tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

const CACHE: &str = "/var/cache/mptd-tests";

fn git(args: &[&str]) -> String {
    try_git(args).unwrap_or_else(|e| panic!("git {args:?}: {e}"))
}

fn try_git(args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit before the one that set the current protocol version, if this checkout has the
/// history (a shallow clone has not).
fn previous_rev() -> Option<String> {
    if try_git(&["rev-parse", "--is-shallow-repository"]).as_deref() != Ok("false") {
        return None;
    }
    let line = format!("pub const VERSION: u8 = {};", mpt_core::wire::VERSION);
    let change = try_git(&[
        "log",
        "--format=%H",
        "-S",
        &line,
        "--",
        "crates/mpt-core/src/wire/mod.rs",
    ])
    .ok()?;
    let first = change.lines().last()?.to_owned();
    try_git(&["rev-parse", &format!("{first}^")]).ok()
}

/// The mptd of `rev`, built once.
fn previous_mptd(rev: &str) -> PathBuf {
    let bin = Path::new(CACHE).join(format!("mptd-{}", &rev[..12]));
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(CACHE).expect("cache dir");
    let tree = std::env::temp_dir().join(format!("mpt-previous-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tree);
    git(&[
        "worktree",
        "add",
        "--detach",
        tree.to_str().expect("path"),
        rev,
    ]);
    eprintln!(
        "versions: building mptd of {} (once; a few minutes)",
        &rev[..12]
    );
    let target = Path::new(CACHE).join("previous-target");
    let st = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "mptd",
            "--bin",
            "mptd",
        ])
        .current_dir(&tree)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .expect("cargo");
    let built = target.join("release/mptd");
    let copied = st.success() && std::fs::copy(&built, &bin).is_ok();
    git(&[
        "worktree",
        "remove",
        "--force",
        tree.to_str().expect("path"),
    ]);
    assert!(copied, "building the previous mptd failed");
    bin
}

/// A tunnel with `old` on `old_side` and this mptd on the other; TCP through it; returns the
/// protocol version this mptd's side reports and the TCP rate.
fn tunnel_with(old: &Path, old_side: Side) -> (Option<u8>, f64) {
    let mut lab =
        Lab::new(&[LinkSpec::shaped(20_000_000), LinkSpec::shaped(20_000_000)]).expect("lab");
    let new = TunnelOpts::default();
    let previous = TunnelOpts {
        mptd: Some(old.to_owned()),
        ..TunnelOpts::default()
    };
    for side in [Side::B, Side::A] {
        let o = if side == old_side { &previous } else { &new };
        lab.start_mptd(side, o).expect("mptd");
    }
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("a tunnel between the versions");
    let v = lab
        .iperf3(Side::A, &tunnel_addr(Side::B), 5211, &["-t", "4"])
        .expect("iperf3 through the tunnel");
    let bps = mpt_lab::harness::iperf3_bps(&v);
    let st = lab.status(old_side.other()).expect("status");
    (st.peers.first().and_then(|p| p.protocol), bps)
}

#[test]
fn this_mptd_and_the_previous_protocol_version_make_a_tunnel_either_way() {
    need!("versions", "iperf3", "git");
    let Some(rev) = previous_rev() else {
        // not a regression of this tree: a checkout without its history cannot build the past
        eprintln!(
            "\n!!!!!!!! SKIPPED versions: this checkout has no history of the protocol version (shallow clone?) !!!!!!!!\n"
        );
        return;
    };
    let old = previous_mptd(&rev);
    let out = Command::new(&old)
        .arg("--version")
        .output()
        .expect("old mptd");
    let old_version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // the previous mptd initiates (A names B): this one answers in its version
    let (v1, bps1) = tunnel_with(&old, Side::A);
    // this mptd initiates: its first initiation goes unread, the next in the older version
    let (v2, bps2) = tunnel_with(&old, Side::B);
    eprintln!(
        "RESULT versions: with {old_version}: it initiating, protocol {v1:?}, TCP {:.1} Mbit/s; this one initiating, protocol {v2:?}, TCP {:.1} Mbit/s",
        bps1 / 1e6,
        bps2 / 1e6
    );
    let before = Some(mpt_core::wire::VERSION - 1);
    assert_eq!((v1, v2), (before, before));
    assert!(bps1 > 10e6 && bps2 > 10e6, "TCP through the tunnel");
}
