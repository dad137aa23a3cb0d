//! Upgrades without lockstep: this mptd and the last release (`releases.toml`: a git worktree of
//! its commit, built here once and kept in `/var/cache/mptd-tests`) make a tunnel, whichever of
//! them starts the handshake, and carry TCP through it.

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

/// The newest release `releases.toml` names: its version and commit.
fn last_release() -> (String, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../releases.toml");
    let text = std::fs::read_to_string(path).expect("releases.toml");
    let v: toml::Value = toml::from_str(&text).expect("releases.toml is TOML");
    let newest = &v["release"][0];
    let field = |k: &str| {
        newest[k]
            .as_str()
            .unwrap_or_else(|| panic!("releases.toml: the newest release has no {k}"))
            .to_owned()
    };
    (field("version"), field("commit"))
}

/// The commit `rev`, if this checkout has it (a shallow clone may not).
fn have_commit(rev: &str) -> bool {
    try_git(&["cat-file", "-e", &format!("{rev}^{{commit}}")]).is_ok()
}

/// The protocol version the commit `rev` speaks (its `mpt_core::wire::VERSION`).
fn wire_version_of(rev: &str) -> u8 {
    let src = git(&["show", &format!("{rev}:crates/mpt-core/src/wire/mod.rs")]);
    src.lines()
        .find_map(|l| l.trim().strip_prefix("pub const VERSION: u8 = "))
        .and_then(|v| v.trim_end_matches(';').parse().ok())
        .expect("the release's wire VERSION")
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
fn this_mptd_and_the_last_release_make_a_tunnel_either_way() {
    need!("versions", "iperf3", "git");
    let (release, rev) = last_release();
    if !have_commit(&rev) {
        // not a regression of this tree: a checkout without its history cannot build the past
        eprintln!(
            "\n!!!!!!!! SKIPPED versions: this checkout lacks release {release}'s commit {rev} (shallow clone?) !!!!!!!!\n"
        );
        return;
    }
    let old = previous_mptd(&rev);
    let out = Command::new(&old)
        .arg("--version")
        .output()
        .expect("old mptd");
    let old_version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // the release initiates (A names B): this one answers in its version
    let (v1, bps1) = tunnel_with(&old, Side::A);
    // this mptd initiates: where the release speaks an older version, its first initiations go
    // unread and a later one is in the release's version
    let (v2, bps2) = tunnel_with(&old, Side::B);
    eprintln!(
        "RESULT versions: with release {release} ({old_version}, {}): it initiating, protocol {v1:?}, TCP {:.1} Mbit/s; this one initiating, protocol {v2:?}, TCP {:.1} Mbit/s",
        &rev[..12],
        bps1 / 1e6,
        bps2 / 1e6
    );
    let version = wire_version_of(&rev).min(mpt_core::wire::VERSION);
    let session = Some(version);
    assert_eq!((v1, v2), (session, session));
    assert!(bps1 > 10e6 && bps2 > 10e6, "TCP through the tunnel");
    crate::headline(
        "versions",
        &format!(
            "this mptd and the last release, {release} (`tests/e2e/versions.rs`, `releases.toml`)"
        ),
        &format!(
            "a tunnel whichever end starts, in version {}, TCP {:.1} / {:.1} Mbit/s",
            version,
            bps1 / 1e6,
            bps2 / 1e6
        ),
    );
}
