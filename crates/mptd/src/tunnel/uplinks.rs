//! The tunnel's side of uplinks that come and go ([`crate::uplinks`]): looking at the paths'
//! interfaces and telling the connections, and the operator's changes to a path.

use std::sync::Arc;

use anyhow::Result;
use mpt_tunnel::UplinkDown;
use tracing::{info, warn};

use super::{Outputs, Tunnel};
use crate::uplinks::{self, PathChange};

impl Tunnel {
    /// The id of the `[[path]]` named `name`, or a message listing the names there are.
    pub(super) fn path_named(&self, name: &str) -> Result<mpt_core::PathId, String> {
        let cfg = self.cfg();
        cfg.paths
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.id)
            .ok_or_else(|| {
                let names: Vec<&str> = cfg.paths.iter().map(|p| p.name.as_str()).collect();
                format!("no [[path]] named {name:?}; the paths are {names:?}")
            })
    }

    /// The operator sets the `[[path]]` named `name` down (`down`) or up again: a path set down
    /// sends nothing and is down at once, whatever its interface does, and its peers find it
    /// silent; set up, it rejoins as an uplink that came back does. Says what it did, or why not.
    pub fn set_admin(&self, name: &str, down: bool) -> Result<String, String> {
        let path = self.path_named(name)?;
        let socks = self.sockets();
        let Some(sock) = socks.iter().find(|s| s.path() == Some(path)) else {
            return Err(format!("path {name} has no socket"));
        };
        let was = std::mem::replace(&mut sock.lock_uplink().admin_down, down);
        if was == down {
            return Ok(format!(
                "path {name} was {} already",
                if down { "down" } else { "up" }
            ));
        }
        info!(
            path = name,
            "the operator set the path {}",
            if down { "down" } else { "up" }
        );
        self.check_uplinks();
        Ok(format!(
            "path {name} set {}",
            if down { "down" } else { "up" }
        ))
    }

    /// The operator changes the `[[path]]` named `name`'s weight, rate or backup flag, for every
    /// peer that uses it; the schedulers are made again with it. Says what it did, or why not.
    pub fn set_spec(&self, name: &str, change: PathChange) -> Result<String, String> {
        let path = self.path_named(name)?;
        let now = self.clock.now();
        let (weight, rate, backup) = match change {
            PathChange::Weight(w) => (Some(w), None, None),
            PathChange::Rate(r) => (None, Some(Some(r)), None),
            PathChange::Backup(b) => (None, None, Some(b)),
        };
        let mut peers = 0;
        for peer in self.peers.list().iter().filter(|p| !p.listening) {
            if let Some(ep) = peer.lock().as_mut() {
                ep.set_path_spec(now, path, weight, rate, backup);
                peer.note_deadline(ep);
                peers += 1;
            }
        }
        info!(path = name, change = ?change, peers, "the operator changed the path's scheduling");
        Ok(format!("path {name}: {change:?} for {peers} peer(s)"))
    }

    /// A dual-stack path's interface's address families ([`crate::families`]), kept in `u`:
    /// whether they changed (the resolver is told to look the names up again). With none, the
    /// uplink is `down` for having no address.
    fn look_at_families(
        &self,
        cfg: &crate::config::PathConfig,
        u: &mut uplinks::Uplink,
        down: &mut Option<UplinkDown>,
    ) -> bool {
        let (Some(i), true) = (&cfg.interface, cfg.dual) else {
            return false;
        };
        let families = crate::families::of_interface(i);
        if families == crate::families::Families::default() && down.is_none() {
            *down = Some(UplinkDown::NoAddress);
        }
        if families == u.families {
            return false;
        }
        info!(path = %cfg.name, interface = %i, families = families.name(),
            "the interface's address families changed: choosing the peer's address again");
        u.families = families;
        self.resolve_now.notify_one();
        true
    }

    /// Look at every path's interface now, and act on what changed.
    pub fn check_uplinks(&self) {
        let now = self.clock.now();
        let mut out = Outputs::default();
        // one reload at a time, and none while the sockets are looked at
        let _turn = self.lock_reload();
        let config = self.cfg();
        for sock in self.sockets().iter() {
            let Some(path) = sock.path() else { continue };
            let Some(cfg) = config.paths.get(path.index()) else {
                continue;
            };
            let mut u = sock.lock_uplink();
            let ifname = cfg.interface.as_deref().unwrap_or("-");
            let index = cfg.interface.as_deref().and_then(uplinks::ifindex);
            let mut down = match (&cfg.interface, index) {
                (None, _) => None,
                (Some(_), None) => Some(UplinkDown::Absent),
                (Some(i), Some(_)) if !uplinks::link_up(i) => Some(UplinkDown::LinkDown),
                (Some(_), Some(_)) => None,
            };
            if let Some(i) = index.filter(|&i| u.ifindex != Some(i)) {
                match crate::net::bind_device(&sock.io.sock, ifname) {
                    Ok(()) => {
                        let again = u.ifindex.is_some();
                        info!(path = %cfg.name, interface = ifname, ifindex = i,
                            "{}", if again { "interface recreated: socket bound to it again" }
                            else { "interface present: socket bound to it" });
                        u.ifindex = Some(i);
                    }
                    Err(e) => {
                        warn!(path = %cfg.name, interface = ifname, error = %e,
                            "cannot bind the socket to the interface");
                        down = Some(UplinkDown::Absent);
                    }
                }
            }
            if self.look_at_families(cfg, &mut u, &mut down) {
                // chosen before the path rejoins: its first keepalive goes where it can reach
                drop(u);
                self.choose_cached(now);
                u = sock.lock_uplink();
            }
            if u.stream_down && down.is_none() {
                down = Some(UplinkDown::Connecting);
            }
            if u.budget_off {
                down = Some(UplinkDown::Budget);
            }
            if u.admin_down {
                down = Some(UplinkDown::Administrative);
            }
            if down == u.down {
                continue;
            }
            match down {
                Some(reason) => warn!(path = %cfg.name, interface = ifname, reason = reason.name(),
                    "uplink down: the path is not used until it is back"),
                None => info!(path = %cfg.name, interface = ifname, "uplink up: path rejoining"),
            }
            u.down = down;
            drop(u);
            for (i, peer) in self.peers.list().iter().enumerate() {
                if peer.listening {
                    continue;
                }
                if let Some(ep) = peer.lock().as_mut() {
                    ep.set_uplink(now, path, down);
                    Tunnel::gather(ep, now, i, &mut out);
                    peer.note_deadline(ep);
                }
            }
        }
        self.act(&mut out);
    }

    /// Watch the paths' interfaces for as long as the daemon runs.
    pub async fn uplink_task(self: Arc<Self>) -> Result<()> {
        // (a reload may add interfaces to watch: looked at every second even without any now)
        let nl = match uplinks::netlink() {
            Ok(nl) => Some(nl),
            Err(e) => {
                warn!(error = %e, "cannot watch interfaces through netlink: checking them every second");
                None
            }
        };
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            self.check_uplinks();
            match &nl {
                Some(nl) => {
                    tokio::select! {
                        r = nl.readable() => {
                            if let Ok(mut guard) = r {
                                // what changed does not matter: every interface is looked at again
                                while guard.get_inner().recv(&mut &mut buf[..], 0).is_ok() {}
                                guard.clear_ready();
                            }
                        }
                        _ = tokio::time::sleep(uplinks::CHECK_EVERY) => {}
                    }
                }
                None => tokio::time::sleep(uplinks::CHECK_EVERY).await,
            }
        }
    }
}
