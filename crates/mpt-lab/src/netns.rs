//! A two-host lab in network namespaces, for the end-to-end tests, the demo and the
//! experiments.
//!
//! [`Lab::new`] creates two namespaces (`a` and `b`) joined by N paths, each shaped with `tbf`
//! at the sending side in both directions; the tunnel uses `198.19.0.1`/`.2` and
//! `2001:db8:19::1`/`::2`.
//!
//! * Without impairments a path is one veth pair: `198.18.(i+1).1` (a) — `198.18.(i+1).2` (b).
//! * When any path has a delay, jitter or loss, every path goes through a third namespace `r`
//!   that routes it through the userspace link emulator ([`crate::emulator`]):
//!   `198.18.(i+1).1` (a) — r — `198.18.(101+i).2` (b).
//!
//! Everything the lab creates — the namespaces (and with them their links) and every process
//! it started — is removed when the [`Lab`] is dropped, also when a test fails. Processes are
//! stopped by their own pid only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Which end of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn octet(self) -> u8 {
        match self {
            Side::A => 1,
            Side::B => 2,
        }
    }

    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Tunnel address of a side.
pub fn tunnel_addr(side: Side) -> String {
    format!("198.19.0.{}", side.octet())
}

/// Address of a side on path `i` (0-based) in a lab without impairments.
pub fn path_addr(side: Side, i: usize) -> String {
    format!("198.18.{}.{}", i + 1, side.octet())
}

/// Address of a side on path `i` in an emulated lab (a and b sit on different subnets, with
/// the emulator's namespace routing between them).
fn emulated_path_addr(side: Side, i: usize) -> String {
    match side {
        Side::A => format!("198.18.{}.1", i + 1),
        Side::B => format!("198.18.{}.2", 101 + i),
    }
}

/// Whether this process may build labs. Outside CI a test without root skips loudly;
/// with `CI=true` it fails.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let have_ip = Command::new("ip")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && have_ip && Path::new("/dev/net/tun").exists() {
        return true;
    }
    let why = if !root {
        "not root"
    } else if !have_ip {
        "no `ip` command"
    } else {
        "no /dev/net/tun"
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: needs root, iproute2 and /dev/net/tun for network namespaces ({why}), and CI=true");
    }
    eprintln!("\n!!!!!!!! SKIPPED {test}: needs root + network namespaces ({why}) !!!!!!!!\n");
    false
}

/// Whether `program` is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Run a command, failing with its output when it fails.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

fn sh(script: &str) -> Result<Output> {
    run(Command::new("sh").args(["-ec", script]))
}

/// One shaped path.
#[derive(Debug, Clone)]
pub struct PathSpec {
    /// Egress rate in both directions, bits per second; `None` = unshaped.
    pub rate_bps: Option<u64>,
    /// Impairments from a to b.
    pub ab: Impair,
    /// Impairments from b to a.
    pub ba: Impair,
}

impl PathSpec {
    /// A path shaped to `rate_bps` both ways, with no other impairment.
    pub fn shaped(rate_bps: u64) -> PathSpec {
        PathSpec {
            rate_bps: Some(rate_bps),
            ab: Impair::default(),
            ba: Impair::default(),
        }
    }

    /// A bare veth path: no shaping, no impairment.
    pub fn unshaped() -> PathSpec {
        PathSpec {
            rate_bps: None,
            ab: Impair::default(),
            ba: Impair::default(),
        }
    }

    /// The path's rate from a to b: `tbf`'s, or the emulator's serial link's.
    pub fn rate(&self) -> Option<u64> {
        self.rate_bps.or(self.ab.rate_bps)
    }

    fn impaired(&self) -> bool {
        self.ab != Impair::default() || self.ba != Impair::default()
    }
}

pub use crate::emulator::Impair;

/// A running vsftpd started by [`Lab::ftp_server`].
#[derive(Debug)]
pub struct FtpServer {
    /// `ftp://address:port`
    pub url: String,
    /// The served file (`/random.bin`).
    pub file: PathBuf,
    /// The writable upload directory (`/upload/`).
    pub upload: PathBuf,
    pub pid: u32,
}

/// Options for the daemons' configuration files.
#[derive(Debug, Clone)]
pub struct TunnelOpts {
    pub scheduler: String,
    pub reorder_window: usize,
    pub reorder_timeout_ms: u64,
    pub keepalive_ms: u64,
    pub dead_ms: u64,
    pub mtu: u16,
    /// `tunnel.queues`.
    pub queues: usize,
    /// Write each path's `rate` and `weight` (false: leave them for `adaptive` to learn).
    pub configure_rates: bool,
    /// `[security] encryption`: "chacha20-poly1305", "aes-256-gcm" or "none". Both sides
    /// share one key file in the lab's directory.
    pub encryption: String,
    /// The mptd binary to run (default [`mptd_bin`]): `mpt-lab bench compare` runs several.
    pub mptd: Option<PathBuf>,
}

impl TunnelOpts {
    /// These options with the largest tunnel MTU the lab's 1500-byte links carry: 1500 minus
    /// the outer IPv4/UDP header (28), mptd's header (16) and, when sealed, counter and tag (24).
    pub fn with_full_mtu(self) -> Self {
        let mtu = 1500 - mpt_core::wire::Overhead::new(self.encryption != "none", false).ip();
        TunnelOpts {
            mtu: mtu as u16,
            ..self
        }
    }
}

impl Default for TunnelOpts {
    fn default() -> Self {
        TunnelOpts {
            scheduler: "rate".into(),
            reorder_window: mptd::config::defaults::REORDER_WINDOW,
            reorder_timeout_ms: 100,
            keepalive_ms: 100,
            dead_ms: 500,
            mtu: 1400,
            queues: 1,
            configure_rates: true,
            encryption: "chacha20-poly1305".into(),
            mptd: None,
        }
    }
}

/// A two-namespace lab. Dropping it tears everything down.
#[derive(Debug)]
pub struct Lab {
    pub tag: String,
    pub paths: Vec<PathSpec>,
    pub dir: PathBuf,
    children: Vec<(String, Child)>,
    mptd: Vec<(Side, u32)>,
    /// Paths go through the emulator namespace.
    pub emulated: bool,
}

impl Lab {
    /// Build the namespaces, links, addresses and shaping.
    pub fn new(paths: &[PathSpec]) -> Result<Lab> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{n}", tag_prefix());
        let dir = std::env::temp_dir().join(&tag);
        std::fs::create_dir_all(&dir)?;
        let emulated = paths.iter().any(PathSpec::impaired);
        let mut lab = Lab {
            tag,
            paths: paths.to_vec(),
            dir,
            children: Vec::new(),
            mptd: Vec::new(),
            emulated,
        };
        // Dropping `lab` removes whatever part was built if building fails.
        lab.build()
            .with_context(|| format!("building lab {}", lab.tag))?;
        if emulated {
            lab.start_emulator()
                .with_context(|| format!("starting the link emulator of lab {}", lab.tag))?;
        }
        Ok(lab)
    }

    pub fn ns(&self, side: Side) -> String {
        match side {
            Side::A => format!("{}a", self.tag),
            Side::B => format!("{}b", self.tag),
        }
    }

    /// The emulator's namespace (only in an emulated lab).
    pub fn ns_r(&self) -> String {
        format!("{}r", self.tag)
    }

    /// Address of `side` on path `i`.
    pub fn path_addr(&self, side: Side, i: usize) -> String {
        if self.emulated {
            emulated_path_addr(side, i)
        } else {
            path_addr(side, i)
        }
    }

    /// Name of path `i`'s link inside either namespace.
    pub fn link(i: usize) -> String {
        format!("p{i}")
    }

    fn build(&self) -> Result<()> {
        let (a, b, r) = (self.ns(Side::A), self.ns(Side::B), self.ns_r());
        let mut s = format!("ip netns add {a}\nip netns add {b}\n");
        if self.emulated {
            writeln!(s, "ip netns add {r}\nip -n {r} link set lo up")?;
            writeln!(s, "ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0")?;
        }
        for ns in [&a, &b] {
            writeln!(s, "ip -n {ns} link set lo up")?;
            // No IPv6 duplicate address detection delay on the test links.
            writeln!(s, "ip netns exec {ns} sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 || true")?;
        }
        for (i, p) in self.paths.iter().enumerate() {
            let l = Self::link(i);
            if self.emulated {
                writeln!(
                    s,
                    "ip -n {r} link add a{i} type veth peer name {l} netns {a}"
                )?;
                writeln!(
                    s,
                    "ip -n {r} link add b{i} type veth peer name {l} netns {b}"
                )?;
                writeln!(s, "ip -n {r} addr add 198.18.{}.254/24 dev a{i}", i + 1)?;
                writeln!(s, "ip -n {r} addr add 198.18.{}.254/24 dev b{i}", 101 + i)?;
                writeln!(s, "ip -n {r} link set a{i} up\nip -n {r} link set b{i} up")?;
            } else {
                writeln!(
                    s,
                    "ip link add {l} netns {a} type veth peer name {l} netns {b}"
                )?;
            }
            for side in [Side::A, Side::B] {
                let ns = self.ns(side);
                writeln!(
                    s,
                    "ip -n {ns} addr add {}/24 dev {l}",
                    self.path_addr(side, i)
                )?;
                writeln!(s, "ip -n {ns} link set {l} up")?;
                if self.emulated {
                    let (gw, peer_net) = match side {
                        Side::A => (
                            format!("198.18.{}.254", i + 1),
                            format!("198.18.{}.0/24", 101 + i),
                        ),
                        Side::B => (
                            format!("198.18.{}.254", 101 + i),
                            format!("198.18.{}.0/24", i + 1),
                        ),
                    };
                    writeln!(s, "ip -n {ns} route add {peer_net} via {gw} dev {l}")?;
                }
                if let Some(rate) = p.rate_bps {
                    writeln!(s, "tc -n {ns} qdisc add dev {l} root {}", tbf(rate))?;
                }
            }
        }
        sh(&s)?;
        Ok(())
    }

    /// Start the link emulator in the emulator namespace and route every path through it:
    /// what arrives from a on `a<i>` goes into the TUN device `e<i>ab`, the emulator holds or
    /// drops it and writes it back, and the kernel forwards it to b on `b<i>` (and the other
    /// way through `e<i>ba`).
    fn start_emulator(&mut self) -> Result<()> {
        let r = self.ns_r();
        let links: Vec<crate::emulator::Link> = self
            .paths
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                [
                    crate::emulator::Link {
                        device: format!("e{i}ab"),
                        impair: p.ab,
                        seed: 2 * i as u64 + 1,
                        outage_flag: Some(self.outage_flag(i)),
                    },
                    crate::emulator::Link {
                        device: format!("e{i}ba"),
                        impair: p.ba,
                        seed: 2 * i as u64 + 2,
                        outage_flag: Some(self.outage_flag(i)),
                    },
                ]
            })
            .collect();
        let spec = serde_json::to_string(&links)?;
        let bin = sibling_bin("mpt-lab")?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &r])
            .arg(&bin)
            .args(["emulate", &spec]);
        let pid = self.spawn(Side::A, "emulator", &mut cmd)?;
        let t0 = Instant::now();
        let last = format!("e{}ba", self.paths.len() - 1);
        while run(Command::new("ip").args(["-n", &r, "link", "show", &last])).is_err() {
            if self.exited(pid) || t0.elapsed() > Duration::from_secs(10) {
                bail!("the emulator did not start:\n{}", self.log("emulator"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut s = String::new();
        for i in 0..self.paths.len() {
            for (from, dev, table) in [
                (format!("a{i}"), format!("e{i}ab"), 100 + i),
                (format!("b{i}"), format!("e{i}ba"), 200 + i),
            ] {
                writeln!(
                    s,
                    "ip netns exec {r} sysctl -qw net.ipv4.conf.{dev}.rp_filter=0"
                )?;
                writeln!(s, "ip -n {r} link set {dev} up")?;
                writeln!(s, "ip -n {r} route add default dev {dev} table {table}")?;
                writeln!(s, "ip -n {r} rule add iif {from} table {table}")?;
            }
        }
        sh(&s)?;
        Ok(())
    }

    /// A command run inside a namespace.
    pub fn cmd(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(side), program]);
        c
    }

    /// Run a shell script inside a namespace.
    pub fn sh(&self, side: Side, script: &str) -> Result<Output> {
        run(self.cmd(side, "sh").args(["-ec", script]))
    }

    /// Start a background process in a namespace; it is stopped (by pid) when the lab drops.
    pub fn spawn(&mut self, side: Side, name: &str, cmd: &mut Command) -> Result<u32> {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log")))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {name} in {:?}", side))?;
        let pid = child.id();
        self.children.push((name.to_owned(), child));
        Ok(pid)
    }

    /// Write the config of `side` and return its path.
    pub fn write_config(&self, side: Side, o: &TunnelOpts) -> Result<PathBuf> {
        let mut c = String::new();
        writeln!(c, "[tunnel]\nname = \"mpt0\"\naddresses = [\"{}/24\", \"2001:db8:19::{}/64\"]\nmtu = {}\nqueues = {}\n", tunnel_addr(side), side.octet(), o.mtu, o.queues)?;
        writeln!(c, "[connection]\nscheduler = \"{}\"\nreorder_window = {}\nreorder_timeout_ms = {}\nkeepalive_ms = {}\ndead_ms = {}\n", o.scheduler, o.reorder_window, o.reorder_timeout_ms, o.keepalive_ms, o.dead_ms)?;
        writeln!(
            c,
            "[control]\nsocket = \"{}\"\n",
            self.control_socket(side).display()
        )?;
        if o.encryption == "none" {
            writeln!(c, "[security]\nencryption = \"none\"\n")?;
        } else {
            writeln!(
                c,
                "[security]\nencryption = \"{}\"\nkey_file = \"{}\"\n",
                o.encryption,
                self.key_file()?.display()
            )?;
        }
        for (i, p) in self.paths.iter().enumerate() {
            let rate = p.rate().unwrap_or(10_000_000_000);
            // wrr weights in proportion to the rates, as MPT configured them.
            let unit = self
                .paths
                .iter()
                .map(|p| p.rate().unwrap_or(10_000_000_000))
                .fold(0, gcd)
                .max(1);
            let weight = (rate / unit).clamp(1, 10_000);
            writeln!(
                c,
                "[[path]]\nname = \"p{i}\"\ninterface = \"{}\"\nlocal = \"{}:4754\"\nremote = \"{}:4754\"",
                Self::link(i),
                self.path_addr(side, i),
                self.path_addr(side.other(), i),
            )?;
            if o.configure_rates {
                writeln!(c, "weight = {weight}\nrate = {rate}")?;
            }
            c.push('\n');
        }
        let path = self.dir.join(format!("{}.toml", self.ns(side)));
        std::fs::write(&path, c)?;
        Ok(path)
    }

    /// The lab's pre-shared key file (mode 0600), made on first use.
    pub fn key_file(&self) -> Result<PathBuf> {
        use std::io::{Read, Write};
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join("mpt.key");
        if !path.exists() {
            let mut key = [0u8; mpt_core::seal::KEY_LEN];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            writeln!(f, "{}", mpt_core::seal::Psk::from_bytes(key).encode())?;
        }
        Ok(path)
    }

    pub fn control_socket(&self, side: Side) -> PathBuf {
        self.dir.join(format!("{}.sock", self.ns(side)))
    }

    /// Start mptd on both sides and wait until the tunnel carries a ping.
    pub fn start_tunnel(&mut self, o: &TunnelOpts) -> Result<()> {
        for side in [Side::A, Side::B] {
            self.start_mptd(side, o)?;
        }
        self.wait_for_tunnel(Duration::from_secs(10))
    }

    /// Start mptd on one side with a config written from `o`.
    pub fn start_mptd(&mut self, side: Side, o: &TunnelOpts) -> Result<u32> {
        let cfg = self.write_config(side, o)?;
        let bin = match &o.mptd {
            Some(b) => b.clone(),
            None => mptd_bin()?,
        };
        let mut cmd = self.cmd(side, bin.to_str().ok_or_else(|| anyhow!("bad path"))?);
        cmd.args(["-c", cfg.to_str().unwrap_or_default()]);
        let name = format!("mptd-{}", self.ns(side));
        let pid = self.spawn(side, &name, &mut cmd)?;
        self.mptd.push((side, pid));
        // Ready when the control socket answers.
        let sock = self.control_socket(side);
        let t0 = Instant::now();
        while mptd::control::status(&sock).is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                bail!(
                    "mptd on {side:?} did not come up; log:\n{}",
                    self.log(&name)
                );
            }
            if self.exited(pid) {
                bail!("mptd on {side:?} exited; log:\n{}", self.log(&name));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(pid)
    }

    /// Stop one of the daemons this lab started (SIGTERM, then SIGKILL after 5 s) and return
    /// its exit code.
    pub fn stop_mptd(&mut self, side: Side) -> Result<Option<i32>> {
        let Some(k) = self.mptd.iter().position(|(s, _)| *s == side) else {
            bail!("no mptd running on {side:?}");
        };
        let (_, pid) = self.mptd.remove(k);
        let idx = self
            .children
            .iter()
            .position(|(_, c)| c.id() == pid)
            .ok_or_else(|| anyhow!("lost child"))?;
        let (_, mut child) = self.children.remove(idx);
        terminate(&mut child);
        Ok(child.wait()?.code())
    }

    fn exited(&mut self, pid: u32) -> bool {
        self.children
            .iter_mut()
            .find(|(_, c)| c.id() == pid)
            .is_none_or(|(_, c)| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// A log file of a process started with [`Lab::spawn`].
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    pub fn mptd_log(&self, side: Side) -> String {
        self.log(&format!("mptd-{}", self.ns(side)))
    }

    /// Ping across the tunnel until it answers.
    pub fn wait_for_tunnel(&self, limit: Duration) -> Result<()> {
        let t0 = Instant::now();
        loop {
            let ok = self
                .cmd(Side::A, "ping")
                .args(["-c1", "-W1", &tunnel_addr(Side::B)])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return Ok(());
            }
            if t0.elapsed() > limit {
                bail!(
                    "no ping through the tunnel after {limit:?}\n--- a ---\n{}\n--- b ---\n{}",
                    self.mptd_log(Side::A),
                    self.mptd_log(Side::B)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the lab's links look like now (for an error message): each side's addresses,
    /// qdiscs with their counters, neighbours and TCP sockets.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        for side in [Side::A, Side::B] {
            let script = "ip -br addr; tc -s qdisc show; ip neigh; ss -tan";
            let text = self.sh(side, script).map_or_else(
                |e| format!("{e:#}"),
                |o| String::from_utf8_lossy(&o.stdout).into_owned(),
            );
            out += &format!("--- {side:?} ---\n{text}");
        }
        out
    }

    /// mptd's status on `side`.
    pub fn status(&self, side: Side) -> Result<mptd::status::Status> {
        mptd::control::status(&self.control_socket(side))
    }

    /// Run an iperf3 client in `client` against a server started in the other namespace on
    /// `server_addr`; returns iperf3's JSON.
    pub fn iperf3(
        &mut self,
        client: Side,
        server_addr: &str,
        port: u16,
        args: &[&str],
    ) -> Result<serde_json::Value> {
        let mut v = self.iperf3_many(client, &[(server_addr.to_owned(), port)], args)?;
        Ok(v.remove(0))
    }

    /// Run one iperf3 client per `(server address, port)` at the same time, each against its
    /// own server in the other namespace; returns their JSON results in order.
    pub fn iperf3_many(
        &mut self,
        client: Side,
        targets: &[(String, u16)],
        args: &[&str],
    ) -> Result<Vec<serde_json::Value>> {
        let server = client.other();
        let mut servers = Vec::new();
        for (addr, port) in targets {
            let name = format!("iperf3-server-{port}");
            let mut cmd = self.cmd(server, "iperf3");
            // -J: the server's own JSON reaches the client with --get-server-output.
            cmd.args(["-s", "-1", "-J", "-B", addr, "-p", &port.to_string()]);
            servers.push(self.spawn(server, &name, &mut cmd)?);
        }
        for (_, port) in targets {
            let t0 = Instant::now();
            while self
                .sh(server, &format!("ss -ltnH 'sport = :{port}' | grep -q ."))
                .is_err()
            {
                if t0.elapsed() > Duration::from_secs(5) {
                    bail!(
                        "iperf3 server on port {port} did not start: {}",
                        self.log(&format!("iperf3-server-{port}"))
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let clients: Vec<Child> = targets
            .iter()
            .map(|(addr, port)| {
                self.cmd(client, "timeout")
                    .args(["90", "iperf3", "-J", "-c", addr, "-p", &port.to_string()])
                    .args(args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("cannot start iperf3")
            })
            .collect::<Result<_>>()?;
        let mut results = Vec::new();
        for c in clients {
            let out = c.wait_with_output()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
                format!(
                    "iperf3 gave no JSON: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })?;
            if let Some(e) = v.get("error") {
                bail!("iperf3 failed: {e}\n{}", self.diagnostics());
            }
            results.push(v);
        }
        for pid in servers {
            self.reap(pid);
        }
        Ok(results)
    }

    /// Start an iperf3 TCP transfer of `secs` seconds from A to B through the tunnel and
    /// return at once: the server's pid (for [`Lab::reap`]) and the client, whose JSON comes
    /// out on its stdout.
    pub fn tcp_transfer_in_background(&mut self, port: u16, secs: u64) -> Result<(u32, Child)> {
        let mut server = self.cmd(Side::B, "iperf3");
        server.args([
            "-s",
            "-1",
            "-B",
            &tunnel_addr(Side::B),
            "-p",
            &port.to_string(),
        ]);
        let spid = self.spawn(Side::B, &format!("iperf3-server-{port}"), &mut server)?;
        let t0 = Instant::now();
        while self
            .sh(Side::B, &format!("ss -ltnH 'sport = :{port}' | grep -q ."))
            .is_err()
        {
            if t0.elapsed() > Duration::from_secs(5) {
                bail!("iperf3 server on port {port} did not start");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let client = self
            .cmd(Side::A, "timeout")
            .args([
                &(secs + 30).to_string(),
                "iperf3",
                "-J",
                "-c",
                &tunnel_addr(Side::B),
            ])
            .args(["-p", &port.to_string(), "-t", &secs.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start iperf3")?;
        Ok((spid, client))
    }

    /// Run `f` on a thread inside `side`'s namespace (sockets it opens live there).
    pub fn in_ns<R: Send>(&self, side: Side, f: impl FnOnce() -> R + Send) -> Result<R> {
        in_netns(&self.ns(side), f)
    }

    /// The stranger's namespace (see [`Lab::add_stranger`]).
    pub fn ns_x(&self) -> String {
        format!("{}x", self.tag)
    }

    /// A third host, "x", that can reach B's path addresses: a veth to A, which forwards.
    /// Its traffic arrives at B on the path links, from [`STRANGER_ADDR`]. Removed with the
    /// lab. Only for an unemulated lab.
    pub fn add_stranger(&mut self) -> Result<()> {
        if self.emulated {
            bail!("add_stranger: only in a lab without the emulator");
        }
        let (a, b, x) = (self.ns(Side::A), self.ns(Side::B), self.ns_x());
        let mut s = format!("ip netns add {x}\nip -n {x} link set lo up\n");
        writeln!(
            s,
            "ip link add x0 netns {x} type veth peer name xa netns {a}"
        )?;
        writeln!(
            s,
            "ip -n {x} addr add {STRANGER_ADDR}/24 dev x0\nip -n {x} link set x0 up"
        )?;
        writeln!(
            s,
            "ip -n {a} addr add 198.18.200.1/24 dev xa\nip -n {a} link set xa up"
        )?;
        writeln!(s, "ip -n {x} route add default via 198.18.200.1")?;
        writeln!(s, "ip netns exec {a} sysctl -qw net.ipv4.ip_forward=1")?;
        // B answers nothing to x, but must not drop its datagrams as spoofed.
        writeln!(s, "ip netns exec {b} sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0")?;
        for i in 0..self.paths.len() {
            let l = Self::link(i);
            writeln!(
                s,
                "ip netns exec {b} sysctl -qw net.ipv4.conf.{l}.rp_filter=0"
            )?;
        }
        writeln!(
            s,
            "ip -n {b} route add 198.18.200.0/24 via {} dev {}",
            self.path_addr(Side::A, 0),
            Self::link(0)
        )?;
        sh(&s)?;
        Ok(())
    }

    /// Run `f` on a thread inside the stranger's namespace.
    pub fn in_stranger<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        in_netns(&self.ns_x(), f)
    }
}

/// The stranger's address (see [`Lab::add_stranger`]).
pub const STRANGER_ADDR: &str = "198.18.200.2";

/// Run `f` on a thread inside network namespace `ns` (sockets it opens live there).
pub fn in_netns<R: Send>(ns: &str, f: impl FnOnce() -> R + Send) -> Result<R> {
    let file = std::fs::File::open(format!("/run/netns/{ns}"))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a valid namespace fd; it only changes this thread's network
            // namespace, and this thread ends when `f` returns.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(anyhow!("setns: {}", std::io::Error::last_os_error()));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| anyhow!("namespace thread panicked"))?
    })
}

impl Lab {
    /// Ping `addr` from `side` with `args` (e.g. `-c 20 -i 0.05`); the average RTT in ms.
    pub fn ping_avg_ms(&self, side: Side, addr: &str, args: &[&str]) -> Result<f64> {
        let out = self
            .cmd(side, "ping")
            .args(args)
            .args(["-q", addr])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.contains("min/avg/max"))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.trim().split('/').nth(1))
            .and_then(|v| v.parse().ok())
            .with_context(|| {
                format!(
                    "no ping summary: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }

    fn outage_flag(&self, i: usize) -> PathBuf {
        self.dir.join(format!("outage-{i}"))
    }

    /// Make path `i` drop everything in both directions (`on`), or carry traffic again.
    /// Only in an emulated lab.
    pub fn set_outage(&self, i: usize, on: bool) -> Result<()> {
        if !self.emulated {
            bail!("outages need the emulator (a lab with impairments)");
        }
        if on {
            std::fs::write(self.outage_flag(i), b"")?;
        } else {
            let _ = std::fs::remove_file(self.outage_flag(i));
        }
        Ok(())
    }

    /// Start vsftpd on `side`'s tunnel address (port 2121) serving an anonymous root that
    /// holds `random.bin` (`file_bytes` random bytes) and a writable `upload/`.
    pub fn ftp_server(&mut self, side: Side, file_bytes: u64) -> Result<FtpServer> {
        let root = self.dir.join("ftproot");
        let upload = root.join("upload");
        let empty = self.dir.join("empty");
        std::fs::create_dir_all(&upload)?;
        std::fs::create_dir_all(&empty)?;
        use std::os::unix::fs::PermissionsExt;
        // vsftpd refuses an anonymous root the ftp user can write to.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))?;
        std::fs::set_permissions(&upload, std::fs::Permissions::from_mode(0o777))?;
        let file = root.join("random.bin");
        run(Command::new("head")
            .args(["-c", &file_bytes.to_string(), "/dev/urandom"])
            .stdout(std::fs::File::create(&file)?))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
        let conf = self.dir.join("vsftpd.conf");
        let addr = tunnel_addr(side);
        std::fs::write(
            &conf,
            format!(
                "listen=YES\nlisten_ipv6=NO\nlisten_address={addr}\nlisten_port=2121\nbackground=NO\n\
                 anonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root={}\n\
                 write_enable=YES\nanon_upload_enable=YES\nanon_mkdir_write_enable=YES\nanon_umask=022\n\
                 ftp_username=ftp\nsecure_chroot_dir={}\nseccomp_sandbox=NO\nisolate_network=NO\n\
                 isolate=NO\npasv_enable=YES\npasv_min_port=30000\npasv_max_port=30100\n\
                 xferlog_enable=NO\n",
                root.display(),
                empty.display()
            ),
        )?;
        let mut cmd = self.cmd(side, "vsftpd");
        cmd.arg(&conf);
        let pid = self.spawn(side, "vsftpd", &mut cmd)?;
        let t0 = Instant::now();
        while self
            .sh(side, "ss -ltnH 'sport = :2121' | grep -q .")
            .is_err()
        {
            if self.exited(pid) || t0.elapsed() > Duration::from_secs(5) {
                bail!("vsftpd did not start: {}", self.log("vsftpd"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(FtpServer {
            url: format!("ftp://{addr}:2121"),
            file,
            upload,
            pid,
        })
    }

    /// Stop a started process if it still runs, and forget it.
    pub fn reap(&mut self, pid: u32) {
        if let Some(i) = self.children.iter().position(|(_, c)| c.id() == pid) {
            let (_, mut c) = self.children.remove(i);
            terminate(&mut c);
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `tbf` parameters that deliver the configured rate: a burst of at least 4 ms of data and
/// 3000 bytes, and a queue of 50 ms.
pub fn tbf(rate_bps: u64) -> String {
    tbf_with_burst(rate_bps, tbf_burst(rate_bps))
}

/// The bucket [`tbf`] gives a rate: 4 ms of it, at least two full-size packets.
pub fn tbf_burst(rate_bps: u64) -> u64 {
    (rate_bps / 8 * 4 / 1000).max(3000)
}

/// `tbf` with a given bucket. A qdisc re-shaped with `tc qdisc change` must keep a bucket at
/// least as large as before: tbf takes a GSO packet whole when it fits the bucket, and one
/// that fitted the old bucket but not the new one stays at the head of the queue for ever
/// (the link then carries nothing at all).
pub fn tbf_with_burst(rate_bps: u64, burst: u64) -> String {
    format!("tbf rate {rate_bps}bit burst {burst} latency 50ms")
}

fn terminate(c: &mut Child) {
    if matches!(c.try_wait(), Ok(Some(_))) {
        return;
    }
    let pid = c.id() as i32;
    // SAFETY: kill(2) on a pid we spawned and have not yet reaped, so it is still ours.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if matches!(c.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = c.kill();
    let _ = c.wait();
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            terminate(c);
        }
        for ns in [self.ns(Side::A), self.ns(Side::B), self.ns_r(), self.ns_x()] {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
        if std::env::var_os("MPT_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The prefix of every namespace this process creates.
pub fn tag_prefix() -> String {
    format!("mpt{}x", std::process::id())
}

/// Remove every namespace this process created and stop the processes running in them (they
/// are ours: we started them there). For a signal handler: `Drop` does not run on SIGTERM.
pub fn cleanup_own_namespaces() {
    let prefix = tag_prefix();
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &name]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: kill(2) with a pid listed in a namespace this process created.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
    }
}

/// On SIGINT or SIGTERM: clean up this process's namespaces and exit with 130.
///
/// The signals are caught by a handler (signal-hook), not blocked: a blocked signal would be
/// inherited, blocked, by every process the lab starts (mptd would then ignore the SIGTERM
/// that stops it).
pub fn cleanup_on_signal() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("signal {sig}: removing the lab");
            cleanup_own_namespaces();
            std::process::exit(130);
        }
    });
    Ok(())
}

/// The mptd binary: `$MPTD_BIN`, or the one built next to this program.
pub fn mptd_bin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("MPTD_BIN") {
        return Ok(PathBuf::from(p));
    }
    sibling_bin("mptd")
}

/// A binary of this workspace built next to the running program (or one directory up, for
/// test binaries in `target/*/deps`).
pub fn sibling_bin(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    for dir in exe.ancestors().skip(1).take(3) {
        let cand = dir.join(name);
        if cand.is_file() {
            return Ok(cand);
        }
    }
    bail!(
        "{name} not found near {}; run `cargo build --release --bins` first",
        exe.display()
    )
}

/// Datagrams the receiving iperf3 saw out of order in a UDP run made with
/// `--get-server-output` (the client's own JSON counts none); `None` without the server's JSON.
pub fn iperf3_receiver_out_of_order(v: &serde_json::Value) -> Option<u64> {
    v["server_output_json"]["end"]["streams"][0]["udp"]["out_of_order"].as_u64()
}

/// Throughput in bits per second that an iperf3 JSON result reports at the receiver.
pub fn iperf3_bps(v: &serde_json::Value) -> f64 {
    let end = &v["end"];
    end["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| end["sum"]["bits_per_second"].as_f64())
        .unwrap_or(0.0)
}
