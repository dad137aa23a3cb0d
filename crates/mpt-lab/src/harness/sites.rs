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

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use mpt_core::seal::PrivateKey;
use mptd::config::{
    ConfigFile, ConnectionFile, ControlFile, ListenFile, PathFile, PeerFile, SecurityFile,
    TunnelFile,
};

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

    /// The flooder's namespace (see [`Sites::add_flooder`]).
    pub fn ns_flooder(&self) -> String {
        format!("{}f", self.tag)
    }

    /// A host beside the server (its own link, not through the router) that owns
    /// `addresses` addresses, 198.18.101.10 and up; the server is 198.18.101.1 on that link.
    pub fn add_flooder(&self, addresses: usize) -> Result<()> {
        let (v, f) = (self.ns(Host::Server), self.ns_flooder());
        let mut s = format!("ip netns add {f}\nip -n {f} link set lo up\n");
        writeln!(
            s,
            "ip link add fl netns {v} type veth peer name fl netns {f}"
        )?;
        writeln!(
            s,
            "ip -n {v} addr add 198.18.101.1/24 dev fl\nip -n {v} link set fl up"
        )?;
        for k in 0..addresses.min(200) {
            writeln!(s, "ip -n {f} addr add 198.18.101.{}/24 dev fl", 10 + k)?;
        }
        writeln!(s, "ip -n {f} link set fl up")?;
        sh(&s)?;
        Ok(())
    }

    /// Send forged initiations to the server at `rate` a second for `secs`, from `addresses`
    /// source addresses of the flooder and a new source port each time: a valid header, a
    /// random Noise message with a valid mac1 (the server's public key is public: mac1 stops
    /// only those who lack it), and no mac2 (a flooder with spoofed sources never sees its
    /// cookies). Each costs the server a key exchange unless something bounds them. Returns
    /// how many were sent.
    pub fn flood(&self, rate: u64, secs: f64, addresses: usize) -> Result<u64> {
        self.flooder(rate, secs, addresses)?()
    }

    /// [`Sites::flood`], to run later (in a thread of its own while the lab goes on).
    pub fn flooder(
        &self,
        rate: u64,
        secs: f64,
        addresses: usize,
    ) -> Result<impl FnOnce() -> Result<u64> + Send + 'static> {
        use mpt_core::wire::{HeaderRepr, Kind, HEADER_LEN, INITIATION_LEN, NOISE_INITIATION_LEN};
        let ns = self.ns_flooder();
        let server = mpt_core::seal::PublicKey::parse(&self.public_key(Host::Server)?)?;
        let macs = mpt_core::seal::MacKeys::new(&server);
        Ok(move || {
            super::in_netns(&ns, move || -> Result<u64> {
                let socks: Vec<std::net::UdpSocket> = (0..addresses.clamp(1, 200))
                    .map(|k| std::net::UdpSocket::bind(format!("198.18.101.{}:0", 10 + k)))
                    .collect::<std::io::Result<_>>()?;
                let mut rng = mpt_core::rng::Rng::new(7);
                let mut d = vec![0u8; INITIATION_LEN];
                let start = Instant::now();
                let mut sent = 0u64;
                while start.elapsed().as_secs_f64() < secs {
                    let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                    while sent < due {
                        HeaderRepr {
                            kind: Kind::Initiation,
                            path: mpt_core::PathId(0),
                            path_seq: 0,
                            session: 0,
                            seq: 0,
                            timestamp: 0,
                        }
                        .emit(&mut d);
                        let noise_end = HEADER_LEN + NOISE_INITIATION_LEN;
                        rng.fill(&mut d[HEADER_LEN..noise_end]);
                        let mac1 = macs.mac1(&d[HEADER_LEN..noise_end]);
                        d[noise_end..noise_end + 16].copy_from_slice(&mac1);
                        let s = &socks[(sent as usize) % socks.len()];
                        let _ = s.send_to(&d, format!("198.18.101.1:{PORT}"));
                        sent += 1;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(sent)
            })?
        })
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

    fn key_file(&self, h: Host) -> Result<PathBuf> {
        super::key_file_in(&self.dir, &self.ns(h))
    }

    /// `h`'s public key (its key pair is made on first use).
    pub fn public_key(&self, h: Host) -> Result<String> {
        let text = std::fs::read_to_string(self.key_file(h)?)?;
        Ok(PrivateKey::parse(&text)?.public().encode())
    }

    pub fn control_socket(&self, h: Host) -> PathBuf {
        self.dir.join(format!("{}.sock", self.ns(h)))
    }

    fn base(&self, h: Host) -> Result<ConfigFile> {
        Ok(ConfigFile {
            tunnel: Some(TunnelFile {
                name: Some("mpt0".into()),
                address: Some(format!("{}/24", tunnel_ip(h))),
                ..TunnelFile::default()
            }),
            connection: ConnectionFile::default(),
            control: ControlFile {
                socket: Some(self.control_socket(h).display().to_string()),
                ..ControlFile::default()
            },
            security: SecurityFile {
                encryption: None,
                private_key_file: Some(self.key_file(h)?.display().to_string()),
                ..SecurityFile::default()
            },
            ..ConfigFile::default()
        })
    }

    /// The server's config: it listens, and knows the first `known` sites.
    pub fn server_config(&self) -> Result<ConfigFile> {
        let mut c = self.base(Host::Server)?;
        c.listen = vec![ListenFile {
            address: Some(format!("0.0.0.0:{PORT}")),
        }];
        for k in 0..self.known {
            let mut allowed = vec![format!("{}/32", tunnel_ip(Host::Site(k)))];
            if k == 0 {
                allowed.push(SITE0_LAN.into());
            }
            c.peer.push(PeerFile {
                name: Some(format!("site{k}")),
                public_key: Some(self.public_key(Host::Site(k))?),
                allowed: Some(allowed),
                ..PeerFile::default()
            });
        }
        Ok(c)
    }

    /// Site `k`'s config: its server by endpoint, its uplinks by interface.
    pub fn site_config(&self, k: usize) -> Result<ConfigFile> {
        let mut c = self.base(Host::Site(k))?;
        c.peer = vec![PeerFile {
            name: Some("server".into()),
            public_key: Some(self.public_key(Host::Server)?),
            endpoint: Some(format!("{SERVER}:{PORT}")),
            allowed: Some(vec!["198.19.0.0/24".into()]),
            ..PeerFile::default()
        }];
        c.path = (0..2)
            .map(|j| PathFile {
                name: Some(format!("uplink{j}")),
                interface: Some(format!("u{j}")),
                ..PathFile::default()
            })
            .collect();
        Ok(c)
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
