//! From the file as written ([`ConfigFile`]) to a validated [`Config`]: every error names the
//! file, the key and what was expected.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpt_core::seal::{Cipher, CipherChoice};
use mpt_core::{PathId, MAX_PATHS};

use super::*;

pub(super) struct Validator<'a> {
    pub(super) file: &'a Path,
}

impl Validator<'_> {
    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_owned(),
            key: key.into(),
            message: message.into(),
        }
    }

    fn int_in<T: TryFrom<i64>>(
        &self,
        key: &str,
        v: Option<i64>,
        default: T,
        lo: i64,
        hi: i64,
    ) -> Result<T, ConfigError> {
        let Some(v) = v else { return Ok(default) };
        if v < lo || v > hi {
            return Err(self.err(key, format!("{v} is out of range, expected {lo}..={hi}")));
        }
        T::try_from(v).map_err(|_| self.err(key, format!("{v} does not fit")))
    }

    pub(super) fn config(&self, raw: ConfigFile) -> Result<Config, ConfigError> {
        let raw_tunnel = raw.tunnel.ok_or_else(|| {
            self.err(
                "tunnel",
                "missing section, expected [tunnel] with name and address",
            )
        })?;
        let tunnel = self.tunnel(raw_tunnel)?;
        let explicit_scheduler = raw.connection.scheduler.clone();
        let connection = self.connection(raw.connection)?;
        let mut connection = connection;
        let listen = self.listen(raw.listen)?;
        let peers = self.peers(raw.peer)?;

        let initiating = peers.iter().find(|p| p.endpoint.is_some());
        let paths = if raw.path.is_empty() && initiating.is_none() && !listen.is_empty() {
            // a server: every path comes to its [[listen]] sockets
            Vec::new()
        } else {
            self.paths(raw.path, connection.scheduler, initiating)?
        };
        // No scheduler named: `rate` when every path has a rate (it measures better than
        // learning them), else `adaptive`.
        if explicit_scheduler.is_none()
            && !paths.is_empty()
            && paths.iter().all(|p| p.rate_bps.is_some())
        {
            connection.scheduler = SchedulerKind::Rate;
        }
        let socket = match raw.control.socket {
            Some(s) if s.trim().is_empty() => {
                return Err(self.err("control.socket", "empty, expected a filesystem path"))
            }
            Some(s) => PathBuf::from(s),
            None => Path::new(defaults::CONTROL_DIR).join(format!("{}.sock", tunnel.name)),
        };
        let security = self.security(raw.security)?;
        Ok(Config {
            tunnel,
            connection,
            listen,
            peers,
            paths,
            control: Control { socket },
            security,
        })
    }

    fn security(&self, raw: SecurityFile) -> Result<Security, ConfigError> {
        let cipher = match raw
            .encryption
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("auto") => Some(CipherChoice::Auto),
            Some("chacha20-poly1305") => Some(CipherChoice::Only(Cipher::ChaCha20Poly1305)),
            Some("aes-256-gcm") => Some(CipherChoice::Only(Cipher::Aes256Gcm)),
            Some("none") => None,
            Some(other) => {
                return Err(self.err(
                    "security.encryption",
                    format!(
                        "unknown {other:?}, expected \"auto\" (default), \"chacha20-poly1305\", \
                         \"aes-256-gcm\" or \"none\""
                    ),
                ))
            }
        };
        let private_key_file = match raw.private_key_file {
            Some(s) if s.trim().is_empty() => {
                return Err(self.err("security.private_key_file", "empty, expected a file path"))
            }
            Some(s) => self.relative(s),
            None => {
                return Err(self.err(
                    "security.private_key_file",
                    "missing: each host has a key pair; create this host's with \
                     `umask 077; mptd genkey > /etc/mptd/host.key`, name it here, and give the \
                     peer `mptd pubkey < /etc/mptd/host.key`",
                ))
            }
        };
        Ok(Security {
            cipher,
            private_key_file,
        })
    }

    /// A file named in the config: relative to the config file's directory.
    fn relative(&self, s: String) -> PathBuf {
        let p = PathBuf::from(s);
        if p.is_relative() {
            self.file.parent().unwrap_or(Path::new(".")).join(p)
        } else {
            p
        }
    }

    fn listen(&self, raw: Vec<ListenFile>) -> Result<Vec<SocketAddr>, ConfigError> {
        let mut out: Vec<SocketAddr> = Vec::with_capacity(raw.len());
        for (i, l) in raw.into_iter().enumerate() {
            let key = format!("listen[{i}].address");
            let v = l.address.ok_or_else(|| {
                self.err(
                    &key,
                    "missing, expected address:port such as \"0.0.0.0:4754\"",
                )
            })?;
            let a = SocketAddr::from_str(v.trim()).map_err(|_| {
                self.err(&key, format!("{v:?} is not address:port, expected e.g. \"0.0.0.0:4754\" or \"[::]:4754\""))
            })?;
            if a.port() == 0 {
                return Err(self.err(&key, format!("{v:?} has port 0, expected a fixed port")));
            }
            if a.ip().is_multicast() {
                return Err(self.err(&key, format!("{v:?} is not a unicast address")));
            }
            if out.contains(&a) {
                return Err(self.err(&key, format!("{a} is listed twice")));
            }
            out.push(a);
        }
        Ok(out)
    }

    fn peers(&self, raw: Vec<PeerFile>) -> Result<Vec<PeerConfig>, ConfigError> {
        if raw.is_empty() {
            return Err(self.err(
                "peer",
                "no [[peer]] given, expected at least one with name and public_key",
            ));
        }
        if raw.len() > MAX_PEERS {
            return Err(self.err(
                "peer",
                format!("{} peers given, at most {MAX_PEERS} allowed", raw.len()),
            ));
        }
        let mut peers: Vec<PeerConfig> = Vec::with_capacity(raw.len());
        for (i, r) in raw.into_iter().enumerate() {
            let key = |k: &str| format!("peer[{i}].{k}");
            let name = r
                .name
                .ok_or_else(|| self.err(key("name"), "missing, expected a short unique name"))?;
            if name.trim().is_empty() || name.len() > 32 {
                return Err(self.err(key("name"), "expected 1 to 32 characters"));
            }
            if let Some(j) = peers.iter().position(|p| p.name == name) {
                return Err(self.err(
                    key("name"),
                    format!("{name:?} is already the name of peer[{j}]"),
                ));
            }
            let text = r.public_key.ok_or_else(|| {
                self.err(
                    key("public_key"),
                    "missing, expected the peer's public key (`mptd pubkey < its.key` prints it)",
                )
            })?;
            let public_key = PublicKey::parse(&text).map_err(|e| {
                self.err(
                    key("public_key"),
                    format!("{e}, expected the base64 text `mptd pubkey` prints"),
                )
            })?;
            if let Some(j) = peers.iter().position(|p| p.public_key == public_key) {
                return Err(self.err(
                    key("public_key"),
                    format!(
                        "already the key of peer[{j}] ({:?}): one key, one peer",
                        peers[j].name
                    ),
                ));
            }
            let endpoint = r
                .endpoint
                .map(|e| self.host_port(&key("endpoint"), &e))
                .transpose()?;
            let mut allowed = Vec::new();
            for (j, a) in r.allowed.unwrap_or_default().iter().enumerate() {
                let net = IpNet::from_str(a.trim()).map_err(|_| {
                    self.err(
                        format!("peer[{i}].allowed[{j}]"),
                        format!("{a:?} is not a prefix, expected e.g. \"10.99.0.0/24\""),
                    )
                })?;
                let net = net.trunc();
                if let Some(k) = peers.iter().position(|p| p.allowed.contains(&net)) {
                    return Err(self.err(
                        format!("peer[{i}].allowed[{j}]"),
                        format!(
                            "{net} is already allowed to peer[{k}] ({:?}): a prefix routes to one peer",
                            peers[k].name
                        ),
                    ));
                }
                allowed.push(net);
            }
            let preshared_key_file = match r.preshared_key_file {
                Some(s) if s.trim().is_empty() => {
                    return Err(self.err(key("preshared_key_file"), "empty, expected a file path"))
                }
                s => s.map(|s| self.relative(s)),
            };
            peers.push(PeerConfig {
                name,
                public_key,
                endpoint,
                allowed,
                preshared_key_file,
            });
        }
        Ok(peers)
    }

    /// `host:port`, `address:port` or `[v6 address]:port`.
    fn host_port(&self, key: &str, v: &str) -> Result<HostPort, ConfigError> {
        let bad = || {
            self.err(
                key,
                format!("{v:?} is not host:port, expected e.g. \"vps.example.net:4754\", \"198.18.0.1:4754\" or \"[2001:db8::1]:4754\""),
            )
        };
        let v = v.trim();
        let (host, port) = if let Some(rest) = v.strip_prefix('[') {
            let (h, p) = rest.split_once("]:").ok_or_else(bad)?;
            (h, p)
        } else {
            let (h, p) = v.rsplit_once(':').ok_or_else(bad)?;
            if h.contains(':') {
                return Err(bad());
            }
            (h, p)
        };
        let port: u16 = port.parse().map_err(|_| bad())?;
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
        if !host_ok {
            return Err(bad());
        }
        if port == 0 {
            return Err(self.err(key, format!("{v:?} has port 0, expected a fixed port")));
        }
        Ok(HostPort {
            host: host.to_owned(),
            port,
        })
    }

    fn tunnel(&self, raw: TunnelFile) -> Result<Tunnel, ConfigError> {
        let name = raw.name.ok_or_else(|| {
            self.err(
                "tunnel.name",
                "missing, expected an interface name such as \"tun0\"",
            )
        })?;
        self.ifname("tunnel.name", &name)?;
        let (key, list) = match (raw.address, raw.addresses) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    "tunnel.address",
                    "give either address or addresses, not both",
                ))
            }
            (Some(a), None) => ("tunnel.address", vec![a]),
            (None, Some(list)) if !list.is_empty() => ("tunnel.addresses", list),
            _ => {
                return Err(self.err(
                    "tunnel.address",
                    "missing, expected an address with prefix length such as \"198.19.0.1/24\"",
                ))
            }
        };
        let mut addresses = Vec::with_capacity(list.len());
        for (i, a) in list.iter().enumerate() {
            let k = if key == "tunnel.address" {
                key.to_owned()
            } else {
                format!("{key}[{i}]")
            };
            let net = IpNet::from_str(a.trim()).map_err(|_| {
                self.err(&k, format!("{a:?} is not an address with prefix length such as \"198.19.0.1/24\" or \"2001:db8::1/64\""))
            })?;
            let ip = net.addr();
            if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
                return Err(self.err(&k, format!("{a:?} is not a usable unicast address")));
            }
            if addresses.contains(&net) {
                return Err(self.err(&k, format!("{a:?} is listed twice")));
            }
            addresses.push(net);
        }
        let has_v6 = addresses.iter().any(|n| matches!(n, IpNet::V6(_)));
        let min_mtu = if has_v6 { 1280 } else { 576 };
        let mtu = self.int_in("tunnel.mtu", raw.mtu, defaults::MTU, min_mtu, 65_000)?;
        let queues = self.int_in(
            "tunnel.queues",
            raw.queues,
            defaults::QUEUES,
            1,
            MAX_QUEUES as i64,
        )?;
        Ok(Tunnel {
            name,
            addresses,
            mtu,
            queues,
            routes: raw.routes.unwrap_or(true),
        })
    }

    fn connection(&self, raw: ConnectionFile) -> Result<Connection, ConfigError> {
        let scheduler = match raw.scheduler {
            None => SchedulerKind::Adaptive,
            Some(s) => s
                .parse()
                .map_err(|m: String| self.err("connection.scheduler", m))?,
        };
        let reorder_window = self.int_in(
            "connection.reorder_window",
            raw.reorder_window,
            defaults::REORDER_WINDOW,
            0,
            MAX_REORDER_WINDOW as i64,
        )?;
        let ms = |key, v, default, lo, hi| -> Result<Duration, ConfigError> {
            Ok(Duration::from_millis(self.int_in(key, v, default, lo, hi)?))
        };
        let reorder_timeout = ms(
            "connection.reorder_timeout_ms",
            raw.reorder_timeout_ms,
            defaults::REORDER_TIMEOUT_MS,
            1,
            10_000,
        )?;
        let keepalive = ms(
            "connection.keepalive_ms",
            raw.keepalive_ms,
            defaults::KEEPALIVE_MS,
            10,
            60_000,
        )?;
        let dead = ms(
            "connection.dead_ms",
            raw.dead_ms,
            defaults::DEAD_MS,
            20,
            600_000,
        )?;
        if dead < keepalive * 2 {
            return Err(self.err(
                "connection.dead_ms",
                format!(
                    "{} ms is too short, expected at least twice keepalive_ms ({} ms)",
                    dead.as_millis(),
                    keepalive.as_millis() * 2
                ),
            ));
        }
        Ok(Connection {
            scheduler,
            reorder_window,
            reorder_timeout,
            keepalive,
            dead,
        })
    }

    fn paths(
        &self,
        raw: Vec<PathFile>,
        scheduler: SchedulerKind,
        peer: Option<&PeerConfig>,
    ) -> Result<Vec<PathConfig>, ConfigError> {
        if raw.is_empty() {
            return Err(self.err(
                "path",
                "no [[path]] given, expected 1 to 64 (a host that only waits for its peers may \
                 have [[listen]] sockets instead)",
            ));
        }
        if raw.len() > MAX_PATHS {
            return Err(self.err(
                "path",
                format!("{} paths given, at most {MAX_PATHS} allowed", raw.len()),
            ));
        }
        let mut paths: Vec<PathConfig> = Vec::with_capacity(raw.len());
        for (i, r) in raw.into_iter().enumerate() {
            let key = |k: &str| format!("path[{i}].{k}");
            let name = r
                .name
                .ok_or_else(|| self.err(key("name"), "missing, expected a short unique name"))?;
            if name.trim().is_empty() || name.len() > 32 {
                return Err(self.err(key("name"), "expected 1 to 32 characters"));
            }
            if let Some(other) = paths.iter().find(|p| p.name == name) {
                return Err(self.err(
                    key("name"),
                    format!("{name:?} is already the name of path[{}]", other.id),
                ));
            }
            if let Some(ifname) = &r.interface {
                self.ifname(&key("interface"), ifname)?;
            }
            let remote = r
                .remote
                .map(|v| self.socket_addr(&key("remote"), Some(v)))
                .transpose()?;
            let local_given = r.local.is_some();
            let local = match r.local {
                Some(v) => self.socket_addr(&key("local"), Some(v))?,
                None if r.interface.is_none() => {
                    return Err(self.err(
                        key("local"),
                        "missing, expected the local address:port to bind, or an interface \
                         to leave through",
                    ))
                }
                // whatever address the interface has, of the remote's family
                None => {
                    let v6 = remote.map(|r| r.is_ipv6()).or_else(|| {
                        let e = peer?.endpoint.as_ref()?;
                        e.host.parse::<IpAddr>().ok().map(|a| a.is_ipv6())
                    });
                    let any: IpAddr = if v6 == Some(true) {
                        std::net::Ipv6Addr::UNSPECIFIED.into()
                    } else {
                        std::net::Ipv4Addr::UNSPECIFIED.into()
                    };
                    SocketAddr::new(any, 0)
                }
            };
            if let Some(remote) = remote {
                if local.is_ipv4() != remote.is_ipv4() {
                    return Err(self.err(
                        key("remote"),
                        format!("{remote} is not of the same address family as local {local}"),
                    ));
                }
            }
            if remote.is_none() && peer.is_none() && !local_given {
                return Err(self.err(
                    key("local"),
                    "missing: with no remote and no peer endpoint, the peer comes to us, so \
                     this path needs a fixed local address:port to be found at",
                ));
            }
            if let Some(other) = paths.iter().find(|p| p.local == local && local.port() != 0) {
                return Err(self.err(
                    key("local"),
                    format!(
                        "{local} is already the local address of path[{}] ({:?})",
                        other.id, other.name
                    ),
                ));
            }
            let weight = self.int_in(&key("weight"), r.weight, 1, 1, i64::from(MAX_WEIGHT))?;
            let rate_bps = r.rate.map(|v| self.rate(&key("rate"), v)).transpose()?;
            if scheduler == SchedulerKind::Rate && rate_bps.is_none() {
                return Err(self.err(
                    key("rate"),
                    "missing, required by scheduler = \"rate\" (e.g. rate = \"20mbit\")",
                ));
            }
            paths.push(PathConfig {
                id: PathId(i as u8),
                name,
                interface: r.interface,
                local,
                remote,
                weight,
                rate_bps,
                backup: r.backup.unwrap_or(false),
            });
        }
        if paths.iter().all(|p| p.backup) {
            return Err(self.err(
                "path",
                "every path is backup = true, expected at least one regular path",
            ));
        }
        Ok(paths)
    }

    fn socket_addr(&self, key: &str, v: Option<String>) -> Result<SocketAddr, ConfigError> {
        let v = v.ok_or_else(|| self.err(key, "missing, expected address:port such as \"198.18.1.1:4754\" or \"[2001:db8::1]:4754\""))?;
        let a = SocketAddr::from_str(v.trim()).map_err(|_| {
            self.err(key, format!("{v:?} is not address:port, expected e.g. \"198.18.1.1:4754\" or \"[2001:db8::1]:4754\""))
        })?;
        if a.port() == 0 {
            return Err(self.err(key, format!("{v:?} has port 0, expected a fixed port")));
        }
        let ip: IpAddr = a.ip();
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(self.err(key, format!("{v:?} is not a unicast address")));
        }
        Ok(a)
    }

    fn ifname(&self, key: &str, name: &str) -> Result<(), ConfigError> {
        let ok = !name.is_empty()
            && name.len() <= 15
            && name != "."
            && name != ".."
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':');
        if ok {
            Ok(())
        } else {
            Err(self.err(key, format!("{name:?} is not a valid interface name, expected 1 to 15 characters without '/', ':' or spaces")))
        }
    }

    fn rate(&self, key: &str, v: RateFile) -> Result<u64, ConfigError> {
        let bps = match v {
            RateFile::Bits(b) => u64::try_from(b).ok(),
            RateFile::Text(t) => parse_rate(&t),
        };
        match bps {
            Some(b) if (1_000..=1_000_000_000_000).contains(&b) => Ok(b),
            _ => Err(self.err(key, "expected a rate between 1kbit and 1000gbit, such as \"20mbit\", \"128kbit\" or a number of bits per second")),
        }
    }
}

/// Parse `"20mbit"`, `"128kbit"`, `"1.5gbit"`, `"64000bit"` or `"64000"` into bits per second.
pub fn parse_rate(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor = match unit.trim() {
        "" | "bit" | "bps" => 1.0,
        "kbit" | "k" => 1e3,
        "mbit" | "m" => 1e6,
        "gbit" | "g" => 1e9,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    let bps = n * factor;
    (1.0..1e18).contains(&bps).then(|| bps.round() as u64)
}
