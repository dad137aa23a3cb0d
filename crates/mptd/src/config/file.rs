//! The configuration file's schema as written: every key optional, nothing validated.

use serde::{Deserialize, Serialize};

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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<ListenFile>,
    #[serde(default)]
    pub peer: Vec<PeerFile>,
    #[serde(default)]
    pub path: Vec<PathFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<HooksFile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class: Vec<ClassFile>,
}

/// One `[[class]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dscp: Option<Vec<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_syn: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_ack: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_size: Option<i64>,
}

/// A class's `protocol`: a name (`"udp"`) or a number.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ProtocolFile {
    Number(i64),
    Name(String),
}

/// A class's `port`: one port, or a range as text (`"5000-5100"`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PortFile {
    Number(i64),
    Range(String),
}

/// `[hooks]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HooksFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub up: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_up: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_down: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_up: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_down: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_active: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_budget: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
}

/// One `[[listen]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ListenFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
}

/// One `[[peer]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PeerFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preshared_key_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

/// `[security]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SecurityFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rekey_after_s: Option<i64>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_closed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_table: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_protocol: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failback_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
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
    pub idle_keepalive_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resend: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parity: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub equalise: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compress: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_classes: Option<bool>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BytesFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_period: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_reset: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_exhausted: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
}

/// A path's `budget`: bytes, or text such as `"20 GB"`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum BytesFile {
    Bytes(i64),
    Text(String),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_token: Option<String>,
}
