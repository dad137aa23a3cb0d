//! The daemon's configuration: TOML parsed into raw structs, then validated into the types
//! below. Every error names the file, the key and what was expected.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use ipnet::IpNet;

use mpt_core::seal::{CipherChoice, PrivateKey, Psk, PublicKey};
use mpt_core::PathId;
pub use mpt_sched::SchedulerKind;

mod file;
mod validate;

pub use file::{
    ClassFile, ConfigFile, ConnectionFile, ControlFile, HooksFile, ListenFile, PathFile, PeerFile,
    PortFile, ProtocolFile, RateFile, SecurityFile, TunnelFile,
};
pub use validate::parse_rate;
use validate::Validator;

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub tunnel: TunnelConfig,
    pub connection: Connection,
    /// UDP sockets that serve every path of every peer that comes to us (`[[listen]]`).
    pub listen: Vec<SocketAddr>,
    pub peers: Vec<PeerConfig>,
    /// In file order; a path's [`PathId`] is its index here.
    pub paths: Vec<PathConfig>,
    pub control: Control,
    pub security: Security,
    pub hooks: HooksConfig,
    /// The file it was read from, and its text as read (`mptctl showconf`).
    pub source: (PathBuf, String),
}

/// `[hooks]`: shell commands run when a path or a peer goes up or down (`crate::hooks`).
#[derive(Debug, Clone, PartialEq)]
pub struct HooksConfig {
    /// Run once the TUN device is configured, before the daemon is ready.
    pub up: Option<String>,
    /// Run when the daemon stops, before the TUN device goes.
    pub down: Option<String>,
    pub path_up: Option<String>,
    pub path_down: Option<String>,
    pub peer_up: Option<String>,
    pub peer_down: Option<String>,
    /// A hook still running after this is killed.
    pub timeout: Duration,
}

/// What happened, for a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// The tunnel is up (`hooks.up`).
    Up,
    /// The tunnel is about to go (`hooks.down`).
    Down,
    PathUp,
    PathDown,
    PeerUp,
    PeerDown,
}

impl HookEvent {
    /// The name in `MPTD_EVENT`, and of its `[hooks]` key.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::Up => "up",
            HookEvent::Down => "down",
            HookEvent::PathUp => "path_up",
            HookEvent::PathDown => "path_down",
            HookEvent::PeerUp => "peer_up",
            HookEvent::PeerDown => "peer_down",
        }
    }
}

/// Default of `hooks.timeout_ms`.
pub const DEFAULT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            up: None,
            down: None,
            path_up: None,
            path_down: None,
            peer_up: None,
            peer_down: None,
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }
}

impl HooksConfig {
    /// The command for `event`, if one is configured.
    pub fn command(&self, event: HookEvent) -> Option<&str> {
        use HookEvent::*;
        match event {
            Up => self.up.as_deref(),
            Down => self.down.as_deref(),
            PathUp => self.path_up.as_deref(),
            PathDown => self.path_down.as_deref(),
            PeerUp => self.peer_up.as_deref(),
            PeerDown => self.peer_down.as_deref(),
        }
    }

    /// Whether no path or peer hook is configured (`up` and `down` are not queued).
    pub fn is_empty(&self) -> bool {
        self.path_up.is_none()
            && self.path_down.is_none()
            && self.peer_up.is_none()
            && self.peer_down.is_none()
    }
}

/// `[security]`: this host's key and how data is sealed.
#[derive(Debug, Clone, PartialEq)]
pub struct Security {
    /// `None`: data travels in the clear (`encryption = "none"`); the handshake still
    /// authenticates both hosts by their keys.
    pub cipher: Option<CipherChoice>,
    /// This host's private key (relative paths are resolved against the config file's
    /// directory).
    pub private_key_file: PathBuf,
    /// An initiator renews a session's keys when they are this old (`rekey_after_s`).
    pub rekey_after: Duration,
}

/// One `[[peer]]`: a host we make a tunnel with.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerConfig {
    pub name: String,
    pub public_key: PublicKey,
    /// Where the peer listens (host name or address, and port): we start the handshakes, over
    /// our `[[path]]`s. `None`: the peer comes to us (at our `[[listen]]` sockets, or without
    /// them at our `[[path]]`s' local addresses).
    pub endpoint: Option<HostPort>,
    /// Inner source addresses accepted from the peer, and routed to it.
    pub allowed: Vec<IpNet>,
    pub preshared_key_file: Option<PathBuf>,
}

/// A host name or address, and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl HostPort {
    /// The addresses the host name resolves to now (an address resolves to itself).
    pub fn resolve(&self) -> std::io::Result<Vec<SocketAddr>> {
        use std::net::ToSocketAddrs;
        Ok((self.host.as_str(), self.port).to_socket_addrs()?.collect())
    }
}

/// The keys a configuration names, read from their files.
#[derive(Debug, Clone)]
pub struct Keys {
    pub private: PrivateKey,
    /// Per peer, in `peers` order.
    pub psks: Vec<Option<Psk>>,
}

/// Read a key file: refused when group or others may read it, or when it does not hold base64
/// of 32 bytes. `config` and `key` name the config file and its key, for the message.
fn read_key_file<T>(
    file: &Path,
    config: &Path,
    key: &str,
    parse: impl Fn(&str) -> Result<T, mpt_core::seal::KeyError>,
) -> Result<T, ConfigError> {
    let err = |message: String| ConfigError::Invalid {
        file: config.to_owned(),
        key: key.into(),
        message,
    };
    let meta =
        std::fs::metadata(file).map_err(|e| err(format!("cannot read {}: {e}", file.display())))?;
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
    parse(&text).map_err(|e| {
        err(format!(
            "{}: {e}; `mptd genkey` writes a valid key",
            file.display()
        ))
    })
}

impl Config {
    /// `peer` comes to our `[[listen]]` sockets with paths of its own (it has no `endpoint`,
    /// and we listen): its connection is made by its first initiation.
    pub fn listening(&self, peer: &PeerConfig) -> bool {
        peer.endpoint.is_none() && !self.listen.is_empty()
    }

    /// Read the keys the configuration names: this host's private key and each peer's
    /// pre-shared key. `config` is the config file, for the messages.
    pub fn load_keys(&self, config: &Path) -> Result<Keys, ConfigError> {
        let private = read_key_file(
            &self.security.private_key_file,
            config,
            "security.private_key_file",
            PrivateKey::parse,
        )?;
        let psks = self
            .peers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.preshared_key_file
                    .as_ref()
                    .map(|f| {
                        read_key_file(
                            f,
                            config,
                            &format!("peer[{i}].preshared_key_file"),
                            Psk::parse,
                        )
                    })
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        Ok(Keys { private, psks })
    }
}

/// `[tunnel]`: the TUN interface.
#[derive(Debug, Clone, PartialEq)]
pub struct TunnelConfig {
    pub name: String,
    /// Addresses with prefix length, IPv4 and/or IPv6.
    pub addresses: Vec<IpNet>,
    pub mtu: u16,
    /// TUN queues, each read by its own task (multi-queue TUN: the kernel spreads flows over
    /// them, so that hosts with more cores read the device in parallel).
    pub queues: usize,
    /// Install a route through the TUN device for every peer's `allowed` prefix...
    pub routes: bool,
    /// ...in this routing table, with this route protocol number (`ip route ... table T
    /// proto P`), so that a routing daemon can tell them apart and export them.
    pub route_table: u32,
    pub route_protocol: u8,
    /// A full tunnel (a peer allowed `0.0.0.0/0` or `::/0`) blocks the host's traffic while its
    /// peer is down and after the daemon stops, instead of letting it out of the uplinks.
    pub fail_closed: bool,
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
    /// A path without data either way is idle: a keepalive crosses it this often (`None`:
    /// never idle). See `mpt_tunnel::ConnectionConfig::idle_keepalive`.
    pub idle_keepalive: Option<Duration>,
    /// Pack small packets into one datagram while their path is busy.
    pub bundle: bool,
    /// Ask the peer to send again what a path lost, and do what it asks (`docs/protocol.md`,
    /// "Resend requests").
    pub resend: bool,
    /// Send parity on paths that lose packets, so that the peer makes a lost packet again
    /// without asking (`docs/protocol.md`, "Parity"); with `resend` only.
    pub parity: bool,
    /// Bonded data that arrives on a nearer path waits to match the farthest path up, so that
    /// a bonded flow sees one RTT (`docs/protocol.md`, "Delay equalisation").
    pub equalise: bool,
    /// Bulk TCP goes with its IP and TCP headers compressed against the last packet of its
    /// flow that went whole (`docs/protocol.md`, "Compressed headers"), to a peer of protocol
    /// version 6, with resending. Off by default: a path MTU black hole that swallows a
    /// flow's reference stalls it (README, `connection.compress`).
    pub compress: bool,
    /// Traffic classes (`[[class]]`, then the built-in ones unless
    /// `connection.default_classes = false`): the first that matches a packet decides how it
    /// is sent.
    pub classes: Vec<mpt_tunnel::ClassRule>,
}

/// One `[[path]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathConfig {
    pub id: PathId,
    pub name: String,
    /// Bind the socket to this device (SO_BINDTODEVICE).
    pub interface: Option<String>,
    /// The address and port the socket binds; unspecified (and port 0) when not configured:
    /// whatever address the interface has.
    pub local: SocketAddr,
    /// Where the peer's socket for this path is, as configured. Without it, the peer's
    /// `endpoint` (resolved at start); without that, learned from the peer's authenticated
    /// datagrams.
    pub remote: Option<SocketAddr>,
    pub weight: u32,
    /// Configured rate in bits per second.
    pub rate_bps: Option<u64>,
    pub backup: bool,
    /// Its tier, 1 the highest: lower tiers carry traffic while the higher ones are down or
    /// full.
    pub priority: u8,
    /// A cap on the path's MTU (outer IP packet bytes); discovery finds it otherwise.
    pub mtu: Option<u16>,
}

/// `[control]`: the unix socket `mptctl` talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    pub socket: PathBuf,
    /// Where Prometheus metrics are served (`GET /metrics`), if anywhere.
    pub metrics: Option<SocketAddr>,
}

/// A configuration that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {}{message}", key.as_ref().map(|k| format!("{k}: ")).unwrap_or_default())]
    Syntax {
        file: PathBuf,
        line: usize,
        column: usize,
        /// The key whose value is wrong, when the error lies in one (`connection.dead_ms`).
        key: Option<String>,
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
            ConfigError::Syntax { key, .. } => key.as_deref(),
            _ => None,
        }
    }
}

/// Defaults, documented in `config/README.md`.
pub mod defaults {
    pub const MTU: u16 = 1500;
    /// `tunnel.route_table`: main.
    pub const ROUTE_TABLE: u32 = 254;
    /// `tunnel.route_protocol`: boot, what `ip route` gives a route by default.
    pub const ROUTE_PROTOCOL: u8 = 3;
    /// One TUN queue: on a 2-core host the two directions already take a core each.
    pub const QUEUES: usize = 1;
    /// Packets: enough for two unshaped multi-Gbit/s paths, whose datagrams can reach their
    /// sockets milliseconds apart (`docs/results.md`, "Reorder window"). ~6 MB of receive
    /// buffers.
    pub const REORDER_WINDOW: usize = 4096;
    pub const REORDER_TIMEOUT_MS: u64 = 100;
    pub const KEEPALIVE_MS: u64 = 100;
    pub const DEAD_MS: u64 = 500;
    pub const IDLE_KEEPALIVE_MS: u64 = 10_000;
    pub const CONTROL_DIR: &str = "/run/mptd";
}

/// Most TUN queues.
pub const MAX_QUEUES: usize = 16;
/// Largest `reorder_window`.
pub const MAX_REORDER_WINDOW: usize = 65_536;
/// Largest `weight`.
pub const MAX_WEIGHT: u32 = 10_000;
/// Most `[[peer]]`s (a peer's slot is 16 bits of its session indices).
pub const MAX_PEERS: usize = 65_535;

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
                key: e.span().and_then(|s| key_at(text, s.start)),
                message: e.message().trim().to_owned(),
            }
        })?;
        let mut cfg = Validator { file }.config(raw)?;
        cfg.source = (file.to_owned(), text.to_owned());
        Ok(cfg)
    }
}

/// The key of the `key = value` line `offset` lies in, with its table (`connection.dead_ms`,
/// `path[1].local`), if it lies in one.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let (key, _) = text[start..].split_once('=')?;
    let key = key.trim();
    if key.is_empty() || key.starts_with('#') || key.starts_with('[') || key.contains('\n') {
        return None;
    }
    // the table it is in: the last header before it (`[[path]]`: counted)
    let mut table = None;
    let mut counts: std::collections::HashMap<&str, usize> = Default::default();
    for line in text[..start].lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.split_once("]]")) {
            let n = counts.entry(name.0.trim()).or_insert(0);
            table = Some(format!("{}[{}]", name.0.trim(), *n));
            *n += 1;
        } else if let Some(name) = line.strip_prefix('[').and_then(|l| l.split_once(']')) {
            table = Some(name.0.trim().to_owned());
        }
    }
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key.to_owned(),
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::seal::Cipher;

    #[test]
    fn routes_go_to_the_table_and_with_the_protocol_named() {
        let c = parse(GOOD).expect("good");
        assert_eq!((c.tunnel.route_table, c.tunnel.route_protocol), (254, 3));
        let with = |keys: &str| GOOD.replace("mtu = 1400", &format!("mtu = 1400\n{keys}"));
        let c = parse(&with("route_table = 100\nroute_protocol = 200")).expect("good");
        let net = "192.168.10.0/24".parse().expect("prefix");
        assert_eq!(
            crate::net::route_args("replace", &c.tunnel, net).join(" "),
            "route replace 192.168.10.0/24 dev tun0 table 100 proto 200"
        );
        for bad in [
            "route_table = 0",
            "route_table = 255",
            "route_table = 4754",
            "route_protocol = 2",
            "route_protocol = 256",
        ] {
            let key = bad.split(' ').next().unwrap_or_default();
            assert_eq!(invalid_key(&with(bad)), format!("tunnel.{key}"), "{bad}");
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_by_its_key() {
        let text = "[connection]\ndead_ms = 500\nkeepalive_ms = \"often\"\n\n[[path]]\nname = \"a\"\n\n[[path]]\nname = \"b\"\nweight = \"x\"\n";
        let at = |needle: &str| key_at(text, text.find(needle).unwrap());
        assert_eq!(at("\"often").as_deref(), Some("connection.keepalive_ms"));
        assert_eq!(at("\"x\"").as_deref(), Some("path[1].weight"));
        assert_eq!(at("[connection]"), None);
        let e = Config::parse(text, Path::new("f.toml")).unwrap_err();
        assert_eq!(e.key(), Some("connection.keepalive_ms"), "{e}");
        assert!(e.to_string().starts_with("f.toml:3:"), "{e}");
    }

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
private_key_file = "keys/host.key"

[[peer]]
name = "b"
public_key = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
allowed = ["198.19.0.2/32", "192.168.10.0/24"]

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

    const PEER: &str =
        "[[peer]]\nname='b'\npublic_key='HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw='\n";

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
                private_key_file: Some("k".into()),
                ..SecurityFile::default()
            },
            peer: vec![PeerFile {
                name: Some("b".into()),
                public_key: Some(PrivateKey::from_bytes([1; 32]).public().encode()),
                endpoint: Some("vps.example.net:4754".into()),
                ..PeerFile::default()
            }],
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
        assert_eq!(c.security.private_key_file, PathBuf::from("keys/host.key"));
        let c = Config::parse(GOOD, Path::new("/etc/mptd/a.toml")).expect("valid");
        assert_eq!(
            c.security.private_key_file,
            PathBuf::from("/etc/mptd/keys/host.key")
        );
        let p = &c.peers[0];
        assert_eq!((p.name.as_str(), p.endpoint.as_ref()), ("b", None));
        assert_eq!(p.allowed.len(), 2);
        assert_eq!(
            c.paths[0].remote,
            Some("198.18.1.2:4754".parse().expect("addr"))
        );
    }

    #[test]
    fn a_site_names_its_server_by_host_name_and_its_paths_by_interface() {
        let site = r#"
[tunnel]
name = "mpt0"
address = "10.99.0.2/24"
[security]
private_key_file = "home.key"
[[peer]]
name = "vps"
public_key = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="
endpoint = "vps.example.net:4754"
allowed = ["10.99.0.0/24"]
[[path]]
name = "dsl"
interface = "eth1"
[[path]]
name = "lte"
interface = "wwan0"
"#;
        let c = parse(site).expect("valid");
        let e = c.peers[0].endpoint.as_ref().expect("endpoint");
        assert_eq!((e.host.as_str(), e.port), ("vps.example.net", 4754));
        for p in &c.paths {
            // whatever address the interface has; the remote is the peer's endpoint
            assert_eq!(p.local, "0.0.0.0:0".parse().expect("addr"));
            assert_eq!(p.remote, None);
        }
        let v6 = site.replace("vps.example.net:4754", "[2001:db8::1]:4754");
        assert_eq!(
            parse(&v6).expect("valid").paths[0].local,
            "[::]:0".parse().expect("addr")
        );
        for bad in [
            "vps.example.net",
            "vps:0",
            ":4754",
            "[2001:db8::1]",
            "a b:1",
            "2001:db8::1:4754",
        ] {
            let text = site.replace("vps.example.net:4754", bad);
            assert_eq!(invalid_key(&text), "peer[0].endpoint", "{bad}");
        }
    }

    #[test]
    fn security_needs_a_private_key_and_names_the_cipher() {
        let no_key = GOOD.replace("private_key_file = \"keys/host.key\"\n", "");
        assert_eq!(invalid_key(&no_key), "security.private_key_file");
        let e = parse(&no_key).unwrap_err().to_string();
        assert!(
            e.contains("mptd genkey") && e.contains("mptd pubkey"),
            "{e}"
        );
        let none = GOOD.replace("[security]\n", "[security]\nencryption = \"none\"\n");
        assert_eq!(parse(&none).expect("valid").security.cipher, None);
        let aes = GOOD.replace("[security]\n", "[security]\nencryption = \"AES-256-GCM\"\n");
        assert_eq!(
            parse(&aes).expect("valid").security.cipher,
            Some(CipherChoice::Only(Cipher::Aes256Gcm))
        );
        let bad = GOOD.replace("[security]\n", "[security]\nencryption = \"rot13\"\n");
        assert_eq!(invalid_key(&bad), "security.encryption");
        let empty = GOOD.replace("keys/host.key", " ");
        assert_eq!(invalid_key(&empty), "security.private_key_file");
    }

    #[test]
    fn key_files_permissions_and_contents_are_checked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mpt-key-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("keys")).expect("dir");
        let cfg_file = dir.join("a.toml");
        let key_file = dir.join("keys/host.key");
        let text = GOOD.replace(
            "[[peer]]\n",
            "[[peer]]\npreshared_key_file = \"keys/psk\"\n",
        );
        let c = Config::parse(&text, &cfg_file).expect("valid");
        let load = || c.load_keys(&cfg_file).map_err(|e| e.to_string());
        assert!(load().unwrap_err().contains("cannot read"));
        let key = PrivateKey::from_bytes([3; 32]);
        std::fs::write(&key_file, key.encode() + "\n").expect("write");
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = load().unwrap_err();
        assert!(
            e.contains("a.toml") && e.contains("security.private_key_file") && e.contains("0644"),
            "{e}"
        );
        std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let e = load().unwrap_err();
        assert!(e.contains("peer[0].preshared_key_file"), "{e}");
        let psk_file = dir.join("keys/psk");
        std::fs::write(&psk_file, Psk::from_bytes([4; 32]).encode()).expect("write");
        std::fs::set_permissions(&psk_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let keys = load().expect("keys load");
        assert_eq!(keys.private, key);
        assert_eq!(keys.psks, vec![Some(Psk::from_bytes([4; 32]))]);
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
            &format!("[tunnel]\nname='t'\naddresses=['198.19.0.1/24','2001:db8::1/64']\n[security]\nprivate_key_file='k'\n{PEER}[[path]]\nname='a'\nlocal='198.18.1.1:1'\nremote='198.18.1.2:1'\n"),
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
    fn classes_come_first_then_the_built_in_ones_and_bad_ones_are_refused() {
        let voice = "\n[[class]]\nname = \"voice\"\nmode = \"duplicate\"\nprotocol = \"udp\"\nport = \"5000-5100\"\nmax_size = 300\n\n[[class]]\nname = \"marked\"\nmode = \"fastest\"\ndscp = [34, 46]\n";
        let c = parse(&format!("{GOOD}{voice}")).expect("valid");
        let names: Vec<&str> = c
            .connection
            .classes
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["voice", "marked", "ef", "dns", "tcp-handshake", "tcp-ack"]
        );
        let v = &c.connection.classes[0];
        assert_eq!(
            (v.mode, v.protocol, v.ports, v.max_size),
            (
                mpt_tunnel::Mode::Duplicate,
                Some(17),
                Some((5000, 5100)),
                Some(300)
            )
        );
        assert_eq!(c.connection.classes[1].dscp, [34, 46]);
        // no built-in classes when asked
        let off = GOOD.replace("dead_ms = 500", "dead_ms = 500\ndefault_classes = false");
        assert!(parse(&off).expect("valid").connection.classes.is_empty());
        let with = |class: &str| format!("{GOOD}\n[[class]]\nname = \"c\"\n{class}\n");
        for (class, key) in [
            ("mode = \"fast\"", "class[0].mode"),
            ("dscp = [64]", "class[0].dscp"),
            ("dscp = []", "class[0].dscp"),
            ("protocol = \"sctp\"", "class[0].protocol"),
            ("protocol = 300", "class[0].protocol"),
            ("port = 0", "class[0].port"),
            ("port = \"6000-5000\"", "class[0].port"),
            ("port = \"http\"", "class[0].port"),
            ("protocol = \"icmp\"\nport = 53", "class[0].port"),
            ("protocol = \"udp\"\ntcp_syn = true", "class[0].tcp_syn"),
            ("protocol = \"udp\"\ntcp_ack = true", "class[0].tcp_ack"),
            ("tcp_syn = true\ntcp_ack = true", "class[0].tcp_ack"),
            ("max_size = 10", "class[0].max_size"),
        ] {
            assert_eq!(invalid_key(&with(class)), key, "{class}");
        }
        let twice = format!("{GOOD}\n[[class]]\nname = \"c\"\n[[class]]\nname = \"c\"\n");
        assert_eq!(invalid_key(&twice), "class[1].name");
    }

    #[test]
    fn tiers_and_idle_keepalives_parse_with_their_defaults() {
        let c = parse(GOOD).expect("valid");
        assert!(c.paths.iter().all(|p| p.priority == 1));
        assert_eq!(c.connection.idle_keepalive, Some(Duration::from_secs(10)));
        let text = GOOD
            .replace("weight = 2", "weight = 2\npriority = 3")
            .replace(
                "keepalive_ms = 100",
                "keepalive_ms = 100\nidle_keepalive_ms = 0",
            );
        let c = parse(&text).expect("valid");
        assert_eq!(c.paths[0].priority, 3);
        assert_eq!(c.connection.idle_keepalive, None, "0: never idle");
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
            ("weight = 2", "weight = 2\npriority = 0", "path[0].priority"),
            (
                "weight = 2",
                "weight = 2\npriority = 255",
                "path[0].priority",
            ),
            (
                "weight = 2",
                "weight = 2\npriority = 2\nbackup = true",
                "path[0].priority",
            ),
            (
                "keepalive_ms = 100",
                "keepalive_ms = 100\nidle_keepalive_ms = 50",
                "connection.idle_keepalive_ms",
            ),
            (
                "keepalive_ms = 100",
                "keepalive_ms = 100\nidle_keepalive_ms = -1",
                "connection.idle_keepalive_ms",
            ),
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
            "peer"
        );
        assert_eq!(
            invalid_key(&format!(
                "[tunnel]\nname='t'\naddress='198.19.0.1/24'\n{PEER}"
            )),
            "path"
        );
        let all_backup = GOOD.replace("weight = 2", "weight = 2\nbackup = true");
        assert_eq!(invalid_key(&all_backup), "path");
        let mut many = format!(
            "[tunnel]\nname='t'\naddress='198.19.0.1/24'\n[connection]\nscheduler='rr'\n{PEER}",
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
