//! The keys and peers: `[security]`, `[[listen]]`, `[[peer]]`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use mpt_core::seal::{Cipher, CipherChoice};

use super::super::*;
use super::Validator;

impl Validator<'_> {
    pub(super) fn security(&self, raw: SecurityFile) -> Result<Security, ConfigError> {
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
            Some(s) => self.key_path("security.private_key_file", s)?,
            None => {
                return Err(self.err(
                    "security.private_key_file",
                    "missing: each host has a key pair; create this host's with \
                     `sudo sh -c 'umask 077; mptd genkey > /etc/mptd/NAME.key'` (beside /etc/mptd/NAME.toml), \
                     name it here (`private_key_file = \"NAME.key\"`), and give the peer \
                     `sudo sh -c 'mptd pubkey < /etc/mptd/NAME.key'`",
                ))
            }
        };
        let rekey_after = Duration::from_secs(self.int_in(
            "security.rekey_after_s",
            raw.rekey_after_s,
            mpt_tunnel::REKEY_AFTER.as_secs(),
            10,
            86_400,
        )?);
        Ok(Security {
            cipher,
            private_key_file,
            rekey_after,
        })
    }

    /// A file named in the config: relative to the config file's directory.
    /// A key file's path: `$CREDENTIALS_DIRECTORY/...` names a systemd credential (the unit's
    /// `LoadCredential=`); a relative path is the config file's directory's.
    pub(super) fn key_path(&self, key: &str, s: String) -> Result<PathBuf, ConfigError> {
        for var in ["$CREDENTIALS_DIRECTORY/", "${CREDENTIALS_DIRECTORY}/"] {
            if let Some(rest) = s.strip_prefix(var) {
                return match std::env::var_os("CREDENTIALS_DIRECTORY") {
                    Some(dir) => Ok(Path::new(&dir).join(rest)),
                    None => Err(self.err(
                        key,
                        format!(
                            "{s:?} names a systemd credential, but CREDENTIALS_DIRECTORY is not \
                             set (systemd sets it for a unit with LoadCredential=); expected \
                             that, or a file path"
                        ),
                    )),
                };
            }
        }
        Ok(self.relative(s))
    }

    pub(super) fn relative(&self, s: String) -> PathBuf {
        let p = PathBuf::from(s);
        if p.is_relative() {
            self.file.parent().unwrap_or(Path::new(".")).join(p)
        } else {
            p
        }
    }

    pub(super) fn listen(&self, raw: Vec<ListenFile>) -> Result<Vec<SocketAddr>, ConfigError> {
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

    /// Whether `[[listen]]` `i` takes TCP connections too (`tcp = true` or `tls = true`: either
    /// takes plain and TLS connections, told apart by their first bytes).
    pub(super) fn listen_tcp(&self, i: usize, l: &ListenFile) -> Result<bool, ConfigError> {
        match (l.tcp, l.tls) {
            (Some(false), Some(true)) => Err(self.err(
                format!("listen[{i}].tcp"),
                "false, but tls = true takes TCP connections (TLS runs on TCP), expected \
                 tcp = true or no tcp",
            )),
            (tcp, tls) => Ok(tcp.unwrap_or(false) || tls.unwrap_or(false)),
        }
    }

    pub(super) fn peers(&self, raw: Vec<PeerFile>) -> Result<Vec<PeerConfig>, ConfigError> {
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
            let name =
                self.unique_name("peer", i, r.name, peers.iter().map(|p| p.name.as_str()))?;
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
            let priority: Option<u8> = r
                .priority
                .map(|_| self.int_in(&key("priority"), r.priority, 1, 1, 254))
                .transpose()?;
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
                for (k, other) in peers.iter().enumerate() {
                    if !other.allowed.contains(&net) {
                        continue;
                    }
                    let why = match (priority, other.priority) {
                        (Some(a), Some(b)) if a == b => format!(
                            "{net} is also allowed to peer[{k}] ({:?}) with the same priority                              {a}: peers that share a prefix need different priorities",
                            other.name
                        ),
                        (Some(_), Some(_)) => continue,
                        _ => format!(
                            "{net} is already allowed to peer[{k}] ({:?}): a prefix routes to                              one peer, unless each peer that shares it has a `priority`                              (several servers of a site)",
                            other.name
                        ),
                    };
                    return Err(self.err(format!("peer[{i}].allowed[{j}]"), why));
                }
                allowed.push(net);
            }
            let preshared_key_file = match r.preshared_key_file {
                Some(s) if s.trim().is_empty() => {
                    return Err(self.err(key("preshared_key_file"), "empty, expected a file path"))
                }
                Some(s) => Some(self.key_path(&key("preshared_key_file"), s)?),
                None => None,
            };
            peers.push(PeerConfig {
                name,
                public_key,
                endpoint,
                allowed,
                preshared_key_file,
                priority,
            });
        }
        Ok(peers)
    }

    /// `host:port`, `address:port` or `[v6 address]:port`.
    pub(super) fn host_port(&self, key: &str, v: &str) -> Result<HostPort, ConfigError> {
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
}
