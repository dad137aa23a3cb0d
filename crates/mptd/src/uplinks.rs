//! Uplinks that come and go: the interfaces the `[[path]]`s name are watched (netlink link and
//! address events, and a check every second besides). An interface that is absent, or whose
//! link is down, takes its path down at once, with the reason; one that appears or comes back
//! brings it back, and a recreated one (a new interface index: `ppp0` redialled, a USB modem
//! replugged) has its socket bound to it again. An address change needs nothing: a path
//! without a `local` address sends from whatever address its interface has, and the peer
//! follows it from the first authenticated datagram.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use mpt_tunnel::UplinkDown;
use tokio::io::unix::AsyncFd;
use tracing::{info, warn};

use crate::tunnel::{Outputs, Tunnel};

/// What the watcher last saw of a path's interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uplink {
    /// The interface index the socket is bound to.
    pub ifindex: Option<u32>,
    /// Why it cannot carry anything, if it cannot.
    pub down: Option<UplinkDown>,
    /// The operator set the path down (`mptctl path NAME down`): it stays down, whatever
    /// its interface does, until set up again.
    pub admin_down: bool,
}

/// How often the interfaces are checked without a netlink event.
const CHECK_EVERY: Duration = Duration::from_secs(1);

fn sys(ifname: &str, what: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/{what}"))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The interface's index, if it exists.
pub fn ifindex(ifname: &str) -> Option<u32> {
    sys(ifname, "ifindex")?.parse().ok()
}

/// Whether the interface is up and its link works: administratively up, and a carrier. The
/// carrier is read as the driver has it now; the operational state lags it by up to a second
/// (the kernel's link watch), and a path would be taken for down just after its link came up.
/// Where the carrier cannot be read, the operational state decides ("up", or "unknown" as
/// tunnels and PPP devices report).
fn link_up(ifname: &str) -> bool {
    let admin_up = sys(ifname, "flags")
        .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & 1 != 0);
    if !admin_up {
        return false;
    }
    match sys(ifname, "carrier").as_deref() {
        Some("1") => true,
        Some("0") => false,
        _ => matches!(
            sys(ifname, "operstate").unwrap_or_default().as_str(),
            "up" | "unknown"
        ),
    }
}

/// The id of the `[[path]]` named `name`, or a message listing the names there are.
fn path_named(t: &Tunnel, name: &str) -> Result<mpt_core::PathId, String> {
    let cfg = t.cfg();
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
pub fn set_admin(t: &Tunnel, name: &str, down: bool) -> Result<String, String> {
    let path = path_named(t, name)?;
    let socks = t.sockets();
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
    check(t);
    Ok(format!(
        "path {name} set {}",
        if down { "down" } else { "up" }
    ))
}

/// What the operator changes of a path's scheduling (`mptctl path NAME ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChange {
    Weight(u32),
    Rate(u64),
    Backup(bool),
}

/// The operator changes the `[[path]]` named `name`'s weight, rate or backup flag, for every
/// peer that uses it; the schedulers are made again with it. Says what it did, or why not.
pub fn set_spec(t: &Tunnel, name: &str, change: PathChange) -> Result<String, String> {
    let path = path_named(t, name)?;
    let now = t.clock.now();
    let (weight, rate, backup) = match change {
        PathChange::Weight(w) => (Some(w), None, None),
        PathChange::Rate(r) => (None, Some(Some(r)), None),
        PathChange::Backup(b) => (None, None, Some(b)),
    };
    let mut peers = 0;
    for peer in t.peers().iter().filter(|p| !p.listening) {
        if let Some(ep) = peer.lock().as_mut() {
            ep.set_path_spec(now, path, weight, rate, backup);
            peer.note_deadline(ep);
            peers += 1;
        }
    }
    info!(path = name, change = ?change, peers, "the operator changed the path's scheduling");
    Ok(format!("path {name}: {change:?} for {peers} peer(s)"))
}

/// Look at every path's interface now, and act on what changed.
pub fn check(t: &Tunnel) {
    let now = t.clock.now();
    let mut out = Outputs::default();
    // one reload at a time, and none while the sockets are looked at
    let _turn = t.lock_reload();
    let config = t.cfg();
    for sock in t.sockets().iter() {
        let Some(path) = sock.path() else { continue };
        let Some(cfg) = config.paths.get(path.index()) else {
            continue;
        };
        let mut u = sock.lock_uplink();
        let ifname = cfg.interface.as_deref().unwrap_or("-");
        let index = cfg.interface.as_deref().and_then(ifindex);
        let mut down = match (&cfg.interface, index) {
            (None, _) => None,
            (Some(_), None) => Some(UplinkDown::Absent),
            (Some(i), Some(_)) if !link_up(i) => Some(UplinkDown::LinkDown),
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
        for (i, peer) in t.peers().iter().enumerate() {
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
    t.act(&mut out);
}

/// A netlink socket that hears of link and address changes.
fn netlink() -> std::io::Result<AsyncFd<netlink_sys::Socket>> {
    use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
    let groups = (libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
    let mut s = Socket::new(NETLINK_ROUTE)?;
    s.bind(&SocketAddr::new(0, groups))?;
    s.set_non_blocking(true)?;
    // SAFETY: the AsyncFd owns the socket, whose descriptor stays open and the same until the
    // AsyncFd (and with it the socket) is dropped.
    unsafe { AsyncFd::register_with_interest(s, tokio::io::Interest::READABLE) }
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// How often a silent peer's endpoint host name is resolved again.
const RESOLVE_EVERY: Duration = Duration::from_secs(1);

/// Resolve the endpoints of peers named by host name that we have not heard for `dead_ms`
/// (or ever), or whose every path is down, and send their paths without a `remote` of their
/// own to the new address.
async fn resolve_silent(t: &Tunnel) {
    let now = t.clock.now();
    for (i, peer) in t.peers().iter().enumerate() {
        let Some(e) = peer.cfg().endpoint.clone() else {
            continue;
        };
        let name = peer.cfg().name.clone();
        if e.host.parse::<std::net::IpAddr>().is_ok() {
            continue;
        }
        let silent = peer.lock().as_ref().is_some_and(|ep| {
            ep.last_heard()
                .is_none_or(|h| now - h >= t.cfg().connection.dead)
                || (0..ep.path_count()).all(|p| {
                    ep.path_info(mpt_core::PathId(p as u8)).state == mpt_tunnel::LinkState::Down
                })
        });
        if !silent {
            continue;
        }
        let addrs: Vec<std::net::SocketAddr> = match tokio::net::lookup_host((
            e.host.as_str(),
            e.port,
        ))
        .await
        {
            Ok(a) => a.collect(),
            Err(err) => {
                warn!(peer = %name, endpoint = %e, error = %err, "cannot resolve the peer's endpoint");
                continue;
            }
        };
        let mut out = Outputs::default();
        if let Some(ep) = peer.lock().as_mut() {
            for (k, p) in t.cfg().paths.iter().enumerate() {
                if p.remote.is_some() {
                    continue;
                }
                let path = mpt_core::PathId(k as u8);
                let Some(to) = crate::tunnel::pick_family(&addrs, p.local.is_ipv6()) else {
                    continue;
                };
                if ep.remote(path) != Some(to) {
                    info!(peer = %name, endpoint = %e, path = %p.name, %to, "endpoint resolved");
                    ep.set_remote(path, to);
                }
            }
            Tunnel::gather(ep, now, i, &mut out);
            peer.note_deadline(ep);
        }
        t.act(&mut out);
    }
}

/// Re-resolve silent peers' endpoints every [`RESOLVE_EVERY`], for as long as the daemon runs.
pub async fn resolver_task(t: Arc<Tunnel>) -> Result<()> {
    // (a reload may add peers named by host name: looked at every second even without any)
    loop {
        tokio::time::sleep(RESOLVE_EVERY).await;
        resolve_silent(&t).await;
    }
}

/// Watch the paths' interfaces for as long as the daemon runs.
pub async fn uplink_task(t: Arc<Tunnel>) -> Result<()> {
    // (a reload may add interfaces to watch: looked at every second even without any now)
    let nl = match netlink() {
        Ok(nl) => Some(nl),
        Err(e) => {
            warn!(error = %e, "cannot watch interfaces through netlink: checking them every second");
            None
        }
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        check(&t);
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
                    _ = tokio::time::sleep(CHECK_EVERY) => {}
                }
            }
            None => tokio::time::sleep(CHECK_EVERY).await,
        }
    }
}
