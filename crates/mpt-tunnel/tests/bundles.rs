//! Bundles, driven through a simulated pair of connections (`sim`): small packets travel
//! together only while their path is busy, no longer than the queue they replace, in path
//! order, not to a peer that does not take them, and with their headers compressed on a slow
//! line.

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::PathId;
use sim::helpers::{kind_of, ms, one_slow_line, sent, udp, MS};
use sim::{packet, Pair, Side};

/// A sealed pair over one path of `rate` bits/s that the `rate` scheduler knows, bundling on
/// or off.
fn rated_pair(seed: u64, rate: u64, bundle: bool) -> Pair {
    let cfg = |side| {
        let mut c = sim::config(side, 1, true);
        c.scheduler = mpt_sched::SchedulerKind::Rate;
        c.paths[0].rate_bps = Some(rate);
        c.bundle = bundle;
        c
    };
    let mut p = Pair::with(sim::seed(seed), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        p.link(side, 0).rate_bps = Some(rate);
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    // and path MTU discovery found the path's, so that its first probes do not queue before
    // the packets of the test
    p.run_until(ms(2000), |p| {
        p.node(Side::A).ep.path_info(PathId(0)).pmtu_found
    })
    .expect("path MTU found within 2 s");
    p
}

/// A learned rate is what a path was offered: where the path carries little (acknowledgements
/// going back), the clock runs far ahead of any real queue, and small packets must not wait
/// in bundles for it. `adaptive`, nothing configured, a fast link that never queues: a burst
/// of small packets goes at once, unbundled, while the peer reports no queue.
#[test]
fn small_packets_are_not_held_for_a_queue_only_a_learned_rate_imagines() {
    let cfg = |side| {
        let mut c = sim::config(side, 1, true);
        c.scheduler = mpt_sched::SchedulerKind::Adaptive;
        c
    };
    let mut p = Pair::with(sim::seed(77), cfg(Side::A), cfg(Side::B));
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    // a trickle, so that the estimator learns the little it is offered, and reports come
    for k in 0..200u32 {
        let _ = p.send(Side::A, &packet(k, 100));
        p.run(ms(5));
    }
    let (bundles_before, _, _) = p.ep(Side::A).bundle_counts();
    let burst: Vec<Vec<u8>> = (200..400u32).map(|k| packet(k, 100)).collect();
    p.send_batch(Side::A, &burst);
    p.run(ms(300));
    let (bundles, _, _) = p.ep(Side::A).bundle_counts();
    assert_eq!(
        bundles - bundles_before,
        0,
        "small packets were bundled for a queue the link never had"
    );
    assert_eq!(p.delivered_numbers(Side::B).len(), 400);
}

#[test]
fn small_packets_travel_in_bundles_while_their_path_is_busy() {
    let mut p = rated_pair(60, 1_000_000, true);
    let before = p.node(Side::A).sent_log.len();
    // a burst of 40 packets of 160 bytes at once: the first ones find the path idle, the rest
    // would queue behind them anyway and go in bundles
    let mut held = 0;
    for n in 0..40 {
        if p.send(Side::A, &packet(n, 160)).expect("sent").is_none() {
            held += 1;
        }
    }
    p.run(ms(300));
    assert_eq!(p.delivered_numbers(Side::B), (0..40).collect::<Vec<_>>());
    let (bundles, packets, _) = p.ep(Side::A).bundle_counts();
    // (a packet left alone in a bundle goes as a data datagram)
    assert!(packets <= held, "{packets} bundled, {held} held");
    assert!(packets >= 30, "{packets} of 40 bundled");
    assert!((3..=8).contains(&bundles), "{bundles} bundles");
    let datagrams = p.node(Side::A).sent_log[before..]
        .iter()
        .filter(|(_, d)| matches!(kind_of(d), Kind::Data | Kind::Bundle))
        .count();
    assert_eq!(datagrams as u64, 40 - packets + bundles);
    assert_eq!(sent(&p, Side::A, Kind::Bundle) as u64, bundles);
    // the receiver counts every packet on the path, none lost
    let st = p.ep(Side::B).stats().paths[0].clone();
    assert_eq!((st.packets, st.lost), (40, 0));
}

#[test]
fn a_bundle_waits_no_longer_than_the_queue_it_replaces() {
    let rate = 1_000_000;
    let mut p = rated_pair(61, rate, true);
    for n in 0..10 {
        p.send(Side::A, &packet(n, 160)).expect("sent");
    }
    let start = p.now;
    p.run(ms(200));
    // ten 160-byte packets, one by one, would take 10 × (160 + 82) bytes at 1 Mbit/s: the
    // last would arrive after ~19.4 ms plus the link's delay; bundled, no later than that
    let delivered = &p.node(Side::B).delivered;
    assert_eq!(delivered.len(), 10);
    let last = delivered[9].0 - start;
    let one_by_one = Duration::from_secs_f64(10.0 * 242.0 * 8.0 / rate as f64);
    let delay = p.link(Side::A, 0).delay;
    assert!(
        last <= one_by_one + delay + MS,
        "the last packet arrived after {last:?}, one by one {one_by_one:?} + {delay:?}"
    );
}

#[test]
fn light_traffic_on_an_idle_path_is_never_held() {
    let mut p = rated_pair(62, 1_000_000, true);
    for n in 0..20 {
        assert!(p.send(Side::A, &packet(n, 160)).expect("sent").is_some());
        p.run(ms(20));
    }
    assert_eq!(p.ep(Side::A).bundle_counts(), (0, 0, 0));
    assert_eq!(p.delivered_numbers(Side::B), (0..20).collect::<Vec<_>>());
}

#[test]
fn with_bundling_off_every_packet_has_its_datagram() {
    let mut p = rated_pair(63, 1_000_000, false);
    for n in 0..40 {
        assert!(p.send(Side::A, &packet(n, 160)).expect("sent").is_some());
    }
    p.run(ms(300));
    assert_eq!(p.ep(Side::A).bundle_counts(), (0, 0, 0));
    assert_eq!(p.delivered_numbers(Side::B), (0..40).collect::<Vec<_>>());
}

#[test]
fn a_big_packet_after_a_bundle_leaves_after_it_and_fences_hold() {
    let mut p = rated_pair(64, 1_000_000, true);
    for n in 0..10 {
        p.send(Side::A, &packet(n, 160)).expect("sent");
    }
    // too big for any bundle: the open bundle leaves first, then this one
    assert!(p.send(Side::A, &packet(10, 1400)).expect("sent").is_some());
    for n in 11..20 {
        p.send(Side::A, &packet(n, 160)).expect("sent");
    }
    p.run(ms(500));
    assert_eq!(p.delivered_numbers(Side::B), (0..20).collect::<Vec<_>>());
    let st = p.ep(Side::B).stats().paths[0].clone();
    assert_eq!((st.packets, st.lost, st.path_seq_errors), (20, 0, 0));
    assert_eq!(p.ep(Side::B).drops().too_old, 0);
}

#[test]
fn a_bundle_closed_by_a_batch_that_sent_on_its_path_already_leaves_in_path_order() {
    let mut p = rated_pair(65, 1_000_000, true);
    // one batch: the first packets find the path idle and go in datagrams of their own, the
    // next wait in a bundle, and a big one closes it: the bundle was numbered after the first
    // ones, and must not overtake them
    let mut batch: Vec<Vec<u8>> = (0..6).map(|n| packet(n, 160)).collect();
    batch.push(packet(6, 1400));
    batch.extend((7..10).map(|n| packet(n, 160)));
    p.send_batch(Side::A, &batch);
    p.run(ms(500));
    assert!(p.ep(Side::A).bundle_counts().0 >= 1, "no bundle was made");
    assert_eq!(p.delivered_numbers(Side::B), (0..10).collect::<Vec<_>>());
    let st = p.ep(Side::B).stats().paths[0].clone();
    assert_eq!((st.lost, st.path_seq_errors), (0, 0), "{st:?}");
    let t = &p.ep(Side::B).stats().total;
    assert_eq!((t.late, t.skipped), (0, 0));
}

#[test]
fn to_a_peer_that_does_not_take_bundles_and_express_data_every_packet_goes_as_data() {
    let mut p = rated_pair(72, 1_000_000, true);
    // both ends said so in the handshake
    assert!(p.ep(Side::A).peer_takes_express() && p.ep(Side::B).peer_takes_express());
    p.ep(Side::A).forget_peer_express();
    let before = p.node(Side::A).sent_log.len();
    // a burst that would be bundled, and voice that would go express
    for n in 0..30 {
        p.send(Side::A, &packet(n, 160)).expect("sent");
    }
    for k in 0..5 {
        p.send(Side::A, &udp(k, 4000, 200, mpt_tunnel::DSCP_EF))
            .expect("voice sent");
    }
    p.run(ms(500));
    assert_eq!(p.ep(Side::A).bundle_counts(), (0, 0, 0));
    let kinds: Vec<Kind> = p.node(Side::A).sent_log[before..]
        .iter()
        .map(|(_, d)| HeaderRepr::parse_outer(d).expect("header").0.kind)
        .collect();
    assert!(
        !kinds.contains(&Kind::Bundle) && !kinds.contains(&Kind::Express),
        "{kinds:?}"
    );
    assert_eq!(p.delivered_numbers(Side::B).len(), 35);
}

// ---- bundles on a slow line: headers compressed

/// A voice-sized frame as iperf3 sends it (no DSCP: bonded, not sent the fastest way): an
/// IPv4 UDP packet of 160 bytes of payload, the first four of them `n`, with a valid header
/// checksum and IP identification `n`.
fn voice_frame(n: u32) -> Vec<u8> {
    let mut p = vec![0u8; 188];
    p[..20].copy_from_slice(&[
        0x45, 0, 0, 188, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ]);
    p[4..6].copy_from_slice(&(n as u16).to_be_bytes());
    let sum = mpt_core::wire::internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p[20..24].copy_from_slice(&[0x3e, 0x80, 0x3e, 0x81]);
    p[24..26].copy_from_slice(&168u16.to_be_bytes());
    p[26..28].copy_from_slice(&(n as u16 ^ 0x5a5a).to_be_bytes());
    p[28..32].copy_from_slice(&n.to_be_bytes());
    p
}

/// Table II case 11s: 100 voice frames a second (128 kbit/s of 160-byte payloads) offered to
/// one 128 kbit/s line, more than it carries. Without a tunnel each takes 202 bytes on the
/// line (79 a second fit); bundled whole, 200 (7 to a datagram); bundled without the headers
/// the frame before them already gave, 180 (8 to a datagram: 88 a second). Every frame that
/// arrives is the one sent, byte for byte, and in order.
#[test]
fn voice_frames_in_a_bundle_go_without_their_headers_and_arrive_whole() {
    let mut p = one_slow_line(78, |l| l.queue = Some(ms(300)));
    let sent: Vec<Vec<u8>> = (0..1000).map(voice_frame).collect();
    for f in &sent {
        let _ = p.send(Side::A, f);
        p.run(ms(10));
    }
    p.run(ms(1000));
    let (bundles, bundled, compressed) = p.ep(Side::A).bundle_counts();
    let got: Vec<&Vec<u8>> = p.node(Side::B).delivered.iter().map(|(_, f)| f).collect();
    let numbers: Vec<u32> = got
        .iter()
        .map(|f| u32::from_be_bytes([f[28], f[29], f[30], f[31]]))
        .collect();
    eprintln!(
        "RESULT voice over one 128 kbit/s line: {} of 1000 frames arrived; A sent {bundles} \
         bundles carrying {bundled}, {compressed} of them without their headers",
        got.len()
    );
    for (f, &n) in got.iter().zip(&numbers) {
        assert_eq!(**f, sent[n as usize], "frame {n} arrived changed");
    }
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "frames out of order"
    );
    assert!(
        compressed * 10 >= bundled * 8,
        "{compressed} of {bundled} compressed"
    );
    // 88 a second fit the line, 79 without a tunnel
    assert!(got.len() >= 850, "{} of 1000 frames arrived", got.len());
}

/// A voice frame of `payload` bytes (at least 4), otherwise as [`voice_frame`].
fn udp_frame(n: u32, payload: usize) -> Vec<u8> {
    let mut p = voice_frame(n);
    p.resize(28 + payload, 0);
    p[2..4].copy_from_slice(&((28 + payload) as u16).to_be_bytes());
    p[10..12].fill(0);
    let sum = mpt_core::wire::internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    p
}

/// A packet that fits what is left of a bundle only compressed goes in it compressed and
/// whole (not also cut into pieces, as a packet longer than the room is). Bursts of one flow's
/// frames, each with a filler of another size, so that in some the room left for the last
/// frames falls between their compressed size (168 bytes) and their whole one (189).
#[test]
fn a_packet_that_fits_a_bundle_only_compressed_goes_whole() {
    let mut p = one_slow_line(79, |_| {});
    // discovery done: datagrams of the tunnel MTU's size
    p.run(ms(2000));
    let mut sent = Vec::new();
    let mut n = 0;
    for filler in (4..220).step_by(3) {
        // the first makes the line busy; the rest wait in a bundle: one whole, then the
        // filler and the others compressed
        let mut burst = vec![
            udp_frame(n, 160),
            udp_frame(n + 1, 160),
            udp_frame(n + 2, filler),
        ];
        burst.extend((3..12).map(|k| udp_frame(n + k, 160)));
        n += 12;
        for f in &burst {
            let _ = p.send(Side::A, f);
        }
        sent.extend(burst);
        p.run(ms(1500));
    }
    p.run(ms(1000));
    let (_, bundled, compressed) = p.ep(Side::A).bundle_counts();
    let drops = p.ep(Side::B).drop_counts();
    let got: Vec<&Vec<u8>> = p.node(Side::B).delivered.iter().map(|(_, f)| f).collect();
    eprintln!(
        "RESULT {} of {} frames arrived, {bundled} bundled, {compressed} compressed",
        got.len(),
        sent.len()
    );
    assert!(drops.iter().all(|&d| d == 0), "B dropped {drops:?}");
    assert_eq!(got.len(), sent.len(), "frames lost");
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(*g, s, "a frame arrived changed or out of order");
    }
}
