//! Creating the path sockets and the TUN device, with errors a user can act on.

use std::io;
use std::net::SocketAddr;
use std::path::Path;

use crate::config::{IpNet, PathConfig, TunnelConfig};
use anyhow::{anyhow, Context, Result};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

/// Socket buffer size asked for on every path socket.
const SOCKET_BUFFER: usize = 4 << 20;

/// Bind the UDP socket of one path: to its `interface` (SO_BINDTODEVICE) when given, and to
/// its `local` address.
///
/// An interface that does not exist (yet) is not an error: the socket is made without it (and
/// may bind an address that is not there yet, IP_FREEBIND), and `true` says so; the uplink
/// watcher ([`crate::uplinks`]) binds it to the device when the device appears, and the path
/// sends nothing meanwhile.
pub fn path_socket(p: &PathConfig) -> Result<(UdpSocket, bool)> {
    let what = format!("path {:?} (path[{}])", p.name, p.id);
    let absent = p
        .interface
        .as_deref()
        .is_some_and(|i| !Path::new("/sys/class/net").join(i).exists());
    let interface = if absent { None } else { p.interface.as_deref() };
    if !p.dual {
        return udp_socket(&what, p.local, interface, absent, false).map(|s| (s, absent));
    }
    // a dual-stack socket; a kernel without IPv6 (some routers) has IPv4 only
    match udp_socket(&what, p.local, interface, absent, true) {
        Ok(s) => Ok((s, absent)),
        Err(e) if Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)).is_err() => {
            tracing::warn!(path = %p.name, error = %e,
                "no IPv6 in this kernel: the path's socket is IPv4 only");
            let v4 = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), 0);
            udp_socket(&what, v4, interface, absent, false).map(|s| (s, absent))
        }
        Err(e) => Err(e),
    }
}

/// Bind `sock` to interface `ifname` (SO_BINDTODEVICE), again after the device was recreated
/// (the binding is by interface index).
pub fn bind_device(sock: &UdpSocket, ifname: &str) -> io::Result<()> {
    socket2::SockRef::from(sock).bind_device(Some(ifname.as_bytes()))
}

/// Bind a `[[listen]]` socket.
pub fn listen_socket(i: usize, local: SocketAddr) -> Result<UdpSocket> {
    udp_socket(&format!("listen[{i}] ({local})"), local, None, false, false)
}

/// Bind a UDP socket to `local` (and to `interface`, SO_BINDTODEVICE), dual-stack if `dual`;
/// `what` names it in errors.
fn udp_socket(
    what: &str,
    local: SocketAddr,
    interface: Option<&str>,
    freebind: bool,
    dual: bool,
) -> Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(local), Type::DGRAM, Some(Protocol::UDP))
        .with_context(|| format!("{what}: cannot create a UDP socket"))?;
    if let Some(ifname) = interface {
        sock.bind_device(Some(ifname.as_bytes())).map_err(|e| {
            if e.kind() == io::ErrorKind::PermissionDenied {
                anyhow!("{what}: binding to interface {ifname:?} needs CAP_NET_RAW or CAP_NET_ADMIN: {e}")
            } else {
                anyhow!("{what}: cannot bind to interface {ifname:?}: {e}")
            }
        })?;
    }
    // a dual-stack socket takes IPv4 mapped (`crate::families`); any other IPv6 socket is
    // IPv6 only
    let dual = dual && local.is_ipv6();
    if local.is_ipv6() {
        sock.set_only_v6(!dual).ok();
        if freebind {
            sock.set_freebind_v6(true).ok();
        }
    } else if freebind {
        sock.set_freebind_v4(true).ok();
    }
    // Larger buffers absorb bursts; the kernel caps them at net.core.[rw]mem_max. The receive
    // buffer is forced past that cap when we may (CAP_NET_ADMIN, which the TUN device needs
    // anyway): a burst of small datagrams overflows the default 208 KiB after ~270 of them.
    if force_recv_buffer(&sock, SOCKET_BUFFER).is_err() {
        sock.set_recv_buffer_size(SOCKET_BUFFER).ok();
    }
    sock.set_send_buffer_size(SOCKET_BUFFER).ok();
    // mptd's own datagrams leave by the uplinks, not through a full tunnel's default route
    // (`crate::fulltunnel`); setting the mark needs CAP_NET_ADMIN, which the daemon has
    if let Err(e) = set_int_option(
        &sock,
        libc::SOL_SOCKET,
        libc::SO_MARK,
        crate::fulltunnel::MARK as libc::c_int,
    ) {
        tracing::debug!(%what, error = %e, "cannot mark the socket (SO_MARK)");
    }
    // DF on everything, and no fragmenting by the kernel: a datagram larger than the route's
    // MTU fails with EMSGSIZE, which path MTU discovery takes at once (docs/protocol.md,
    // "Path MTU probes")
    let (level, name, value) = if local.is_ipv6() {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
    };
    set_int_option(&sock, level, name, value)
        .with_context(|| format!("{what}: cannot set path MTU discovery"))?;
    if dual {
        // and for the IPv4 it sends and receives, mapped
        set_int_option(
            &sock,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
        .with_context(|| format!("{what}: cannot set IPv4 path MTU discovery"))?;
    }
    sock.set_nonblocking(true)?;
    sock.bind(&local.into())
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EADDRNOTAVAIL) => {
                anyhow!(
                    "{what}: local address {} does not exist on this host",
                    local.ip()
                )
            }
            Some(libc::EADDRINUSE) => anyhow!("{what}: local port {} is already in use", local),
            Some(libc::EACCES) => anyhow!("{what}: not allowed to bind {}: {e}", local),
            _ => anyhow!("{what}: cannot bind {}: {e}", local),
        })?;
    UdpSocket::from_std(sock.into()).with_context(|| format!("{what}: cannot register socket"))
}

/// SO_RCVBUFFORCE: a receive buffer of `size` bytes regardless of net.core.rmem_max.
fn force_recv_buffer(sock: &Socket, size: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    set_int_option(sock, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v)
}

/// setsockopt(2) of an `int` option that socket2 does not cover.
pub fn set_int_option(
    sock: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: setsockopt on an open socket with a pointer to a c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Create the TUN interface with its addresses and MTU, and bring it up: `t.queues` queues
/// (multi-queue TUN when more than one), each its own descriptor.
pub fn tun_device(t: &TunnelConfig) -> Result<Vec<tun_rs::AsyncDevice>> {
    let builder = || {
        let mut b = tun_rs::DeviceBuilder::new()
            .name(&t.name)
            .mtu(t.mtu)
            .multi_queue(t.queues > 1)
            .packet_information(false);
        if let Some(first) = t.addresses.iter().find_map(|n| match n {
            IpNet::V4(n) => Some(*n),
            IpNet::V6(_) => None,
        }) {
            b = b.ipv4(first.addr(), first.prefix_len(), None);
        }
        for n in &t.addresses {
            if let IpNet::V6(n) = n {
                b = b.ipv6(n.addr(), n.prefix_len());
            }
        }
        b
    };
    let v4 = t
        .addresses
        .iter()
        .filter_map(|n| match n {
            IpNet::V4(n) => Some(*n),
            IpNet::V6(_) => None,
        })
        .skip(1);
    let dev = match builder().offload(true).build_sync() {
        Ok(dev) => Ok(dev),
        Err(e) => {
            tracing::info!(error = %e, "TUN offload unavailable; one packet per read and write");
            builder().build_sync()
        }
    };
    let dev = dev.map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EPERM) {
            anyhow!("cannot create TUN interface {:?}: {e} (mptd needs CAP_NET_ADMIN; run as root or grant the capability)", t.name)
        } else if !Path::new("/dev/net/tun").exists() {
            anyhow!("cannot create TUN interface {:?}: /dev/net/tun is missing (load the tun module)", t.name)
        } else {
            anyhow!("cannot create TUN interface {:?}: {e}", t.name)
        }
    })?;
    for n in v4 {
        dev.add_address_v4(n.addr(), n.prefix_len())
            .with_context(|| format!("cannot add {n} to {}", t.name))?;
    }
    let more = (1..t.queues)
        .map(|q| {
            dev.try_clone().with_context(|| {
                format!(
                    "cannot open queue {q} of {} (tunnel.queues = {})",
                    t.name, t.queues
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    std::iter::once(dev)
        .chain(more)
        .map(|q| tun_rs::AsyncDevice::new(q).context("cannot register the TUN device"))
        .collect()
}

/// The routes through the TUN device that `tunnel.routes` installs for `peers`: their
/// `allowed` prefixes but those inside the tunnel's own subnets and the default prefixes (a
/// full tunnel's: [`crate::fulltunnel`]), each with its peer's name.
pub fn wanted_routes(
    t: &crate::config::TunnelConfig,
    peers: &[crate::config::PeerConfig],
) -> Vec<(IpNet, String)> {
    let own: Vec<IpNet> = t.addresses.iter().map(IpNet::trunc).collect();
    let mut wanted = Vec::new();
    for peer in peers {
        for net in &peer.allowed {
            if !own.iter().any(|o| o.contains(net)) && !crate::fulltunnel::is_default(net) {
                wanted.push((*net, peer.name.clone()));
            }
        }
    }
    wanted
}

/// The `ip` arguments that `verb` (`replace`, `del`) the route to `net` through the tunnel
/// `t`'s device, in its `route_table` with its `route_protocol`.
pub fn route_args(verb: &str, t: &crate::config::TunnelConfig, net: IpNet) -> Vec<String> {
    [
        "route",
        verb,
        &net.to_string(),
        "dev",
        &t.name,
        "table",
        &t.route_table.to_string(),
        "proto",
        &t.route_protocol.to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Route `net` through the tunnel `t`'s device, for `peer`.
pub fn add_route(t: &crate::config::TunnelConfig, net: IpNet, peer: &str) -> Result<()> {
    let dev = &t.name;
    let out = std::process::Command::new("ip")
        .args(route_args("replace", t, net))
        .output()
        .with_context(|| format!("cannot run `ip route` for {net} (iproute2 missing?); set tunnel.routes = false to manage routes yourself"))?;
    if !out.status.success() {
        return Err(anyhow!(
            "cannot add the route {net} dev {dev} for peer {peer:?}: {}; set tunnel.routes = false to manage routes yourself",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    tracing::info!(route = %net, peer, dev, table = t.route_table, proto = t.route_protocol, "route installed");
    Ok(())
}

/// Remove the route to `net` through the tunnel `t`'s device (its peer went down or away).
pub fn remove_route(t: &crate::config::TunnelConfig, net: IpNet) {
    let ok = std::process::Command::new("ip")
        .args(route_args("del", t, net))
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        tracing::info!(route = %net, dev = %t.name, "route removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_go_to_the_table_and_with_the_protocol_configured() {
        let t = TunnelConfig {
            name: "tun0".to_owned(),
            addresses: vec!["198.19.0.1/24".parse().expect("prefix")],
            mtu: 1400,
            queues: 1,
            routes: true,
            route_table: 100,
            route_protocol: 200,
            fail_closed: false,
            failback: std::time::Duration::from_secs(10),
            state_dir: None,
        };
        let net = "192.168.10.0/24".parse().expect("prefix");
        assert_eq!(
            route_args("replace", &t, net).join(" "),
            "route replace 192.168.10.0/24 dev tun0 table 100 proto 200"
        );
    }
}
