//! `[tunnel]`: the interface, its addresses and the routes through it.

use super::super::*;
use super::Validator;

/// The kernel's table of local and broadcast addresses, which routes must not go to.
const LOCAL_TABLE: u32 = 255;

impl Validator<'_> {
    pub(super) fn tunnel(&self, raw: TunnelFile) -> Result<TunnelConfig, ConfigError> {
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
        let route_table = self.int_in(
            "tunnel.route_table",
            raw.route_table,
            defaults::ROUTE_TABLE,
            1,
            i64::from(u32::MAX),
        )?;
        if route_table == LOCAL_TABLE || route_table == FULL_TUNNEL_TABLE {
            return Err(self.err(
                "tunnel.route_table",
                format!(
                    "{route_table} is the kernel's local table or the full tunnel's own, expected \
                     another table (254, main, by default)"
                ),
            ));
        }
        let route_protocol = self.int_in(
            "tunnel.route_protocol",
            raw.route_protocol,
            defaults::ROUTE_PROTOCOL,
            3,
            255,
        )?;
        Ok(TunnelConfig {
            name,
            addresses,
            mtu,
            queues,
            routes: raw.routes.unwrap_or(true),
            route_table,
            route_protocol,
            fail_closed: raw.fail_closed.unwrap_or(false),
            failback: Duration::from_millis(self.int_in(
                "tunnel.failback_ms",
                raw.failback_ms,
                defaults::FAILBACK_MS,
                0,
                3_600_000,
            )?),
            state_dir: self.state_dir(raw.state_dir)?,
        })
    }

    /// `tunnel.state_dir`: an absolute directory.
    fn state_dir(&self, raw: Option<String>) -> Result<Option<std::path::PathBuf>, ConfigError> {
        match raw {
            None => Ok(None),
            Some(d) if d.starts_with('/') && !d.contains('\0') => Ok(Some(d.into())),
            Some(d) => Err(self.err(
                "tunnel.state_dir",
                format!("{d:?} is not an absolute directory, expected e.g. \"/var/lib/mptd\""),
            )),
        }
    }
}
