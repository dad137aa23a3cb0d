//! Bonding over paths of unequal delay (issue 19, goal 1): one TCP flow with BBR through the
//! tunnel fills both paths, because bonded data that arrives on the near path waits to match
//! the far one (`connection.equalise`) and the flow sees one RTT. (Cubic over the same paths:
//! `mpt-lab run realworld`, and the voice tests in `classes.rs`; in single e2e runs it varies
//! from 15 to 34 Mbit/s, as the adaptive estimator sometimes leaves one path starved from the
//! start.)

use std::time::Duration;

use mpt_lab::harness::{tunnel_addr, Impair, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

/// A 20 Mbit/s path (`tbf`) `ms` milliseconds away each way.
fn path(ms: f64) -> LinkSpec {
    let i = Impair {
        delay_ms: ms,
        ..Impair::default()
    };
    LinkSpec {
        rate_bps: Some(20_000_000),
        ab: i,
        ba: i,
    }
}

/// The mean RTT of ten pings from A to B through the tunnel, with TOS `tos`.
fn ping_ms(lab: &Lab, tos: &str) -> f64 {
    let out = lab
        .cmd(Side::A, "ping")
        .args([
            "-q",
            "-c",
            "10",
            "-i",
            "0.2",
            "-Q",
            tos,
            &tunnel_addr(Side::B),
        ])
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    // rtt min/avg/max/mdev = 20.1/20.3/20.9/0.2 ms
    text.lines()
        .find_map(|l| l.split_once(" = ").filter(|(k, _)| k.contains("avg")))
        .and_then(|(_, v)| v.split('/').nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no RTT in ping's output: {text}"))
}

/// A TCP transfer with `cc` over 20 Mbit/s paths 10 and 60 ms away (`adaptive`, nothing
/// configured per path) must get more than the near path alone carries: 25 Mbit/s of the
/// 40. Without equalisation BBR got about 20 (the near path's rate), and 5 with the data held
/// but not the SYN.
fn fills_both_paths(cc: &'static str) {
    let mut lab = Lab::new(&[path(10.0), path(60.0)]).expect("lab");
    let opts = TunnelOpts {
        scheduler: "adaptive".into(),
        configure_rates: false,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    std::thread::sleep(Duration::from_millis(500));
    let target = format!("{}:5700", tunnel_addr(Side::B))
        .parse()
        .expect("addr");
    let mbit =
        mpt_lab::experiments::tcp::transfer(&lab, &[target], false, cc, 10).expect("transfer")[0];
    // what equalisation costs: bonded traffic (a ping) takes the far path's time each way,
    // light traffic (a ping marked EF) the near path's
    let (bonded, light) = (ping_ms(&lab, "0"), ping_ms(&lab, "0xb8"));
    let a = lab.status(Side::A).expect("status a");
    let b = lab.status(Side::B).expect("status b");
    let waits: Vec<f64> = b.paths.iter().map(|p| p.equalise_ms).collect();
    eprintln!(
        "RESULT bonding {cc} over 10 and 60 ms: {mbit:.1} Mbit/s; data per path {:?}; B's waits {:?} ms, resequencer hold p99 {} us, late {}; ping through the tunnel {bonded:.1} ms, marked EF {light:.1} ms",
        a.paths.iter().map(|p| p.tx_packets).collect::<Vec<_>>(),
        waits,
        b.tunnel.reseq.hold_p99_us,
        b.tunnel.reseq.late,
    );
    assert!(
        waits[0] > 45.0 && waits[0] < 55.0 && waits[1] == 0.0,
        "B's waits per path: {waits:?} ms"
    );
    assert!(
        mbit > 25.0,
        "{cc} got {mbit:.1} Mbit/s of two 20 Mbit/s paths"
    );
}

#[test]
fn bbr_fills_paths_of_unequal_delay() {
    need!("bonding_bbr");
    crate::measured_twice("bonding_bbr", || fills_both_paths("bbr"));
}
