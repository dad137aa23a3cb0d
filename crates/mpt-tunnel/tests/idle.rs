//! Idle paths (`ConnectionConfig::idle_keepalive`): what an idle tunnel costs each path, and
//! what data finds when it wakes a path that died while idle. Two connections over simulated
//! links on a seeded virtual clock (`sim`).

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::PathId;
use mpt_tunnel::{DownReason, Event, LinkState};
use sim::{packet, Pair, Side, LEN};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const IDLE: Duration = Duration::from_secs(10);

/// A sealed pair with idle keepalives every 10 s (the daemon's default), keys agreed.
fn idle_pair(default_seed: u64, paths: usize) -> Pair {
    let mut a = sim::config(Side::A, paths, true);
    let mut b = sim::config(Side::B, paths, true);
    a.idle_keepalive = Some(IDLE);
    b.idle_keepalive = Some(IDLE);
    let mut p = Pair::with(sim::seed(default_seed), a, b);
    p.run_until(ms(500), Pair::agreed).expect("keys agreed");
    p
}

/// Bytes `side` sent on each path since its `sent_log` held `from` datagrams, with an outer
/// IPv4 and UDP header (28 bytes) each.
fn bytes_sent(p: &Pair, side: Side, from: usize, paths: usize) -> Vec<u64> {
    let mut per = vec![0u64; paths];
    for (path, d) in &p.node(side).sent_log[from..] {
        per[*path] += d.len() as u64 + 28;
    }
    per
}

#[test]
fn an_idle_path_costs_under_250_bit_s_each_way_and_stays_up() {
    let mut p = idle_pair(61, 2);
    // a little traffic first, then silence: the paths go idle after 2 s
    p.stream(Side::A, ms(500), ms(10), LEN, 0);
    p.run(Duration::from_secs(5));
    let from = [
        p.node(Side::A).sent_log.len(),
        p.node(Side::B).sent_log.len(),
    ];
    let since = p.now;
    let window = Duration::from_secs(300);
    p.run(window);
    for (k, side) in [Side::A, Side::B].into_iter().enumerate() {
        let per = bytes_sent(&p, side, from[k], 2);
        for (i, &b) in per.iter().enumerate() {
            let bits = b as f64 * 8.0 / window.as_secs_f64();
            eprintln!("{side:?} path {i}: {b} bytes in 300 s idle, {bits:.0} bit/s");
            assert!(bits <= 250.0, "{side:?} path {i}: {bits:.0} bit/s");
            assert!(
                b > 0,
                "{side:?} path {i}: something crosses each idle interval"
            );
        }
        for i in 0..2 {
            assert_eq!(p.ep(side).path_info(PathId(i)).state, LinkState::Up);
        }
        let downs = p
            .events_since(side, since)
            .into_iter()
            .filter(|e| matches!(e, Event::PathDown { .. }))
            .count();
        assert_eq!(downs, 0, "{side:?}: no path went down while idle");
    }
}

#[test]
fn a_path_that_died_while_idle_costs_a_wakening_stream_nothing_and_goes_down() {
    let mut p = idle_pair(62, 2);
    p.stream(Side::A, ms(500), ms(10), LEN, 0);
    p.run(Duration::from_secs(15));
    // path 0 dies while idle, before three idle keepalives are missed
    p.set_up(0, false);
    p.run(Duration::from_secs(15));
    assert_eq!(p.ep(Side::A).path_info(PathId(0)).state, LinkState::Up);
    let start = p.now;
    let before = p.node(Side::B).delivered.len();
    // 100 packets a second for 3 s each way, as a ping and its replies
    let mut sent = 0;
    for n in 0..300u32 {
        let _ = p.send(Side::A, &packet(10_000 + n, LEN));
        let _ = p.send(Side::B, &packet(20_000 + n, LEN));
        sent += 1;
        let next = p.now + ms(10);
        p.run(next - p.now);
    }
    let got_b = p.node(Side::B).delivered.len() - before;
    let got_a = p
        .node(Side::A)
        .delivered
        .iter()
        .filter(|(t, d)| *t >= start && sim::number(d) >= 20_000)
        .count();
    eprintln!("a stream woke the paths: B got {got_b} of {sent}, A got {got_a} of {sent}");
    assert_eq!(got_b, sent, "every packet A sent arrived");
    assert_eq!(got_a, sent, "every packet B sent arrived");
    for side in [Side::A, Side::B] {
        let down = p
            .node(side)
            .events
            .iter()
            .find(|(t, e)| {
                *t >= start
                    && matches!(
                        e,
                        Event::PathDown {
                            path: PathId(0),
                            reason: DownReason::Silent(_)
                        }
                    )
            })
            .map(|(t, _)| *t - start);
        eprintln!("{side:?}: path 0 down after {down:?}");
        assert!(
            down.is_some_and(|d| d <= ms(600)),
            "{side:?}: path 0 down within dead of the wake: {down:?}"
        );
    }
}

#[test]
fn a_path_that_fails_under_traffic_goes_down_within_dead_as_without_idling() {
    let mut p = idle_pair(63, 2);
    p.stream(Side::A, ms(1000), ms(2), LEN, 0);
    p.set_up(1, false);
    let start = p.now;
    p.stream(Side::A, ms(1000), ms(2), LEN, 1000);
    let down = p
        .node(Side::A)
        .events
        .iter()
        .find(|(t, e)| {
            *t >= start
                && matches!(
                    e,
                    Event::PathDown {
                        path: PathId(1),
                        ..
                    }
                )
        })
        .map(|(t, _)| *t - start);
    assert!(down.is_some_and(|d| d <= ms(560)), "down after {down:?}");
}

#[test]
fn a_peer_whose_paths_all_went_down_is_sought_again_within_the_handshake_retry() {
    // a server that died under traffic, while the site's traffic went elsewhere (another
    // server of the site): no data wakes these paths, which go idle
    let mut p = idle_pair(64, 2);
    p.stream(Side::A, ms(1000), ms(10), LEN, 0);
    p.set_up(0, false);
    p.set_up(1, false);
    p.stream(Side::A, ms(1000), ms(10), LEN, 1000);
    for i in 0..2 {
        assert_eq!(p.ep(Side::A).path_info(PathId(i)).state, LinkState::Down);
    }
    p.run(Duration::from_secs(10));
    // the server comes back, a new process: the site makes a session with it again, within
    // its handshake retry (at most 5 s)
    p.restart(Side::B);
    p.set_up(0, true);
    p.set_up(1, true);
    let back = p.now;
    p.run_until(Duration::from_secs(40), |p| {
        p.events_since(Side::A, back)
            .iter()
            .any(|e| matches!(e, Event::PathUp { .. }))
    })
    .expect("a path up again");
    let after = p.now - back;
    eprintln!("the server back: a path up again after {after:?}");
    assert!(
        after <= Duration::from_secs(5) + ms(600),
        "sought again only after {after:?}"
    );
}

/// Both ends send a packet every 2 ms for `d` (a transfer and its acknowledgements).
fn both_stream(p: &mut Pair, d: Duration, first: u32) {
    let until = p.now + d;
    let mut n = 0;
    while p.now < until {
        for side in [Side::A, Side::B] {
            let _ = p.send(side, &packet(first + n, LEN));
        }
        n += 1;
        let next = (p.now + ms(2)).min(until);
        p.run(next - p.now);
    }
}

/// A streams until path `path` is up at both ends, for at most `d`: how long it took. B sends
/// nothing (its acknowledgements would take the other path).
fn a_streams_until_up(p: &mut Pair, path: u8, d: Duration, first: u32) -> Option<Duration> {
    let start = p.now;
    let mut n = 0;
    while p.now - start < d {
        let up = [Side::A, Side::B]
            .iter()
            .all(|&s| p.ep(s).path_info(PathId(path)).state == LinkState::Up);
        if up {
            return Some(p.now - start);
        }
        p.stream(Side::A, ms(10), ms(2), LEN, first + n);
        n += 5;
    }
    None
}

#[test]
fn a_path_whose_uplinks_both_ends_lost_for_the_idle_time_is_up_again_at_both_ends_at_once() {
    // A veth (or a cable between two boxes) down for longer than it takes a path to go idle:
    // both ends lose the uplink and see it back at one instant, and each tells the other on
    // its first keepalives that it hears nothing there. Traffic goes on over path 0
    // meanwhile (a transfer and its acknowledgements), so path 1 idles at both ends. A's first keepalive after the link is back
    // may be lost (the kernel refused it: `ENETUNREACH` while the link settles), and B's
    // keepalive tick may fall anywhere in A's: B then comes up on A's datagrams without having sent
    // a keepalive since it heard A, and its path, up and idle, sends none for 10 s. B must
    // still tell A at once that it hears it.
    let mut slow = Vec::new();
    for phase in 0..25u64 {
        for lose_first in [false, true] {
            let seed = 65 + phase;
            let mut p = idle_pair(seed, 2);
            // B's clock ticks `phase` after A's: B restarts that much later
            p.run(ms(phase * 4));
            p.restart(Side::B);
            p.run_until(ms(1000), Pair::agreed)
                .expect("keys agreed again");
            both_stream(&mut p, ms(500), 0);
            let link_down = Some(mpt_tunnel::UplinkDown::LinkDown);
            let t0 = p.now;
            p.ep(Side::A).set_uplink(t0, PathId(1), link_down);
            p.ep(Side::B).set_uplink(t0, PathId(1), link_down);
            p.set_up(1, false);
            both_stream(&mut p, ms(2_000), 10_000);
            let back = p.now;
            p.set_up(1, true);
            if lose_first {
                p.drop_next(Side::A, 1, 1);
            }
            p.ep(Side::A).set_uplink(back, PathId(1), None);
            p.ep(Side::B).set_uplink(back, PathId(1), None);
            let took = a_streams_until_up(&mut p, 1, Duration::from_secs(12), 100_000);
            if took.is_none_or(|t| t > ms(400)) {
                slow.push((phase, lose_first, took));
            }
        }
    }
    assert!(
        slow.is_empty(),
        "(phase, A's first keepalive lost, up at both ends after): {slow:?}"
    );
}
