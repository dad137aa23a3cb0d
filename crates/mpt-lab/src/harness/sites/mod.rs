//! One server, many sites behind NAT: a server namespace with one address, a router namespace
//! that masquerades every site's uplinks with random source ports (nftables), and site
//! namespaces with two uplinks each into the router. The server listens (`[[listen]]`); each
//! site names it by `endpoint` and leaves through its uplinks by `interface` alone. Dropping a
//! [`Sites`] stops what it started (by pid) and removes its namespaces.
//!
//! Addresses: the server 198.18.100.1 (router side .254); site `k`'s uplink `j` 198.18.N.2
//! with N = 10 + 2k + j (router side .1); tunnel addresses 198.19.0.1 (server) and
//! 198.19.0.(k + 2) (site `k`); site 0 also has a LAN, 198.18.200.1/24 on a dummy device, that
//! the server reaches through the tunnel (a veth pair: this kernel may lack `dummy`).

mod config;
mod flood;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use mptd::config::ConfigFile;

use super::process::{
    child_exited, run, sh, spawn_logged, stop_child, terminate, wait_for_control,
};

/// A log file the lab wrote, `dir/<name>.log`.
fn self_log(dir: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

/// The server's address, as the sites reach it.
pub const SERVER: &str = "198.18.100.1";
/// The port it listens on.
pub const PORT: u16 = 4754;
/// Site 0's LAN, routed to it by the server (its `allowed`).
pub const SITE0_LAN: &str = "198.18.200.0/24";
/// The server's `tunnel.route_protocol`: a routing daemon would export the routes with it.
pub const SERVER_ROUTE_PROTOCOL: u8 = 200;

/// Who runs where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Server,
    Site(usize),
}

/// The lab. See the module documentation.
#[derive(Debug)]
pub struct Sites {
    pub tag: String,
    pub dir: PathBuf,
    /// Sites the server knows (their keys are its peers).
    pub known: usize,
    /// Sites in all (the last `sites - known` are strangers to the server).
    pub sites: usize,
    children: Vec<(String, Child)>,
    mptd: Vec<(Host, u32)>,
}

impl Drop for Sites {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            terminate(c);
        }
        let mut all = vec![self.ns(Host::Server), self.ns_router(), self.ns_flooder()];
        all.extend((0..self.sites).map(|k| self.ns(Host::Site(k))));
        for ns in all {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
        if std::env::var_os("MPT_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Site `k`'s uplink `j`: the third octet of its subnet.
fn subnet(k: usize, j: usize) -> usize {
    10 + 2 * k + j
}

/// The tunnel address of `h`.
pub fn tunnel_ip(h: Host) -> String {
    match h {
        Host::Server => "198.19.0.1".into(),
        Host::Site(k) => format!("198.19.0.{}", k + 2),
    }
}

impl Sites {
    /// `known` sites the server has as peers, and `strangers` more it has never heard of.
    pub fn new(known: usize, strangers: usize) -> Result<Sites> {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = format!("{}s{n}", super::tag_prefix());
        let dir = std::env::temp_dir().join(&tag);
        std::fs::create_dir_all(&dir)?;
        let lab = Sites {
            tag,
            dir,
            known,
            sites: known + strangers,
            children: Vec::new(),
            mptd: Vec::new(),
        };
        lab.build()
            .with_context(|| format!("building the sites lab {}", lab.tag))?;
        Ok(lab)
    }

    pub fn ns(&self, h: Host) -> String {
        match h {
            Host::Server => format!("{}v", self.tag),
            Host::Site(k) => format!("{}s{k}", self.tag),
        }
    }

    pub fn ns_router(&self) -> String {
        format!("{}n", self.tag)
    }

    fn build(&self) -> Result<()> {
        let (v, n) = (self.ns(Host::Server), self.ns_router());
        let mut s = String::new();
        for ns in [&v, &n] {
            writeln!(s, "ip netns add {ns}\nip -n {ns} link set lo up")?;
            writeln!(s, "ip netns exec {ns} sysctl -qw net.ipv4.ip_forward=1")?;
        }
        writeln!(
            s,
            "ip link add srv netns {v} type veth peer name wan netns {n}"
        )?;
        writeln!(
            s,
            "ip -n {v} addr add {SERVER}/24 dev srv\nip -n {v} link set srv up"
        )?;
        writeln!(
            s,
            "ip -n {n} addr add 198.18.100.254/24 dev wan\nip -n {n} link set wan up"
        )?;
        for k in 0..self.sites {
            let site = self.ns(Host::Site(k));
            writeln!(s, "ip netns add {site}\nip -n {site} link set lo up")?;
            for j in 0..2 {
                let net = subnet(k, j);
                writeln!(
                    s,
                    "ip link add u{j} netns {site} type veth peer name s{k}u{j} netns {n}"
                )?;
                writeln!(s, "ip -n {site} addr add 198.18.{net}.2/24 dev u{j}")?;
                writeln!(s, "ip -n {site} link set u{j} up")?;
                writeln!(s, "ip -n {n} addr add 198.18.{net}.1/24 dev s{k}u{j}")?;
                writeln!(s, "ip -n {n} link set s{k}u{j} up")?;
                // each uplink has its own route to the server: a socket bound to it leaves there
                writeln!(
                    s,
                    "ip -n {site} route add 198.18.100.0/24 via 198.18.{net}.1 dev u{j} metric {}",
                    10 + j
                )?;
            }
        }
        // site 0's LAN
        if self.sites > 0 {
            writeln!(
            s,
            "ip -n {s0} link add lan type veth peer name lanp\nip -n {s0} addr add 198.18.200.1/24 dev lan\nip -n {s0} link set lan up\nip -n {s0} link set lanp up",
                s0 = self.ns(Host::Site(0))
            )?;
        }
        // the router hides every site behind its one address, with random source ports
        writeln!(s, "ip netns exec {n} nft add table ip nat")?;
        writeln!(
            s,
            "ip netns exec {n} nft add chain ip nat post '{{ type nat hook postrouting priority 100; }}'"
        )?;
        writeln!(
            s,
            "ip netns exec {n} nft add rule ip nat post oifname wan masquerade random"
        )?;
        sh(&s)?;
        Ok(())
    }

    /// Run a shell script in `h`'s namespace.
    pub fn sh(&self, h: Host, script: &str) -> Result<std::process::Output> {
        run(self.cmd(h, "sh").args(["-ec", script]))
    }

    /// Run a shell script in the router's namespace.
    pub fn router_sh(&self, script: &str) -> Result<std::process::Output> {
        let ns = self.ns_router();
        run(Command::new("ip").args(["netns", "exec", &ns, "sh", "-ec", script]))
    }

    pub fn cmd(&self, h: Host, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(h), program]);
        c
    }

    /// Start mptd on `h` with `config`; ready when its control socket answers.
    pub fn start_mptd(&mut self, h: Host, config: &ConfigFile) -> Result<u32> {
        let file = self.dir.join(format!("{}.toml", self.ns(h)));
        std::fs::write(&file, toml::to_string(config)?)?;
        let bin = super::mptd_bin()?;
        let mut cmd = self.cmd(h, bin.to_str().ok_or_else(|| anyhow!("bad path"))?);
        cmd.args(["-c", file.to_str().unwrap_or_default()]);
        let name = format!("mptd-{}", self.ns(h));
        let pid = self.spawn(h, &name, &mut cmd)?;
        self.mptd.push((h, pid));
        let sock = self.control_socket(h);
        let children = &mut self.children;
        let log = || self_log(&self.dir, &name);
        wait_for_control(&sock, || child_exited(children, pid), log)
            .map_err(|e| anyhow!("on {h:?}: {e:#}"))?;
        Ok(pid)
    }

    /// Stop the mptd this lab started on `h` (SIGTERM) and return its exit code.
    pub fn stop_mptd(&mut self, h: Host) -> Result<Option<i32>> {
        let k = self
            .mptd
            .iter()
            .position(|(x, _)| *x == h)
            .ok_or_else(|| anyhow!("no mptd on {h:?}"))?;
        let (_, pid) = self.mptd.remove(k);
        stop_child(&mut self.children, pid)
    }

    /// Start a background program in `h`'s namespace; stopped (by pid) when the lab drops.
    pub fn spawn(&mut self, h: Host, name: &str, cmd: &mut Command) -> Result<u32> {
        let child = spawn_logged(&self.dir, name, &format!("on {h:?}"), cmd)?;
        let pid = child.id();
        self.children.push((name.to_owned(), child));
        Ok(pid)
    }

    /// Stop a program started with [`Sites::spawn`].
    pub fn reap(&mut self, pid: u32) {
        let _ = stop_child(&mut self.children, pid);
    }

    pub fn mptd_log(&self, h: Host) -> String {
        self_log(&self.dir, &format!("mptd-{}", self.ns(h)))
    }

    pub fn status(&self, h: Host) -> Result<mptd::status::Status> {
        mptd::control::status(&self.control_socket(h))
    }

    /// One ping from `from` to `to` (an address) answered within a second.
    pub fn ping(&self, from: Host, to: &str) -> bool {
        self.cmd(from, "ping")
            .args(["-c1", "-W1", to])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Start mptd on the first `n` sites with their configs, and wait (10 s at most each) until
    /// each reaches the server through its tunnel.
    pub fn start_sites(&mut self, n: usize) -> Result<()> {
        for k in 0..n {
            let c = self.site_config(k)?;
            self.start_mptd(Host::Site(k), &c)?;
            self.ping_until(
                Host::Site(k),
                &tunnel_ip(Host::Server),
                Duration::from_secs(10),
            )
            .with_context(|| format!("site {k} reaches the server"))?;
        }
        Ok(())
    }

    /// Ping from `from` to `to` every 50 ms until it answers or `limit` passes: how long it
    /// took.
    pub fn ping_until(&self, from: Host, to: &str, limit: Duration) -> Result<Duration> {
        let t0 = Instant::now();
        loop {
            let ok = self
                .cmd(from, "ping")
                .args(["-c1", "-W0.2", to])
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > limit {
                bail!(
                    "no answer from {to} on {from:?} after {limit:?}\n--- server ---\n{}",
                    self.mptd_log(Host::Server)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
