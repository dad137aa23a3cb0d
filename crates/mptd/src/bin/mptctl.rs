//! `mptctl -s SOCKET status [--json]`: ask a running mptd how its paths are doing.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mptd::status::Status;

/// Control a running mptd.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The daemon's control socket ([control] socket in its config).
    #[arg(
        short,
        long,
        value_name = "SOCKET",
        default_value = "/run/mptd/tun0.sock"
    )]
    socket: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Per-path state, traffic, RTT, loss, jitter, delay and reordering, and tunnel totals.
    Status {
        /// Print the JSON document (stable, see docs/status.md).
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Status { json } => {
            if json {
                return match mptd::control::request(&args.socket, "status") {
                    Ok(reply) => {
                        print!("{reply}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!(
                            "mptctl: cannot talk to mptd at {}: {e}",
                            args.socket.display()
                        );
                        ExitCode::FAILURE
                    }
                };
            }
            match mptd::control::status(&args.socket) {
                Ok(s) => {
                    print_status(&s);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("mptctl: {e:#}");
                    ExitCode::FAILURE
                }
            }
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
        "  reports sent: {} B (budget now {:.2} % of the bytes received); keepalives sent: {}, answered: {}",
        t.tx_report_bytes,
        t.report_fraction * 100.0,
        t.keepalives_sent,
        t.keepalive_acks_sent
    );
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
