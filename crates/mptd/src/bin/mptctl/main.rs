//! `mptctl -s SOCKET status [--json]` and `mptctl -s SOCKET show [PEER]`: ask a running mptd
//! how its peers and paths are doing. The exit code says it too, for scripts and health
//! checks: see [`Health`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use mptd::cli::{CtlArgs as Args, CtlCommand as Command, PathAction};
use mptd::status::Status;

mod format;
mod render;
use render::{print_show, print_status};

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
fn command(socket: &Path, request: &str) -> ExitCode {
    let reply = match mptd::control::request(socket, request) {
        Ok(reply) => reply,
        Err(e) => return no_answer(socket, &e),
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

/// What follows "no mptd answers": where to look.
const NOT_RUNNING: &str = " (is it running? `systemctl status mptd@NAME`; `-s NAME` looks at \
     /run/mptd/NAME/control.sock, the unit's, then /run/mptd/NAME.sock)";

/// No answer at `socket`: why, and exit 3. A socket this user may not reach is not a daemon
/// that is not running: the unit's directory is root's (mode 0750), so that says "sudo".
fn no_answer(socket: &Path, e: &std::io::Error) -> ExitCode {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        eprintln!(
            "mptctl: {}: {e}: mptd's control socket is root's; run mptctl with sudo",
            socket.display()
        );
    } else {
        eprintln!(
            "mptctl: no mptd answers at {}: {e}{NOT_RUNNING}",
            socket.display()
        );
    }
    Health::NoDaemon.code()
}

/// The socket `-s` names: a path, or a name (see [`Args::socket`]). The unit's socket counts
/// as there when this user may not look into its directory: asking it then says why.
fn socket_of(s: PathBuf) -> PathBuf {
    let Some(name) = s.to_str().filter(|n| !n.contains('/')) else {
        return s;
    };
    let unit = PathBuf::from(format!("/run/mptd/{name}/control.sock"));
    match unit.try_exists() {
        Ok(false) => PathBuf::from(format!("/run/mptd/{name}.sock")),
        Ok(true) | Err(_) => unit,
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
            PathAction::Budget {
                action: mptd::cli::BudgetAction::Reset,
            } => "budget reset".to_owned(),
        };
        return command(&args.socket, &format!("path {name} {action}"));
    }
    let status = match mptd::control::request(&args.socket, "status") {
        Ok(reply) => reply,
        Err(e) => return no_answer(&args.socket, &e),
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

/// `mptctl watch`: a frame per interval, each path's throughput since the last one as bars.
/// (A client's wall clock: the daemon's own time comes from its `Clock`.)
#[allow(clippy::disallowed_methods)]
fn watch(socket: &Path, interval: f64, count: Option<u64>) -> ExitCode {
    use std::io::IsTerminal;
    let every = std::time::Duration::from_secs_f64(interval.clamp(0.05, 3600.0));
    let tty = std::io::stdout().is_terminal();
    let mut throughput = mptd::status::Throughput::default();
    let mut last_at = std::time::Instant::now();
    let mut peak = 1.0f64;
    let mut frame = 0u64;
    loop {
        let reply = match mptd::control::request(socket, "status") {
            Ok(reply) => reply,
            Err(e) => return no_answer(socket, &e),
        };
        let s = match mptd::control::parse_status(&reply) {
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
