//! `mptd --check`: what would stop this host from running a config now, and what the operator
//! should know before it runs.

use std::path::Path;

/// What would stop this host from running `cfg` now (`mptd --check`): the capability to make
/// the TUN device, the local addresses the sockets bind (each checked with port 0, so that a
/// daemon already running does not count), interfaces whose MTU cannot carry the tunnel's
/// packets, a control socket another daemon answers on or that cannot be made. And what would
/// not stop it but the operator should know: absent interfaces (their paths wait for them),
/// uplinks whose reverse-path filter drops the server's answers. Returns
/// (problems, warnings), one message each.
pub fn check_host(cfg: &crate::config::Config) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    if !has_net_admin() {
        problems.push(
            "this process lacks CAP_NET_ADMIN, which creating the TUN device needs: run mptd as \
             root, or with the capability (the systemd unit gives it)"
                .to_owned(),
        );
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
    {
        problems.push(format!(
            "cannot open /dev/net/tun: {e} (is the tun module loaded?)"
        ));
    }
    let bindable = |addr: std::net::SocketAddr| {
        let probe = std::net::SocketAddr::new(addr.ip(), 0);
        std::net::UdpSocket::bind(probe).map(|_| ())
    };
    if cfg.paths.iter().any(|p| p.budget.is_some()) {
        warnings.extend(crate::budget::store::check(cfg.tunnel.state_dir.as_deref()));
    }
    for p in &cfg.paths {
        match &p.interface {
            Some(i) if !std::path::Path::new("/sys/class/net").join(i).exists() => {
                warnings.push(format!(
                    "path {:?}: interface {i:?} does not exist now (its path waits for it)",
                    p.name
                ))
            }
            _ => {}
        }
        if !p.local.ip().is_unspecified() {
            if let Err(e) = bindable(p.local) {
                problems.push(format!(
                    "path {:?}: local address {} cannot be bound here: {e}",
                    p.name,
                    p.local.ip()
                ));
            }
        }
    }
    for (i, l) in cfg.listen.iter().enumerate() {
        if let Err(e) = bindable(*l) {
            problems.push(format!("listen[{i}]: {} cannot be bound here: {e}", l.ip()));
        }
    }
    problems.extend(socket_unwritable(&cfg.control.socket));
    warnings.extend(strict_reverse_paths(cfg));
    if std::os::unix::net::UnixStream::connect(&cfg.control.socket).is_ok() {
        problems.push(format!(
            "control socket {} answers: another mptd runs with this config",
            cfg.control.socket.display()
        ));
    }
    (problems, warnings)
}

/// Whether this process has CAP_NET_ADMIN in its effective set (/proc/self/status).
fn has_net_admin() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))?
                .trim()
                .to_owned();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

/// Why the control socket cannot be made at `socket` here: the nearest of its directories that
/// exists (mptd makes the rest) is not writable, as under the systemd unit, where the system
/// is read-only but for `/run` and the unit's state directory (`ProtectSystem=strict`).
fn socket_unwritable(socket: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let existing = dir.ancestors().find(|d| d.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path, which access(2) only reads
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        return None;
    }
    let e = std::io::Error::last_os_error();
    Some(format!(
        "control socket {}: cannot be made here, {} is not writable ({e}); under the systemd \
         unit /etc, /usr and /var are read-only: leave [control] socket unset (the unit's is \
         /run/mptd/NAME/control.sock)",
        socket.display(),
        existing.display()
    ))
}

/// The uplinks whose IPv4 reverse-path filter is strict (`rp_filter` = 1, the larger of the
/// interface's and `all`'s), where that drops the server's answers: with a full tunnel the
/// host's route to the server is the tunnel's, and with several uplinks it leaves by one of
/// them only, so an answer arriving on another fails the check.
fn strict_reverse_paths(cfg: &crate::config::Config) -> Vec<String> {
    let read = |dev: &str| -> Option<u8> {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/conf/{dev}/rp_filter"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let uplinks: Vec<(&str, &str)> = cfg
        .paths
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.interface.as_deref()?)))
        .collect();
    let mut devices: Vec<&str> = uplinks.iter().map(|u| u.1).collect();
    devices.sort_unstable();
    devices.dedup();
    let full = cfg
        .peers
        .iter()
        .flat_map(|p| &p.allowed)
        .any(|n| matches!(n, crate::config::IpNet::V4(_)) && crate::fulltunnel::is_default(n))
        && cfg.tunnel.routes;
    if !full && devices.len() < 2 {
        return Vec::new();
    }
    let all = read("all").unwrap_or(0);
    uplinks
        .into_iter()
        .filter(|(_, dev)| read(dev).is_some_and(|v| v.max(all) == 1))
        .map(|(name, dev)| {
            format!(
                "path {name:?}: {dev} filters reverse paths strictly (rp_filter = 1), which \
                 drops the server's answers on it (the host's route to the server leaves by \
                 {}): set net.ipv4.conf.all.rp_filter = 2 (loose) in /etc/sysctl.d \
                 (docs/deploy.md, \"A site\")",
                if full {
                    "the tunnel"
                } else {
                    "one uplink only"
                }
            )
        })
        .collect()
}
