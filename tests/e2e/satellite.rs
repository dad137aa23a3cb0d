//! Light traffic across a satellite's handovers (issue 72): a satellite-like link (Starlink's
//! handovers every 15 s: dark 50-300 ms, a delay that steps) beside an LTE-like one, mptd with
//! `adaptive` and nothing configured per path, as a new user runs it. A 100/s ping marked EF
//! (light traffic) loses at most 0.1 %, and its 99th percentile round trip is at most 10 ms
//! (idle) or 30 ms (beside one BBR or one cubic transfer) above the better link's own, pinged
//! alone and idle in the same run. Each measurement lasts 30 s: two handovers.

use mpt_lab::experiments::satellite::{light_across_handovers, LightAcross};

use crate::need;

const SECS: u64 = 30;

#[test]
fn light_traffic_across_satellite_handovers_keeps_its_loss_and_delay() {
    need!("satellite", "ping");
    crate::measured_twice(
        "light_traffic_across_satellite_handovers_keeps_its_loss_and_delay",
        once,
    );
}

fn once() {
    let m: LightAcross = light_across_handovers(SECS).expect("lab");
    let better = m.better_p99_ms();
    eprintln!(
        "RESULT satellite alone {}, LTE alone {} (better p99 {better:.1} ms); through mptd \
         idle {}, beside BBR {} ({:.1} Mbit/s), beside cubic {} ({:.1} Mbit/s) (lost % / p99 / \
         max ms)",
        m.alone[0], m.alone[1], m.idle, m.beside_bbr, m.bbr_mbit, m.beside_cubic, m.cubic_mbit
    );
    for (what, s, margin) in [
        ("idle", m.idle, 10.0),
        ("beside BBR", m.beside_bbr, 30.0),
        ("beside cubic", m.beside_cubic, 30.0),
    ] {
        assert!(
            s.loss_pct() <= 0.1,
            "{what}: {:.2} % of the pings lost ({s})",
            s.loss_pct()
        );
        assert!(
            s.p99_ms <= better + margin,
            "{what}: p99 {:.1} ms, the better link's {better:.1} ms (+{margin} at most)",
            s.p99_ms
        );
    }
}
