//! The sites lab's daemon configs: key files, control sockets, and the server's and each
//! site's `ConfigFile`.

use std::path::PathBuf;

use anyhow::Result;
use mpt_core::seal::PrivateKey;
use mptd::config::{
    ConfigFile, ConnectionFile, ControlFile, ListenFile, PathFile, PeerFile, SecurityFile,
    TunnelFile,
};

use super::{tunnel_ip, Host, Sites, PORT, SERVER, SERVER_ROUTE_PROTOCOL, SITE0_LAN};

impl Sites {
    fn key_file(&self, h: Host) -> Result<PathBuf> {
        crate::harness::key_file_in(&self.dir, &self.ns(h))
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

    /// The server's config: it listens, and knows the first `known` sites; the routes to
    /// their prefixes carry protocol number [`SERVER_ROUTE_PROTOCOL`] (in the main table).
    pub fn server_config(&self) -> Result<ConfigFile> {
        let mut c = self.base(Host::Server)?;
        if let Some(t) = c.tunnel.as_mut() {
            t.route_protocol = Some(i64::from(SERVER_ROUTE_PROTOCOL));
        }
        c.listen = vec![ListenFile {
            address: Some(format!("0.0.0.0:{PORT}")),
            tcp: None,
            tls: None,
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
}
