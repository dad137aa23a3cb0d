//! How a path's rate moves on a report: cuts on congestion (and what is not congestion),
//! the share a cut frees, probing upwards, recovery.

use super::super::*;
use super::report;

/// Feed path 0 of `e` reports every 20 ms from `from_ms` for `ms`: 50 packets of 1250
/// bytes sent per interval (25 Mbit/s offered), `lost(k)` of interval `k` lost, with a
/// queue of `queue_us(k)`. Returns the lowest rate seen and whether any report was
/// congested.
fn lossy_run(
    e: &mut Estimator,
    ms: std::ops::Range<u64>,
    lost: impl Fn(u64) -> u32,
    queue_us: impl Fn(u64) -> u32,
) -> (f64, bool) {
    let (mut low, mut congested) = (f64::MAX, false);
    for k in ms.step_by(20).map(|t| t / 20) {
        let prev = e.path(0).unwrap().last.map(|(_, r)| r).unwrap_or_default();
        let l = lost(k);
        e.on_sent(Time::from_millis(k * 20), 0, 50 * 1250);
        let r = report(
            prev.path_seq.wrapping_add(50),
            prev.packets + 50 - l,
            prev.bytes + u64::from(50 - l) * 1250,
            prev.lost + l,
            0,
            queue_us(k),
        );
        e.on_report(Time::from_millis(k * 20), 0, &r, 1);
        let p = e.path(0).unwrap();
        low = low.min(p.rate_bps);
        congested |= p.congested;
    }
    (low, congested)
}

#[test]
fn random_loss_is_not_congestion_but_a_full_queue_or_a_policer_is() {
    // A 25 Mbit/s path, learned: one loss every fourth interval (2 %), no queue. Not
    // congested, and the rate never falls.
    let mut e = Estimator::new(&[Some(25_000_000)]);
    let (low, congested) = lossy_run(&mut e, 0..2000, |k| u32::from(k % 4 == 1), |_| 500);
    assert!(!congested && low >= 25_000_000.0, "{:?}", e.path(0));
    // The same losses while the queue stands at its peak: the queue overflowed.
    let mut e = Estimator::new(&[Some(25_000_000)]);
    let (low, _) = lossy_run(&mut e, 0..100, |_| 0, |_| 500);
    assert_eq!(low, 25_000_000.0);
    let (low, congested) = lossy_run(&mut e, 100..200, |k| u32::from(k % 4 == 1), |_| 40_000);
    assert!(congested && low < 25_000_000.0, "{:?}", e.path(0));
    // A policer drops a tenth without any queue: congestion once the loss is over
    // LOSS_CONGESTION, smoothed.
    let mut e = Estimator::new(&[Some(25_000_000)]);
    let (low, congested) = lossy_run(&mut e, 0..400, |_| 5, |_| 500);
    assert!(congested && low < 25_000_000.0, "{:?}", e.path(0));
}

#[test]
fn congestion_cuts_to_what_was_delivered_and_spreads_to_the_others() {
    let mut e = Estimator::new(&[Some(4_000_000), Some(500_000), Some(1_500_000)]);
    for i in 0..3 {
        e.on_report(Time::ZERO, i, &report(0, 0, 0, 0, 0, 0), 0b111);
    }
    // Paths 1 and 2 delivered 1 and 3 Mbit/s cleanly (a 1.5 ms queue), above their rates:
    // they climb back ×1.5 (to 0.75 and 2.25 Mbit/s).
    for (i, bytes) in [(1, 25_000), (2, 75_000)] {
        e.on_sent(Time::ZERO, i, bytes);
        e.on_report(
            Time::from_millis(200),
            i,
            &report(20, 20, bytes as u64, 0, 0, 1_500),
            0b111,
        );
    }
    assert_eq!(e.path(1).unwrap().rate_bps, 750_000.0);
    // Path 0, offered 4 Mbit/s, shows a queue as long as the interval (200 ms) while it
    // delivered 40 000 bytes in it: 1.6 Mbit/s, so it drops to 95 % of that at once.
    e.on_sent(Time::ZERO, 0, 100_000);
    e.on_report(
        Time::from_millis(200),
        0,
        &report(20, 20, 40_000, 0, 0, 200_000),
        0b111,
    );
    let r: Vec<f64> = e.paths().iter().map(|p| p.rate_bps).collect();
    assert!((r[0] - CUT_TO_DELIVERED * 1_600_000.0).abs() < 1.0, "{r:?}");
    // What path 0 gave up (2.48 Mbit/s) would go 1:3 to paths 1 and 2, but each takes
    // only up to 10 % above what it delivered; the rest is dropped.
    assert!(
        (r[1] - 1_100_000.0).abs() < 1.0 && (r[2] - 3_300_000.0).abs() < 1.0,
        "{r:?}"
    );
    assert!(r.iter().sum::<f64>() < 4_000_000.0 + 750_000.0 + 2_250_000.0);
    // Counted in link bytes: with 100 bytes of overhead per packet the same report means
    // 20 × 2100 bytes in 200 ms.
    let mut e = Estimator::new(&[Some(4_000_000)]);
    e.set_overhead(0, 100);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 100_000);
    e.on_report(
        Time::from_millis(200),
        0,
        &report(20, 20, 40_000, 0, 0, 200_000),
        1,
    );
    assert!((e.path(0).unwrap().rate_bps - CUT_TO_DELIVERED * 1_680_000.0).abs() < 1.0);
}

/// A 40 Mbit/s path whose queue stands is passed over by the scheduler (every path is
/// full): it carries only the last few packets of its queue, and the report still shows
/// the queue those saw. What it carried then is not its capacity: it was not offered more.
#[test]
fn a_path_not_offered_more_than_it_carried_keeps_its_rate_when_cut() {
    let mut e = Estimator::new(&[Some(40_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    // a second at 40 Mbit/s (4000 packets of 1250 bytes), no queue
    e.on_sent(Time::ZERO, 0, 5_000_000);
    e.on_report(
        Time::from_secs(1),
        0,
        &report(4000, 4000, 5_000_000, 0, 0, 500),
        1,
    );
    let rate = e.path(0).unwrap().rate_bps;
    assert!(rate >= 40_000_000.0, "{rate}");
    // the queue stands at 50 ms for two reports, offered what it carries (full)
    e.on_sent(Time::ZERO, 0, 100_000);
    e.on_report(
        Time::from_millis(1020),
        0,
        &report(4080, 4080, 5_100_000, 0, 0, 50_000),
        1,
    );
    // then the scheduler passes it over: 20 ms in which it carries 4 packets and is
    // offered none, the last of its queue still 50 ms deep
    e.on_report(
        Time::from_millis(1040),
        0,
        &report(4084, 4084, 5_105_000, 0, 0, 50_000),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(
        p.rate_bps >= 0.9 * p.delivery_bps && p.rate_bps >= 10_000_000.0,
        "{p:?}"
    );
}

/// Between two transfers a 20 Mbit/s path carries nothing for a second, then one
/// acknowledgement, which still shows the queue of the last transfer. That one packet
/// measures nothing: the path keeps most of its rate (traced in realworld's 5/120 ms pair,
/// where it fell to 12 kbit/s and the next transfer went on the far path alone).
#[test]
fn one_packet_after_an_idle_second_does_not_cut_a_path_to_nothing() {
    let mut e = Estimator::new(&[Some(20_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 2_500_000);
    e.on_report(
        Time::from_secs(1),
        0,
        &report(2000, 2000, 2_500_000, 0, 0, 25_000),
        1,
    );
    let before = e.path(0).unwrap().clone();
    // a second later: one 52-byte packet, offered a few bytes, the queue still 19 ms
    e.on_sent(Time::from_secs(1), 0, 120);
    e.on_report(
        Time::from_secs(2),
        0,
        &report(2001, 2001, 2_500_052, 0, 0, 19_000),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(
        p.rate_bps >= 0.5 * before.rate_bps.min(before.delivery_bps),
        "{} from {before:?}",
        p.rate_bps
    );
}

/// A 1 Mbit/s line learned at 1.02 Mbit/s, its queue standing from the report at 300 ms to the
/// one at 400 ms, offered `offered` bytes in between: the path after that report.
fn a_line_whose_queue_stood(offered: usize, path_seq: u16) -> PathEstimate {
    // Learned from a sample taken while TCP was still starting: 20 packets of 750 bytes in
    // 200 ms, 600 kbit/s.
    let mut e = Estimator::new(&[Some(1_020_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 15_000);
    e.on_report(
        Time::from_millis(200),
        0,
        &report(20, 20, 15_000, 0, 0, 0),
        1,
    );
    assert!((e.path(0).unwrap().delivery_bps - 600_000.0).abs() < 1.0);
    // TCP overshoots with 1250-byte packets (10 ms each): a 25 ms queue at one report
    // (congestion: the threshold is one packet, 10 ms), the line having carried 5 packets
    // since the last (it was idle at first): cut to 90 % of the smoothed delivery. 40 ms at
    // the next, 100 ms later, the line having carried 10 packets in between — its full rate;
    // the newest of them was sent before the cut, so only a capacity measured moves the
    // rate.
    e.on_sent(Time::ZERO, 0, 13_750);
    e.on_report(
        Time::from_millis(300),
        0,
        &report(31, 25, 21_250, 0, 0, 25_000),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(p.congested && (p.rate_bps - 540_000.0).abs() < 1.0, "{p:?}");
    e.on_sent(Time::ZERO, 0, offered);
    let mut r = report(path_seq, 35, 33_750, 0, 0, 40_000);
    r.echo = Time::from_millis(250).wire_micros();
    e.on_report(Time::from_millis(400), 0, &r, 1);
    e.path(0).unwrap().clone()
}

#[test]
fn a_cut_keeps_what_the_path_carried_while_its_queue_stood() {
    // Held at 540 kbit/s the line would be half idle once the queue has drained; what it
    // carried while the queue stood is its capacity. Offered 1.3 Mbit/s meanwhile, or 90 % of
    // what it carried (a path paced at what it carries is offered that, give or take a few
    // packets: halved, it would be paced at half its capacity).
    for (offered, path_seq) in [(16_250, 44), (11_250, 40)] {
        let p = a_line_whose_queue_stood(offered, path_seq);
        assert!(p.congested);
        assert!(
            (p.rate_bps - CUT_TO_DELIVERED * 1_000_000.0).abs() < 1.0,
            "offered {offered}: {}",
            p.rate_bps
        );
    }
}

#[test]
fn an_idle_path_takes_no_freed_share_and_a_lone_cut_shrinks_the_total() {
    let mut e = Estimator::new(&[Some(1_000_000), Some(1_000_000), Some(1_000_000)]);
    for i in 0..3 {
        e.on_report(Time::ZERO, i, &report(0, 0, 0, 0, 0, 0), 0b111);
    }
    // Path 1 carried traffic cleanly; path 2 carried none (the scheduler passed it over,
    // so nothing is known of its headroom).
    e.on_sent(Time::ZERO, 1, 25_000);
    e.on_report(
        Time::from_millis(200),
        1,
        &report(20, 20, 25_000, 0, 0, 0),
        0b111,
    );
    e.on_report(Time::from_millis(200), 2, &report(0, 0, 0, 0, 0, 0), 0b111);
    let before_1 = e.path(1).unwrap().rate_bps;
    e.on_sent(Time::ZERO, 0, 25_000);
    e.on_report(
        Time::from_millis(200),
        0,
        &report(20, 20, 2_000, 0, 0, 200_000),
        0b111,
    );
    let r: Vec<f64> = e.paths().iter().map(|p| p.rate_bps).collect();
    assert_eq!(r[0], CUT_TO_DELIVERED * 80_000.0);
    // Path 1 is already 10 % above what it delivered: it takes nothing either.
    assert_eq!(r[1], before_1, "{r:?}");
    assert_eq!(r[2], 1_000_000.0, "the idle path gained nothing: {r:?}");
    // Now every path is congested or idle: a cut frees rate that nobody takes.
    e.on_sent(Time::ZERO, 1, 25_000);
    e.on_report(
        Time::from_millis(400),
        1,
        &report(40, 40, 50_000, 0, 0, 60_000),
        0b111,
    );
    let r2: Vec<f64> = e.paths().iter().map(|p| p.rate_bps).collect();
    assert!(r2.iter().sum::<f64>() < r.iter().sum::<f64>(), "{r2:?}");
    assert_eq!(r2[2], 1_000_000.0);
}

#[test]
fn a_slow_line_offered_twice_its_capacity_drops_to_it_at_once() {
    // Started at 1 Mbit/s, a 64 kbit/s line is offered a 128 kbit/s stream: far below
    // the rate it is believed to have, but twice what it carries.
    let mut e = Estimator::new(&[None]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 3_200);
    e.on_report(
        Time::from_millis(200),
        0,
        &report(20, 20, 1_600, 0, 0, 200_000),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(p.congested && !p.busy);
    assert!(
        (p.rate_bps - CUT_TO_DELIVERED * 64_000.0).abs() < 1.0,
        "{}",
        p.rate_bps
    );
}

#[test]
fn a_passed_over_path_is_not_held_down_by_its_old_queue() {
    let mut e = Estimator::new(&[Some(1_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    // Overdriven: 300 ms of queue, 2400 bytes delivered in 300 ms (64 kbit/s).
    e.on_sent(Time::ZERO, 0, 37_500);
    e.on_report(
        Time::from_millis(300),
        0,
        &report(30, 15, 2_400, 0, 0, 300_000),
        1,
    );
    let cut = e.path(0).unwrap().rate_bps;
    assert!((cut - CUT_TO_DELIVERED * 64_000.0).abs() < 1.0, "{cut}");
    // The scheduler then passes the path over: nothing sent, nothing arrives, and the
    // report still carries the smoothed delay of the last packets. Not congested; the
    // rate (below what the path delivered) climbs back.
    e.on_report(
        Time::from_secs(2),
        0,
        &report(30, 15, 2_400, 0, 0, 300_000),
        1,
    );
    let p = e.path(0).unwrap();
    assert!(!p.congested);
    assert!(p.rate_bps >= cut, "{} < {cut}", p.rate_bps);
}

#[test]
fn a_busy_clean_path_probes_upwards() {
    // Busy (1 Mbit over the second) with a small queue: +10 %.
    let mut e = Estimator::new(&[Some(1_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 1_500), 1);
    e.on_sent(Time::ZERO, 0, 125_000);
    e.on_report(
        Time::from_secs(1),
        0,
        &report(100, 100, 125_000, 0, 0, 1_500),
        1,
    );
    assert!((e.path(0).unwrap().rate_bps - 1_100_000.0).abs() < 1.0);
    // Idle: no probing.
    e.on_report(
        Time::from_secs(2),
        0,
        &report(100, 100, 125_000, 0, 0, 0),
        1,
    );
    assert!((e.path(0).unwrap().rate_bps - 1_100_000.0).abs() < 1.0);
    // Busy without any queue at either report: nothing says the link is near full, so the
    // step doubles, from what it carried (2 Mbit/s) when that is more than the rate.
    let mut e = Estimator::new(&[Some(1_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 250_000);
    e.on_report(
        Time::from_secs(1),
        0,
        &report(200, 200, 250_000, 0, 0, 500),
        1,
    );
    assert!((e.path(0).unwrap().rate_bps - UNQUEUED_PROBE * 2_000_000.0).abs() < 1.0);
}

#[test]
fn a_path_without_a_queue_is_believed_what_it_carried() {
    // 50 packets of 1000 bytes in 50 ms (8 Mbit/s), before any delivery sample: a path
    // believed at 1 Mbit/s with no queue takes 8 at once; one with a 3 ms queue does not.
    for (queue_us, want) in [(0, 8_000_000.0), (3_000, 1_000_000.0)] {
        let mut e = Estimator::new(&[Some(1_000_000)]);
        e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, queue_us), 1);
        e.on_sent(Time::ZERO, 0, 50_000);
        e.on_report(
            Time::from_millis(50),
            0,
            &report(50, 50, 50_000, 0, 0, queue_us),
            1,
        );
        let p = e.path(0).unwrap();
        assert!((p.rate_bps - want).abs() < 1.0, "queue {queue_us}: {p:?}");
    }
}

#[test]
fn a_path_whose_delay_jitters_by_itself_is_not_taken_for_queued() {
    // A radio link, or a wire that delays each datagram 32 to 38 ms: its smoothed delay sits
    // 3 ms above the least it has shown with no queue at all, and its jitter (RFC 3550) is
    // about 2 ms. Without a queue to blame, it is believed what it carried (8 Mbit/s), as a
    // steady path is; the same 3 ms over a steady path is a queue.
    for (jitter_us, want) in [(2_000, 8_000_000.0), (0, 1_000_000.0)] {
        let mut e = Estimator::new(&[Some(1_000_000)]);
        let r = |path_seq, packets, bytes| ReportEntry {
            jitter_us,
            ..report(path_seq, packets, bytes, 0, 0, 3_000)
        };
        e.on_report(Time::ZERO, 0, &r(0, 0, 0), 1);
        e.on_sent(Time::ZERO, 0, 50_000);
        e.on_report(Time::from_millis(50), 0, &r(50, 50, 50_000), 1);
        let p = e.path(0).unwrap();
        assert!((p.rate_bps - want).abs() < 1.0, "jitter {jitter_us}: {p:?}");
        assert!(!p.saturated || jitter_us == 0, "{p:?}");
        // the scheduler's clock still sees the 3 ms a packet sent now is later than the least
        assert_eq!(p.queue_seen_us, 3_000.0, "{p:?}");
    }
}

#[test]
fn a_silent_path_is_congested_and_recovers_fast() {
    let mut e = Estimator::new(&[Some(8_000_000)]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    e.on_sent(Time::ZERO, 0, 1_000_000);
    e.on_report(
        Time::from_secs(1),
        0,
        &report(800, 800, 1_000_000, 0, 0, 0),
        1,
    );
    let before = e.path(0).unwrap().rate_bps;
    // Outage: 100 packets sent, none delivered.
    e.on_report(
        Time::from_millis(1100),
        0,
        &report(900, 800, 1_000_000, 0, 0, 0),
        1,
    );
    let cut = e.path(0).unwrap().rate_bps;
    assert!(cut < before, "{cut} vs {before}");
    // Back: busy and clean again, below the best delivery rate: ×1.5 per report at least
    // (with no queue at all, from the 8 Mbit/s it carried in the last 100 ms).
    e.on_sent(Time::ZERO, 0, 100_000);
    e.on_report(
        Time::from_millis(1200),
        0,
        &report(1000, 900, 1_100_000, 0, 0, 0),
        1,
    );
    let back = e.path(0).unwrap().rate_bps;
    assert!(
        back >= cut * RECOVER && back >= before,
        "{back} vs {cut}, {before}"
    );
}

#[test]
fn a_queue_deeper_than_the_report_interval_is_long_says_the_path_carried_its_capacity() {
    // A TCP start offers a 20 Mbit/s path twice what arrives, every 25 ms report interval,
    // and 0.8 to 16 Mbit/s arrive with no queue (1250-byte packets): the first delivery
    // sample, over the first 200 ms, says 4.25 Mbit/s. In the next interval the link
    // is full: it carries 20 Mbit/s, and the report shows a 36 ms queue. A packet that waited
    // 36 ms in the link's queue found it busy for all of the 25 ms before it arrived: what
    // arrived in the interval is the link's rate. Cut to half of what it believed, or to a
    // delivery rate smoothed over the start, the path would be paced at half its capacity
    // while the start overflowed the others.
    let mut e = Estimator::new(&[None]);
    e.on_report(Time::ZERO, 0, &report(0, 0, 0, 0, 0, 0), 1);
    let (mut seq, mut packets) = (0u16, 0u32);
    for (k, (got, queue_us)) in [
        (2, 0),
        (2, 0),
        (3, 0),
        (3, 0),
        (5, 0),
        (10, 0),
        (20, 0),
        (40, 0),
        (50, 36_000),
    ]
    .into_iter()
    .enumerate()
    {
        let now = Time::from_millis(25 * (k as u64 + 1));
        e.on_sent(now, 0, 2 * got as usize * 1250);
        seq += 2 * got as u16;
        packets += got;
        e.on_report(
            now,
            0,
            &report(seq, packets, u64::from(packets) * 1250, 0, 0, queue_us),
            1,
        );
    }
    let p = e.path(0).unwrap();
    assert!(p.congested, "{p:?}");
    assert!(
        (p.rate_bps - CUT_TO_DELIVERED * 20_000_000.0).abs() < 1.0,
        "{}",
        p.rate_bps
    );
    let pace = p.pace_rate_bps().expect("paced once cut");
    assert!(pace >= 19_900_000.0, "{pace}");
}

#[test]
fn a_path_is_cut_once_a_round_trip_while_its_queue_answers_the_cut() {
    // 10 Mbit/s believed, 20 ms reports of one packet of 1250 bytes and a queue of 30 ms
    // that stands (not a quarter lower from one report to the next) while the sender offers
    // the path 10 Mbit/s: until the queue has stood for four packets, no capacity is
    // measured, so each cut halves. Reports on packets sent before the last cut (their echo
    // older) say nothing of the rate since: one cut a round trip (here 60 ms), not one a
    // report.
    let mut e = Estimator::new(&[Some(10_000_000)]);
    let mut r = report(0, 0, 0, 0, 0, 0);
    e.on_report(Time::from_secs(1), 0, &r, 1);
    let (mut rates, mut changed) = (vec![], vec![]);
    for k in 1..=6u64 {
        let now = Time::from_millis(1000 + 20 * k);
        e.on_sent(now, 0, 20 * 1250);
        r.path_seq += 20;
        r.packets += 1;
        r.bytes += 1250;
        r.owd_us = 30_000;
        // the newest packet that arrived was sent a round trip (60 ms) before the report
        r.echo = now.wire_micros().wrapping_sub(60_000);
        changed.push(e.on_report(now, 0, &r, 1));
        rates.push(e.path(0).unwrap().rate_bps / 1e6);
    }
    // cut at 20 ms (after the first report); the reports at 40 and 60 ms echo packets sent
    // before it; at 80 ms the echo (20 ms) is the cut's time, and the queue still stands:
    // cut again. At 100 ms the queue has stood for four packets: what the path carried
    // since (0.5 Mbit/s) is its capacity, which moves the rate at every report.
    let rates: Vec<f64> = rates
        .iter()
        .map(|r| (r * 1000.0).round() / 1000.0)
        .collect();
    assert_eq!(rates, [5.0, 5.0, 5.0, 2.5, 0.475, 0.475], "{rates:?}");
    assert_eq!(changed, [true, false, false, true, true, true]);
}

/// Path 0 of a fresh estimator believed at `rate` bits per second, with its first report at
/// 1 s; then one report `ms` later of `got` packets of 1250 bytes arrived (none lost), the
/// sender having offered it `offered` such packets, with a queue of `prev_queue_us` at the
/// report before and `queue_us` at this one. The path after it.
fn one_interval(
    rate: u64,
    prev_queue_us: u32,
    ms: u64,
    offered: u16,
    got: u32,
    queue_us: u32,
) -> PathEstimate {
    let mut e = Estimator::new(&[Some(rate)]);
    let mut r = report(0, 0, 0, 0, 0, prev_queue_us);
    e.on_report(Time::from_secs(1), 0, &r, 1);
    let now = Time::from_millis(1000 + ms);
    e.on_sent(now, 0, usize::from(offered) * 1250);
    r.path_seq = offered;
    r.packets = got;
    r.bytes = u64::from(got) * 1250;
    r.owd_us = queue_us;
    e.on_report(now, 0, &r, 1);
    e.path(0).unwrap().clone()
}

/// A TCP start overdrives a 20 Mbit/s path whose rate was learned at 24.7 Mbit/s, and a far
/// path believed at 2 Mbit/s (it had carried next to nothing) that the scheduler filled
/// because every path was full: a queue appears in the interval, the sender offered more than
/// either carried. Each was full at the end of the interval, so what it carried is at most its
/// capacity: halved (to 12.4 and 1 Mbit/s, realworld's 10/60 and 5/120 ms pairs), the paths
/// stood at half their capacity or less for a second of the start.
#[test]
fn a_path_overdriven_to_its_first_queue_keeps_what_it_carried() {
    // (believed, queue before, packets offered, packets arrived, queue now), 30 ms each: 120
    // offered (40 Mbit/s), 67 arrive (22.3); the far path: 88 offered (29.3), 58 arrive (19.3)
    for (rate, before, offered, got, queue) in [
        (24_700_000, 0, 120, 67, 10_800),
        (2_000_000, 1_300, 88, 58, 17_600),
    ] {
        let p = one_interval(rate, before, 30, offered, got, queue);
        assert!(p.congested, "{p:?}");
        let carried = f64::from(got) * 1250.0 * 8.0 / 0.030;
        assert!(
            (p.rate_bps - CUT_TO_DELIVERED * carried).abs() < 1.0,
            "believed at {rate}: {}",
            p.rate_bps
        );
    }
}

/// The sender already gives a path less than it carries (its pacing clock held it behind the
/// queue a report showed, or the inner flow paused): the queue it shows drains, and a cut
/// would only take the rate below the path's capacity. Traced in realworld's lossy three
/// paths: offered 10 Mbit/s, carrying 15 and 30 with a queue of 15 ms, two paths were halved
/// and stood at half their capacity for half a second.
#[test]
fn a_path_offered_less_than_it_carries_is_not_cut_for_its_queue() {
    // 30 ms: 45 packets arrive (15 Mbit/s), 30 offered (10 Mbit/s); the queue went 5 to 15 ms
    let p = one_interval(18_400_000, 5_300, 30, 30, 45, 14_800);
    assert!(p.congested, "{p:?}");
    assert_eq!((p.rate_bps, p.cuts), (18_400_000.0, 0), "{p:?}");
}

/// A path idle between two transfers shows, at the report before the next one starts, the
/// queue of its last packets; the next report comes 129 ms later with a queue of 16 ms. The
/// two queues together cover 19 ms of the interval: the path was idle for most of it, and what
/// it carried over the interval (4.4 Mbit/s) is not its capacity (realworld's 5/120 ms pair:
/// a 20 Mbit/s path cut to 4.2 Mbit/s at cubic's start, and its start went to the far path).
#[test]
fn queues_that_cover_only_part_of_an_interval_measure_no_capacity() {
    // 129 ms: 57 packets arrive (4.4 Mbit/s), 85 offered (6.6 Mbit/s); queues 2.9 and 16.2 ms
    let p = one_interval(20_860_000, 2_900, 129, 85, 57, 16_200);
    assert!(p.congested, "{p:?}");
    assert!(p.rate_bps >= 10_000_000.0, "{}", p.rate_bps);
}
