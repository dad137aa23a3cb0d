//! mptd in the lab: its configuration (written in the daemon's own file schema), starting and
//! stopping the daemons, and reading their status.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::*;
use ::mptd::config::{
    ConfigFile, ConnectionFile, ControlFile, PathFile, PeerFile, RateFile, SecurityFile, TunnelFile,
};

/// Options for the daemons' configuration files.
#[derive(Debug, Clone)]
pub struct TunnelOpts {
    pub scheduler: String,
    pub reorder_window: usize,
    pub reorder_timeout_ms: u64,
    pub keepalive_ms: u64,
    pub dead_ms: u64,
    /// `connection.idle_keepalive_ms` (`None`: the daemon's default; 0: paths never idle).
    pub idle_keepalive_ms: Option<u64>,
    /// Each path's `priority` (its tier, 1 the highest), by index; `None`: all 1.
    pub priorities: Option<Vec<u8>>,
    pub mtu: u16,
    /// `tunnel.queues`.
    pub queues: usize,
    /// Write each path's `rate` and `weight` (false: leave them for `adaptive` to learn).
    pub configure_rates: bool,
    /// `[security] encryption`: "auto", "chacha20-poly1305", "aes-256-gcm" or "none". Each
    /// side has its key pair in the lab's directory; A knows where B is and starts the
    /// handshakes, as a site does with its server.
    pub encryption: String,
    /// The mptd binary to run (default [`mptd_bin`]): `mpt-lab bench compare` runs several.
    pub mptd: Option<PathBuf>,
    /// `[security] rekey_after_s` (`None`: the default, 120 s).
    pub rekey_after_s: Option<u64>,
    /// `[hooks]` of side A's daemon (B has none).
    pub hooks_on_a: Option<::mptd::config::HooksFile>,
    /// `[control] metrics` of side A's daemon (B has none).
    pub metrics_on_a: Option<String>,
    /// `[control] web` and `web_token` of side A's daemon (B has none).
    pub web_on_a: Option<String>,
    pub web_token_on_a: Option<String>,
    /// The lab's links the `[[path]]`s are on, in order (`None`: all of them); the path on
    /// link `i` is named `p<i>`.
    pub links: Option<Vec<usize>>,
    /// `[connection] bundle` (`None`: the default, on).
    pub bundle: Option<bool>,
    /// `connection.resend`; `None`: the default (on).
    pub resend: Option<bool>,
    /// `connection.parity`; `None`: the default (on).
    pub parity: Option<bool>,
    /// `connection.equalise`; `None`: the default (on).
    pub equalise: Option<bool>,
    /// `connection.compress`; `None`: the default (on).
    pub compress: Option<bool>,
    /// `connection.pace`; `None`: the default (on under `rate` and `adaptive`, else off).
    pub pace: Option<bool>,
    /// `[[class]]` entries, on both ends.
    pub classes: Vec<mptd::config::ClassFile>,
    /// Side A's paths' data budgets: (link index, `budget` such as "5 MB",
    /// `budget_exhausted`: `None` for the default, backup).
    pub budgets_on_a: Vec<(usize, String, Option<String>)>,
    /// `tunnel.state_dir` of side A's daemon (B has none).
    pub state_dir_on_a: Option<String>,
    /// The links whose paths are `transport = "tcp"` on both sides (A dials, B listens).
    pub tcp_links: Vec<usize>,
    /// The links whose path on B takes TCP as well (`transport = "tcp"` there), while A's is
    /// its default (`auto`: UDP while UDP answers).
    pub tcp_on_b: Vec<usize>,
    /// The links whose paths are `transport = "tls"` on both sides (A dials, B listens), on
    /// port 443 at both ends (the others are on 4754).
    pub tls_links: Vec<usize>,
}

impl TunnelOpts {
    /// These options with the largest tunnel MTU the lab's 1500-byte links carry: 1500 minus
    /// the outer IPv4/UDP header (28), mptd's header (16) and, when sealed, counter and tag (20).
    pub fn with_full_mtu(self) -> Self {
        let mtu = 1500 - mpt_core::wire::Overhead::new(self.encryption != "none", false).ip();
        TunnelOpts {
            mtu: mtu as u16,
            ..self
        }
    }
}

impl TunnelOpts {
    /// The port of the paths on link `i`, at both ends: 443 for a TLS link, else 4754.
    pub fn port(&self, i: usize) -> u16 {
        if self.tls_links.contains(&i) {
            443
        } else {
            4754
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
            idle_keepalive_ms: None,
            priorities: None,
            mtu: mptd::config::defaults::MTU,
            queues: 1,
            configure_rates: true,
            encryption: "chacha20-poly1305".into(),
            mptd: None,
            rekey_after_s: None,
            hooks_on_a: None,
            metrics_on_a: None,
            web_on_a: None,
            web_token_on_a: None,
            links: None,
            bundle: None,
            resend: None,
            parity: None,
            equalise: None,
            compress: None,
            pace: None,
            classes: Vec::new(),
            budgets_on_a: Vec::new(),
            state_dir_on_a: None,
            tcp_links: Vec::new(),
            tcp_on_b: Vec::new(),
            tls_links: Vec::new(),
        }
    }
}

/// The private key file `dir/<name>.key` (mode 0600), with a new key written on first use.
pub fn key_file_in(dir: &std::path::Path, name: &str) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(format!("{name}.key"));
    if !path.exists() {
        let key = mpt_core::seal::PrivateKey::generate()?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        writeln!(f, "{}", key.encode())?;
    }
    Ok(path)
}

/// The mptd binary: `$MPTD_BIN`, or the one built next to this program.
pub fn mptd_bin() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("MPTD_BIN") {
        return Ok(PathBuf::from(p));
    }
    sibling_bin("mptd")
}

impl Lab {
    /// The config of `side`, in the daemon's own file schema ([`ConfigFile`]).
    pub fn config_file(&self, side: Side, o: &TunnelOpts) -> Result<ConfigFile> {
        // wrr weights in proportion to the rates, as MPT configured them
        let rate_of = |p: &LinkSpec| p.rate().unwrap_or(10_000_000_000);
        let unit = self.paths.iter().map(rate_of).fold(0, gcd).max(1);
        let security = SecurityFile {
            encryption: Some(o.encryption.clone()),
            private_key_file: Some(self.key_file(side)?.display().to_string()),
            rekey_after_s: o.rekey_after_s.map(|s| s as i64),
        };
        let peer = PeerFile {
            name: Some(self.ns(side.other())),
            public_key: Some(self.private_key(side.other())?.public().encode()),
            endpoint: (side == Side::A).then(|| format!("{}:4754", self.path_addr(Side::B, 0))),
            allowed: Some(vec![
                format!("{}/32", tunnel_addr(side.other())),
                format!("2001:db8:19::{}/128", side.other().octet()),
            ]),
            preshared_key_file: None,
            priority: None,
        };
        Ok(ConfigFile {
            tunnel: Some(TunnelFile {
                name: Some("mpt0".into()),
                addresses: Some(vec![
                    format!("{}/24", tunnel_addr(side)),
                    format!("2001:db8:19::{}/64", side.octet()),
                ]),
                mtu: Some(i64::from(o.mtu)),
                queues: Some(o.queues as i64),
                state_dir: o.state_dir_on_a.clone().filter(|_| side == Side::A),
                ..TunnelFile::default()
            }),
            connection: ConnectionFile {
                scheduler: Some(o.scheduler.clone()),
                reorder_window: Some(o.reorder_window as i64),
                reorder_timeout_ms: Some(o.reorder_timeout_ms as i64),
                keepalive_ms: Some(o.keepalive_ms as i64),
                idle_keepalive_ms: o.idle_keepalive_ms.map(|v| v as i64),
                dead_ms: Some(o.dead_ms as i64),
                bundle: o.bundle,
                resend: o.resend,
                parity: o.parity,
                equalise: o.equalise,
                compress: o.compress,
                pace: o.pace,
                default_classes: None,
            },
            control: ControlFile {
                socket: Some(self.control_socket(side).display().to_string()),
                metrics: o.metrics_on_a.clone().filter(|_| side == Side::A),
                web: o.web_on_a.clone().filter(|_| side == Side::A),
                web_token: o.web_token_on_a.clone().filter(|_| side == Side::A),
            },
            security,
            listen: Vec::new(),
            peer: vec![peer],
            path: self
                .paths
                .iter()
                .enumerate()
                .filter(|(i, _)| o.links.as_ref().is_none_or(|l| l.contains(i)))
                .map(|(i, p)| PathFile {
                    name: Some(format!("p{i}")),
                    interface: Some(Self::link(i)),
                    local: Some(format!("{}:{}", self.path_addr(side, i), o.port(i))),
                    remote: Some(format!("{}:{}", self.path_addr(side.other(), i), o.port(i))),
                    weight: o
                        .configure_rates
                        .then(|| (rate_of(p) / unit).clamp(1, 10_000) as i64),
                    rate: o.configure_rates.then(|| RateFile::Bits(rate_of(p) as i64)),
                    backup: None,
                    priority: o
                        .priorities
                        .as_ref()
                        .and_then(|t| t.get(i))
                        .map(|&t| i64::from(t)),
                    mtu: None,
                    ..self.per_path(side, o, i)
                })
                .collect(),
            hooks: o.hooks_on_a.clone().filter(|_| side == Side::A),
            class: o.classes.clone(),
        })
    }

    /// Path `i`'s budget keys on `side` ([`TunnelOpts::budgets_on_a`]) and its transport
    /// ([`TunnelOpts::tcp_links`], [`TunnelOpts::tcp_on_b`], [`TunnelOpts::tls_links`]), the
    /// rest default.
    fn per_path(&self, side: Side, o: &TunnelOpts, i: usize) -> PathFile {
        let b = o
            .budgets_on_a
            .iter()
            .find(|(k, _, _)| *k == i && side == Side::A);
        PathFile {
            budget: b.map(|(_, text, _)| ::mptd::config::BytesFile::Text(text.clone())),
            budget_exhausted: b.and_then(|(_, _, e)| e.clone()),
            transport: if o.tls_links.contains(&i) {
                Some("tls".into())
            } else {
                (o.tcp_links.contains(&i) || side == Side::B && o.tcp_on_b.contains(&i))
                    .then(|| "tcp".into())
            },
            ..PathFile::default()
        }
    }

    /// Write the config of `side` and return its path.
    pub fn write_config(&self, side: Side, o: &TunnelOpts) -> Result<PathBuf> {
        let text = toml::to_string(&self.config_file(side, o)?)?;
        let path = self.dir.join(format!("{}.toml", self.ns(side)));
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// `side`'s private key file (mode 0600), made on first use.
    pub fn key_file(&self, side: Side) -> Result<PathBuf> {
        key_file_in(&self.dir, &self.ns(side))
    }

    /// `side`'s private key (made on first use).
    pub fn private_key(&self, side: Side) -> Result<mpt_core::seal::PrivateKey> {
        let text = std::fs::read_to_string(self.key_file(side)?)?;
        Ok(mpt_core::seal::PrivateKey::parse(&text)?)
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
        let log_file = self.dir.join(format!("{name}.log"));
        let children = &mut self.children;
        let log = || std::fs::read_to_string(&log_file).unwrap_or_default();
        wait_for_control(&sock, || child_exited(children, pid), log)
            .map_err(|e| anyhow!("on {side:?}: {e:#}"))?;
        Ok(pid)
    }

    /// Stop one of the daemons this lab started (SIGTERM, then SIGKILL after 5 s) and return
    /// its exit code.
    pub fn stop_mptd(&mut self, side: Side) -> Result<Option<i32>> {
        let Some(k) = self.mptd.iter().position(|(s, _)| *s == side) else {
            bail!("no mptd running on {side:?}");
        };
        let (_, pid) = self.mptd.remove(k);
        stop_child(&mut self.children, pid)
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
}
