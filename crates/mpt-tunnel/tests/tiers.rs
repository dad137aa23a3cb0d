//! Priority tiers (`PathSettings::priority`): a lower tier carries traffic only while the
//! higher one is down, or, with `rate`, full; idle meanwhile, it costs little, and takes over
//! within `dead` when the tier above dies. Two connections over simulated links (`sim`).

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::PathId;
use mpt_sched::SchedulerKind;
use sim::{Pair, Side};

/// Inner packets of 1000 bytes.
const LEN: usize = 1000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Paths 0 and 1 in tier 1 and path 2 in tier 2, each 2 Mbit/s, on `rate` with the rates
/// configured; idle keepalives every 10 s.
fn tiered_pair(seed: u64) -> Pair {
    let make = |side| {
        let mut c = sim::config(side, 3, true);
        c.scheduler = SchedulerKind::Rate;
        c.idle_keepalive = Some(Duration::from_secs(10));
        for (i, p) in c.paths.iter_mut().enumerate() {
            p.rate_bps = Some(2_000_000);
            p.priority = if i == 2 { 2 } else { 1 };
        }
        c
    };
    let (a, b) = (make(Side::A), make(Side::B));
    let mut p = Pair::with(sim::seed(seed), a, b);
    for side in [Side::A, Side::B] {
        for i in 0..3 {
            p.link(side, i).rate_bps = Some(2_000_000);
        }
    }
    p.run_until(ms(500), Pair::agreed).expect("keys agreed");
    p
}

/// Data datagrams A sent per path since its log held `from` entries.
fn data_sent(p: &Pair, from: usize) -> [usize; 3] {
    let mut n = [0; 3];
    for (path, d) in &p.node(Side::A).sent_log[from..] {
        let kind = mpt_core::wire::HeaderRepr::parse_outer(d).map(|h| h.0.kind);
        if matches!(
            kind,
            Ok(mpt_core::wire::Kind::Data | mpt_core::wire::Kind::Bundle)
        ) {
            n[*path] += 1;
        }
    }
    n
}

#[test]
fn a_lower_tier_carries_nothing_while_the_higher_has_room_and_takes_the_overflow() {
    let mut p = tiered_pair(71);
    // 2 Mbit/s of 1000-byte packets: half of what tier 1 carries
    let from = p.node(Side::A).sent_log.len();
    p.stream(Side::A, ms(3000), ms(4), LEN, 0);
    let light = data_sent(&p, from);
    eprintln!("2 Mbit/s: data datagrams per path {light:?}");
    assert_eq!(light[2], 0, "tier 2 idle while tier 1 has room");
    assert!(light[0] > 0 && light[1] > 0);
    // 6 Mbit/s: more than tier 1 carries; the rest overflows to tier 2
    let from = p.node(Side::A).sent_log.len();
    p.stream(Side::A, ms(3000), Duration::from_micros(1333), LEN, 10_000);
    let heavy = data_sent(&p, from);
    eprintln!("6 Mbit/s: data datagrams per path {heavy:?}");
    assert!(
        heavy[2] * 5 >= heavy[0] + heavy[1],
        "tier 2 takes the overflow: {heavy:?}"
    );
}

#[test]
fn a_lower_tier_takes_over_within_dead_when_the_higher_dies() {
    let mut p = tiered_pair(72);
    p.stream(Side::A, ms(1000), ms(10), LEN, 0);
    // idle for a while: tier 2 has carried nothing for long
    p.run(Duration::from_secs(20));
    p.set_up(0, false);
    p.set_up(1, false);
    let start = p.now;
    let before = p.node(Side::B).delivered.len();
    let sent = p.stream(Side::A, ms(2000), ms(10), LEN, 1000);
    let got: Vec<Duration> = p.node(Side::B).delivered[before..]
        .iter()
        .map(|(t, _)| *t - start)
        .collect();
    let down = p
        .node(Side::A)
        .events
        .iter()
        .filter(|(t, e)| *t >= start && matches!(e, mpt_tunnel::Event::PathDown { .. }))
        .map(|(t, _)| *t - start)
        .max();
    let first = got.first().copied();
    eprintln!(
        "tier 1 dead: A saw it down after {down:?}; B got {} of {sent}, the first after {first:?}",
        got.len()
    );
    // A sends on tier 2 once tier 1 is down (`dead` and a liveness tick); B delivers the first
    // within a round trip and the resequencer's wait for what tier 1 lost (100 ms), as B, which
    // never heard tier 1 fail, cannot know that nothing more comes there
    assert!(down.is_some_and(|d| d <= ms(530)), "{down:?}");
    assert!(
        first
            .zip(down)
            .is_some_and(|(f, d)| f <= d + ms(20 + 100 + 10)),
        "tier 2 carries within a round trip of tier 1 going down: {first:?}"
    );
    assert_eq!(
        p.ep(Side::A).path_info(PathId(2)).state,
        mpt_tunnel::LinkState::Up
    );
}
