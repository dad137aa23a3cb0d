//! The daemon's configuration: TOML parsed into raw structs, then validated into the types
//! below. Every error names the file, the key and what was expected.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use ipnet::IpNet;

use mpt_core::seal::{CipherChoice, PublicKey};
pub use mpt_sched::SchedulerKind;

mod file;
mod hooks;
mod keys;
mod path;
mod validate;

pub use hooks::{HookEvent, HooksConfig, DEFAULT_HOOK_TIMEOUT};
pub use keys::Keys;
pub use path::{BudgetConfig, Exhausted, PathConfig, PathTransport};

pub use file::{
    BytesFile, ClassFile, ConfigFile, ConnectionFile, ControlFile, HooksFile, ListenFile, PathFile,
    PeerFile, PortFile, ProtocolFile, RateFile, SecurityFile, TunnelFile,
};
use validate::Validator;
pub use validate::{parse_bytes, parse_rate};

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub tunnel: TunnelConfig,
    pub connection: Connection,
    /// UDP sockets that serve every path of every peer that comes to us (`[[listen]]`).
    pub listen: Vec<SocketAddr>,
    /// Those of them that take TCP connections on the same address too (`tcp = true` or
    /// `tls = true`), for peers whose paths are `transport = "tcp"` or `"tls"`: each
    /// connection is told plain or TLS by its first bytes (`crate::stream::tls::sniff`).
    pub listen_tcp: Vec<SocketAddr>,
    pub peers: Vec<PeerConfig>,
    /// In file order; a path's [`PathId`] is its index here.
    pub paths: Vec<PathConfig>,
    pub control: Control,
    pub security: Security,
    pub hooks: HooksConfig,
    /// The file it was read from, and its text as read (`mptctl showconf`).
    pub source: (PathBuf, String),
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
    /// Several peers may be allowed the same prefix (servers of one site) if each has a
    /// priority (1 is the highest): the best one up carries it ([`crate::standby`]).
    pub priority: Option<u8>,
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

impl Config {
    /// `peer` comes to our `[[listen]]` sockets with paths of its own (it has no `endpoint`,
    /// and we listen): its connection is made by its first initiation.
    pub fn listening(&self, peer: &PeerConfig) -> bool {
        peer.endpoint.is_none() && !self.listen.is_empty()
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
    /// A peer of a higher priority than the one carrying its prefixes, up again after it was
    /// down, takes them back once it has been up this long (`failback_ms`).
    pub failback: Duration,
    /// Where what must outlive a restart is kept (the paths' data budgets, `budget.json`):
    /// `tunnel.state_dir`, or else systemd's `$STATE_DIRECTORY` when the daemon starts.
    pub state_dir: Option<std::path::PathBuf>,
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
    /// version 6 or later, with resending. On by default; a path MTU black hole that swallows a flow's
    /// reference holds up its packets until it comes again (`docs/configuration.md`,
    /// `connection.compress`).
    pub compress: bool,
    /// Bonded traffic waits in mptd, under CoDel, while every path holds 20 ms at the rate
    /// the scheduler has for it, instead of queueing (and being dropped) in the links
    /// (`docs/configuration.md`, `connection.pace`; `rate` and `adaptive`).
    pub pace: bool,
    /// Traffic classes (`[[class]]`, then the built-in ones unless
    /// `connection.default_classes = false`): the first that matches a packet decides how it
    /// is sent.
    pub classes: Vec<mpt_tunnel::ClassRule>,
}

/// `[control]`: the unix socket `mptctl` talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    pub socket: PathBuf,
    /// Where Prometheus metrics are served (`GET /metrics`), if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Where the status page is served (`GET /`), if anywhere.
    pub web: Option<SocketAddr>,
    /// The token every request to the page must carry (required off loopback).
    pub web_token: Option<String>,
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

/// Defaults, documented in `docs/configuration.md`.
pub mod defaults {
    pub const MTU: u16 = 1500;
    /// `tunnel.route_table`: main.
    pub const ROUTE_TABLE: u32 = 254;
    /// `tunnel.route_protocol`: boot, what `ip route` gives a route by default.
    pub const ROUTE_PROTOCOL: u8 = 3;
    /// `tunnel.failback_ms`.
    pub const FAILBACK_MS: u64 = 10_000;
    /// One TUN queue: on a 2-core host the two directions already take a core each.
    pub const QUEUES: usize = 1;
    /// Packets: enough for two unshaped multi-Gbit/s paths, whose datagrams can reach their
    /// sockets milliseconds apart (`docs/results.md`, "Resequencer"). Up to ~6 MB of
    /// receive buffers, allocated as packets are held (none while nothing waits).
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
/// The routing table of a full tunnel's default route ([`crate::fulltunnel::TABLE`]), which
/// `tunnel.route_table` must not name. Here, so that validating it needs nothing of the
/// modules that read the configuration.
pub const FULL_TUNNEL_TABLE: u32 = 4754;

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
mod tests;
