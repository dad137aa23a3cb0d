//! The paths: `[[path]]`.

use std::net::{IpAddr, SocketAddr};

use mpt_core::{PathId, MAX_PATHS};

use super::super::*;
use super::Validator;
use crate::budget::calendar::Period;

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
            let budget = self.budget(i, &r)?;
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
            let rate_bps = r
                .rate
                .clone()
                .map(|v| self.rate(&key("rate"), v))
                .transpose()?;
            if scheduler == SchedulerKind::Rate && rate_bps.is_none() {
                return Err(self.err(
                    key("rate"),
                    "missing, required by scheduler = \"rate\" (e.g. rate = \"20mbit\")",
                ));
            }
            let tier = PathFile {
                mtu: r.mtu,
                backup: r.backup,
                priority: r.priority,
                ..PathFile::default()
            };
            let (mtu, priority) = self.mtu_and_tier(i, &tier, local.is_ipv6() && !dual)?;
            let transport = self.transport(i, r.transport.as_deref(), peer, local)?;
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
                budget,
                transport,
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

    /// Path `i`'s `mtu` (a cap on its outer packets, at least IPv6's minimum on an IPv6-only
    /// socket, else IPv4's) and its tier (`priority`, not with `backup`).
    fn mtu_and_tier(
        &self,
        i: usize,
        r: &PathFile,
        v6_only: bool,
    ) -> Result<(Option<u16>, u8), ConfigError> {
        let key = |k: &str| format!("path[{i}].{k}");
        let min_mtu = if v6_only { 1280 } else { 576 };
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
        Ok((mtu, priority))
    }

    /// Path `i`'s `transport`: `auto` (the default), `udp`, `tcp` or `tls`, dialled when we
    /// start the handshakes (to `peer`), else taken at its `local` address, whose port must
    /// then be fixed. A TLS dialler names the peer's endpoint in its hello when that is a host
    /// name.
    fn transport(
        &self,
        i: usize,
        raw: Option<&str>,
        peer: Option<&PeerConfig>,
        local: SocketAddr,
    ) -> Result<PathTransport, ConfigError> {
        let key = format!("path[{i}].transport");
        let dial = peer.is_some();
        let raw = raw.map(str::trim);
        match raw {
            None | Some("auto") => return Ok(PathTransport::Auto { dial }),
            Some("udp") => return Ok(PathTransport::Udp),
            Some("tcp" | "tls") => {}
            Some(other) => {
                return Err(self.err(
                    key,
                    format!("{other:?}, expected \"auto\", \"udp\", \"tcp\" or \"tls\""),
                ))
            }
        }
        if !dial && local.port() == 0 {
            return Err(self.err(
                key,
                format!(
                    "{:?} on a path the peer comes to needs a fixed local address:port to \
                     take its connections at",
                    raw.unwrap_or_default()
                ),
            ));
        }
        if raw == Some("tcp") {
            return Ok(PathTransport::Tcp { dial });
        }
        let server_name = peer
            .filter(|_| by_name(peer))
            .and_then(|p| p.endpoint.as_ref())
            .map(|e| e.host.clone());
        Ok(PathTransport::Tls { dial, server_name })
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

impl Validator<'_> {
    /// Path `i`'s data budget, if `budget` is given (`budget_period`, `budget_reset` and
    /// `budget_exhausted` only with it).
    fn budget(&self, i: usize, r: &PathFile) -> Result<Option<BudgetConfig>, ConfigError> {
        let key = |k: &str| format!("path[{i}].{k}");
        let Some(limit) = &r.budget else {
            let stray = [
                ("budget_period", r.budget_period.is_some()),
                ("budget_reset", r.budget_reset.is_some()),
                ("budget_exhausted", r.budget_exhausted.is_some()),
            ];
            return match stray.iter().find(|(_, given)| *given) {
                Some((k, _)) => Err(self.err(key(k), "given without budget, which it applies to")),
                None => Ok(None),
            };
        };
        let limit = match limit {
            BytesFile::Bytes(b) => u64::try_from(*b).ok(),
            BytesFile::Text(t) => parse_bytes(t),
        }
        .filter(|&b| b >= 1_000_000)
        .ok_or_else(|| {
            self.err(
                key("budget"),
                "expected bytes per period, at least 1 MB, such as \"20 GB\", \"500 MiB\" or a \
                 number of bytes",
            )
        })?;
        let period = match r.budget_period.as_deref() {
            None => Period::Month,
            Some(p) => Period::parse(p).ok_or_else(|| {
                self.err(
                    key("budget_period"),
                    format!("{p:?}, expected \"month\", \"week\" or \"day\""),
                )
            })?,
        };
        let reset_day = match period {
            Period::Month => self.int_in(&key("budget_reset"), r.budget_reset, 1, 1, 31)?,
            Period::Week => self.int_in(&key("budget_reset"), r.budget_reset, 1, 1, 7)?,
            Period::Day if r.budget_reset.is_some() => {
                return Err(self.err(
                    key("budget_reset"),
                    "given with budget_period = \"day\", whose periods start at midnight",
                ))
            }
            Period::Day => 1,
        } as u8;
        let exhausted = match r.budget_exhausted.as_deref() {
            None | Some("backup") => Exhausted::Backup,
            Some("off") => Exhausted::Off,
            Some(other) => {
                return Err(self.err(
                    key("budget_exhausted"),
                    format!("{other:?}, expected \"backup\" or \"off\""),
                ))
            }
        };
        Ok(Some(BudgetConfig {
            limit,
            period,
            reset_day,
            exhausted,
        }))
    }
}

/// Parse `"20 GB"`, `"500MiB"`, `"1.5 TB"` or `"1000000"` into bytes: decimal units (kB,
/// MB, GB, TB: powers of 1000) and binary ones (KiB, MiB, GiB, TiB: of 1024).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    let bytes = n * factor;
    (1.0..1e18).contains(&bytes).then(|| bytes.round() as u64)
}
