//! `mpt-lab bench peers --count N`: one server, N sites. The server is a real mptd listening
//! in its namespace ([`crate::harness::sites`]); the sites are N protocol engines
//! (`mpt_tunnel::Connection`, the one mptd runs) driven from one thread in the router's
//! namespace, each with its own key pair and its own UDP socket (N source ports), making real
//! handshakes and then keeping their sessions alive with real, sealed keepalives. Measured:
//! how fast the server takes the handshakes, its memory per connected idle peer, and its CPU
//! while the N sessions idle.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mpt_core::rng::Rng;
use mpt_core::seal::{CipherChoice, PrivateKey, PublicKey};
use mpt_core::{PathId, Time};
use mpt_tunnel::{Connection, ConnectionConfig, Copies, KeySettings, Overhead, PathSettings};
use mptd::config::{ConfigFile, PeerFile};

use crate::experiments::bench::cpu_seconds;
use crate::harness::in_netns;
use crate::harness::sites::{Host, Sites, PORT, SERVER};

/// One emulated site.
pub(crate) struct Site {
    pub(crate) ep: Connection<Vec<u8>>,
    pub(crate) sock: UdpSocket,
}

/// A site's engine: one path to the server at `to`, initiating, with the defaults of mptd.
pub(crate) fn site_config(
    key: PrivateKey,
    server: PublicKey,
    to: SocketAddr,
    unix: u64,
) -> ConnectionConfig {
    ConnectionConfig {
        paths: vec![PathSettings {
            name: "p0".into(),
            remote: Some(to),
            weight: 1,
            rate_bps: None,
            backup: false,
            priority: 1,
            overhead: Overhead::new(true, false).outer_link(),
            mtu: None,
        }],
        scheduler: mpt_sched::SchedulerKind::RoundRobin,
        reorder_window: 64,
        reorder_timeout: Duration::from_millis(100),
        keepalive: Duration::from_millis(100),
        dead: Duration::from_millis(500),
        idle_keepalive: Some(Duration::from_secs(10)),
        mtu: 1400,
        keys: KeySettings {
            private: key,
            peer: server,
            psk: None,
            encryption: Some(CipherChoice::Auto),
            aes_in_hardware: mpt_core::seal::aes_in_hardware(),
            initiate: true,
            unix_nanos_at_zero: unix,
            rekey_after: mpt_tunnel::REKEY_AFTER,
        },
        index_slot: None,
        follow_peer_paths: false,
        bundle: true,
        resend: true,
        equalise: true,
        compress: false,
        pace: false,
        parity: true,
        classes: mpt_tunnel::default_classes(),
    }
}

/// A site: a new UDP socket (in the router's namespace) and an engine with `cfg`, its clock
/// at `now`.
pub(crate) fn new_site(cfg: ConnectionConfig, now: Time, rng: &mut Rng) -> Result<Site> {
    let sock = UdpSocket::bind("198.18.100.254:0")?;
    sock.set_nonblocking(true)?;
    let mut r = Rng::new(rng.next_u64());
    let ep = Connection::new(cfg, now, Box::new(move |b: &mut [u8]| r.fill(b)));
    Ok(Site { ep, sock })
}

/// The server mptd as the sites see it.
pub(crate) struct Server {
    pub(crate) pid: u32,
    pub(crate) key: PublicKey,
    /// Where the sites send.
    pub(crate) to: SocketAddr,
    /// The Unix time (ns) the sites' clocks start at.
    pub(crate) unix: u64,
}

/// Start the server with a peer for each of `keys` (`s0`, `s1`, ...; no kernel routes), its
/// config edited by `edit` first.
pub(crate) fn start_server(
    lab: &mut Sites,
    keys: &[PrivateKey],
    edit: impl FnOnce(&mut ConfigFile),
) -> Result<Server> {
    let mut cfg = lab.server_config()?;
    if let Some(t) = cfg.tunnel.as_mut() {
        t.routes = Some(false);
    }
    cfg.peer = keys
        .iter()
        .enumerate()
        .map(|(k, key)| PeerFile {
            name: Some(format!("s{k}")),
            public_key: Some(key.public().encode()),
            ..PeerFile::default()
        })
        .collect();
    edit(&mut cfg);
    let pid = lab.start_mptd(Host::Server, &cfg)?;
    Ok(Server {
        pid,
        key: PublicKey::parse(&lab.public_key(Host::Server)?)?,
        to: format!("{SERVER}:{PORT}").parse()?,
        unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as u64,
    })
}

/// Resident memory of `pid`, KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmRSS")
}

/// A figure in KiB of `/proc/PID/status` by its name (`VmRSS`, `RssAnon`, `RssFile`).
pub fn status_kib(pid: u32, name: &str) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| name.to_string())
}

/// What the sites' thread saw.
struct Run {
    /// When each site's session was made, from the start.
    agreed: Vec<Option<Duration>>,
}

/// Wait (poll(2), at most 20 ms) until a datagram is on any of the sites' sockets or their next
/// timer is due; `fds` gets the sockets, and which have datagrams.
pub(crate) fn wait(sites: &[Site], fds: &mut Vec<libc::pollfd>, t: Time) {
    fds.clear();
    fds.extend(sites.iter().map(|s| libc::pollfd {
        fd: s.sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }));
    let next = sites.iter().map(|s| s.ep.poll_timeout()).min().unwrap_or(t);
    let wait_ms = (next.saturating_since(t).as_millis() as i32).clamp(0, 20);
    // SAFETY: poll(2) on an array of pollfd the length we pass.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
}

/// What the sites' turns reuse: a receive buffer, and the inner packets a turn delivered.
pub(crate) struct Scratch {
    buf: Vec<u8>,
    pub(crate) delivered: Vec<Vec<u8>>,
}

impl Scratch {
    pub(crate) fn new() -> Scratch {
        Scratch {
            buf: vec![0; 2048],
            delivered: Vec::new(),
        }
    }
}

/// A site's turn at `t`: the datagrams on its socket (when `readable`; the inner packets they
/// deliver go to `x.delivered`), its timers, and what it has to send. With its uplink down
/// (`up` false) what arrives is dropped and nothing leaves.
pub(crate) fn turn(s: &mut Site, t: Time, readable: bool, up: bool, x: &mut Scratch) {
    let buf = &mut x.buf;
    while let Some(Ok((n, from))) = readable.then(|| s.sock.recv_from(buf)) {
        if up {
            let via = mpt_tunnel::Via {
                path: PathId(0),
                from,
            };
            let delivered = &mut x.delivered;
            s.ep.handle_datagram(t, via, &mut buf[..n], None, &mut Copies, delivered);
        }
    }
    if s.ep.poll_timeout() <= t {
        s.ep.handle_timeout(t);
    }
    while let Some(x) = s.ep.poll_datagram(t) {
        if up {
            let _ = s.sock.send_to(&x.contents, x.destination);
        }
    }
    while s.ep.poll_event().is_some() {}
}

/// Drive the sites for `secs`: every datagram and timer of every endpoint, with one poll(2)
/// over all the sockets. `at_connected` is called once when all have a session.
fn drive(sites: &mut [Site], secs: f64, mut at_connected: impl FnMut(Duration)) -> Run {
    let start = Instant::now();
    let now = |s: Instant| Time::from_nanos(s.elapsed().as_nanos() as u64);
    let mut agreed = vec![None; sites.len()];
    let mut left = sites.len();
    let mut x = Scratch::new();
    let mut fds = Vec::with_capacity(sites.len());
    while start.elapsed().as_secs_f64() < secs {
        wait(sites, &mut fds, now(start));
        let t = now(start);
        for (i, s) in sites.iter_mut().enumerate() {
            turn(s, t, fds[i].revents != 0, true, &mut x);
            x.delivered.clear();
            if agreed[i].is_none() && s.ep.keys_agreed() {
                agreed[i] = Some(start.elapsed());
                left -= 1;
                if left == 0 {
                    at_connected(start.elapsed());
                }
            }
        }
    }
    Run { agreed }
}

/// `count` sites against one server: see the module documentation.
pub fn run(out: &Path, count: usize) -> Result<String> {
    if count == 0 || count > 65_535 {
        bail!("--count must be 1 to 65535");
    }
    let mut lab = Sites::new(0, 0)?;
    let keys: Vec<PrivateKey> = (0..count)
        .map(|_| PrivateKey::generate())
        .collect::<Result<_, _>>()?;
    let server = start_server(&mut lab, &keys, |_| {})?;
    let Server {
        pid,
        key: server_key,
        to,
        unix,
    } = server;
    std::thread::sleep(Duration::from_millis(500));
    let (rss0, cpu0) = (rss_kib(pid)?, cpu_seconds(pid)?);
    let idle = 10.0;
    let connect_phase = 60.0_f64.min(5.0 + count as f64 / 200.0);
    let router = lab.ns_router();
    let (run, connected, rss1, cpu_idle) = in_netns(&router, move || -> Result<_> {
        let mut rng = Rng::new(unix);
        let mut sites = Vec::with_capacity(count);
        for key in keys {
            let cfg = site_config(key, server_key, to, unix);
            sites.push(new_site(cfg, Time::ZERO, &mut rng)?);
        }
        // until every site has a session (or 60 s), then `idle` seconds of keepalives
        let mut connected = None;
        let first = drive(&mut sites, connect_phase, |t| connected = Some(t));
        let rss1 = rss_kib(pid)?;
        let c0 = cpu_seconds(pid)?;
        drive(&mut sites, idle, |_| {});
        let cpu_idle = cpu_seconds(pid)? - c0;
        Ok((first, connected, rss1, cpu_idle))
    })??;
    let agreed = run.agreed.iter().filter(|a| a.is_some()).count();
    let st = lab.status(Host::Server)?;
    let sessions = st.peers.iter().filter(|p| p.keys_agreed).count();
    let last = run
        .agreed
        .iter()
        .flatten()
        .max()
        .copied()
        .unwrap_or_default();
    let per_peer = (rss1.saturating_sub(rss0)) as f64 / count as f64;
    let cpu_handshakes = cpu_seconds(pid)? - cpu0 - cpu_idle;
    let md = format!(
        "| sites | sessions (site / server) | all connected after | handshakes/s | server RSS before / after | per idle peer | server CPU while idle | per 1 000 idle peers |\n\
         |---|---|---|---|---|---|---|---|\n\
         | {count} | {agreed} / {sessions} | {} | {:.0} | {rss0} / {rss1} KiB | {per_peer:.1} KiB | {:.1} % of a core | {:.1} % |\n\n\
         Server CPU while the sites connected and then kept alive for the rest of {connect_phase:.0} s: {cpu_handshakes:.2} s. \
         {} keepalives a second reach the server (one per site per 100 ms), and as many answers leave it.\n",
        connected.map_or_else(|| format!("not all ({last:.1?} for the last)"), |t| format!("{t:.2?}")),
        agreed as f64 / last.as_secs_f64().max(1e-3),
        100.0 * cpu_idle / idle,
        100.0 * cpu_idle / idle * 1000.0 / count as f64,
        count * 10,
    );
    let head = crate::summary::Headline {
        key: "peers".into(),
        what: format!("{count} idle sites on one server (`mpt-lab bench peers --count {count}`)"),
        figure: format!(
            "**{per_peer:.1} KiB** of server memory per idle peer, {:.1} % of a core for the \
             {count}; all connected after {}",
            100.0 * cpu_idle / idle,
            connected.map_or_else(|| "—".to_owned(), |t| format!("{:.2} s", t.as_secs_f64()))
        ),
    };
    let md = format!("{md}\n{}\n", head.comment());
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("peers-{count}.md")), &md)?;
    if agreed < count || sessions < count {
        bail!("only {agreed} of {count} sites (server: {sessions}) got a session\n{md}");
    }
    Ok(md)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_status_gives_its_rss_and_its_anonymous_part() {
        let pid = std::process::id();
        let rss = super::rss_kib(pid).expect("VmRSS");
        let anon = super::status_kib(pid, "RssAnon").expect("RssAnon");
        assert!(anon > 0 && anon <= rss, "RssAnon {anon} of VmRSS {rss}");
        assert!(
            super::status_kib(pid, "Rss").is_err(),
            "a prefix is no name"
        );
    }
}
