//! Pacing (`connection.pace`): bonded traffic that the paths cannot carry waits in the sender,
//! under CoDel, instead of overflowing the links' queues.

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use sim::helpers::{ms, udp};
use sim::{seed, Pair, Side};

/// Two paths of 10 Mbit/s (10 and 30 ms, 50 ms of queue each), paced or not.
fn two_paths(pace: bool) -> Pair {
    let links = [
        (ms(10), Duration::ZERO, 10, 0.0),
        (ms(30), Duration::ZERO, 10, 0.0),
    ];
    Pair::shaped_adaptive_with(seed(41), &links, |c| c.pace = pace)
}

/// Datagrams the links from A dropped for a full queue.
fn overflowed(p: &Pair) -> u64 {
    (0..2).map(|i| p.overflowed(Side::A, i)).sum()
}

/// A stream at 1.5 times what two 10 Mbit/s paths carry, which does not back off. Unpaced, the
/// links' queues overflow for as long as it lasts. Paced, once a queue showed each path's
/// capacity, the excess waits in the sender (where CoDel drops it, counted, before it is
/// numbered) and the links drop nothing, while they stay full.
#[test]
fn a_stream_faster_than_the_paths_waits_in_the_sender_not_in_the_links() {
    for pace in [false, true] {
        let mut p = two_paths(pace);
        p.run(ms(300));
        assert!(p.agreed());
        // 1200-byte packets at 30 Mbit/s
        let every = Duration::from_micros(320);
        let n = p.stream_paced(Side::A, ms(2000), every, 1200, 0);
        let (dropped, got) = (overflowed(&p), p.node(Side::B).delivered.len());
        p.stream_paced(Side::A, ms(3000), every, 1200, n);
        let dropped = overflowed(&p) - dropped;
        let got = p.node(Side::B).delivered.len() - got;
        let mbit = got as f64 * 1200.0 * 8.0 / 3.0 / 1e6;
        let paced = p.ep(Side::A).drop_counts()[mpt_tunnel::DropReason::Paced as usize];
        eprintln!("pace {pace}: links dropped {dropped}, sender dropped {paced}, {mbit:.1} Mbit/s delivered");
        if pace {
            assert_eq!(dropped, 0, "the links overflowed while paced");
            assert!(paced > 0, "the excess was not dropped in the sender");
            assert!(
                mbit > 17.0,
                "paced below the paths' capacity: {mbit:.1} Mbit/s"
            );
        } else {
            assert!(
                dropped > 1000,
                "unpaced, the links overflowed only {dropped} times"
            );
        }
    }
}

/// Light traffic (DSCP EF: the `fastest` class) never waits behind the bulk pacing holds, and
/// meets at most the short queue pacing leaves in the link.
#[test]
fn light_traffic_passes_the_bulk_pacing_holds() {
    let mut p = two_paths(true);
    p.run(ms(300));
    let every = Duration::from_micros(320);
    let n = p.stream_paced(Side::A, ms(2000), every, 1200, 0);
    assert!(!p.node(Side::A).paced.is_empty(), "no bulk held");
    let voice = udp(7, 5004, 160, 46);
    let t0 = p.now;
    p.send_paced(Side::A, voice.clone());
    assert!(
        p.node(Side::A).paced.iter().all(|(_, q)| q != &voice),
        "the voice packet waits"
    );
    p.stream_paced(Side::A, ms(200), every, 1200, n);
    let at = p
        .node(Side::B)
        .delivered
        .iter()
        .find(|(_, q)| q == &voice)
        .map(|(t, _)| *t);
    let took = at.expect("voice delivered").saturating_since(t0);
    eprintln!("voice took {took:?}");
    // the 10 ms path, and at most the pacing limit of queue before it
    assert!(
        took < ms(10) + mpt_tunnel::PACE_LIMIT + ms(5),
        "voice took {took:?}"
    );
}

/// One 128 kbit/s line with its rate configured (`rate`, which paces by default), offered a
/// stream of 1498-byte packets (each in two pieces at an Ethernet MTU) a tenth faster than it
/// carries: paced, the line carries as much as unpaced. One packet takes about 99 ms on it,
/// longer than pacing's limit and CoDel's target, so a packet or two always waits in the sender.
#[test]
fn a_slow_line_paced_carries_what_it_would_unpaced() {
    let mut got = Vec::new();
    for pace in [false, true] {
        let cfg = |side| {
            let mut c = sim::config(side, 1, true);
            c.mtu = 1500;
            c.scheduler = mpt_sched::SchedulerKind::Rate;
            c.paths[0].rate_bps = Some(128_000);
            c.pace = pace;
            c
        };
        let mut p = Pair::with(seed(43), cfg(Side::A), cfg(Side::B));
        for side in [Side::A, Side::B] {
            p.link(side, 0).rate_bps = Some(128_000);
            p.link(side, 0).mtu = Some(1472);
        }
        p.run_until(ms(500), Pair::agreed)
            .expect("keys agreed within 500 ms");
        let before = p.node(Side::B).delivered.len();
        p.stream_paced(Side::A, ms(20_000), ms(90), 1498, 0);
        p.run(ms(1000));
        let n = p.node(Side::B).delivered.len() - before;
        let paced = p.ep(Side::A).drop_counts()[mpt_tunnel::DropReason::Paced as usize];
        eprintln!("pace {pace}: {n} of 222 delivered, {paced} dropped in the sender");
        got.push(n);
    }
    assert!(
        got[1] as f64 >= 0.98 * got[0] as f64,
        "paced, the line carried {} packets, unpaced {}",
        got[1],
        got[0]
    );
}

/// Two 10 Mbit/s paths, one near (5 ms) and one far (120 ms), paced, under a stream at 1.5
/// times their capacity: the far path's reports come a round trip late, and the queue they
/// show must not hold it idle after it has drained.
#[test]
fn a_far_path_is_kept_busy_though_its_reports_are_a_round_trip_old() {
    let links = [
        (ms(5), Duration::ZERO, 10, 0.0),
        (ms(120), Duration::ZERO, 10, 0.0),
    ];
    let mut p = Pair::shaped_adaptive_with(seed(47), &links, |c| c.pace = true);
    p.run(ms(300));
    assert!(p.agreed());
    let every = Duration::from_micros(320);
    let n = p.stream_paced(Side::A, ms(3000), every, 1200, 0);
    let busy = |p: &Pair| [0, 1].map(|i| p.link_busy(Side::A, i));
    let before = busy(&p);
    p.stream_paced(Side::A, ms(4000), every, 1200, n);
    let after = busy(&p);
    let used = [0, 1].map(|i| (after[i] - before[i]).as_secs_f64() / 4.0);
    eprintln!("links busy: near {:.3}, far {:.3}", used[0], used[1]);
    // held to each report's queue as it stood a round trip before, the far link was idle 14 %
    // of the time
    assert!(
        used.iter().all(|&u| u >= 0.97),
        "a link was idle while the sender held packets: busy {used:?}"
    );
}
