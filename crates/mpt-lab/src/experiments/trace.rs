//! `mpt-lab run realworld --trace`: what a transfer through mptd looked like, second by second
//! (the sender's TCP, the paths' `tbf` queues, the rates A's scheduler assumes), and what both
//! daemons and the link emulator counted when it was over.

use std::time::{Duration, Instant};

use crate::harness::{nonzero_drops, tbf_counts, tunnel_addr, Lab, Side};

/// `--trace`: samples, once a second, the sender's TCP (`ss -tin`) and every path's `tbf` in A
/// (drops so far, backlog), and prints what both daemons counted when the transfer is over.
pub(crate) struct Tracer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    /// The emulator's own counts when the transfer began.
    wire_before: crate::harness::emulator::Lateness,
}

/// The fields of `ss -tin` worth a line: congestion window, RTT, rates, BBR's model, losses,
/// and what limited the sender (the receiver's window, its own send buffer).
fn tcp_summary(ss: &str) -> String {
    const KEEP: [&str; 12] = [
        "cwnd:",
        "ssthresh:",
        "rwnd_limited:",
        "sndbuf_limited:",
        "rtt:",
        "bbr:",
        "pacing_rate",
        "delivery_rate",
        "retrans:",
        "lost:",
        "unacked:",
        "minrtt:",
    ];
    let words: Vec<&str> = ss.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if KEEP.iter().any(|k| w.starts_with(k)) {
            if (w == "pacing_rate" || w == "delivery_rate") && i + 1 < words.len() {
                out.push(format!("{w}:{}", words[i + 1]));
                i += 1;
            } else {
                out.push(w.to_owned());
            }
        }
        i += 1;
    }
    out.join(" ")
}

impl Tracer {
    pub(crate) fn start(lab: &Lab, every: Duration) -> Tracer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ns = lab.ns(Side::A);
        let links: Vec<String> = (0..lab.paths.len()).map(Lab::link).collect();
        let dst = tunnel_addr(Side::B);
        let control = lab.control_socket(Side::A);
        let control_b = lab.control_socket(Side::B);
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let out = |args: &[&str]| {
                std::process::Command::new("ip")
                    .args(["netns", "exec", &ns])
                    .args(args)
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default()
            };
            let tbf = |l: &str| tbf_counts(&out(&["tc", "-s", "qdisc", "show", "dev", l]));
            let start = Instant::now();
            // the links' byte counters run on from the transfers before this one
            let mut last = (start, links.iter().map(|l| tbf(l).0).collect::<Vec<_>>());
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(every);
                let secs = last.0.elapsed().as_secs_f64();
                last.0 = Instant::now();
                let ss = out(&["ss", "-tin", "dst", &dst]);
                // what each link carried since the last line (frames, as tbf counts them)
                let queues: Vec<String> = links
                    .iter()
                    .zip(last.1.iter_mut())
                    .map(|(l, sent_before)| {
                        let (sent, dropped, backlog) = tbf(l);
                        let mbit = sent.saturating_sub(*sent_before) as f64 * 8.0 / secs / 1e6;
                        *sent_before = sent;
                        format!("{l} {mbit:.1} Mbit/s dropped {dropped} backlog {backlog}b")
                    })
                    .collect();
                // the rates A's scheduler assumes (adaptive: learned, and why)
                let mbit = |b: u64| b as f64 / 1e6;
                let status_a = mptd::control::status(&control);
                // what pacing dropped so far (CoDel, or the held queue full)
                let paced = status_a
                    .as_ref()
                    .map(|st| st.tunnel.drops.get(mpt_tunnel::DropReason::Paced))
                    .unwrap_or(0);
                let rates: Vec<String> = status_a
                    .map(|st| {
                        st.paths
                            .iter()
                            .map(|p| {
                                let mut s = format!("{:.1}", mbit(p.rate_bps.unwrap_or(0)));
                                if !p.mtu_found {
                                    s += &format!(" [MTU {} searching]", p.mtu);
                                }
                                if let Some(l) = &p.learned {
                                    let flags = [
                                        (l.silent, 'S'),
                                        (l.congested, 'C'),
                                        (l.saturated, 'F'),
                                        (l.busy, 'B'),
                                    ];
                                    let flags: String =
                                        flags.iter().filter(|f| f.0).map(|f| f.1).collect();
                                    s += &format!(
                                        " (rate {:.1} cap {:.1} delivery {:.1} best {:.1} queue {:.0} ms backlog {:.0} ms {flags} reports {} cuts {})",
                                        mbit(l.rate_bps),
                                        mbit(l.cap_bps),
                                        mbit(l.delivery_bps),
                                        mbit(l.best_delivery_bps),
                                        l.queue_us as f64 / 1e3,
                                        l.backlog_us as f64 / 1e3,
                                        l.reports,
                                        l.cuts
                                    );
                                }
                                s
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                // what B's resequencer gave up so far, and what came after all
                let reseq = mptd::control::status(&control_b)
                    .map(|st| {
                        let r = &st.tunnel.reseq;
                        format!(
                            " | B gave up {} (by timeout {}), late {}, lost {:?}, out of path order {:?}",
                            r.skipped,
                            r.released_by_timeout,
                            r.late,
                            st.paths.iter().map(|p| p.lost).collect::<Vec<_>>(),
                            st.paths.iter().map(|p| p.path_seq_errors).collect::<Vec<_>>()
                        )
                    })
                    .unwrap_or_default();
                eprintln!(
                    "   t={:.1}s {} | {} | rates {} Mbit/s | A paced {paced}{reseq}",
                    start.elapsed().as_secs_f64(),
                    tcp_summary(&ss),
                    queues.join(", "),
                    rates.join("/")
                );
            }
        });
        Tracer {
            stop,
            thread,
            wire_before: lab.wire_lateness(),
        }
    }

    pub(crate) fn finish(self, lab: &Lab) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.thread.join();
        let wire = lab.wire_lateness().since(self.wire_before);
        eprintln!(
            "   emulator (the machine, not the links): {} packets written 2 ms late or more, {} of them 10 ms or more; {} dropped in its devices' queues",
            wire.late, wire.stalled, wire.queue_dropped
        );
        if let Ok(a) = lab.status(Side::A) {
            let t = &a.tunnel;
            eprintln!(
                "   A TCP headers: compressed {}, references {}, uncompressible {}, too long {}",
                t.tcp_compressed, t.tcp_references, t.tcp_uncompressible, t.tcp_too_long
            );
            for p in &a.paths {
                eprintln!(
                    "   A {}: sent {} pkts, resent {} of {} asked for ({} too late), parity {}, rate {:?} bit/s, peer says lost {}, MTU {} ({} probes, {} drops)",
                    p.name,
                    p.tx_packets,
                    p.resent,
                    p.resend_asked,
                    p.resend_missed,
                    p.parity_sent,
                    p.rate_bps,
                    p.peer.as_ref().map_or(0, |r| r.lost),
                    p.mtu,
                    p.mtu_probes,
                    p.mtu_drops,
                );
            }
        }
        for side in [Side::A, Side::B] {
            let drops = lab.status(side).map(|s| nonzero_drops(&s.tunnel.drops));
            let udp: Vec<String> = lab
                .kernel_udp(side)
                .unwrap_or_default()
                .into_iter()
                .filter(|(n, v)| n.contains("Err") && *v > 0)
                .map(|(n, v)| format!("{n} {v}"))
                .collect();
            eprintln!(
                "   {side:?} drops: {}; kernel UDP errors: {}",
                drops.unwrap_or_default(),
                udp.join(", ")
            );
        }
        if let Ok(b) = lab.status(Side::B) {
            let r = &b.tunnel.reseq;
            eprintln!(
                "   B resequencer (so far): hold p50/p99/max {}/{}/{} us, skipped {}, by timeout {}, by overflow {}, recovered {}, parity repaired {}, late {}, waited in order {}; waits {:?} ms; lost (queue overflowed) {:?}; refused for their reference {}",
                r.hold_p50_us,
                r.hold_p99_us,
                r.hold_max_us,
                r.skipped,
                r.released_by_timeout,
                r.released_by_overflow,
                r.recovered,
                r.parity_repaired,
                r.late,
                r.waited_in_order,
                b.paths.iter().map(|p| p.equalise_ms).collect::<Vec<_>>(),
                b.paths
                    .iter()
                    .map(|p| (p.lost, p.congestion_lost))
                    .collect::<Vec<_>>(),
                b.tunnel.drops.no_reference,
            );
        }
    }
}
