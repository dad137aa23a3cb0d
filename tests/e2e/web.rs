//! The live status page (`[control] web`) in a real browser: Debian's headless chromium, driven
//! by playwright-core from `web/status_page.mjs` inside side A's namespace, shows both paths of
//! the lab, its throughput chart follows an iperf3 transfer within 2 s up and down, and a path
//! set down by the operator shows as down within 2 s. Off loopback the page needs its token.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpt_lab::harness::{
    ensure_package, sibling_bin, tunnel_addr, Impair, Lab, LinkSpec, Side, TunnelOpts,
};
use serde_json::{json, Value};

use crate::need;

/// Where playwright-core is installed once and reused.
const PLAYWRIGHT_DIR: &str = "/var/cache/mptd-tests/playwright";
const PLAYWRIGHT: &str = "playwright-core@1.65.1";

/// The bound on every delay the page is held to.
const WITHIN: Duration = Duration::from_secs(2);

/// playwright-core in [`PLAYWRIGHT_DIR`], installed with npm when missing.
fn playwright() -> PathBuf {
    let dir = PathBuf::from(PLAYWRIGHT_DIR);
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        std::fs::create_dir_all(&dir).expect("playwright's directory");
        eprintln!("installing {PLAYWRIGHT} into {PLAYWRIGHT_DIR}");
        let out = Command::new("timeout")
            .args([
                "300",
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(&dir)
            .arg(PLAYWRIGHT)
            .output()
            .expect("npm");
        assert!(
            out.status.success(),
            "npm install {PLAYWRIGHT}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

/// Whether node is 20 or later (playwright-core 1.65 needs it); if not, skip loudly, or under
/// `CI=true` fail.
fn node_20() -> bool {
    let out = Command::new("node")
        .arg("--version")
        .output()
        .expect("node");
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major >= 20 {
        return true;
    }
    let why = format!("web: node {version:?}, playwright-core needs 20 or later");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}");
    }
    eprintln!("\n!!!!!!!! SKIPPED {why} !!!!!!!!\n");
    false
}

/// The node script, driving chromium in side A's namespace; stopped (by its pid) on drop.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Browser {
    fn start(lab: &Lab, playwright: &Path) -> Browser {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/web/status_page.mjs");
        let mut child = lab
            .cmd(Side::A, "node")
            .arg(script)
            .env("PLAYWRIGHT_DIR", playwright)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Browser {
            child,
            stdin,
            lines,
        }
    }

    /// Send `cmd`; its answer, within `limit`.
    fn ask(&mut self, cmd: Value, limit: Duration) -> Value {
        writeln!(self.stdin, "{cmd}").expect("to the browser's script");
        let line = self
            .lines
            .recv_timeout(limit)
            .unwrap_or_else(|e| panic!("no answer to {cmd} in {limit:?}: {e}"));
        let v: Value = serde_json::from_str(&line).expect("the script's JSON");
        let errors = v["errors"].as_array().map_or(0, Vec::len);
        assert_eq!(errors, 0, "the page logged errors: {v}");
        v
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process killed (by its pid) when dropped: the iperf3 client, on a failure too.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A path of `mbit` Mbit/s (`tbf`), `ms` milliseconds away each way.
fn path(mbit: u64, ms: f64) -> LinkSpec {
    let i = Impair {
        delay_ms: ms,
        ..Impair::default()
    };
    LinkSpec {
        rate_bps: Some(mbit * 1_000_000),
        ab: i,
        ba: i,
    }
}

/// The target directory this test was built in (`target/release/deps/e2e-…`'s grandparent's
/// parent): artefacts go to its `artefacts/`.
fn artefacts() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("target directory")
        .to_path_buf();
    let dir = target.join("artefacts");
    std::fs::create_dir_all(&dir).expect("artefacts directory");
    dir
}

/// Poll `side`'s status until every path is up.
fn until_all_up(lab: &Lab, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let st = lab.status(Side::A).expect("status");
        if st.peers[0].paths.iter().all(|p| p.state == "up") {
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "paths not up: {:?}",
            st.peers[0].paths
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start an iperf3 server on B's tunnel address, port 5201, and wait until it listens.
fn iperf3_server(lab: &mut Lab) {
    let mut cmd = lab.cmd(Side::B, "iperf3");
    cmd.args(["-s", "-B", &tunnel_addr(Side::B), "-p", "5201"]);
    lab.spawn(Side::B, "iperf3-server", &mut cmd)
        .expect("iperf3 -s");
    let t0 = Instant::now();
    while lab
        .sh(Side::B, "ss -ltnH 'sport = :5201' | grep -q .")
        .is_err()
    {
        assert!(t0.elapsed() < Duration::from_secs(5), "iperf3 -s not up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_status_page_shows_the_paths_follows_a_transfer_and_a_path_set_down() {
    need!("web", "node", "npm", "iperf3");
    if !node_20() {
        return;
    }
    ensure_package("chromium", "chromium").expect("chromium");
    playwright();
    // delays measured on a shared 2-core VM: a stall of its host is measured once more
    crate::measured_twice("web", the_page_follows_the_tunnel);
}

/// The lab, the page in chromium, a transfer and a path set down, and the delays.
fn the_page_follows_the_tunnel() {
    let playwright = playwright();
    let mut lab = Lab::new(&[path(20, 10.0), path(10, 25.0)]).expect("lab");
    let opts = TunnelOpts {
        web_on_a: Some("127.0.0.1:9190".into()),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    until_all_up(&lab, Duration::from_secs(10));
    let mut browser = Browser::start(&lab, &playwright);
    let open = browser.ask(
        json!({"cmd": "open", "url": "http://127.0.0.1:9190/", "timeout_ms": 30000}),
        Duration::from_secs(60),
    );
    assert_eq!(open["ok"], true, "{open}");
    for p in ["p0", "p1"] {
        let up = browser.ask(
            json!({"cmd": "until_state", "path": p, "state": "up", "timeout_ms": 5000}),
            Duration::from_secs(10),
        );
        assert_eq!(up["ok"], true, "{p} not shown up: {up}");
    }
    let peer = lab.ns(Side::B);

    // a UDP transfer at 24 Mbit/s (both paths carry it): the chart's last point reaches half of
    // it, then falls back under a quarter once it stops
    let rate = 24_000_000.0;
    iperf3_server(&mut lab);
    let t0 = Instant::now();
    let client = lab
        .cmd(Side::A, "iperf3")
        .args(["-c", &tunnel_addr(Side::B), "-p", "5201", "-u", "-b", "24M"])
        .args(["-l", "1200", "-t", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 -c");
    let client = Killed(client);
    let rise = browser.ask(
        json!({"cmd": "until_rate", "peer": peer, "above": rate / 2.0}),
        Duration::from_secs(15),
    );
    let rise_delay = t0.elapsed();
    assert_eq!(
        rise["ok"], true,
        "the chart did not follow the transfer: {rise}"
    );
    // a few seconds of it on the chart, for the picture
    let more = browser.ask(
        json!({"cmd": "until_samples", "peer": peer, "more": 6}),
        Duration::from_secs(15),
    );
    assert_eq!(more["ok"], true, "{more}");
    let t1 = Instant::now();
    drop(client);
    let fall = browser.ask(
        json!({"cmd": "until_rate", "peer": peer, "below": rate / 4.0}),
        Duration::from_secs(15),
    );
    let fall_delay = t1.elapsed();
    assert_eq!(fall["ok"], true, "the chart did not fall back: {fall}");
    // the picture with the transfer's end on the chart
    browser.ask(
        json!({"cmd": "until_samples", "peer": peer, "more": 2}),
        Duration::from_secs(15),
    );
    let picture = artefacts().join("status-page.png");
    let shot = browser.ask(
        json!({"cmd": "screenshot", "file": picture}),
        Duration::from_secs(20),
    );
    assert_eq!(shot["ok"], true, "{shot}");
    if std::env::var_os("MPTD_BLESS").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/figures/status-page.png");
        std::fs::copy(&picture, &docs).expect("docs/figures/status-page.png");
        eprintln!("blessed {}", docs.display());
    }

    // a path set down by the operator
    let t2 = Instant::now();
    let out = Command::new(sibling_bin("mptctl").expect("mptctl built"))
        .arg("-s")
        .arg(lab.control_socket(Side::A))
        .args(["path", "p1", "down"])
        .output()
        .expect("mptctl");
    assert!(out.status.success(), "mptctl path p1 down: {out:?}");
    let down = browser.ask(
        json!({"cmd": "until_state", "path": "p1", "state": "down"}),
        Duration::from_secs(15),
    );
    let down_delay = t2.elapsed();
    assert_eq!(down["ok"], true, "p1 not shown down: {down}");
    let down_picture = artefacts().join("status-page-p1-down.png");
    browser.ask(
        json!({"cmd": "screenshot", "file": down_picture}),
        Duration::from_secs(20),
    );
    eprintln!(
        "RESULT web: page loaded in {} ms; chart reached half of a 24 Mbit/s transfer {:.2} s \
         after it started, fell under a quarter {:.2} s after it stopped; p1 set down shown \
         down after {:.2} s; screenshot {}",
        open["ms"],
        rise_delay.as_secs_f64(),
        fall_delay.as_secs_f64(),
        down_delay.as_secs_f64(),
        picture.display()
    );
    for (what, d) in [
        ("the chart following the transfer", rise_delay),
        ("the chart falling back", fall_delay),
        ("the path shown down", down_delay),
    ] {
        assert!(d <= WITHIN, "{what} took {d:?}, more than {WITHIN:?}");
    }
}

/// `curl` in A: the HTTP status code of `url` with `args`.
fn http_code(lab: &Lab, url: &str, args: &[&str]) -> String {
    let out = lab
        .cmd(Side::A, "curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_status_page_off_loopback_needs_its_token() {
    need!("web_token", "curl");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    let token = "mptd-test-0123456789abcdef";
    let addr = "198.18.1.1:9191";
    let opts = TunnelOpts {
        web_on_a: Some(addr.into()),
        web_token_on_a: Some(token.into()),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let bearer = format!("Authorization: Bearer {token}");
    let wrong = "Authorization: Bearer mptd-test-0123456789abcdeX";
    for path in ["/", "/api/status", "/api/history", "/uplot.js"] {
        let url = format!("http://{addr}{path}");
        assert_eq!(
            http_code(&lab, &url, &[]),
            "401",
            "{path} without the token"
        );
        assert_eq!(http_code(&lab, &url, &["-H", wrong]), "401", "{path}");
        assert_eq!(http_code(&lab, &url, &["-H", &bearer]), "200", "{path}");
        let with = format!("{url}?token={token}");
        assert_eq!(http_code(&lab, &with, &[]), "200", "{path} with ?token=");
    }
    eprintln!("RESULT web_token: {addr}: 401 without the token or with a wrong one, 200 with it");
}
