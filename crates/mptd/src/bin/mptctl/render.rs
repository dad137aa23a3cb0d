//! `mptctl status` and `mptctl show` as people read them: a daemon's [`Status`] rendered as
//! text (the JSON is the document itself).

use mptd::status::Status;

use crate::format::{ago, budget_line, bytes};

/// `mptctl show`: a block per peer, a few lines per path.
pub(crate) fn print_show(s: &Status, only: Option<&str>) {
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
        if let Some(role) = &peer.role {
            println!("  role: {role}");
        }
        match (&peer.session, peer.keys_agreed) {
            (Some(session), true) => println!(
                "  session: {session}, {}, protocol {}; latest handshake: {}; renewed {} times, restarted {} times",
                peer.cipher.as_deref().unwrap_or("in the clear"),
                peer.protocol.map_or("?".to_owned(), |v| v.to_string()),
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
            let tier = match (p.backup, p.priority) {
                (true, _) => " (backup)".to_owned(),
                (false, 1) => String::new(),
                (false, n) => format!(" (priority {n})"),
            };
            println!("  path: {}{tier}", p.name);
            println!("    state: {state}");
            println!(
                "    endpoint: {} -> {} ({})",
                p.local, p.remote, p.transport
            );
            if let Some(why) = &p.transport_why {
                let n = p.transport_changes;
                println!(
                    "    transport: auto, {} ({why}; moved {n} times)",
                    p.transport
                );
            }
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
            if p.congestion_lost > 0 {
                println!(
                    "    lost where its queue overflowed: {} of {} (not waited for)",
                    p.congestion_lost, p.lost
                );
            }
            println!(
                "    transfer: {} received, {} sent ({} of it control)",
                bytes(p.rx_bytes),
                bytes(p.tx_bytes),
                bytes(p.tx_control_bytes)
            );
            if let Some(b) = &p.budget {
                println!("    {}", budget_line(b));
            }
            println!(
                "    mtu: {}{}",
                p.mtu,
                if p.mtu_found { "" } else { " (searching)" }
            );
            if p.resend_asked > 0 {
                println!(
                    "    resent: {} of {} asked for ({}), {} too late",
                    p.resent,
                    p.resend_asked,
                    bytes(p.resent_bytes),
                    p.resend_missed
                );
            }
            if p.equalise_ms > 0.0 {
                println!(
                    "    equalised: bonded data from it waits {:.1} ms to match the farthest path",
                    p.equalise_ms
                );
            }
            if p.parity_group > 0 || p.parity_sent > 0 {
                println!(
                    "    parity: {} sent ({}), one per {} packets{}, loss {:.2} %",
                    p.parity_sent,
                    bytes(p.parity_bytes),
                    p.parity_group,
                    if p.parity_group == 0 {
                        " (off now)"
                    } else {
                        ""
                    },
                    p.sent_loss_pct
                );
            }
        }
    }
}

pub(crate) fn print_status(s: &Status) {
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
    if r.resend_requests > 0 || r.resent_received > 0 {
        println!(
            "  resend: asked for {} lost packets in {} requests ({} B), {} came again, {} recovered in time; not TCP behind them: {} waited, {} waiting",
            r.resend_asked, r.resend_requests, r.resend_request_bytes, r.resent_received, r.recovered,
            r.waited_in_order, r.waiting_in_order
        );
    }
    if r.parity_received > 0 {
        println!(
            "  parity: {} received, {} lost packets made again, {} groups lacked more than one",
            r.parity_received, r.parity_repaired, r.parity_unrepairable
        );
    }
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
        "  reports sent: {} B (budget now {:.2} % of the bytes received); keepalives sent: {}, answered: {}; bundles sent: {} carrying {} packets ({} without their headers)",
        t.tx_report_bytes,
        t.report_fraction * 100.0,
        t.keepalives_sent,
        t.keepalive_acks_sent,
        t.bundles_sent,
        t.bundled_packets,
        t.compressed_packets
    );
    println!(
        "  TCP with compressed headers: {} packets, {} B of headers saved; {} went whole as their flow's reference, {} whole as their headers do not compress, {} whole as their compressed headers were too long",
        t.tcp_compressed, t.tcp_header_bytes_saved, t.tcp_references, t.tcp_uncompressible, t.tcp_too_long
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
        if let Some(role) = &peer.role {
            println!("  {role}");
        }
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
            "    {} -> {}   mtu {}{}{}{}",
            p.local,
            p.remote,
            p.mtu,
            if p.mtu_found { "" } else { " (searching)" },
            if p.resend_asked > 0 {
                format!(
                    "   resent {}/{} ({} B)",
                    p.resent, p.resend_asked, p.resent_bytes
                )
            } else {
                String::new()
            },
            p.down_reason
                .as_deref()
                .map_or(String::new(), |r| format!("   down: {r}"))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_reads_in_the_limits_unit_with_its_reset_in_local_time() {
        let b = mptd::status::BudgetStatus {
            limit: 20_000_000_000,
            used: 3_210_000_000,
            left: 16_790_000_000,
            period_start: 0,
            period_end: 1_798_761_600,
            exhausted: false,
            action: "backup".into(),
        };
        let end = mptd::budget::calendar::local_minute(
            b.period_end,
            mptd::clock::utc_offset(b.period_end),
        );
        assert_eq!(
            budget_line(&b),
            format!("budget 3.21 of 20 GB, 16.79 GB left, resets {end}")
        );
        assert_eq!(
            mptd::budget::calendar::local_minute(1_798_761_600, 0),
            "2027-01-01 00:00"
        );
        assert_eq!(
            mptd::budget::calendar::local_minute(1_798_761_600, -3600),
            "2026-12-31 23:00"
        );
        let spent = mptd::status::BudgetStatus {
            used: 5_126_000,
            limit: 5_000_000,
            left: 0,
            exhausted: true,
            action: "off".into(),
            ..b
        };
        assert!(budget_line(&spent).starts_with("budget 5.13 of 5 MB, 0 B left, resets "));
        assert!(budget_line(&spent).ends_with(", spent: the path is off"));
    }
}
