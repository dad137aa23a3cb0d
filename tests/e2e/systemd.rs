//! What the systemd unit relies on, without systemd: the unit itself passes
//! `systemd-analyze verify` and scores at most 2.5 on `systemd-analyze security`; and mptd,
//! given what systemd hands a service (a credentials directory, a runtime directory, a notify
//! socket and a watchdog interval), reads its key from the credential, puts its control
//! socket in the runtime directory, says READY=1 and feeds the watchdog.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mpt_lab::harness::{mptd_bin, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

const UNIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../systemd/mptd@.service");

#[test]
fn the_unit_verifies_and_is_hardened() {
    need!("systemd_unit", "systemd-analyze");
    // a root with systemd's own units, the unit installed, and mptd where the unit runs it
    let root = tempdir("unit");
    let copy = |from: &Path, to: &str| {
        let to = root.join(to);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(from, &to).expect("copy");
    };
    let units = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .into_iter()
        .find(|d| Path::new(d).join("sysinit.target").exists())
        .expect("systemd's units are installed");
    std::fs::create_dir_all(root.join("usr/lib/systemd")).expect("mkdir");
    let st = Command::new("cp")
        .args(["-rT", units])
        .arg(root.join("usr/lib/systemd/system"))
        .status();
    assert!(st.is_ok_and(|s| s.success()), "copying systemd's units");
    copy(Path::new(UNIT), "etc/systemd/system/mptd@.service");
    copy(&mptd_bin().expect("mptd built"), "usr/bin/mptd");
    // ExecReload runs mptctl
    copy(
        &mpt_lab::harness::sibling_bin("mptctl").expect("mptctl built"),
        "usr/bin/mptctl",
    );
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(format!("--root={}", root.display()))
        .arg("mptd@tun0.service")
        .output()
        .expect("systemd-analyze verify");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=25"])
        .arg(root.join("etc/systemd/system/mptd@.service"))
        .output()
        .expect("systemd-analyze security");
    let text = String::from_utf8_lossy(&out.stdout);
    let overall = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or("no overall line");
    eprintln!("RESULT unit: {}", overall.trim());
    assert!(out.status.success(), "exposure over 2.5:\n{text}");
    let _ = std::fs::remove_dir_all(&root);
}

/// A directory of its own under the system's temporary directory.
fn tempdir(what: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mpt-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[test]
fn mptd_takes_what_systemd_hands_a_service_and_feeds_the_watchdog() {
    need!("systemd_environment");
    let mut lab = Lab::new(&[LinkSpec::unshaped()]).expect("lab");
    let opts = TunnelOpts::default();
    lab.start_mptd(Side::B, &opts).expect("mptd b");
    // A's config names its key as a credential and leaves the control socket to the default
    let cfg_path = lab.write_config(Side::A, &opts).expect("config");
    let text = std::fs::read_to_string(&cfg_path).expect("config");
    let mut cfg: toml::Table = toml::from_str(&text).expect("toml");
    let key = cfg["security"]["private_key_file"]
        .as_str()
        .expect("key file")
        .to_owned();
    cfg["security"]["private_key_file"] = "$CREDENTIALS_DIRECTORY/host.key".into();
    cfg.remove("control");
    std::fs::write(&cfg_path, toml::to_string(&cfg).expect("toml")).expect("write");
    let dir = tempdir("svc");
    let (creds, runtime) = (dir.join("credentials"), dir.join("runtime"));
    std::fs::create_dir_all(&creds).expect("mkdir");
    std::fs::create_dir_all(&runtime).expect("mkdir");
    std::fs::copy(&key, creds.join("host.key")).expect("credential");
    let notify = UnixDatagram::bind(dir.join("notify")).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");

    // without the credentials directory, the config is refused naming the key
    let out = lab
        .cmd(Side::A, mptd_bin().expect("mptd").to_str().expect("utf-8"))
        .arg("-c")
        .arg(&cfg_path)
        .arg("--check")
        .env_remove("CREDENTIALS_DIRECTORY")
        .output()
        .expect("mptd --check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("security.private_key_file") && err.contains("CREDENTIALS_DIRECTORY"),
        "{err}"
    );

    // WATCHDOG_PID is the service's pid, as systemd sets it: the shell's, which mptd takes over
    let mut cmd = lab.cmd(Side::A, "sh");
    cmd.args(["-c", "WATCHDOG_PID=$$ exec \"$0\" \"$@\""])
        .arg(mptd_bin().expect("mptd"))
        .arg("-c")
        .arg(&cfg_path)
        .arg("-v")
        .env("CREDENTIALS_DIRECTORY", &creds)
        .env("RUNTIME_DIRECTORY", &runtime)
        .env("NOTIFY_SOCKET", dir.join("notify"))
        .env("WATCHDOG_USEC", "400000");
    lab.spawn(Side::A, "mptd-systemd", &mut cmd)
        .expect("mptd a");
    let t0 = Instant::now();
    let mut got: Vec<String> = Vec::new();
    let mut buf = [0u8; 512];
    while t0.elapsed() < Duration::from_secs(3) {
        if let Ok(n) = notify.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        if got.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 4 {
            break;
        }
    }
    let sock = runtime.join("control.sock");
    let st = mptd::control::status(&sock);
    eprintln!(
        "RESULT systemd: {} notifications in {:?}: {:?}",
        got.len(),
        t0.elapsed(),
        got
    );
    assert!(got.iter().any(|m| m.contains("READY=1")), "{got:?}");
    assert!(
        got.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 4,
        "the watchdog is fed every 200 ms: {got:?}"
    );
    assert!(
        st.is_ok(),
        "no control socket in the runtime directory: {st:?}"
    );
    // -v: a summary line per path every 5 s; the journal gets no colour codes
    let t0 = Instant::now();
    let log = loop {
        let log = lab.log("mptd-systemd");
        if log.contains("path summary") || t0.elapsed() > Duration::from_secs(8) {
            break log;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        log.contains("path summary") && log.contains("rtt_ms="),
        "{log}\nstatus now: {:?}",
        mptd::control::status(&sock).map(|s| s.tunnel.uptime_ms)
    );
    assert!(!log.contains('\x1b'), "colour codes in a file:\n{log}");
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
}
