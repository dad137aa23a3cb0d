//! `mptd --check`: what would stop this host from running a config now, and what the operator
//! should know before it runs.

/// What would stop this host from running `cfg` now (`mptd --check`): the capability to make
/// the TUN device, the local addresses the sockets bind (each checked with port 0, so that a
/// daemon already running does not count), interfaces whose MTU cannot carry the tunnel's
/// packets, and a control socket another daemon answers on. And what would not stop it but
/// the operator should know: absent interfaces (their paths wait for them). Returns
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
