//! The paths: `[[path]]`.

use std::net::{IpAddr, SocketAddr};

use mpt_core::{PathId, MAX_PATHS};

use super::super::*;
use super::Validator;

impl Validator<'_> {
    pub(super) fn paths(
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
            let name =
                self.unique_name("path", i, r.name, paths.iter().map(|p| p.name.as_str()))?;
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
                // whatever address the interface has, of the remote's family (of both, for a
                // peer named by host name)
                None => any_address(remote, peer),
            };
            let dual = !local_given && remote.is_none() && by_name(peer);
            self.same_family(i, local, remote)?;
            if remote.is_none() && peer.is_none() && !local_given {
                return Err(self.err(
                    key("local"),
                    "missing: with no remote and no peer endpoint, the peer comes to us, so \
                     this path needs a fixed local address:port to be found at",
                ));
            }
            self.unique_local(i, local, &paths)?;
            let weight = self.int_in(&key("weight"), r.weight, 1, 1, i64::from(MAX_WEIGHT))?;
            let rate_bps = r.rate.map(|v| self.rate(&key("rate"), v)).transpose()?;
            if scheduler == SchedulerKind::Rate && rate_bps.is_none() {
                return Err(self.err(
                    key("rate"),
                    "missing, required by scheduler = \"rate\" (e.g. rate = \"20mbit\")",
                ));
            }
            let min_mtu = if local.is_ipv6() && !dual { 1280 } else { 576 };
            let mtu = r
                .mtu
                .map(|_| self.int_in(&key("mtu"), r.mtu, 1500, min_mtu, 65_535))
                .transpose()?
                .map(|m| m as u16);
            if r.backup == Some(true) && r.priority.is_some() {
                return Err(self.err(
                    key("priority"),
                    "give priority or backup = true (below every priority), not both",
                ));
            }
            let priority = self.int_in(&key("priority"), r.priority, 1, 1, 254)?;
            paths.push(PathConfig {
                id: PathId(i as u8),
                name,
                interface: r.interface,
                local,
                remote,
                dual,
                weight,
                rate_bps,
                backup: r.backup.unwrap_or(false),
                priority,
                mtu,
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

    /// Path `i`'s `remote`, if given, is of the family of its `local` address.
    fn same_family(
        &self,
        i: usize,
        local: SocketAddr,
        remote: Option<SocketAddr>,
    ) -> Result<(), ConfigError> {
        match remote {
            Some(remote) if local.is_ipv4() != remote.is_ipv4() => Err(self.err(
                format!("path[{i}].remote"),
                format!("{remote} is not of the same address family as local {local}"),
            )),
            _ => Ok(()),
        }
    }

    /// Path `i`'s `local` address (unless its port is left to the kernel) is none of the
    /// `paths` before it.
    fn unique_local(
        &self,
        i: usize,
        local: SocketAddr,
        paths: &[PathConfig],
    ) -> Result<(), ConfigError> {
        match paths.iter().find(|p| p.local == local && local.port() != 0) {
            Some(other) => Err(self.err(
                format!("path[{i}].local"),
                format!(
                    "{local} is already the local address of path[{}] ({:?})",
                    other.id, other.name
                ),
            )),
            None => Ok(()),
        }
    }
}

/// Whether `peer`'s endpoint is a host name (not an address).
fn by_name(peer: Option<&PeerConfig>) -> bool {
    peer.and_then(|p| p.endpoint.as_ref())
        .is_some_and(|e| e.host.parse::<IpAddr>().is_err())
}

/// The wildcard address of the family of `remote`, or else of `peer`'s endpoint when that is
/// an address, port 0: a path given only an interface. A host name gives `[::]` (a dual-stack
/// socket, [`PathConfig::dual`]); nothing gives IPv4.
fn any_address(remote: Option<SocketAddr>, peer: Option<&PeerConfig>) -> SocketAddr {
    let v6 = remote.map(|r| r.is_ipv6()).or_else(|| {
        let e = peer?.endpoint.as_ref()?;
        Some(e.host.parse::<IpAddr>().map_or(true, |a| a.is_ipv6()))
    });
    let any: IpAddr = if v6 == Some(true) {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    SocketAddr::new(any, 0)
}
