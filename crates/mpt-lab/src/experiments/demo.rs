//! The demo: two namespaces joined by four shaped paths (20/20/10/10 Mbit/s), mptd on both
//! ends, iperf3 through tun0; prints what each path carried, the aggregate and the
//! efficiency against the paths measured alone, then tears everything down.

use std::time::Duration;

use crate::experiments::runs::Trace;
use crate::harness::{iperf3_bps, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};
use anyhow::{Context, Result};

/// Run the demo with `scheduler` (`adaptive`: no rates or weights configured).
pub fn run(scheduler: &str) -> Result<()> {
    if !["rate", "adaptive", "wrr", "rr"].contains(&scheduler) {
        anyhow::bail!("unknown scheduler {scheduler:?}, expected rate, adaptive, wrr or rr");
    }
    if !crate::harness::require_root("mpt-lab demo") {
        anyhow::bail!("the demo needs root");
    }
    let rates = [20u64, 20, 10, 10];
    let paths: Vec<LinkSpec> = rates
        .iter()
        .map(|&m| LinkSpec::shaped(m * 1_000_000))
        .collect();
    println!(
        "== building the lab: namespaces A and B joined by {} paths shaped {:?} Mbit/s (tbf)",
        rates.len(),
        rates
    );
    let mut lab = Lab::new(&paths).context("building the lab (needs root)")?;

    println!("== measuring each path alone: iperf3 TCP on all four at once, 8 s");
    let targets: Vec<(String, u16)> = (0..rates.len())
        .map(|i| (lab.path_addr(Side::B, i), 5300 + i as u16))
        .collect();
    let alone: Vec<f64> = lab
        .iperf3_many(Side::A, &targets, &["-t", "8"])?
        .iter()
        .map(iperf3_bps)
        .collect();
    let sum: f64 = alone.iter().sum();

    // the product's defaults: encryption "auto" (AES-256-GCM where both ends have it in
    // hardware, ChaCha20-Poly1305 otherwise)
    let opts = TunnelOpts {
        scheduler: scheduler.into(),
        configure_rates: scheduler != "adaptive",
        encryption: "auto".into(),
        ..TunnelOpts::default()
    };
    println!(
        "== starting mptd on both ends (scheduler {}, encryption {}, reorder window {}, timeout {} ms)",
        opts.scheduler, opts.encryption, opts.reorder_window, opts.reorder_timeout_ms
    );
    lab.start_tunnel(&opts)?;
    println!(
        "   tunnel up: {} <-> {} (ping answered)",
        tunnel_addr(Side::A),
        tunnel_addr(Side::B)
    );

    println!("== iperf3 TCP through the tunnel, 10 s");
    let before = lab.status(Side::A)?;
    let trace = Trace::start(&lab, Side::A);
    let tcp = lab.iperf3(Side::A, &tunnel_addr(Side::B), 5201, &["-t", "10"])?;
    trace.print();
    let after = lab.status(Side::A)?;
    let agg = iperf3_bps(&tcp);
    let retransmits = tcp["end"]["sum_sent"]["retransmits"].as_u64();
    let sent = (after.tunnel.tx_bytes - before.tunnel.tx_bytes).max(1) as f64;
    println!();
    println!(
        "| path | shaped Mbit/s | alone Mbit/s | share of tunnel bytes | tunnel Mbit/s on path |"
    );
    println!("|---|---|---|---|---|");
    for (i, (a, b)) in after.paths.iter().zip(&before.paths).enumerate() {
        let bytes = (a.tx_bytes - b.tx_bytes) as f64;
        println!(
            "| {} | {} | {:.2} | {:.1} % | {:.2} |",
            a.name,
            rates[i],
            alone[i] / 1e6,
            100.0 * bytes / sent,
            bytes * 8.0 / 10.0 / 1e6
        );
    }
    println!();
    println!(
        "aggregate through tun0: {:.2} Mbit/s; paths alone: {:.2} Mbit/s; efficiency {:.1} %; TCP retransmits {}",
        agg / 1e6,
        sum / 1e6,
        100.0 * agg / sum,
        retransmits.map_or("?".to_owned(), |n| n.to_string())
    );

    println!();
    println!("== iperf3 UDP through the tunnel at 48 Mbit/s (80 % of the shaped sum), 1200-byte datagrams, 10 s");
    let udp = lab.iperf3(
        Side::A,
        &tunnel_addr(Side::B),
        5202,
        &[
            "-u",
            "-b",
            "48000000",
            "-l",
            "1200",
            "-t",
            "10",
            "--get-server-output",
        ],
    )?;
    // The receiver's view: `sum_received`, and the receiving iperf3's out-of-order count (the
    // client's own stream figures count none).
    let s = &udp["end"]["sum_received"];
    let ooo = crate::harness::iperf3_receiver_out_of_order(&udp);
    let rx = lab.status(Side::B)?;
    println!(
        "received {:.2} Mbit/s, lost {:.3} %, jitter {:.3} ms, out of order at iperf3: {}",
        s["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6,
        s["lost_percent"].as_f64().unwrap_or(f64::NAN),
        s["jitter_ms"].as_f64().unwrap_or(f64::NAN),
        ooo.map_or("?".to_owned(), |n| n.to_string())
    );
    println!(
        "mptd on B: {} packets reordered on arrival across paths (max extent {}), {} delivered out of order, hold p50 {} us p99 {} us",
        rx.tunnel.reseq.reordered, rx.tunnel.reseq.reorder_extent_max, rx.tunnel.reseq.delivered_out_of_order, rx.tunnel.reseq.hold_p50_us, rx.tunnel.reseq.hold_p99_us
    );
    println!();
    println!("== mptctl status on A");
    let out = std::process::Command::new(crate::harness::mptd_bin()?.with_file_name("mptctl"))
        .args([
            "-s",
            lab.control_socket(Side::A).to_str().unwrap_or_default(),
            "status",
        ])
        .output()?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    std::thread::sleep(Duration::from_millis(100));
    println!("== tearing down");
    Ok(())
}
