//! Traffic classes, driven through a simulated pair of connections (`sim`): light traffic goes
//! the fastest way and is not held behind bulk, a light stream keeps its path short (with and
//! without delay equalisation) and a DNS lookup keeps none short, and a duplicate class goes on
//! two paths and is delivered once.

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::PathId;
use sim::helpers::{ms, udp};
use sim::{packet, Pair, Side};

/// Two paths, path 0 with 10 ms one way, path 1 with 60 ms, `classes` as given (the built-in
/// ones after them); keys agreed and both paths' round-trip times measured.
fn fast_and_slow_pair(seed: u64, classes: Vec<mpt_tunnel::ClassRule>) -> Pair {
    let cfg = |side| {
        let mut c = sim::config(side, 2, true);
        let mut all = classes.clone();
        all.extend(mpt_tunnel::default_classes());
        c.classes = all;
        c
    };
    let mut p = Pair::with(sim::seed(seed), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        p.link(side, 0).delay = ms(10);
        p.link(side, 1).delay = ms(60);
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    // keepalives measure both paths
    p.run(ms(1000));
    p
}

#[test]
fn light_traffic_goes_the_fastest_way_and_is_delivered_at_once_not_behind_bulk() {
    let mut p = fast_and_slow_pair(70, Vec::new());
    // bulk round-robin over both paths, and among it a voice packet (DSCP EF) every 20 ms and
    // a DNS query now and then
    let mut sent_at = std::collections::HashMap::new();
    let mut light = Vec::new();
    for k in 0..100u32 {
        p.send(Side::A, &packet(1_000_000 + k, 1000))
            .expect("bulk sent");
        if k % 4 == 0 {
            let voice = udp(k, 4000, 200, mpt_tunnel::DSCP_EF);
            assert_eq!(
                p.send(Side::A, &voice).expect("voice sent"),
                Some(PathId(0))
            );
            sent_at.insert(sim::number(&voice), p.now);
            light.push(sim::number(&voice));
        }
        if k % 25 == 0 {
            let dns = udp(k, 53, 80, 0);
            assert_eq!(p.send(Side::A, &dns).expect("dns sent"), Some(PathId(0)));
            sent_at.insert(sim::number(&dns), p.now);
            light.push(sim::number(&dns));
        }
        p.run(ms(5));
    }
    p.run(ms(500));
    // everything arrived once; the light packets within the fast path's delay, although the
    // bulk sent before them waited for the slow path's
    let delivered = p.delivered_numbers(Side::B);
    assert_eq!(delivered.len(), 100 + light.len());
    let mut sorted = delivered.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), delivered.len(), "something delivered twice");
    for (at, bytes) in &p.node(Side::B).delivered {
        if let Some(&sent) = sent_at.get(&sim::number(bytes)) {
            let took = *at - sent;
            assert!(took < ms(15), "a light packet took {took:?}");
        }
    }
    // bulk went both ways; the classes' counters say where the light packets went
    // (in its first minute a path has not shown whether it loses: each voice packet and DNS
    // query went twice, the copy on the slow path, and arrived once)
    let (per_class, copies) = p.ep(Side::A).class_counts();
    assert_eq!(copies, 25 + 4);
    assert_eq!(per_class[0], vec![25, 25], "ef");
    assert_eq!(per_class[1], vec![4, 4], "dns");
    let bulk_on_slow = p.ep(Side::B).stats().paths[1].packets;
    assert!(bulk_on_slow >= 45, "bulk on the slow path: {bulk_on_slow}");
    assert_eq!(p.ep(Side::B).drops().too_old, 0);
}

/// Bulk offered 30 Mbit/s over a 20 Mbit/s path 10 ms away and another 60 ms away (`rate`,
/// both rates configured), then a voice stream (DSCP EF) from 1.5 s on: how long each voice
/// packet took (by its number), after every packet was checked delivered and both paths
/// carried bulk.
fn voice_next_to_bulk(equalise: bool) -> Vec<(u32, Duration)> {
    let cfg = |side| {
        let mut c = sim::config(side, 2, true);
        c.scheduler = mpt_sched::SchedulerKind::Rate;
        c.equalise = equalise;
        for path in &mut c.paths {
            path.rate_bps = Some(20_000_000);
        }
        c
    };
    let mut p = Pair::with(sim::seed(74), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        for (i, d) in [(0, 10), (1, 60)] {
            p.link(side, i).delay = ms(d);
            p.link(side, i).rate_bps = Some(20_000_000);
        }
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p.run(ms(2000));
    let every = Duration::from_micros(373);
    let mut bulk = 0u32;
    let mut sent_at = std::collections::HashMap::new();
    let mut voice = Vec::new();
    let mut on_near = 0;
    for tick in 0..8000u32 {
        p.send(Side::A, &packet(1_000_000 + bulk, 1400))
            .expect("bulk sent");
        bulk += 1;
        // from 1.5 s on, a voice packet every 20 ms (every 54th tick)
        if tick >= 4000 && tick % 54 == 0 {
            let k = voice.len() as u32;
            let v = voice_packet(k);
            let path = p.send(Side::A, &v).expect("voice sent");
            on_near += u32::from(path == Some(PathId(0)));
            sent_at.insert(k, p.now);
            voice.push(k);
        }
        p.run(every);
    }
    p.run(ms(1000));
    let mut took = Vec::new();
    for (at, bytes) in &p.node(Side::B).delivered {
        if let Some(k) = voice_number(bytes) {
            if let Some(&sent) = sent_at.get(&k) {
                took.push((k, *at - sent));
            }
        }
    }
    took.sort_unstable();
    assert_eq!(took.len(), voice.len(), "voice lost");
    assert_eq!(on_near as usize, voice.len(), "voice took the far path");
    // both paths carried the bulk, nothing was lost
    let st = p.ep(Side::B).stats();
    assert!(
        st.paths[1].packets > 2000,
        "far path {}",
        st.paths[1].packets
    );
    assert_eq!(
        p.delivered_numbers(Side::B).len(),
        bulk as usize + voice.len()
    );
    took
}

/// The UDP packet `p` ([`udp`]) numbered `k` after its UDP header, its ports as they are: the
/// packets of one flow, told apart.
fn numbered(mut p: Vec<u8>, k: u32) -> Vec<u8> {
    p[28..32].copy_from_slice(&k.to_be_bytes());
    p
}

/// The `k`th packet of a voice stream: 200 bytes of UDP marked EF, from port 4000 to port
/// 4000 (one flow, as a call's), [`numbered`].
fn voice_packet(k: u32) -> Vec<u8> {
    numbered(udp(4000, 4000, 200, mpt_tunnel::DSCP_EF), k)
}

/// The number of a [`voice_packet`] (`None` for another packet).
fn voice_number(p: &[u8]) -> Option<u32> {
    (p.len() == 200).then(|| u32::from_be_bytes([p[28], p[29], p[30], p[31]]))
}

/// Without delay equalisation, bulk fills the near path's queue until the far path is the
/// sooner one: 50 ms. A voice stream that starts then must not wait in that queue: from its
/// first packet on (marked EF, it is a stream at once), the near path is kept short and the
/// far one takes the rest of the bulk. Only the packets sent while the queue that stood drains
/// wait at all.
#[test]
fn a_light_stream_keeps_its_path_short_and_bulk_takes_the_other() {
    let took = voice_next_to_bulk(false);
    // the queue that stood when the stream began: 40 ms and more
    assert!(took[0].1 > ms(40), "first voice packet {:?}", took[0]);
    for &(k, d) in &took[3..] {
        assert!(d < ms(17), "voice packet {k} took {d:?}");
    }
}

/// With it (the default), the near path is no sooner for bulk, which the receiver delays to
/// match the far path: bulk shares the paths by queue, none stands on the near path, and not
/// even the voice stream's first packet waits.
#[test]
fn where_the_receiver_equalises_bulk_leaves_no_queue_on_the_near_path_for_voice() {
    for (k, d) in voice_next_to_bulk(true) {
        assert!(d < ms(17), "voice packet {k} took {d:?}");
    }
}

#[test]
fn a_duplicate_class_goes_on_two_paths_once_delivered_and_a_blackout_costs_it_nothing() {
    let voice = mpt_tunnel::ClassRule {
        name: "voice".into(),
        protocol: Some(17),
        ports: Some((5004, 5004)),
        mode: mpt_tunnel::Mode::Duplicate,
        ..mpt_tunnel::ClassRule::default()
    };
    let mut p = fast_and_slow_pair(71, vec![voice]);
    let mut numbers = Vec::new();
    // 50 packets a second for 3 s; the fast path blacks out for the second in the middle
    for k in 0..150u32 {
        if k == 50 {
            p.set_up(0, false);
        }
        if k == 100 {
            p.set_up(0, true);
        }
        let v = udp(k, 5004, 200, 0);
        numbers.push(sim::number(&v));
        p.send(Side::A, &v).expect("voice sent");
        p.run(ms(20));
    }
    p.run(ms(500));
    let mut delivered = p.delivered_numbers(Side::B);
    assert_eq!(delivered.len(), 150, "each packet delivered exactly once");
    delivered.sort_unstable();
    numbers.sort_unstable();
    assert_eq!(delivered, numbers);
    let (per_class, copies) = p.ep(Side::A).class_counts();
    // every packet had a copy while both paths were up (and some while the fast one was
    // down but not yet known to be)
    assert!(copies >= 100, "copies sent: {copies}");
    assert_eq!(per_class[0].iter().sum::<u64>(), 150 + copies);
    // the receiver dropped the copy that came second of every pair that both arrived
    assert!(p.ep(Side::B).drops().duplicate >= 90);
}

/// A UDP stream at 80 % of two 20 Mbit/s paths (10 and 60 ms one way, 50 ms of queue, nothing
/// configured per path) for 10 s, and a DNS lookup (an A and an AAAA query) every `every`
/// from the same host: the datagrams of the stream that the links' queues dropped, and those
/// that never arrived.
fn stream_beside_dns(every: Option<Duration>) -> (u64, usize) {
    let links = [(ms(10), ms(0), 20, 0.0), (ms(60), ms(0), 20, 0.0)];
    let mut p = Pair::shaped_adaptive_with(sim::seed(72), &links, |c| {
        c.reorder_window = 4096;
        c.mtu = 1500;
    });
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    let gap = Duration::from_secs_f64(1228.0 * 8.0 / 32e6);
    let (mut sent, mut next_lookup) = (0u32, p.now + ms(3000));
    let until = p.now + ms(13_000);
    while p.now < until {
        if every.is_some_and(|_| p.now >= next_lookup) {
            // from a port of its own (a resolver's), both queries
            let port = 40_000 + sent % 20_000;
            for _ in 0..2 {
                p.send(Side::A, &udp(port, 53, 80, 0)).expect("query sent");
            }
            next_lookup = next_lookup + every.unwrap_or_default();
        }
        let _ = p.send(Side::A, &numbered(udp(5000, 5201, 1228, 0), sent));
        sent += 1;
        p.run(gap);
    }
    p.run(ms(1000));
    let got = p.node(Side::B).delivered.iter();
    let got = got.filter(|(_, b)| b.len() == 1228).count();
    let dropped = (0..2).map(|i| p.overflowed(Side::A, i)).sum();
    (dropped, sent as usize - got)
}

/// A DNS query is light traffic, but one lookup is no stream: it keeps no path short. Kept
/// short for a second after each query, the near path took half of what it
/// carried for bulk, the far path's queue overflowed, and a UDP stream at 80 % of the paths
/// lost 8.8 % of its datagrams with a lookup every 2 s (34.8 % with one every 500 ms),
/// against 0.4 % without.
#[test]
fn a_dns_lookup_now_and_then_costs_a_stream_beside_it_nothing() {
    let (quiet_dropped, quiet_lost) = stream_beside_dns(None);
    for every in [ms(2000), ms(500)] {
        let (dropped, lost) = stream_beside_dns(Some(every));
        eprintln!(
            "RESULT lookups every {every:?}: the links dropped {dropped}, {lost} lost \
             (without lookups {quiet_dropped}, {quiet_lost})"
        );
        assert!(
            lost <= quiet_lost + quiet_lost / 2 + 10 && dropped <= quiet_dropped * 2 + 50,
            "lookups every {every:?}: {dropped} dropped by the links and {lost} lost, against \
             {quiet_dropped} and {quiet_lost} without"
        );
    }
}
