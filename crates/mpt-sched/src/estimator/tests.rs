//! What a report says about a path: its delivery rate, reliability, queue, silence, and the
//! cap it is trusted with. How the rate moves (cuts, spreading, probing): [`rate`].

use super::*;
use mpt_core::PathId;

mod rate;

pub(super) fn report(
    path_seq: u16,
    packets: u32,
    bytes: u64,
    lost: u32,
    owd_min_us: u32,
    owd_us: u32,
) -> ReportEntry {
    ReportEntry {
        path: PathId(0),
        path_seq,
        packets,
        bytes,
        lost,
        owd_min_us,
        owd_us,
        ..Default::default()
    }
}

#[test]
fn a_path_is_trusted_with_a_step_above_what_it_carried() {
    let mut e = Estimator::new(&[None, Some(2_000_000)]);
    let p = e.path(0).unwrap();
    assert_eq!(
        (p.rate_bps, p.send_rate_bps()),
        (DEFAULT_START_RATE, UNPROVEN_RATE)
    );
    assert_eq!(e.path(1).unwrap().send_rate_bps(), 2_000_000.0);
    for i in 0..2 {
        e.on_report(Time::ZERO, i, &report(0, 0, 0, 0, 0, 0), 0b11);
    }
    // Each carried 20 packets of 500 bytes in 100 ms: 800 kbit/s.
    for i in 0..2 {
        e.on_report(
            Time::from_millis(100),
            i,
            &report(20, 20, 10_000, 0, 0, 0),
            0b11,
        );
    }
    let (p0, p1) = (e.path(0).unwrap(), e.path(1).unwrap());
    assert!(
        (p0.cap_bps - CAP_GROWTH * 800_000.0).abs() < 1.0,
        "{}",
        p0.cap_bps
    );
    assert_eq!(p0.send_rate_bps(), p0.cap_bps);
    // A configured rate is trusted as it stands.
    assert_eq!(p1.send_rate_bps(), 2_000_000.0);
    // Carrying 10 times less (80 kbit/s), path 0 is trusted with less again, but the
    // smoothed delivery (the first 200 ms sample: 440 kbit/s) holds it up.
    e.on_report(
        Time::from_millis(200),
        0,
        &report(22, 22, 11_000, 0, 0, 0),
        0b11,
    );
    let p0 = e.path(0).unwrap();
    assert!(
        (p0.cap_bps - CAP_GROWTH * 440_000.0).abs() < 1.0,
        "{}",
        p0.cap_bps
    );
    // Never below the floor: 40 kbit/s carried.
    let mut e = Estimator::new(&[None]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_report(Time::from_millis(100), 0, &report(1, 1, 500, 0, 0, 0), 1);
    assert_eq!(e.path(0).unwrap().cap_bps, UNPROVEN_RATE);
}

#[test]
fn a_path_with_a_standing_queue_is_trusted_with_what_it_carries() {
    let mut e = Estimator::new(&[None]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    // 200 packets of 1250 bytes in 100 ms (20 Mbit/s, 0.5 ms each) with a 5 ms queue:
    // under the 10 ms congestion threshold, but ten packets deep.
    e.on_report(
        Time::from_millis(100),
        0,
        &report(200, 200, 250_000, 0, 0, 5_000),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(p.saturated && !p.congested);
    assert!((p.cap_bps - 20_000_000.0).abs() < 1.0, "{}", p.cap_bps);
    // The queue gone (half a packet), the path may take a step more again.
    e.on_report(
        Time::from_millis(200),
        0,
        &report(400, 400, 500_000, 0, 0, 250),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(!p.saturated);
    assert!(p.cap_bps > 1.2 * 20_000_000.0, "{}", p.cap_bps);
}

#[test]
fn delivery_rate_is_smoothed_as_cmt_rev() {
    let mut e = Estimator::new(&[Some(1_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    // 125 000 bytes per second = 1 Mbit/s, then 2 Mbit/s.
    e.on_report(
        Time::from_secs(1),
        0,
        &report(100, 100, 125_000, 0, 0, 0),
        1,
    );
    assert_eq!(e.path(0).unwrap().delivery_bps, 1_000_000.0);
    e.on_report(
        Time::from_secs(2),
        0,
        &report(300, 300, 375_000, 0, 0, 0),
        1,
    );
    // EWMA: 0.5·1M + 0.5·2M = 1.5M; history [1.5M, 1M] with weights 1, 1.
    assert!((e.path(0).unwrap().delivery_bps - 1_250_000.0).abs() < 1.0);
}

#[test]
fn reliability_follows_delivered_over_sent() {
    let mut e = Estimator::new(&[Some(1_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    // 100 sent, 90 delivered: R = 0.8·1 + 0.2·0.9 = 0.98.
    e.on_report(Time::from_secs(1), 0, &report(100, 90, 90_000, 10, 0, 0), 1);
    let p = e.path(0).unwrap();
    assert!((p.reliability - 0.98).abs() < 1e-9, "{}", p.reliability);
    assert!((p.last_loss - 0.1).abs() < 1e-9);
    assert!(p.congested);
}

#[test]
fn a_short_interval_with_few_packets_is_measured_with_the_next() {
    let mut e = Estimator::new(&[Some(64_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    // Two 200-byte packets in 20 ms would say 160 kbit/s on a 64 kbit/s line.
    e.on_report(Time::from_millis(20), 0, &report(2, 2, 400, 0, 0, 0), 1);
    assert_eq!(e.path(0).unwrap().delivery_bps, 0.0);
    // 40 packets over the whole second: 64 kbit/s.
    e.on_report(Time::from_secs(1), 0, &report(40, 40, 8_000, 0, 0, 0), 1);
    assert_eq!(e.path(0).unwrap().delivery_bps, 64_000.0);
}

#[test]
fn counters_that_go_backwards_restart_the_measurement() {
    // A restarted peer counts from zero again: every difference would wrap.
    let mut e = Estimator::new(&[Some(1_000_000)]);
    e.on_report(Time::ZERO, 0, &report(500, 500, 600_000, 40, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 50_000);
    e.on_report(Time::from_millis(300), 0, &report(3, 3, 300, 0, 0, 0), 1);
    e.on_report(
        Time::from_millis(600),
        0,
        &report(30, 30, 3_000, 0, 0, 0),
        1,
    );
    let p = e.path(0).unwrap();
    // 27 packets, 2700 bytes in the 300 ms since the restart: 72 kbit/s.
    assert_eq!(p.delivery_bps, 72_000.0);
    assert_eq!(p.rate_bps, 1_000_000.0);
}

#[test]
fn serialisation_of_larger_packets_is_no_queue() {
    // A 128 kbit/s serial line carries 400-byte datagrams (486 on the wire) at 65 kbit/s;
    // its minimum delay was set by a 52-byte packet, 27 ms faster to serialise at
    // 128 kbit/s, so the smoothed delay stands 25 ms above the minimum with no queue.
    let mut e = Estimator::new(&[None]);
    e.set_overhead(0, 86);
    let r = |seq: u16, owd_us: u32| ReportEntry {
        owd_min_len: 52,
        ..report(seq, u32::from(seq), u64::from(seq) * 400, 0, 0, owd_us)
    };
    e.on_report(Time::ZERO, 0, &r(0, 0), 1);
    e.on_sent(Time::ZERO, 0, 20 * 486);
    e.on_report(Time::from_millis(1200), 0, &r(20, 25_000), 1);
    let p = e.path(0).unwrap();
    assert!(!p.congested && p.queue_us < NO_QUEUE_US, "{p:?}");
    // A real queue on top of it still counts: 150 ms is congestion.
    e.on_sent(Time::ZERO, 0, 20 * 486);
    e.on_report(Time::from_millis(2400), 0, &r(40, 175_000), 1);
    let p = e.path(0).unwrap();
    assert!(p.congested && p.queue_us > 100_000.0, "{p:?}");
}

#[test]
fn a_path_that_stops_delivering_while_sent_to_is_silent() {
    // 10 Mbit/s of 1250-byte packets (one a millisecond), reported every 20 ms; the path
    // delivers nothing sent after 60 ms.
    let run = |sends: &dyn Fn(u64) -> bool| {
        let mut e = Estimator::new(&[None]);
        let mut delivered = 0u32;
        let mut last = None;
        for ms in 0..=100u64 {
            let now = Time::from_millis(ms);
            if sends(ms) {
                e.on_sent(now, 0, 1250);
            }
            if ms <= 60 && sends(ms) {
                delivered += 1;
                last = Some((ms, now.wire_micros()));
            }
            if ms % 20 == 0 {
                let (at, echo) = last.unwrap_or((0, 0));
                let r = ReportEntry {
                    echo,
                    echo_age_us: ((ms - at) * 1000) as u32,
                    ..report(
                        delivered as u16,
                        delivered,
                        u64::from(delivered) * 1250,
                        0,
                        0,
                        0,
                    )
                };
                e.on_report(now, 0, &r, 1);
            }
        }
        e.path(0).unwrap().clone()
    };
    // Sent to throughout: the packets sent at 61–90 ms would have arrived by 100 ms.
    let p = run(&|_| true);
    assert!(p.silent, "{p:?}");
    // The sender stopped at 60 ms (a TCP flow that stalled): nothing is missing.
    let p = run(&|ms| ms <= 60);
    assert!(!p.silent, "{p:?}");
    // The sender paused from 40 to 95 ms: what it sent since would not have arrived yet.
    let p = run(&|ms| !(40..95).contains(&ms));
    assert!(!p.silent, "{p:?}");
}

/// A report's queue is a round trip old: carried forward to now, it stands where the sender
/// kept the path busy since, and is gone where the sender sent the path too little.
#[test]
fn a_reported_queue_is_carried_forward_from_the_packet_it_names() {
    let ms = |n: u64| std::time::Duration::from_millis(n);
    let mut e = Estimator::new(&[None, None]);
    for p in &mut e.paths {
        // 10 Mbit/s: 1250 bytes take 1 ms
        p.best_delivery_bps = 10e6;
        p.queue_seen_us = 30_000.0;
    }
    // path 0 is sent a packet a millisecond for 100 ms, path 1 only for the first 50
    for t in 0..100 {
        e.on_sent(Time::from_millis(t), 0, 1250);
        if t < 50 {
            e.on_sent(Time::from_millis(t), 1, 1250);
        }
    }
    let now = Time::from_millis(100);
    // The report at 100 ms names the packet sent at 40 ms, which waited 30 ms. On path 0, 60
    // ms of packets went after it in 60 ms: the queue stands. On path 1, 10 ms of packets:
    // it drained 20 ms after the named packet left, at 90 ms.
    assert_eq!(e.queue_now(now, 0, 40_000), Some(ms(30)));
    assert_eq!(e.queue_now(now, 1, 40_000), Some(ms(0)));
    // Named at 70 ms on path 0: 30 ms passed, 30 ms of packets sent after it.
    assert_eq!(e.queue_now(now, 0, 70_000), Some(ms(30)));
    // Never more than the report shows: a rate far below the link's would count what was sent
    // since for a queue that is not there.
    e.paths[0].best_delivery_bps = 1e6;
    assert_eq!(e.queue_now(now, 0, 40_000), Some(ms(30)));
    // A path sent at more than it has delivered so far (a capacity measured while its queue
    // stood, above a delivery rate smoothed over a start) drains at that rate. Path 1, sent at
    // 20 Mbit/s: the report at 55 ms names the packet sent at 25 ms, which waited 30 ms; the
    // 25 ms of packets at 10 Mbit/s sent after it take 12.5 ms at 20, so the queue drains at
    // 67.5 ms. At the smoothed 10 Mbit/s it would stand until 80 ms, holding the path idle.
    e.paths[1].best_delivery_bps = 10e6;
    e.paths[1].rate_bps = 20e6;
    e.paths[1].cap_bps = 20e6;
    assert_eq!(
        e.queue_now(Time::from_millis(55), 1, 25_000),
        Some(ms(12) + ms(1) / 2)
    );
    // Nothing to go by: no delivery yet, or a packet older than the log.
    e.paths[0].best_delivery_bps = 0.0;
    assert_eq!(e.queue_now(now, 0, 40_000), None);
    e.on_path_up(1);
    assert_eq!(e.queue_now(now, 1, 40_000), None);
}

/// Path 0 carries 20 Mbit/s while it is given that (200 packets of 1250 bytes per 100 ms),
/// then the scheduler prefers another path and gives it 20 packets per 100 ms: those samples
/// measure the sender, and the path keeps what it showed. Given 20 Mbit/s again, it is
/// trusted with a step above that at once.
#[test]
fn a_path_given_less_than_it_carries_keeps_the_rate_it_showed() {
    let mut e = Estimator::new(&[None]);
    let ms = Time::from_millis;
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    let mut seq = 0u32;
    let mut at = 0;
    let mut interval = |e: &mut Estimator, n: u32| {
        for k in 0..n {
            e.on_sent(ms(at + u64::from(k) * 100 / u64::from(n)), 0, 1250);
        }
        seq += n;
        at += 100;
        e.on_report(
            ms(at),
            0,
            &report(seq as u16, seq, u64::from(seq) * 1250, 0, 0, 0),
            1,
        );
    };
    for _ in 0..6 {
        interval(&mut e, 200);
    }
    let shown = e.path(0).unwrap().delivery_bps;
    assert!(shown > 15_000_000.0, "{shown}");
    for _ in 0..10 {
        interval(&mut e, 20);
    }
    let p = e.path(0).unwrap();
    assert_eq!(p.delivery_bps, shown);
    assert!(p.cap_bps >= CAP_GROWTH * shown - 1.0, "{}", p.cap_bps);
}
