//! Losses recovered inside the tunnel (resend requests, `docs/protocol.md`), driven through a
//! simulated pair of connections: a lost datagram is asked for and comes again, without holding
//! the TCP packets behind it, while other packets behind it wait for it; random loss is recovered at a cost close to the loss itself; nothing is
//! resent on clean paths; and without resending on both ends, nothing changes.

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::wire::Kind;
use mpt_core::PathId;
use sim::{packet, tcp_packet, Pair, Side, LEN};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn agreed(p: &mut Pair) {
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p.run(ms(200));
}

/// Data datagrams of `kind` that `side` sent.
fn sent(p: &Pair, side: Side, kind: Kind) -> usize {
    p.node(side)
        .sent_log
        .iter()
        .filter(|(_, d)| mpt_core::wire::HeaderRepr::parse_outer(d).map(|h| h.0.kind) == Ok(kind))
        .count()
}

/// A sealed pair over `paths` paths with resending set on each side as given.
fn pair(seed: u64, paths: usize, resend_a: bool, resend_b: bool) -> Pair {
    let mut a = sim::config(Side::A, paths, true);
    let mut b = sim::config(Side::B, paths, true);
    a.resend = resend_a;
    b.resend = resend_b;
    let mut p = Pair::with(sim::seed(seed), a, b);
    agreed(&mut p);
    p
}

/// A [`packet`] that says it is UDP.
fn udp(k: u32, len: usize) -> Vec<u8> {
    let mut p = packet(k, len);
    p[9] = 17;
    p
}

/// Path 1 loses one datagram of ten TCP packets numbered from `first`; returns when they left.
fn lose_one(p: &mut Pair, first: u32) -> mpt_core::Time {
    lose_one_of(p, first, tcp_packet)
}

/// Path 1 loses one datagram of ten packets `make` makes, numbered from `first`; returns when
/// they left.
fn lose_one_of(p: &mut Pair, first: u32, make: fn(u32, usize) -> Vec<u8>) -> mpt_core::Time {
    p.drop_next(Side::A, 1, 1);
    let start = p.now;
    for k in first..first + 10 {
        p.send(Side::A, &make(k, LEN)).expect("sent");
    }
    p.run(ms(300));
    start
}

#[test]
fn a_path_s_first_loss_is_asked_for_but_only_later_ones_are_kept_to_send_again() {
    let mut p = pair(5, 2, true, true);
    lose_one(&mut p, 0);
    assert_eq!(p.delivered_numbers(Side::B), [0, 2, 3, 4, 5, 6, 7, 8, 9]);
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!((c.requested, c.resent, c.missed), (1, 0, 1));
    // from then on path 1's packets are kept, for a minute after the last request: the lost
    // one comes again, after the packets behind it, which did not wait for it
    lose_one(&mut p, 10);
    assert_eq!(
        p.delivered_numbers(Side::B)[9..],
        [10, 12, 13, 14, 15, 16, 17, 18, 19, 11]
    );
    p.run(mpt_tunnel::KEEP_AFTER_LOSS);
    lose_one(&mut p, 20);
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!(
        (c.requested, c.resent, c.missed),
        (3, 1, 2),
        "kept no longer"
    );
}

/// A path that reorders its own datagrams (two batches sent from different CPUs into a veth
/// may) shows a gap that is no loss: the datagram comes a moment later, and the UDP behind it
/// waits for it that long even where the sender keeps nothing to send again.
#[test]
fn a_datagram_its_own_path_reordered_is_waited_for_a_moment() {
    let mut p = pair(3, 2, true, true);
    p.link(Side::A, 0).jitter = ms(1);
    p.link(Side::A, 1).jitter = ms(1);
    for k in 0..40 {
        p.send(Side::A, &udp(k, LEN)).expect("sent");
        p.run(Duration::from_micros(200));
    }
    p.run(ms(300));
    let c = p.ep(Side::A).resend_counts(PathId(0));
    let d = p.ep(Side::A).resend_counts(PathId(1));
    assert!(c.requested + d.requested > 0, "no gap seen");
    assert_eq!(p.delivered_numbers(Side::B), (0..40).collect::<Vec<_>>());
}

/// A path that overflows loses a run of packets: the first is not kept, but the sender keeps
/// what it sends from the first request on, so what the path loses a round trip later comes
/// again, and the UDP behind it waits for it (not the hold time since the first request).
#[test]
fn a_loss_a_round_trip_after_a_path_s_first_is_waited_for() {
    let mut p = pair(1, 2, true, true);
    p.drop_next(Side::A, 1, 1);
    for k in 100..110 {
        p.send(Side::A, &udp(k, LEN)).expect("sent");
    }
    p.run(ms(50));
    p.node_mut(Side::B).delivered.clear();
    lose_one_of(&mut p, 0, udp);
    assert_eq!(p.delivered_numbers(Side::B), (0..10).collect::<Vec<_>>());
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!((c.requested, c.resent, c.missed), (2, 1, 1));
}

/// A stream that is not TCP (UDP here, that does not back off) keeps its order: the packets
/// behind a loss wait for it to come again, a round trip, and go on after it. A path's first
/// loss, which the sender did not keep, holds them only a moment (`PATH_REORDER`).
#[test]
fn packets_that_are_not_tcp_behind_a_loss_wait_for_it_and_keep_their_order() {
    let mut p = pair(1, 2, true, true);
    // the path's first loss is not resent: the packets behind it wait only a moment
    let start = lose_one_of(&mut p, 100, udp);
    assert_eq!(
        p.delivered_numbers(Side::B),
        [100, 102, 103, 104, 105, 106, 107, 108, 109]
    );
    let last = p.node(Side::B).delivered.last().expect("delivered").0 - start;
    assert!(last <= ms(15), "waited {last:?} for a loss never resent");
    assert_eq!(p.ep(Side::B).waiting_in_order(), (0, 8));
    p.node_mut(Side::B).delivered.clear();
    // the next loss is resent: the packets behind it wait for it, and nothing is out of order
    let start = lose_one_of(&mut p, 0, udp);
    assert_eq!(p.delivered_numbers(Side::B), (0..10).collect::<Vec<_>>());
    let delivered = &p.node(Side::B).delivered;
    let last = delivered.last().expect("delivered").0 - start;
    assert!(last <= ms(45), "the gap was filled after {last:?}");
    let total = &p.ep(Side::B).stats().total;
    assert_eq!(
        (total.resent, total.late),
        (1, 1),
        "late to the resequencer"
    );
    assert_eq!(p.ep(Side::B).waiting_in_order(), (0, 16));
    // TCP behind a loss does not wait, and other packets wait only for what is before them
    p.node_mut(Side::B).delivered.clear();
    p.drop_next(Side::A, 1, 1);
    for k in 200..210 {
        let packet = if k % 2 == 0 {
            tcp_packet(k, LEN)
        } else {
            udp(k, LEN)
        };
        p.send(Side::A, &packet).expect("sent");
    }
    p.run(ms(300));
    let got = p.delivered_numbers(Side::B);
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (200..210).collect::<Vec<_>>());
    let pos = |k: u32| got.iter().position(|&j| j == k).expect("delivered");
    // the lost one: delivered after a later one
    let lost = *got
        .iter()
        .find(|&&k| got[..pos(k)].iter().any(|&j| j > k))
        .expect("one came again, late");
    for k in lost + 1..210 {
        if k % 2 == 0 {
            assert!(pos(k) < pos(lost), "TCP {k} waited for {lost}: {got:?}");
        } else {
            assert!(pos(k) > pos(lost), "{k} went before {lost}: {got:?}");
        }
    }
}

/// A loss on a path whose round trip is longer than the hold time cannot come again (the
/// sender sends nothing older than that): the packets behind it wait only a moment.
#[test]
fn packets_behind_a_loss_on_a_far_path_do_not_wait_for_it() {
    let mut p = pair(4, 2, true, true);
    for side in [Side::A, Side::B] {
        p.link(side, 1).delay = ms(70);
    }
    p.run(ms(2000));
    for round in 0..3 {
        let first = 100 * round;
        p.node_mut(Side::B).delivered.clear();
        let start = lose_one_of(&mut p, first, udp);
        let got = p.delivered_numbers(Side::B);
        assert_eq!(got.len(), 9, "round {round}: one lost, not resent: {got:?}");
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
        let last = p.node(Side::B).delivered.last().expect("delivered").0 - start;
        assert!(last <= ms(90), "round {round}: waited {last:?}");
    }
    assert_eq!(p.ep(Side::B).waiting_in_order(), (0, 24));
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!((c.requested, c.resent), (3, 0));
}

/// The TCP packets behind a gap are not held for its resend: they go to the TUN device at once,
/// and the lost one when it comes again, a round trip later (a TCP receiver acknowledges what
/// came after the gap and its sender goes on, where holding them stopped the whole bundle for
/// that round trip at every loss).
#[test]
fn a_lost_datagram_is_asked_for_and_sent_again_within_a_round_trip_holding_nothing_behind_it() {
    let mut p = pair(1, 2, true, true);
    assert!(p.ep(Side::A).resending() && p.ep(Side::B).resending());
    // a first loss on path 1: its packets are kept from then on
    lose_one(&mut p, 100);
    p.node_mut(Side::B).delivered.clear();
    // the next data datagram on path 1 is lost
    let start = lose_one(&mut p, 0);
    assert_eq!(
        p.delivered_numbers(Side::B),
        [0, 2, 3, 4, 5, 6, 7, 8, 9, 1],
        "every packet, the lost one when it came again"
    );
    let delivered = &p.node(Side::B).delivered;
    let behind = delivered[delivered.len() - 2].0 - start;
    let last = delivered.last().expect("delivered").0 - start;
    // the packets behind it arrive 10 ms after they left (both paths are 10 ms away), and
    // are not held; the lost one, seen missing when path 1's next datagram arrives, is asked
    // for on the 10 ms path and sent again on the soonest: back about 30 ms after it left
    assert!(
        behind <= ms(15),
        "the packets behind the gap waited: {behind:?}"
    );
    assert!(last <= ms(45), "the gap was filled after {last:?}");
    assert_eq!(p.ep(Side::B).nack_counts(), (2, 2));
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!((c.requested, c.resent, c.missed), (2, 1, 1));
    assert_eq!(p.ep(Side::A).resend_counts(PathId(0)).requested, 0);
    let total = &p.ep(Side::B).stats().total;
    assert_eq!(
        (total.resent, total.recovered, total.skipped, total.late),
        (1, 0, 2, 1)
    );
    assert_eq!(sent(&p, Side::A, Kind::Resent), 1);
    assert_eq!(sent(&p, Side::B, Kind::Nack), 2);
}

#[test]
fn a_packet_that_went_in_pieces_is_sent_again_whole_on_a_path_it_fits() {
    // path 1 carries 1252-byte datagrams: a 1400-byte packet goes there in pieces, and
    // whole on path 0
    let mut a = sim::config(Side::A, 2, true);
    let mut b = sim::config(Side::B, 2, true);
    a.mtu = 1500;
    b.mtu = 1500;
    let mut p = Pair::with(sim::seed(6), a, b);
    for side in [Side::A, Side::B] {
        p.link(side, 1).mtu = Some(1252);
    }
    p.run_until(ms(3000), |p| {
        (0..2).all(|i| p.node(Side::A).ep.path_info(PathId(i)).pmtu_found)
    })
    .expect("found");
    assert!(p.ep(Side::A).path_info(PathId(1)).datagram_max <= 1252);
    let lose = |p: &mut Pair, first: u32, pass: usize| {
        p.drop_after(Side::A, 1, pass, 1);
        for k in first..first + 10 {
            p.send(Side::A, &tcp_packet(k, 1400)).expect("sent");
        }
        p.run(ms(300));
    };
    // the first loss makes path 1's packets kept; the next loses a head piece
    lose(&mut p, 100, 0);
    p.run(ms(2500));
    let expired = p.ep(Side::B).drops().fragment_expired;
    p.node_mut(Side::B).delivered.clear();
    lose(&mut p, 0, 0);
    assert_eq!(
        p.delivered_numbers(Side::B),
        [0, 2, 3, 4, 5, 6, 7, 8, 9, 1],
        "every packet, the lost one when it came again"
    );
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!((c.requested, c.resent, c.missed), (2, 1, 1));
    // it went again whole on path 0: a datagram path 1 would not carry
    let resent: Vec<usize> = p
        .node(Side::A)
        .sent_log
        .iter()
        .filter_map(|(_, d)| {
            let (h, _) = mpt_core::wire::HeaderRepr::parse_outer(d).ok()?;
            (h.kind == Kind::Resent).then_some((h.path.index(), d.len()))
        })
        .map(|(path, len)| {
            assert_eq!(path, 0);
            len
        })
        .collect();
    assert_eq!(resent.len(), 1);
    assert!(resent[0] > 1252, "{resent:?}");
    // the pieces that came first are not left waiting, to expire as losses
    p.run(ms(2500));
    assert_eq!(p.ep(Side::B).drops().fragment_expired, expired);
    // a continuation lost: no path sequence names it, but the packet never reaches the
    // resequencer, which sees its head piece's path sequence missing when the next
    // datagram on the path arrives, and asks for that
    p.node_mut(Side::B).delivered.clear();
    lose(&mut p, 200, 1);
    assert_eq!(
        p.delivered_numbers(Side::B),
        [200, 202, 203, 204, 205, 206, 207, 208, 209, 201],
        "every packet, the lost one when it came again"
    );
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!((c.requested, c.resent, c.missed), (3, 2, 1));
    p.run(ms(2500));
    assert_eq!(p.ep(Side::B).drops().fragment_expired, expired);
}

#[test]
fn without_resending_at_both_ends_a_lost_datagram_stays_lost() {
    for (a, b) in [(true, false), (false, true), (false, false)] {
        let mut p = pair(2, 2, a, b);
        assert!(!p.ep(Side::A).resending() && !p.ep(Side::B).resending());
        p.drop_next(Side::A, 1, 1);
        for k in 0..10 {
            p.send(Side::A, &packet(k, LEN)).expect("sent");
        }
        p.run(ms(300));
        assert_eq!(p.delivered_numbers(Side::B), [0, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(sent(&p, Side::B, Kind::Nack), 0);
        assert_eq!(sent(&p, Side::A, Kind::Resent), 0);
    }
}

/// A streams `n` packets of 1200 bytes, `per_ms` a millisecond, over two paths with `loss` both
/// ways, resending on both ends as `resend` says, parity as `parity` says; returns the pair
/// and the packets sent.
fn lossy_stream(
    seed: u64,
    loss: f64,
    n: u32,
    per_ms: u32,
    resend: bool,
    parity: bool,
) -> (Pair, usize) {
    let mut a = sim::config(Side::A, 2, true);
    let mut b = sim::config(Side::B, 2, true);
    (a.resend, b.resend) = (resend, resend);
    (a.parity, b.parity) = (parity, parity);
    let mut p = Pair::with(sim::seed(seed), a, b);
    agreed(&mut p);
    for path in 0..2 {
        p.link(Side::A, path).loss = loss;
        p.link(Side::B, path).loss = loss;
    }
    let mut sent = 0;
    for k in 0..n {
        let _ = p.send(Side::A, &packet(k, 1200));
        sent += 1;
        if (k + 1) % per_ms == 0 {
            p.run(ms(1));
        }
    }
    p.run(ms(500));
    (p, sent)
}

/// What recovering a lossy stream did: (missing, lost on the paths, asked for, bytes resent,
/// bytes of parity, packets made again from parity, hold time p99).
struct Recovery {
    missing: usize,
    lost: u64,
    asked: u64,
    resent: u64,
    parity: u64,
    repaired: u64,
    hold_p99: Duration,
}

fn recover(seed: u64, loss: f64, n: u32, per_ms: u32, parity: bool) -> Recovery {
    let (mut p, sent) = lossy_stream(seed, loss, n, per_ms, true, parity);
    let got = p.delivered_numbers(Side::B);
    let mut sorted = got.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), got.len(), "nothing delivered twice");
    let counts: Vec<_> = (0..2)
        .map(|i| p.ep(Side::A).resend_counts(PathId(i)))
        .collect();
    Recovery {
        missing: sent - got.len(),
        lost: (0..2).map(|i| p.ep(Side::B).stats().paths[i].lost).sum(),
        asked: p.ep(Side::B).nack_counts().1,
        resent: counts.iter().map(|c| c.resent_bytes).sum(),
        parity: counts.iter().map(|c| c.parity_bytes).sum(),
        repaired: p.ep(Side::B).parity_counts().repaired,
        hold_p99: p.ep(Side::B).stats().total.hold_time_percentile(0.99),
    }
}

#[test]
fn random_loss_is_recovered_at_a_cost_close_to_the_loss() {
    let n = 20_000;
    let data_bytes = u64::from(n) * (1200 + 82);
    for parity in [false, true] {
        let r = recover(3, 0.01, n, 4, parity);
        assert!(
            r.lost > u64::from(n) / 200,
            "the links lost {} of {n}",
            r.lost
        );
        // what is still missing: a resend lost too, or its request
        assert!(
            r.missing * 2000 <= n as usize,
            "{} of {n} missing (more than 0.05 %), {} lost on the paths",
            r.missing,
            r.lost
        );
        // at most twice the loss rate plus 1 % of the traffic
        let cost = r.resent + r.parity;
        assert!(
            cost * 100 <= data_bytes * 3,
            "resent {} and parity {} bytes for {data_bytes} of data",
            r.resent,
            r.parity
        );
        println!(
            "RESULT sim-resend 1% loss, parity {}: {} of {n} missing, {} lost on the paths, {} \
             asked for, {} made again from parity; {} bytes resent, {} of parity ({:.2} % of \
             data); hold p99 {:?}",
            if parity { "on" } else { "off" },
            r.missing,
            r.lost,
            r.asked,
            r.repaired,
            r.resent,
            r.parity,
            cost as f64 * 100.0 / data_bytes as f64,
            r.hold_p99,
        );
        if parity {
            // one parity per 64 packets at 1 % loss: about half the groups with a loss lack
            // only one
            assert!(
                r.repaired * 3 > r.lost,
                "parity made {} of {} again",
                r.repaired,
                r.lost
            );
        } else {
            assert_eq!((r.repaired, r.parity), (0, 0));
            assert!(r.asked >= r.lost * 9 / 10);
        }
    }
}

#[test]
fn the_same_loss_without_resending_loses_about_as_much_as_the_links() {
    let n = 5_000;
    let (p, sent) = lossy_stream(3, 0.01, n, 1, false, false);
    let missing = sent - p.delivered_numbers(Side::B).len();
    assert!(
        missing * 200 >= sent,
        "only {missing} of {sent} missing without resending"
    );
}

#[test]
fn clean_paths_cost_nothing() {
    let (mut p, n) = lossy_stream(4, 0.0, 5_000, 4, true, true);
    assert_eq!(p.delivered_numbers(Side::B).len(), n);
    assert_eq!(p.ep(Side::B).nack_counts(), (0, 0));
    assert_eq!(sent_kind(&p), 0);
    assert_eq!(
        sent(&p, Side::A, Kind::Parity),
        0,
        "no parity on clean paths"
    );
}

fn sent_kind(p: &Pair) -> usize {
    sent(p, Side::A, Kind::Resent)
}

#[test]
fn parity_is_sent_only_when_both_ends_take_it() {
    for (pa, pb) in [(true, true), (true, false), (false, true)] {
        let mut a = sim::config(Side::A, 2, true);
        let mut b = sim::config(Side::B, 2, true);
        (a.parity, b.parity) = (pa, pb);
        let mut p = Pair::with(sim::seed(6), a, b);
        agreed(&mut p);
        for path in 0..2 {
            p.link(Side::A, path).loss = 0.02;
        }
        for k in 0..8_000 {
            let _ = p.send(Side::A, &packet(k, 1200));
            if k % 4 == 3 {
                p.run(ms(1));
            }
        }
        p.run(ms(500));
        let parities = sent(&p, Side::A, Kind::Parity);
        if pa && pb {
            assert!(parities > 0, "no parity at 2 % loss");
        } else {
            assert_eq!(parities, 0, "parity {pa} / {pb}");
        }
        assert!(sent(&p, Side::A, Kind::Resent) > 0, "resending goes on");
    }
}

/// The paths `side`'s resent data went on, in order.
fn resent_on(p: &Pair, side: Side) -> Vec<usize> {
    p.node(side)
        .sent_log
        .iter()
        .filter_map(|(_, d)| {
            let (h, _) = mpt_core::wire::HeaderRepr::parse_outer(d).ok()?;
            (h.kind == Kind::Resent).then_some(h.path.index())
        })
        .collect()
}

#[test]
fn a_large_packet_lost_on_a_path_goes_again_on_another_a_small_one_where_it_arrives_soonest() {
    // A large datagram lost on a path may have met a black hole there (its MTU dropped, not
    // noticed yet): sent again on the same path it would be lost again, and with it every
    // packet compressed against it. A small one goes where it arrives soonest, as before:
    // here path 0 (the paths tie, and the first wins).
    // No classes: no path is kept short for light traffic (resends avoid that one).
    let mut a = sim::config(Side::A, 2, true);
    let mut b = sim::config(Side::B, 2, true);
    a.classes.clear();
    b.classes.clear();
    let mut p = Pair::with(sim::seed(7), a, b);
    agreed(&mut p);
    p.run(ms(3000));
    // a path's first loss makes it keep what it sends for resending
    p.drop_next(Side::A, 0, 1);
    for n in 1000..1010 {
        p.send(Side::A, &packet(n, LEN)).expect("sent");
    }
    p.run(ms(300));
    for (k, (len, want)) in [(LEN, 0), (1300, 1)].into_iter().enumerate() {
        let first = 100 * k as u32;
        let before = resent_on(&p, Side::A).len();
        p.node_mut(Side::B).delivered.clear();
        p.drop_next(Side::A, 0, 1);
        for n in first..first + 10 {
            p.send(Side::A, &packet(n, len)).expect("sent");
        }
        p.run(ms(300));
        let mut got = p.delivered_numbers(Side::B);
        got.sort_unstable();
        assert_eq!(got, (first..first + 10).collect::<Vec<_>>(), "{len} bytes");
        assert_eq!(resent_on(&p, Side::A)[before..], [want], "{len} bytes");
    }
}

/// Two paths of 20 Mbit/s, 10 and 60 ms away, offered more than they carry (44 Mbit/s of large
/// packets) for two seconds, then less (30 Mbit/s): the near one loses packets in the flood,
/// and a large packet lost goes again on the far path. Each resend took the far path's time at
/// the rate learned for it, cut in the flood, with no bound: its clock stood seconds ahead, so
/// it got no data, learned nothing new, and its rate stayed cut long after the flood (the lab:
/// a cubic flow after a BBR start at half the paths' sum). Resends and control take a path's
/// time only up to the backlog limit, so the far path gets data again and learns its rate.
#[test]
fn resends_do_not_starve_a_path_of_its_rate_learned() {
    let still = Duration::ZERO;
    let links = [(ms(10), still, 20, 0.0), (ms(60), still, 20, 0.0)];
    let mut p = Pair::shaped_adaptive(sim::seed(61), &links);
    agreed(&mut p);
    let mut k = 0;
    let mut learned = Vec::new();
    let mut backlog = Vec::new();
    for second in 0..8 {
        let every = if second < 2 { 230 } else { 350 };
        let every = Duration::from_micros(every);
        k += p.stream_of(Side::A, ms(1000), every, 1300, k, tcp_packet);
        let now = p.now;
        let l: Vec<_> = (0..2)
            .map(|i| p.ep(Side::A).learned(now, PathId(i)).unwrap_or_default())
            .collect();
        learned.push(
            l.iter()
                .map(|l| l.rate_bps.min(l.cap_bps) as f64 / 1e6)
                .collect::<Vec<_>>(),
        );
        backlog.push(l.iter().map(|l| l.backlog_us / 1000).collect::<Vec<_>>());
    }
    let resent: Vec<_> = (0..2)
        .map(|i| p.ep(Side::A).resend_counts(PathId(i)).resent)
        .collect();
    eprintln!(
        "RESULT rates learned each second (Mbit/s): {learned:.1?}; clocks ahead (ms) {backlog:?}; resent {resent:?}"
    );
    assert!(
        resent[0] > 0,
        "the near path lost packets in the flood, and they were resent"
    );
    for l in &learned[5..] {
        assert!(
            l.iter().all(|&r| r >= 10.0),
            "rates learned {learned:.1?} of two 20 Mbit/s paths offered 30 Mbit/s"
        );
    }
}
