//! The daemon's configuration: TOML parsed into raw structs, then validated into the types
//! below. Every error names the file, the key and what was expected.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use mpt_core::seal::{Cipher, CipherChoice, Psk};
use mpt_core::{PathId, MAX_PATHS};
pub use mpt_sched::SchedulerKind;

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub tunnel: Tunnel,
    pub connection: Connection,
    /// In file order; a path's [`PathId`] is its index here.
    pub paths: Vec<PathConfig>,
    pub control: Control,
    pub security: Security,
}

/// `[security]`: authentication and encryption of every datagram.
#[derive(Debug, Clone, PartialEq)]
pub struct Security {
    /// `None`: datagrams travel in the clear and unauthenticated (`encryption = "none"`).
    pub cipher: Option<CipherChoice>,
    /// The pre-shared key file (relative paths are resolved against the config file's
    /// directory); always set when `cipher` is.
    pub key_file: Option<PathBuf>,
}

impl Security {
    /// Read the pre-shared key. Refuses a file that group or others may read, or that does not
    /// hold base64 of 32 bytes. `config` is the config file, for the message.
    pub fn load_key(&self, config: &Path) -> Result<Option<Psk>, ConfigError> {
        let Some(file) = &self.key_file else {
            return Ok(None);
        };
        let err = |message: String| ConfigError::Invalid {
            file: config.to_owned(),
            key: "security.key_file".into(),
            message,
        };
        let meta = std::fs::metadata(file)
            .map_err(|e| err(format!("cannot read {}: {e}", file.display())))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(err(format!(
                    "{} is readable by group or others (mode {mode:04o}), expected 0600 or \
                     stricter: chmod 600 {}",
                    file.display(),
                    file.display()
                )));
            }
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| err(format!("cannot read {}: {e}", file.display())))?;
        Psk::parse(&text).map(Some).map_err(|e| {
            err(format!(
                "{}: {e}; `mptd genkey` writes a valid key",
                file.display()
            ))
        })
    }
}

/// `[tunnel]`: the TUN interface.
#[derive(Debug, Clone, PartialEq)]
pub struct Tunnel {
    pub name: String,
    /// Addresses with prefix length, IPv4 and/or IPv6.
    pub addresses: Vec<IpNet>,
    pub mtu: u16,
    /// TUN queues, each read by its own task (multi-queue TUN: the kernel spreads flows over
    /// them, so that hosts with more cores read the device in parallel).
    pub queues: usize,
}

/// `[connection]`: how packets are spread and put back in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    pub scheduler: SchedulerKind,
    /// Most packets the resequencer holds; 0 delivers without resequencing.
    pub reorder_window: usize,
    /// Longest a packet waits for a missing predecessor.
    pub reorder_timeout: Duration,
    pub keepalive: Duration,
    /// A path with nothing received for this long is down.
    pub dead: Duration,
}

/// One `[[path]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    pub id: PathId,
    pub name: String,
    /// Bind the socket to this device (SO_BINDTODEVICE).
    pub interface: Option<String>,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub weight: u32,
    /// Configured rate in bits per second.
    pub rate_bps: Option<u64>,
    pub backup: bool,
}

/// `[control]`: the unix socket `mptctl` talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    pub socket: PathBuf,
}

/// A configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: {key}: {message}")]
    Invalid {
        file: PathBuf,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// The offending key (`path[1].local`), where one is known.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// Defaults, documented in `config/README.md`.
pub mod defaults {
    pub const MTU: u16 = 1400;
    /// One TUN queue: on a 2-core host the two directions already take a core each.
    pub const QUEUES: usize = 1;
    /// Packets: enough for two unshaped multi-Gbit/s paths, whose datagrams can reach their
    /// sockets milliseconds apart (`docs/results.md`, "Reorder window"). ~6 MB of receive
    /// buffers.
    pub const REORDER_WINDOW: usize = 4096;
    pub const REORDER_TIMEOUT_MS: u64 = 100;
    pub const KEEPALIVE_MS: u64 = 100;
    pub const DEAD_MS: u64 = 500;
    pub const CONTROL_DIR: &str = "/run/mptd";
}

/// Most TUN queues.
pub const MAX_QUEUES: usize = 16;
/// Largest `reorder_window`.
pub const MAX_REORDER_WINDOW: usize = 65_536;
/// Largest `weight`.
pub const MAX_WEIGHT: u32 = 10_000;

impl Config {
    /// Read and validate the configuration in `file`.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Io {
            file: file.to_owned(),
            source,
        })?;
        Config::parse(&text, file)
    }

    /// Validate configuration `text`; `file` is only used in error messages.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let raw: ConfigFile = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
            ConfigError::Syntax {
                file: file.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        Validator { file }.config(raw)
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// The configuration file as written: every key optional, nothing validated yet. Parsing
/// reads into this, and [`Config`] is validated from it; the lab writes its configs by
/// serialising one, so that they follow the same schema.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelFile>,
    #[serde(default)]
    pub connection: ConnectionFile,
    #[serde(default)]
    pub control: ControlFile,
    #[serde(default)]
    pub security: SecurityFile,
    #[serde(default)]
    pub path: Vec<PathFile>,
}

/// `[security]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_file: Option<String>,
}

/// `[tunnel]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<i64>,
}

/// `[connection]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder_window: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder_timeout_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keepalive_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_ms: Option<i64>,
}

/// One `[[path]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<bool>,
}

/// A path's `rate`: bits per second, or text such as `"20mbit"`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RateFile {
    Bits(i64),
    Text(String),
}

/// `[control]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ControlFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
}

struct Validator<'a> {
    file: &'a Path,
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

    fn config(&self, raw: ConfigFile) -> Result<Config, ConfigError> {
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
        let paths = self.paths(raw.path, connection.scheduler)?;
        // No scheduler named: `rate` when every path has a rate (it measures better than
        // learning them), else `adaptive`.
        if explicit_scheduler.is_none() && paths.iter().all(|p| p.rate_bps.is_some()) {
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
        let key_file = match raw.key_file {
            Some(s) if s.trim().is_empty() => {
                return Err(self.err("security.key_file", "empty, expected a file path"))
            }
            Some(s) => {
                let p = PathBuf::from(s);
                Some(if p.is_relative() {
                    self.file.parent().unwrap_or(Path::new(".")).join(p)
                } else {
                    p
                })
            }
            None => None,
        };
        match (cipher, key_file) {
            (Some(_), None) => Err(self.err(
                "security.key_file",
                "missing: datagrams are authenticated with a pre-shared key; create one with \
                 `mptd genkey > /etc/mptd/mpt.key && chmod 600 /etc/mptd/mpt.key` and name it \
                 here, or set encryption = \"none\" to run without (not recommended)",
            )),
            (None, _) => Ok(Security {
                cipher: None,
                key_file: None,
            }),
            (cipher, key_file) => Ok(Security { cipher, key_file }),
        }
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
    ) -> Result<Vec<PathConfig>, ConfigError> {
        if raw.is_empty() {
            return Err(self.err("path", "no [[path]] given, expected 1 to 64"));
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
            let local = self.socket_addr(&key("local"), r.local)?;
            let remote = self.socket_addr(&key("remote"), r.remote)?;
            if local.is_ipv4() != remote.is_ipv4() {
                return Err(self.err(
                    key("remote"),
                    format!("{remote} is not of the same address family as local {local}"),
                ));
            }
            if let Some(other) = paths.iter().find(|p| p.local == local) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[tunnel]
name = "tun0"
address = "198.19.0.1/24"
mtu = 1400

[connection]
scheduler = "rate"
reorder_window = 512
reorder_timeout_ms = 100
keepalive_ms = 100
dead_ms = 500

[security]
key_file = "keys/mpt.key"

[[path]]
name = "p1"
interface = "eth1"
local = "198.18.1.1:4754"
remote = "198.18.1.2:4754"
weight = 2
rate = "20mbit"

[[path]]
name = "p2"
local = "198.18.2.1:4754"
remote = "198.18.2.2:4754"
rate = 10000000
backup = true
"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.toml"))
    }

    fn invalid_key(text: &str) -> String {
        match parse(text) {
            Err(ConfigError::Invalid { key, .. }) => key,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn a_config_file_written_by_serialising_parses_back() {
        let file = ConfigFile {
            tunnel: Some(TunnelFile {
                name: Some("mpt0".into()),
                addresses: Some(vec!["198.19.0.1/24".into(), "2001:db8:19::1/64".into()]),
                mtu: Some(1400),
                ..TunnelFile::default()
            }),
            connection: ConnectionFile {
                scheduler: Some("wrr".into()),
                keepalive_ms: Some(50),
                ..ConnectionFile::default()
            },
            security: SecurityFile {
                encryption: Some("none".into()),
                key_file: None,
            },
            path: vec![PathFile {
                name: Some("p0".into()),
                local: Some("198.18.1.1:4754".into()),
                remote: Some("198.18.1.2:4754".into()),
                weight: Some(2),
                rate: Some(RateFile::Bits(20_000_000)),
                ..PathFile::default()
            }],
            ..ConfigFile::default()
        };
        let text = toml::to_string(&file).expect("serialises");
        let c = parse(&text).expect("the serialised file is valid");
        assert_eq!(c.tunnel.mtu, 1400);
        assert_eq!(c.tunnel.addresses.len(), 2);
        assert_eq!(c.connection.scheduler, SchedulerKind::WeightedRoundRobin);
        assert_eq!(c.connection.keepalive, Duration::from_millis(50));
        assert_eq!(c.security.cipher, None);
        assert_eq!(
            (c.paths[0].weight, c.paths[0].rate_bps),
            (2, Some(20_000_000))
        );
    }

    #[test]
    fn parses_the_documented_example() {
        let c = parse(GOOD).expect("valid");
        assert_eq!(c.tunnel.name, "tun0");
        assert_eq!(
            c.tunnel.addresses,
            vec!["198.19.0.1/24".parse::<IpNet>().unwrap()]
        );
        assert_eq!(c.connection.scheduler, SchedulerKind::Rate);
        assert_eq!(c.connection.dead, Duration::from_millis(500));
        assert_eq!(c.paths.len(), 2);
        assert_eq!(c.paths[0].id, PathId(0));
        assert_eq!(c.paths[0].interface.as_deref(), Some("eth1"));
        assert_eq!(c.paths[0].weight, 2);
        assert_eq!(c.paths[0].rate_bps, Some(20_000_000));
        assert_eq!(c.paths[1].weight, 1);
        assert!(c.paths[1].backup);
        assert_eq!(c.control.socket, PathBuf::from("/run/mptd/tun0.sock"));
        assert_eq!(c.security.cipher, Some(CipherChoice::Auto));
        // relative to the config file's directory
        assert_eq!(c.security.key_file, Some(PathBuf::from("keys/mpt.key")));
        let c = Config::parse(GOOD, Path::new("/etc/mptd/a.toml")).expect("valid");
        assert_eq!(
            c.security.key_file,
            Some(PathBuf::from("/etc/mptd/keys/mpt.key"))
        );
    }

    #[test]
    fn security_needs_a_key_or_an_explicit_none() {
        let no_key = GOOD.replace("key_file = \"keys/mpt.key\"\n", "");
        assert_eq!(invalid_key(&no_key), "security.key_file");
        let e = parse(&no_key).unwrap_err().to_string();
        assert!(
            e.contains("mptd genkey") && e.contains("encryption = \"none\""),
            "{e}"
        );
        let none = no_key.replace("[security]\n", "[security]\nencryption = \"none\"\n");
        let c = parse(&none).expect("valid without a key");
        assert_eq!((c.security.cipher, c.security.key_file), (None, None));
        let aes = GOOD.replace("[security]\n", "[security]\nencryption = \"AES-256-GCM\"\n");
        assert_eq!(
            parse(&aes).expect("valid").security.cipher,
            Some(CipherChoice::Only(Cipher::Aes256Gcm))
        );
        for (name, choice) in [
            ("auto", CipherChoice::Auto),
            (
                "chacha20-poly1305",
                CipherChoice::Only(Cipher::ChaCha20Poly1305),
            ),
        ] {
            let text = GOOD.replace(
                "[security]\n",
                &format!("[security]\nencryption = \"{name}\"\n"),
            );
            assert_eq!(parse(&text).expect("valid").security.cipher, Some(choice));
        }
        let bad = GOOD.replace("[security]\n", "[security]\nencryption = \"rot13\"\n");
        assert_eq!(invalid_key(&bad), "security.encryption");
        let empty = GOOD.replace("keys/mpt.key", " ");
        assert_eq!(invalid_key(&empty), "security.key_file");
    }

    #[test]
    fn key_file_permissions_and_contents_are_checked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mpt-key-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("keys")).expect("dir");
        let cfg_file = dir.join("a.toml");
        let key_file = dir.join("keys/mpt.key");
        let c = Config::parse(GOOD, &cfg_file).expect("valid");
        let load = || c.security.load_key(&cfg_file).map_err(|e| e.to_string());
        assert!(load().unwrap_err().contains("cannot read"));
        let psk = Psk::from_bytes([3; 32]);
        std::fs::write(&key_file, psk.encode() + "\n").expect("write");
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = load().unwrap_err();
        assert!(
            e.contains("a.toml") && e.contains("security.key_file") && e.contains("0644"),
            "{e}"
        );
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(load(), Ok(Some(psk)));
        std::fs::write(&key_file, "c2hvcnQ=").expect("write");
        assert!(load().unwrap_err().contains("expected 32"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn shipped_example_configs_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("config/ exists") {
            let p = entry.expect("dir entry").path();
            if p.extension().is_some_and(|e| e == "toml") {
                Config::load(&p).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 2, "expected the example pair in config/");
    }

    #[test]
    fn defaults_apply() {
        let c = parse(
            "[tunnel]\nname='t'\naddresses=['198.19.0.1/24','2001:db8::1/64']\n[security]\nkey_file='k'\n[[path]]\nname='a'\nlocal='198.18.1.1:1'\nremote='198.18.1.2:1'\n",
        )
        .expect("valid: adaptive needs no rate");
        assert_eq!(c.tunnel.mtu, defaults::MTU);
        assert_eq!(c.tunnel.queues, defaults::QUEUES);
        assert_eq!(c.tunnel.addresses.len(), 2);
        assert_eq!(c.connection.reorder_window, defaults::REORDER_WINDOW);
        assert_eq!(c.connection.scheduler, SchedulerKind::Adaptive);
        assert_eq!(c.paths[0].rate_bps, None);
        // With every rate given and no scheduler named: rate.
        let text = GOOD.replace("scheduler = \"rate\"\n", "");
        assert_eq!(
            parse(&text).expect("valid").connection.scheduler,
            SchedulerKind::Rate
        );
    }

    #[test]
    fn unknown_key_is_refused_with_its_name_and_line() {
        let text = GOOD.replace("mtu = 1400", "mtu = 1400\ncolour = \"blue\"");
        let e = parse(&text).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("test.toml:6:"), "{msg}");
        assert!(msg.contains("colour"), "{msg}");
    }

    #[test]
    fn invalid_values_name_their_key() {
        let cases = [
            ("198.19.0.1/24", "198.19.0.1", "tunnel.address"),
            ("198.19.0.1/24", "300.1.1.1/24", "tunnel.address"),
            ("mtu = 1400", "mtu = 100", "tunnel.mtu"),
            ("mtu = 1400", "mtu = 1400\nqueues = 0", "tunnel.queues"),
            ("\"rate\"\n", "\"fastest\"\n", "connection.scheduler"),
            (
                "reorder_window = 512",
                "reorder_window = -1",
                "connection.reorder_window",
            ),
            ("dead_ms = 500", "dead_ms = 150", "connection.dead_ms"),
            (
                "keepalive_ms = 100",
                "keepalive_ms = 0",
                "connection.keepalive_ms",
            ),
            ("name = \"p2\"", "name = \"p1\"", "path[1].name"),
            ("198.18.2.1:4754", "198.18.1.1:4754", "path[1].local"),
            (
                "local = \"198.18.1.1:4754\"",
                "local = \"198.18.1.1\"",
                "path[0].local",
            ),
            (
                "remote = \"198.18.1.2:4754\"",
                "remote = \"[2001:db8::2]:4754\"",
                "path[0].remote",
            ),
            (
                "remote = \"198.18.1.2:4754\"",
                "remote = \"198.18.1.2:0\"",
                "path[0].remote",
            ),
            ("weight = 2", "weight = 0", "path[0].weight"),
            (
                "rate = \"20mbit\"",
                "rate = \"20 furlongs\"",
                "path[0].rate",
            ),
            ("rate = \"20mbit\"", "rate = 0", "path[0].rate"),
            ("rate = \"20mbit\"", "", "path[0].rate"),
            (
                "interface = \"eth1\"",
                "interface = \"a/b\"",
                "path[0].interface",
            ),
            (
                "name = \"tun0\"",
                "name = \"a-very-long-interface-name\"",
                "tunnel.name",
            ),
            (
                "backup = true",
                "backup = true\n[control]\nsocket = \"\"",
                "control.socket",
            ),
        ];
        for (from, to, key) in cases {
            assert!(GOOD.contains(from), "{from}");
            let text = GOOD.replacen(from, to, 1);
            assert_eq!(invalid_key(&text), key, "replacing {from:?} with {to:?}");
        }
    }

    #[test]
    fn structural_errors() {
        assert_eq!(invalid_key("[[path]]\nname='a'\n"), "tunnel");
        assert_eq!(
            invalid_key("[tunnel]\nname='t'\naddress='198.19.0.1/24'\n"),
            "path"
        );
        let all_backup = GOOD.replace("weight = 2", "weight = 2\nbackup = true");
        assert_eq!(invalid_key(&all_backup), "path");
        let mut many = String::from(
            "[tunnel]\nname='t'\naddress='198.19.0.1/24'\n[connection]\nscheduler='rr'\n",
        );
        for i in 0..65 {
            many += &format!(
                "[[path]]\nname='p{i}'\nlocal='198.18.1.1:{}'\nremote='198.18.1.2:1'\n",
                i + 1
            );
        }
        assert_eq!(invalid_key(&many), "path");
        // A wrong type is a syntax-level error that still names the key.
        let e = parse(&GOOD.replace("backup = true", "backup = \"yes\"")).unwrap_err();
        assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
        let e = Config::load(Path::new("/nonexistent/mpt.toml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/mpt.toml: cannot read"),
            "{e}"
        );
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("20mbit"), Some(20_000_000));
        assert_eq!(parse_rate("128kbit"), Some(128_000));
        assert_eq!(parse_rate("1.5Gbit"), Some(1_500_000_000));
        assert_eq!(parse_rate("64000"), Some(64_000));
        assert_eq!(parse_rate("mbit"), None);
        assert_eq!(parse_rate("-5mbit"), None);
        assert_eq!(parse_rate("1e99mbit"), None);
    }

    #[test]
    fn scheduler_names_are_case_insensitive() {
        assert_eq!(
            "WRR".parse::<SchedulerKind>(),
            Ok(SchedulerKind::WeightedRoundRobin)
        );
        assert_eq!("Rate".parse::<SchedulerKind>(), Ok(SchedulerKind::Rate));
        assert!("bogus".parse::<SchedulerKind>().is_err());
    }
}
