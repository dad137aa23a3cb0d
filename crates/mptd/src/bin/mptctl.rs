//! `mptctl -s SOCKET status [--json]` and `mptctl -s SOCKET show [PEER]`: ask a running mptd
//! how its peers and paths are doing. The exit code says it too, for scripts and health
//! checks: see [`Health`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mptd::cli::{CtlArgs as Args, CtlCommand as Command, PathAction};
use mptd::status::Status;

/// What the exit code of `status` and `show` says (as monitoring plugins have it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    /// 0: every peer has a session and every path is up.
    Ok = 0,
    /// 1: degraded: some path is down, or some peer has no session, but some path is up.
    Degraded = 1,
    /// 2: down: no path of any peer is up.
    Down = 2,
    /// 3: no answer from a daemon at the socket.
    NoDaemon = 3,
}

impl Health {
    fn of(s: &Status) -> Health {
        let paths: Vec<&mptd::status::PathStatus> = if s.peers.is_empty() {
            s.paths.iter().collect()
        } else {
            s.peers.iter().flat_map(|p| &p.paths).collect()
        };
        let up = paths.iter().filter(|p| p.state == "up").count();
        let sessions = if s.peers.is_empty() {
            s.tunnel.keys_agreed
        } else {
            s.peers.iter().all(|p| p.keys_agreed)
        };
        if up == 0 {
            Health::Down
        } else if up < paths.len() || !sessions {
            Health::Degraded
        } else {
            Health::Ok
        }
    }

    fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }
}

/// Send `request`, whose answer is text to print (`showconf`, `path ...`): 0 when the daemon
/// did it, 1 with its error.
/// Send `request`: exit 0 with its answer, 1 with the daemon's refusal, 3 when no daemon
/// answers (as `status` tells it).
fn command(socket: &std::path::Path, request: &str) -> ExitCode {
    let reply = match mptd::control::request(socket, request) {
        Ok(reply) => reply,
        Err(e) => {
            eprintln!("mptctl: no mptd answers at {}: {e}", socket.display());
            return Health::NoDaemon.code();
        }
    };
    match mptd::control::parse_answer(&reply) {
        Ok(text) => {
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mptctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The socket `-s` names: a path, or a name (see [`Args::socket`]).
fn socket_of(s: PathBuf) -> PathBuf {
    let Some(name) = s.to_str().filter(|n| !n.contains('/')) else {
        return s;
    };
    let unit = PathBuf::from(format!("/run/mptd/{name}/control.sock"));
    if unit.exists() {
        unit
    } else {
        PathBuf::from(format!("/run/mptd/{name}.sock"))
    }
}

fn main() -> ExitCode {
    let mut args = Args::parse();
    args.socket = socket_of(args.socket);
    if let Command::Watch { interval, count } = args.command {
        return watch(&args.socket, interval, count);
    }
    if let Command::Showconf = &args.command {
        return command(&args.socket, "showconf");
    }
    if let Command::Reload = &args.command {
        return command(&args.socket, "reload");
    }
    if let Command::Path { name, action } = &args.command {
        let action = match action {
            PathAction::Up => "up".to_owned(),
            PathAction::Down => "down".to_owned(),
            PathAction::Backup => "backup".to_owned(),
            PathAction::Primary => "primary".to_owned(),
            PathAction::Weight { weight } => format!("weight {weight}"),
            PathAction::Rate { rate } => format!("rate {rate}"),
        };
        return command(&args.socket, &format!("path {name} {action}"));
    }
    let status = match mptd::control::request(&args.socket, "status") {
        Ok(reply) => reply,
        Err(e) => {
            eprintln!("mptctl: no mptd answers at {}: {e}", args.socket.display());
            return Health::NoDaemon.code();
        }
    };
    let parsed = mptd::control::parse_status(&status);
    match args.command {
        Command::Status { json: true } => {
            print!("{status}");
            parsed.map_or(Health::NoDaemon, |s| Health::of(&s)).code()
        }
        Command::Status { json: false } => match parsed {
            Ok(s) => {
                print_status(&s);
                Health::of(&s).code()
            }
            Err(e) => {
                eprintln!("mptctl: {e:#}");
                Health::NoDaemon.code()
            }
        },
        Command::Path { .. } | Command::Showconf | Command::Reload | Command::Watch { .. } => {
            unreachable!("answered above")
        }
        Command::Show { peer } => match parsed {
            Ok(s) => {
                if let Some(name) = &peer {
                    if !s.peers.iter().any(|p| &p.name == name) {
                        let names: Vec<&str> = s.peers.iter().map(|p| p.name.as_str()).collect();
                        eprintln!("mptctl: no peer {name:?}; the peers are {names:?}");
                        return ExitCode::from(64);
                    }
                }
                print_show(&s, peer.as_deref());
                Health::of(&s).code()
            }
            Err(e) => {
                eprintln!("mptctl: {e:#}");
                Health::NoDaemon.code()
            }
        },
    }
}

/// Bytes as people read them.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// How long ago, from milliseconds.
fn ago(ms: Option<u64>) -> String {
    match ms {
        None => "never".to_owned(),
        Some(m) if m < 1000 => format!("{m} ms ago"),
        Some(m) if m < 120_000 => format!("{:.1} s ago", m as f64 / 1000.0),
        Some(m) => format!("{} min {} s ago", m / 60_000, m / 1000 % 60),
    }
}

/// `mptctl show`: a block per peer, a few lines per path.
fn print_show(s: &Status, only: Option<&str>) {
    let t = &s.tunnel;
    println!("interface: {}", t.name);
    println!("  scheduler: {}", t.scheduler);
    println!("  encryption: {}", t.encryption);
    for peer in s.peers.iter().filter(|p| only.is_none_or(|n| n == p.name)) {
        println!();
        println!("peer: {} ({})", peer.name, peer.public_key);
        match &peer.endpoint {
            Some(e) => println!("  endpoint: {e}"),
            None if peer.listening => println!("  endpoint: (comes to our listen sockets)"),
            None => println!("  endpoint: (waits for the peer)"),
        }
        match (&peer.session, peer.keys_agreed) {
            (Some(session), true) => println!(
                "  session: {session}, {}; latest handshake: {}; renewed {} times, restarted {} times",
                peer.cipher.as_deref().unwrap_or("in the clear"),
                ago(peer.last_handshake_ms),
                peer.rekeys,
                peer.restarts
            ),
            _ => println!("  session: none yet"),
        }
        println!("  heard: {}", ago(peer.last_heard_ms));
        println!(
            "  transfer: {} received, {} sent",
            bytes(peer.rx_bytes),
            bytes(peer.tx_bytes)
        );
        for p in &peer.paths {
            let state = match (&p.down_reason, p.state.as_str()) {
                (Some(why), "down") => format!("down ({why})"),
                (_, state) => state.to_owned(),
            };
            println!();
            println!(
                "  path: {}{}",
                p.name,
                if p.backup { " (backup)" } else { "" }
            );
            println!("    state: {state}");
            println!("    endpoint: {} -> {}", p.local, p.remote);
            println!("    heard: {}", ago(p.last_heard_ms));
            let rtt = p
                .rtt_us
                .map_or("-".to_owned(), |r| format!("{:.2} ms", r as f64 / 1000.0));
            let rate = p
                .rate_bps
                .map_or("-".to_owned(), |r| format!("{:.2} Mbit/s", r as f64 / 1e6));
            println!(
                "    rtt: {rtt}, loss: {:.2} %, jitter: {:.2} ms, rate: {rate}",
                p.loss_pct,
                p.jitter_us / 1000.0
            );
            println!(
                "    transfer: {} received, {} sent",
                bytes(p.rx_bytes),
                bytes(p.tx_bytes)
            );
        }
    }
}

fn print_status(s: &Status) {
    let t = &s.tunnel;
    println!(
        "tunnel {}  scheduler {}  encryption {}{}  up {:.1}s  session {}  peer {}{}",
        t.name,
        t.scheduler,
        match &t.cipher {
            Some(c) if *c != t.encryption => format!("{} ({c})", t.encryption),
            _ => t.encryption.clone(),
        },
        if t.encryption != "none" && !t.keys_agreed {
            " (no keys agreed yet)"
        } else {
            ""
        },
        t.uptime_ms as f64 / 1000.0,
        t.session,
        t.peer_session.as_deref().unwrap_or("-"),
        if t.peer_restarts > 0 {
            format!(" (restarted {}x)", t.peer_restarts)
        } else {
            String::new()
        }
    );
    println!(
        "  tx {} pkts {} B   rx {} pkts {} B   delivered {}",
        t.tx_packets, t.tx_bytes, t.rx_packets, t.rx_bytes, t.delivered
    );
    let r = &t.reseq;
    println!(
        "  reseq window {} timeout {}ms held {}  reordered {} (max extent {})  out-of-order {}  skipped {}  late {}  released: timeout {} fence {} overflow {}",
        r.window, r.timeout_ms, r.held, r.reordered, r.reorder_extent_max, r.delivered_out_of_order,
        r.skipped, r.late, r.released_by_timeout, r.released_by_fence, r.released_by_overflow
    );
    println!(
        "  hold p50 {}us p99 {}us max {}us   occupancy mean {:.1} p99 {} max {}",
        r.hold_p50_us,
        r.hold_p99_us,
        r.hold_max_us,
        r.occupancy_mean,
        r.occupancy_p99,
        r.occupancy_max
    );
    let d = &t.drops;
    println!(
        "  drops: no-path {} send {} tun {} path-mismatch {} malformed {} duplicate {} too-old {}",
        d.no_path,
        d.send_error,
        d.tun_write_error,
        d.path_mismatch,
        d.malformed(),
        d.duplicate,
        d.too_old
    );
    println!(
        "  handshake drops: unknown-key {} bad-handshake {} stale-handshake {} cipher-mismatch {}; \
         session drops: unauthenticated {} bad-tag {} replayed {} unknown-session {} no-session {}",
        d.unknown_key, d.bad_handshake, d.stale_handshake, d.cipher_mismatch,
        d.unauthenticated, d.bad_tag, d.replayed, d.unknown_session, d.no_session
    );
    println!(
        "  reports sent: {} B (budget now {:.2} % of the bytes received); keepalives sent: {}, answered: {}; bundles sent: {} carrying {} packets",
        t.tx_report_bytes,
        t.report_fraction * 100.0,
        t.keepalives_sent,
        t.keepalive_acks_sent,
        t.bundles_sent,
        t.bundled_packets
    );
    let path_name = |i: usize| {
        s.paths
            .get(i)
            .map_or_else(|| format!("#{i}"), |p| p.name.clone())
    };
    for c in s.tunnel.classes.iter().filter(|c| c.sent > 0) {
        let where_: Vec<String> = c
            .sent_per_path
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, n)| format!("{} {n}", path_name(i)))
            .collect();
        println!(
            "  class {} ({}): {} packets sent: {}",
            c.name,
            c.mode,
            c.sent,
            where_.join(", ")
        );
    }
    if s.tunnel.copies_sent > 0 {
        println!(
            "  copies sent (duplicate classes): {}",
            s.tunnel.copies_sent
        );
    }
    if s.peers.is_empty() {
        println!();
        print_paths(&s.paths);
    }
    for peer in &s.peers {
        println!();
        let age = |ms: Option<u64>| {
            ms.map_or("never".to_owned(), |m| {
                format!("{:.1}s ago", m as f64 / 1000.0)
            })
        };
        println!(
            "peer {}  key {}  {}  session {}  handshake {}  heard {}{}",
            peer.name,
            peer.public_key,
            peer.endpoint.as_deref().map_or_else(
                || if peer.listening {
                    "comes to us".to_owned()
                } else {
                    "waits for it".to_owned()
                },
                |e| format!("endpoint {e}")
            ),
            if peer.keys_agreed {
                peer.cipher.as_deref().unwrap_or("plain")
            } else {
                "none yet"
            },
            age(peer.last_handshake_ms),
            age(peer.last_heard_ms),
            if peer.restarts > 0 {
                format!("  (new sessions: {})", peer.restarts)
            } else {
                String::new()
            }
        );
        print_paths(&peer.paths);
    }
}

fn print_paths(paths: &[mptd::status::PathStatus]) {
    println!(
        "{:<3} {:<10} {:<8} {:>10} {:>12} {:>10} {:>12} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10}",
        "id",
        "path",
        "state",
        "tx pkts",
        "tx bytes",
        "rx pkts",
        "rx bytes",
        "rtt ms",
        "loss %",
        "jitter ms",
        "owd ms",
        "reorder",
        "rate Mbit"
    );
    for p in paths {
        println!(
            "{:<3} {:<10} {:<8} {:>10} {:>12} {:>10} {:>12} {:>9} {:>7.2} {:>9.2} {:>9.2} {:>9} {:>10}",
            p.id,
            p.name,
            p.state,
            p.tx_packets,
            p.tx_bytes,
            p.rx_packets,
            p.rx_bytes,
            p.rtt_us
                .map_or("-".to_owned(), |r| format!("{:.2}", r as f64 / 1000.0)),
            p.loss_pct,
            p.jitter_us / 1000.0,
            p.owd_us / 1000.0,
            p.reordered,
            p.rate_bps.map_or("-".to_owned(), |r| format!("{:.3}", r as f64 / 1e6))
        );
        println!(
            "    {} -> {}{}",
            p.local,
            p.remote,
            p.down_reason
                .as_deref()
                .map_or(String::new(), |r| format!("   down: {r}"))
        );
    }
}

/// `mptctl watch`: a frame per interval, each path's throughput since the last one as bars.
/// (A client's wall clock: the daemon's own time comes from its `Clock`.)
#[allow(clippy::disallowed_methods)]
fn watch(socket: &std::path::Path, interval: f64, count: Option<u64>) -> ExitCode {
    use std::io::IsTerminal;
    let every = std::time::Duration::from_secs_f64(interval.clamp(0.05, 3600.0));
    let tty = std::io::stdout().is_terminal();
    let mut throughput = mptd::status::Throughput::default();
    let mut last_at = std::time::Instant::now();
    let mut peak = 1.0f64;
    let mut frame = 0u64;
    loop {
        let s = match mptd::control::status(socket) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("mptctl: {e:#}");
                return Health::NoDaemon.code();
            }
        };
        let rows = throughput.rates(&s, last_at.elapsed().as_secs_f64());
        last_at = std::time::Instant::now();
        for r in &rows {
            peak = peak.max(r.tx_bps).max(r.rx_bps);
        }
        let mut out = String::new();
        if tty {
            out.push_str("\x1b[H\x1b[2J");
        }
        out.push_str(&format!(
            "{}  {} peers  up {:.0} s  (every {:.1} s; bars to {:.1} Mbit/s)\n",
            s.tunnel.name,
            s.peers.len(),
            s.tunnel.uptime_ms as f64 / 1000.0,
            every.as_secs_f64(),
            peak / 1e6
        ));
        out.push_str(&format!(
            "{:<16} {:<10} {:<8} {:<34} {:<34}\n",
            "peer", "path", "state", "sent Mbit/s", "received Mbit/s"
        ));
        let bar = |v: f64| {
            let n = ((v / peak) * 24.0).round() as usize;
            format!(
                "{}{} {:>8.2}",
                "#".repeat(n.min(24)),
                ".".repeat(24 - n.min(24)),
                v / 1e6
            )
        };
        for r in rows {
            out.push_str(&format!(
                "{:<16} {:<10} {:<8} {:<34} {:<34}\n",
                r.peer.name,
                r.path.name,
                r.path.state,
                bar(r.tx_bps),
                bar(r.rx_bps)
            ));
        }
        print!("{out}");
        if !tty {
            println!();
        }
        frame += 1;
        if count.is_some_and(|c| frame >= c) {
            return Health::of(&s).code();
        }
        std::thread::sleep(every);
    }
}
