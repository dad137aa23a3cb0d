//! Satellite handovers beside LTE (issue 72), driven through a simulated pair of connections
//! (`sim`): a satellite-like path (Starlink's handovers, [`HandoverSpec::STARLINK`]: dark
//! 50-300 ms every 15 s, a delay that steps) beside an LTE-like one, `adaptive` with nothing
//! configured per path, as a new user runs it. What light traffic (a 100/s voice-sized stream
//! marked EF) loses and how late it comes across the handovers, alone and beside bulk, against
//! the better link's own figures measured in the same test; and whether what the dark swallows
//! of bulk comes again on the other path.
//!
//! The goals are the issue's: light traffic loses at most 0.1 %, and its 99th percentile is at
//! most 10 ms (alone) or 30 ms (beside bulk) above the better link's own. A goal the engine
//! does not meet yet is an ignored test whose message says what it measured.

#[allow(dead_code)]
mod sim;

use std::collections::HashMap;
use std::time::Duration;

use mpt_core::handover::HandoverSpec;
use mpt_core::wire::Kind;
use mpt_core::{PathId, Time};
use sim::helpers::{kind_of, ms, udp};
use sim::{tcp_packet, Pair, Side};

/// A link: one-way delay, jitter, rate in Mbit/s, random loss (`Pair::shaped_adaptive`'s).
type Shape = (Duration, Duration, u64, f64);

/// The satellite path: 40 Mbit/s, up to 5 ms of jitter each way, 0.5 % random loss, Starlink's
/// handovers (which set its delay); `docs/results.md` cites the figures.
const SAT: Shape = (
    Duration::from_millis(25),
    Duration::from_millis(5),
    40,
    0.005,
);
/// The LTE path: 20 Mbit/s, 30 ms one way, up to 5 ms of jitter, 0.1 % random loss.
const LTE: Shape = (
    Duration::from_millis(30),
    Duration::from_millis(5),
    20,
    0.001,
);

/// How long each measurement runs: four handovers (at 12, 27, 42 and 57 s).
const RUN: Duration = Duration::from_secs(60);

/// A sealed pair on `adaptive`, nothing configured per path, the daemon's reorder window and
/// tunnel MTU, over `links` (each `(spec, satellite)`) that keep their datagrams in order; keys agreed and the paths measured for
/// 2 s. Random loss as `loss` says (else none).
fn pair(seed: u64, links: &[(Shape, bool)], loss: bool) -> Pair {
    let specs: Vec<_> = links
        .iter()
        .map(|&((d, j, r, l), _)| (d, j, r, if loss { l } else { 0.0 }))
        .collect();
    let mut p = Pair::shaped_adaptive_with(sim::seed(seed), &specs, |c| {
        c.reorder_window = 4096;
        c.mtu = 1500;
    });
    for (i, &(_, satellite)) in links.iter().enumerate() {
        for side in [Side::A, Side::B] {
            p.link(side, i).in_order = true;
        }
        if satellite {
            p.hand_over(i, HandoverSpec::STARLINK);
        }
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p.run(ms(2000));
    p
}

/// The `k`th packet of a voice stream: 200 bytes of UDP marked EF, one flow, numbered after
/// its UDP header.
fn voice(k: u32) -> Vec<u8> {
    let mut p = udp(4000, 4000, 200, mpt_tunnel::DSCP_EF);
    p[28..32].copy_from_slice(&k.to_be_bytes());
    p
}

/// The number of a [`voice`] packet (`None` for another packet).
fn voice_number(p: &[u8]) -> Option<u32> {
    (p.len() == 200 && p[9] == 17).then(|| u32::from_be_bytes([p[28], p[29], p[30], p[31]]))
}

/// What a light stream met: sent, lost, and the 99th percentile of its one-way delays.
#[derive(Debug, Clone, Copy)]
struct Light {
    sent: usize,
    lost: usize,
    p99: Duration,
}

impl Light {
    fn loss_pct(&self) -> f64 {
        100.0 * self.lost as f64 / self.sent.max(1) as f64
    }
}

/// For [`RUN`]: a voice packet every 10 ms from A, and, when `bulk_bps` is set, TCP-like bulk
/// packets of 1400 bytes at that rate between them (`bulk_first` on). Then what the voice
/// stream met.
fn light_stream(p: &mut Pair, bulk_bps: Option<u64>, bulk_first: u32) -> (Light, u32) {
    let start = p.now;
    let until = start + RUN;
    let mut sent_at: HashMap<u32, Time> = HashMap::new();
    let (mut next_voice, mut bulk) = (start, 0u32);
    let gap = bulk_bps.map(|bps| Duration::from_nanos(1400 * 8 * 1_000_000_000 / bps));
    let step = gap.unwrap_or(ms(10)).min(ms(10));
    while p.now < until {
        if p.now >= next_voice {
            let k = sent_at.len() as u32;
            sent_at.insert(k, p.now);
            let _ = p.send(Side::A, &voice(k));
            next_voice = next_voice + ms(10);
        }
        if gap.is_some() {
            let _ = p.send(Side::A, &tcp_packet(bulk_first + bulk, 1400));
            bulk += 1;
        }
        p.run(step);
    }
    p.run(ms(1000));
    let mut took: Vec<Duration> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (at, bytes) in &p.node(Side::B).delivered {
        let Some(k) = voice_number(bytes) else {
            continue;
        };
        if let Some(&sent) = sent_at.get(&k) {
            if seen.insert(k) {
                took.push(*at - sent);
            }
        }
    }
    took.sort_unstable();
    let p99 = took
        .get((took.len() * 99 / 100).min(took.len().saturating_sub(1)))
        .copied()
        .unwrap_or(Duration::MAX);
    let light = Light {
        sent: sent_at.len(),
        lost: sent_at.len() - took.len(),
        p99,
    };
    (light, bulk)
}

/// The better link's own figures for the light stream: each link alone (a one-path tunnel
/// over it), idle; the one with the lower 99th percentile.
fn better_link_alone(seed: u64) -> Light {
    let sat = light_stream(&mut pair(seed, &[(SAT, true)], true), None, 0).0;
    let lte = light_stream(&mut pair(seed, &[(LTE, false)], true), None, 0).0;
    eprintln!("RESULT alone: satellite {sat:?}, LTE {lte:?}");
    if sat.p99 <= lte.p99 {
        sat
    } else {
        lte
    }
}

/// The light stream over both paths, with bulk beside it at `bulk_bps` or none.
fn bonded(seed: u64, bulk_bps: Option<u64>) -> Light {
    let mut p = pair(seed, &[(SAT, true), (LTE, false)], true);
    let (light, bulk) = light_stream(&mut p, bulk_bps, 1_000_000);
    let dark = p.darkened(Side::A, 0) + p.darkened(Side::B, 0);
    eprintln!(
        "RESULT bonded, bulk {bulk_bps:?} ({bulk} packets): {light:?}, {:.3} % lost; \
         {} handovers, {dark} datagrams lost in the dark",
        light.loss_pct(),
        p.handovers(Side::A, 0)
    );
    assert!(p.handovers(Side::A, 0) >= 4, "the run crossed handovers");
    light
}

/// The light stream bonded (`bulk_bps` beside it, or none) and the better link's own figures.
fn measured(seed: u64, bulk_bps: Option<u64>) -> (Light, Light) {
    (bonded(seed + 1, bulk_bps), better_link_alone(seed))
}

/// The loss goal: at most 0.1 % lost.
fn check_loss(what: &str, light: Light) {
    assert!(
        light.loss_pct() <= 0.1,
        "{what}: {:.2} % lost ({} of {})",
        light.loss_pct(),
        light.lost,
        light.sent
    );
}

/// The delay goal: a p99 at most `margin` above the better link's.
fn check_p99(what: &str, light: Light, better: Light, margin: Duration) {
    assert!(
        light.p99 <= better.p99 + margin,
        "{what}: p99 {:?} against the better link's {:?} (+{:?})",
        light.p99,
        better.p99,
        light.p99.saturating_sub(better.p99)
    );
}

/// Bulk beside the light stream: half of what the two links carry.
const BULK: u64 = 30_000_000;

#[test]
fn light_traffic_alone_loses_at_most_a_thousandth_across_handovers() {
    check_loss("alone", measured(720, None).0);
}

#[test]
fn light_traffic_alone_keeps_its_p99_within_10_ms_of_the_better_link_across_handovers() {
    let (light, better) = measured(720, None);
    check_p99("alone", light, better, ms(10));
}

#[test]
#[ignore = "issue 72: 10 of 6000 lost (0.167 %) beside bulk at 30 Mbit/s"]
fn light_traffic_beside_bulk_loses_at_most_a_thousandth_across_handovers() {
    check_loss("beside bulk", measured(720, Some(BULK)).0);
}

/// Light packets copied on LTE arrive behind what bulk queued there: the copies that stand
/// in for packets lost in the dark count with that delay.
#[test]
#[ignore = "issue 72: p99 82.9 ms against the better link's 28.0 ms (+54.9 ms)"]
fn light_traffic_beside_bulk_keeps_its_p99_within_30_ms_of_the_better_link_across_handovers() {
    let (light, better) = measured(720, Some(BULK));
    check_p99("beside bulk", light, better, ms(30));
}

/// Bulk below what LTE carries alone, no random loss: whatever bulk loses, it loses in the
/// dark. Each lost packet comes again, on the other path, and nothing is missing at the end.
#[test]
#[ignore = "issue 72: of 85715 bulk packets 261 never arrived; 308 lost in the dark, 29 asked for (longer gaps are outages), 7 resent on LTE"]
fn what_the_dark_swallows_of_bulk_comes_again_on_the_other_path() {
    let mut p = pair(723, &[(SAT, true), (LTE, false)], false);
    let bps = 16_000_000;
    let (_, sent) = light_stream(&mut p, Some(bps), 0);
    let dark = p.darkened(Side::A, 0);
    let delivered: std::collections::HashSet<u32> = p
        .node(Side::B)
        .delivered
        .iter()
        .filter(|(_, b)| b.len() == 1400)
        .map(|(_, b)| sim::number(b))
        .collect();
    let missing = sent as usize - delivered.len();
    let resent_on = |path: usize| {
        let log = &p.node(Side::A).sent_log;
        log.iter()
            .filter(|(q, d)| *q == path && kind_of(d) == Kind::Resent)
            .count()
    };
    let (on_sat, on_lte) = (resent_on(0), resent_on(1));
    let c = p.ep(Side::A).resend_counts(PathId(0));
    let l = p.ep(Side::A).resend_counts(PathId(1));
    eprintln!(
        "RESULT queues overflowed: satellite {}, LTE {}; LTE's losses asked for {}, resent {}, missed {}",
        p.overflowed(Side::A, 0),
        p.overflowed(Side::A, 1),
        l.requested, l.resent, l.missed
    );
    eprintln!(
        "RESULT bulk at {bps} bit/s: {sent} sent, {missing} never arrived; {dark} lost in the \
         dark; the satellite path's losses asked for {}, resent {} (on the satellite {on_sat}, \
         on LTE {on_lte}), missed {}",
        c.requested, c.resent, c.missed
    );
    assert!(dark > 0, "nothing was lost in the dark");
    assert_eq!(
        missing, 0,
        "bulk packets never arrived ({dark} lost in the dark)"
    );
    assert!(on_lte >= dark as usize, "resent on LTE {on_lte} of {dark}");
}

/// Bulk at three quarters of what the two links carry, beside the light stream, across the
/// handovers: at least 90 % of it arrives (what the dark swallows is lost: no inner TCP resends
/// it). The path light traffic keeps short gets bulk at half its learned rate, so it is never
/// offered the 80 % of its rate that lets `adaptive` probe, and what it is trusted with shrinks
/// to what it carries. Judged at half its share, the path carried 0.969 here, but in the lab a
/// voice call beside BBR on 10/60 ms paths waited behind the bulk it took (p99 36-42 ms). Each path keeps what it has shown it carries: the one light traffic keeps short,
/// which gets bulk at half its rate, and the satellite after a handover, whose delay step is
/// no queue once it is the floor and which the scheduler passes over for a moment.
#[test]
#[ignore = "issue 72: 0.260 of bulk at 45 Mbit/s arrived"]
fn bulk_beyond_lte_keeps_the_satellite_across_its_delay_steps() {
    let mut p = pair(724, &[(SAT, true), (LTE, false)], true);
    let bps = 45_000_000;
    let start = p.now;
    let (_, sent) = light_stream(&mut p, Some(bps), 0);
    let delivered = p
        .node(Side::B)
        .delivered
        .iter()
        .filter(|(at, b)| b.len() == 1400 && *at >= start)
        .count();
    let now = p.now;
    let sat = p.ep(Side::A).learned(now, PathId(0));
    let lte = p.ep(Side::A).learned(now, PathId(1));
    let share = delivered as f64 / f64::from(sent);
    eprintln!(
        "RESULT bulk at {bps} bit/s beside handovers: {delivered} of {sent} arrived ({share:.3}); \
         {} handovers; learned: satellite {sat:?}, LTE {lte:?}",
        p.handovers(Side::A, 0)
    );
    assert!(share >= 0.9, "{share:.3} of the bulk arrived");
}
