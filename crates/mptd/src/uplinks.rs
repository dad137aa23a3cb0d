//! Uplinks that come and go: the interfaces the `[[path]]`s name are watched (netlink link and
//! address events, and a check every second besides). An interface that is absent, or whose
//! link is down, takes its path down at once, with the reason; one that appears or comes back
//! brings it back, and a recreated one (a new interface index: `ppp0` redialled, a USB modem
//! replugged) has its socket bound to it again. An address change within a family needs
//! nothing: a path without a `local` address sends from whatever address its interface has,
//! and the peer follows it from the first authenticated datagram. A change of the families an
//! interface has (an uplink renumbered from IPv6 to IPv4, or given both) makes a path to a
//! peer named by host name choose its peer's address again ([`crate::families`]).

use std::time::Duration;

use mpt_tunnel::UplinkDown;
use tokio::io::unix::AsyncFd;

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
    /// The address families the interface has (a dual-stack path's; [`crate::families`]).
    pub families: crate::families::Families,
    /// The path's data budget is spent and `budget_exhausted = "off"`: it is down until the
    /// next period or a reset.
    pub budget_off: bool,
    /// A TCP path's stream to its peer is not up (it is being made again).
    pub stream_down: bool,
}

/// How often the interfaces are checked without a netlink event.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

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
pub fn link_up(ifname: &str) -> bool {
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

/// What the operator changes of a path's scheduling (`mptctl path NAME ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathChange {
    Weight(u32),
    Rate(u64),
    Backup(bool),
}

/// A netlink socket that hears of link and address changes.
pub fn netlink() -> std::io::Result<AsyncFd<netlink_sys::Socket>> {
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
