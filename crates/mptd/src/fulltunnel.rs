//! A full tunnel: a peer allowed `0.0.0.0/0` (or `::/0`) takes the host's default route, the
//! way wg-quick does it, without touching the uplinks' own routes.
//!
//! mptd's sockets carry the firewall mark [`MARK`]. Two policy rules per address family send
//! everything else to table [`TABLE`], where the default route is `dev <tunnel>`:
//!
//! ```text
//! 32700: from all lookup main suppress_prefixlength 0    more specific routes (LAN, uplink subnets) first
//! 32701: not from all fwmark 0x4754 lookup 4754          the rest, but mptd's own datagrams, to the tunnel
//! ```
//!
//! mptd's datagrams (marked) fall through to the main table and leave by their uplinks, over
//! whatever default routes DHCP or pppd installed there; so does the traffic of a host whose
//! tunnel route is absent.
//!
//! Fail open (the default): the tunnel's default route is in table 4754 only while the peer is
//! up; while it is down, and after the daemon stops (rules and table removed), the host's
//! traffic leaves by the uplinks. Fail closed (`tunnel.fail_closed`): an `unreachable` default
//! route under the tunnel's own stays in table 4754 while the daemon runs and after it stops,
//! with the rules, so that nothing leaves outside the tunnel until mptd runs again (or the
//! operator removes them: [`FullTunnel::undo_commands`]).

use std::process::Command;

use crate::config::{Config, IpNet};

/// The routing table of the tunnel's default route (defined with the configuration, whose
/// `tunnel.route_table` must not name it).
pub const TABLE: u32 = crate::config::FULL_TUNNEL_TABLE;
/// The firewall mark of mptd's own sockets (`SO_MARK`).
pub const MARK: u32 = 0x4754;
/// The priority of the `suppress_prefixlength 0` rule; the table's rule is the next.
const PRIORITY: u32 = 32700;
/// The metric of the fail-closed `unreachable` route (the tunnel's own has 0).
const BLOCK_METRIC: u32 = 1_000_000;

/// An address family of the full tunnel: `ip -4` or `ip -6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn flag(self) -> &'static str {
        match self {
            Family::V4 => "-4",
            Family::V6 => "-6",
        }
    }
}

/// The full tunnel of a config, if a peer is allowed a default prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct FullTunnel {
    dev: String,
    families: Vec<Family>,
    /// The peers whose `allowed` hold a default prefix, by their public keys (several servers
    /// of a site: [`crate::standby`]).
    pub peers: Vec<mpt_core::seal::PublicKey>,
    pub fail_closed: bool,
}

/// Whether `net` is a default prefix (`0.0.0.0/0`, `::/0`).
pub fn is_default(net: &IpNet) -> bool {
    net.prefix_len() == 0
}

impl FullTunnel {
    /// The full tunnel `cfg` asks for: with `tunnel.routes`, a peer allowed `0.0.0.0/0` or
    /// `::/0`.
    pub fn of(cfg: &Config) -> Option<FullTunnel> {
        if !cfg.tunnel.routes {
            return None;
        }
        let peers: Vec<&crate::config::PeerConfig> = cfg
            .peers
            .iter()
            .filter(|p| p.allowed.iter().any(is_default))
            .collect();
        if peers.is_empty() {
            return None;
        }
        let mut families = Vec::new();
        for net in peers
            .iter()
            .flat_map(|p| &p.allowed)
            .filter(|n| is_default(n))
        {
            let f = match net {
                IpNet::V4(_) => Family::V4,
                IpNet::V6(_) => Family::V6,
            };
            if !families.contains(&f) {
                families.push(f);
            }
        }
        Some(FullTunnel {
            dev: cfg.tunnel.name.clone(),
            families,
            peers: peers.iter().map(|p| p.public_key).collect(),
            fail_closed: cfg.tunnel.fail_closed,
        })
    }

    /// The rules as `ip` arguments, per family: (suppress rule, table rule).
    fn rules(f: Family) -> [Vec<String>; 2] {
        let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        [
            s(&[
                f.flag(),
                "rule",
                "%",
                "priority",
                &PRIORITY.to_string(),
                "table",
                "main",
                "suppress_prefixlength",
                "0",
            ]),
            s(&[
                f.flag(),
                "rule",
                "%",
                "priority",
                &(PRIORITY + 1).to_string(),
                "not",
                "fwmark",
                &format!("{MARK:#x}"),
                "table",
                &TABLE.to_string(),
            ]),
        ]
    }

    /// `rule` with `op` (`add`, `del`) in place of its `%`.
    fn with_op(rule: &[String], op: &str) -> Vec<String> {
        rule.iter()
            .map(|a| if a == "%" { op.to_owned() } else { a.clone() })
            .collect()
    }

    /// Set up the rules (and, failing closed, the `unreachable` route), after removing what
    /// an earlier run left. The tunnel's default route comes with [`FullTunnel::route`].
    pub fn install(&self) -> anyhow::Result<()> {
        self.clear();
        for &f in &self.families {
            for rule in Self::rules(f) {
                ip(&Self::with_op(&rule, "add"))
                    .map_err(|e| anyhow::anyhow!("full tunnel (tunnel.routes): {e}; set tunnel.routes = false to route it yourself"))?;
            }
            if self.fail_closed {
                ip(&Self::block(f, "replace"))
                    .map_err(|e| anyhow::anyhow!("tunnel.fail_closed: {e}"))?;
            }
        }
        tracing::info!(
            table = TABLE,
            mark = format_args!("{MARK:#x}"),
            fail_closed = self.fail_closed,
            "full tunnel: the host's traffic goes through the tunnel, mptd's own by the uplinks"
        );
        Ok(())
    }

    fn block(f: Family, op: &str) -> Vec<String> {
        [
            f.flag(),
            "route",
            op,
            "unreachable",
            "default",
            "table",
            &TABLE.to_string(),
            "metric",
            &BLOCK_METRIC.to_string(),
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect()
    }

    /// The tunnel's default route in table [`TABLE`]: there while the peer is up (`up`), or
    /// always when failing closed.
    pub fn route(&self, up: bool) {
        for &f in &self.families {
            let op = if up { "replace" } else { "del" };
            let args = [
                f.flag(),
                "route",
                op,
                "default",
                "dev",
                &self.dev,
                "table",
                &TABLE.to_string(),
            ];
            match ip(&args.map(str::to_owned)) {
                Ok(()) => tracing::info!(
                    family = f.flag(),
                    dev = %self.dev,
                    "full tunnel: default route {}",
                    if up { "through the tunnel" } else { "removed: the host's traffic leaves by the uplinks (tunnel.fail_closed = false)" }
                ),
                Err(e) if up => tracing::warn!("full tunnel: {e}"),
                Err(_) => {}
            }
        }
    }

    /// At exit: failing open, remove the rules and the table; failing closed, leave them (the
    /// tunnel's route goes with its device, the `unreachable` one stays).
    pub fn remove(&self) {
        if self.fail_closed {
            tracing::warn!(
                undo = %self.undo_commands().join("; "),
                "tunnel.fail_closed: the host's traffic stays blocked until mptd runs again"
            );
        } else {
            self.clear();
        }
    }

    /// What removes the rules and the table (an earlier run's too).
    fn clear(&self) {
        for &f in &[Family::V4, Family::V6] {
            for rule in Self::rules(f) {
                // one at a time: a rule added twice is there twice
                for _ in 0..8 {
                    if ip(&Self::with_op(&rule, "del")).is_err() {
                        break;
                    }
                }
            }
            let _ =
                ip(&[f.flag(), "route", "flush", "table", &TABLE.to_string()].map(str::to_owned));
        }
    }

    /// The commands that undo what a fail-closed tunnel leaves behind.
    pub fn undo_commands(&self) -> Vec<String> {
        let mut c = Vec::new();
        for &f in &self.families {
            for rule in Self::rules(f) {
                c.push(format!("ip {}", Self::with_op(&rule, "del").join(" ")));
            }
            c.push(format!("ip {} route flush table {TABLE}", f.flag()));
        }
        c
    }
}

/// Run `ip ARGS`: Ok, or its error message.
fn ip(args: &[String]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2 missing?): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
