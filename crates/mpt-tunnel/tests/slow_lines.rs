//! Slow serial lines (Table II's cases), driven through a simulated pair of connections
//! (`sim`): a line offered twice its rate drops whole packets, probes cost the stream nothing,
//! reports a second apart are no silence, and streams on `wrr` and `rate` lose nothing and
//! arrive in order.

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::PathId;
use mpt_tunnel::DropReason;
use sim::helpers::{
    four_slow_lines, four_slow_lines_with, ms, one_slow_line, slow_lines, slow_lines_with, span,
    stream_1498,
};
use sim::{packet, tcp_packet, Pair, Side};

// ---- queues and probes

/// A 128 kbit/s line with its rate configured, offered twice that in 1500-byte packets (each
/// in two pieces): the packets its queue has no room for are dropped whole at the sender
/// (`queue_full`), so that what the line carries are whole packets, soon, instead of pieces
/// of all of them, late (or, on a real line, dropped piece by piece).
#[test]
fn a_slow_line_offered_twice_its_rate_carries_whole_packets_and_drops_the_rest_whole() {
    let cfg = |side| {
        let mut c = sim::config(side, 1, true);
        c.mtu = 1500;
        c.scheduler = mpt_sched::SchedulerKind::Rate;
        c.paths[0].rate_bps = Some(128_000);
        c
    };
    let mut p = Pair::with(sim::seed(72), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        p.link(side, 0).rate_bps = Some(128_000);
        // an Ethernet MTU: a 1500-byte packet goes in two pieces
        p.link(side, 0).mtu = Some(1472);
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    // 256 kbit/s: a 1500-byte packet every 47 ms for 4 s
    let n = 85u32;
    for k in 0..n {
        let _ = p.send(Side::A, &packet(k, 1500));
        p.run(ms(47));
    }
    let stopped = p.now;
    p.run(ms(3000));
    let got = p.delivered_numbers(Side::B);
    let dropped = p.ep(Side::A).drops().queue_full;
    eprintln!(
        "RESULT slow line: {} of {n} delivered, {dropped} dropped whole; A's drops {:?}; B's {:?}",
        got.len(),
        p.ep(Side::A).drops(),
        p.ep(Side::B).drops()
    );
    // the line carries about 128 kbit/s × 4 s / (1584 × 8 bits) = 40 of them
    assert!(dropped > 0, "nothing dropped: the queue grows without end");
    assert!(got.len() >= 30, "{} delivered", got.len());
    assert_eq!(
        got.len() as u64 + dropped,
        u64::from(n),
        "each packet delivered or counted"
    );
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, got, "in order");
    // what arrived did not wait behind seconds of queue
    let last = p
        .node(Side::B)
        .delivered
        .last()
        .map(|(t, _)| *t)
        .expect("some");
    assert!(
        last.saturating_since(stopped) < ms(700),
        "the last packet arrived {:?} after the sender stopped",
        last.saturating_since(stopped)
    );
}

/// Table II case 11: a 128 kbit/s stream of 1498-byte packets into a 128 kbit/s line whose
/// interface MTU is 1500 (the kernel refuses larger datagrams). Path MTU discovery tries the
/// sizes above it first; those refused probes must not take the line's time on the clock, or
/// the stream's first second is dropped at the sender as if the queue were full.
#[test]
fn probes_the_kernel_refuses_cost_a_slow_line_nothing() {
    let mut p = one_slow_line(73, |l| {
        l.mtu = Some(1472);
        l.mtu_local = true;
        l.queue = Some(ms(300));
    });
    p.run(ms(300));
    // 128 kbit/s of 1470-byte UDP payloads: a packet every 91.875 ms for 2 s
    let every = Duration::from_micros(91_875);
    let start = p.now;
    let mut k = 0u32;
    while p.now < start + ms(2000) {
        let _ = p.send(Side::A, &packet(k, 1498));
        k += 1;
        p.run(every);
    }
    let got = p.delivered_numbers(Side::B).len();
    let info = p.ep(Side::A).path_info(PathId(0));
    eprintln!(
        "RESULT slow line's first 2 s: {got} of {k} delivered, {} dropped whole, {} probes, \
         datagrams of {} found: {}",
        p.ep(Side::A).drops().queue_full,
        info.pmtu_probes,
        info.datagram_max,
        info.pmtu_found
    );
    assert!(info.pmtu_found, "the search ended");
    // the line carries a packet (two datagrams' worth with the packets around it, 1589
    // bytes) every 99 ms, less the one probe that passes: 18 or 19 in 2 s; with the refused
    // probes on the clock, 13
    assert!(got >= 16, "{got} of {k} delivered in the first 2 s");
    assert_eq!(p.overflowed(Side::A, 0), 0, "the line's queue overflowed");
}

/// Path MTU probes A sent on the four paths (those the kernel refused too).
fn probes_of_four(p: &mut Pair) -> u64 {
    (0..4)
        .map(|i| p.ep(Side::A).path_info(PathId(i)).pmtu_probes)
        .sum()
}

/// Table II case 13: a 128 kbit/s stream of 1498-byte packets over four 128 kbit/s lines, a
/// quarter of what they carry. The peer reports once a second at such rates: that is no
/// silence, and must not send confirmation probes (1500 bytes, 94 ms of a line each, every
/// packet behind one delayed by as much) every second on every path.
#[test]
fn reports_a_second_apart_on_slow_lines_are_no_silence() {
    let mut p = four_slow_lines(76);
    let every = Duration::from_micros(91_875);
    let start = p.now;
    let k = stream_1498(&mut p, every, ms(20_000));
    p.run(ms(1000));
    // one-way delay of each packet, and RFC 3550's jitter over them (as iperf3 computes it)
    let mut transit = Vec::new();
    let mut jitter = 0.0f64;
    for (t, pk) in &p.node(Side::B).delivered {
        let sent = start + every * sim::number(pk);
        let d = t.saturating_since(sent).as_secs_f64() * 1000.0;
        if let Some(&last) = transit.last() {
            let step: f64 = d - last;
            jitter += (step.abs() - jitter) / 16.0;
        }
        transit.push(d);
    }
    let probes = probes_of_four(&mut p);
    let (least, most) = span(&transit);
    eprintln!(
        "RESULT case 13: {} of {k} delivered, {probes} probes (refused ones too), one-way \
         {least:.1}-{most:.1} ms, jitter {jitter:.2} ms",
        transit.len()
    );
    assert_eq!(transit.len() as u32, k, "packets lost");
    // each path's search (its refused sizes cost nothing) and a confirmation every 9.4 s (a
    // hundred probes' time); before, 59 probes, one every 1.4 s on each path
    assert!(probes <= 32, "{probes} probes in 20 s");
    // no packet waited behind a probe: before, one in ten took 90 ms more than the rest
    assert!(
        most - least < 70.0,
        "one-way delays from {least:.1} to {most:.1} ms"
    );
    assert!(jitter < 2.0, "jitter {jitter:.2} ms");
}

/// Table II case 14: a 256 kbit/s stream of 1498-byte packets over four 128 kbit/s lines, half
/// of what they carry, every packet in two pieces whose head fills a datagram. Those full
/// datagrams, delivered, confirm each path's size: a confirmation probe (94 ms of a line)
/// would delay what goes behind it. They came every 9.4 s on three paths at once, and the
/// packets after them waited up to 85 ms more than the rest (iperf's jitter, the last value
/// of its running mean, was 9.5 ms when one fell at the end of a run, against 0.3-0.5 ms
/// between them).
#[test]
fn full_datagrams_confirm_a_slow_paths_size_without_probes_that_delay_the_stream() {
    for kind in [
        mpt_sched::SchedulerKind::Rate,
        mpt_sched::SchedulerKind::WeightedRoundRobin,
    ] {
        let mut p = four_slow_lines_with(81, kind);
        let every = Duration::from_micros(45_937);
        let start = p.now;
        let k = stream_1498(&mut p, every, ms(20_000));
        p.run(ms(1000));
        // one-way delay of each packet after the searches (the first 4 s: one line at a time, each when idle)
        let transit: Vec<f64> = p
            .node(Side::B)
            .delivered
            .iter()
            .filter(|(_, pk)| every * sim::number(pk) >= ms(4000))
            .map(|(t, pk)| {
                let sent = start + every * sim::number(pk);
                t.saturating_since(sent).as_secs_f64() * 1000.0
            })
            .collect();
        let probes = probes_of_four(&mut p);
        let (least, most) = span(&transit);
        eprintln!(
            "RESULT case 14 {kind:?}: {} of {k} delivered, {probes} probes, one-way after 4 s \
             {least:.1}-{most:.1} ms",
            p.node(Side::B).delivered.len()
        );
        assert_eq!(p.node(Side::B).delivered.len() as u32, k, "packets lost");
        assert!(
            most - least < 60.0,
            "{kind:?}: one-way delays from {least:.1} to {most:.1} ms"
        );
    }
}

/// Table II case 17 at tunnel MTU 1400: 256 kbit/s of 1228-byte packets (1200-byte UDP
/// payloads) over 64/128/64/128 kbit/s lines, `rate`. The packets need more than the base
/// datagram, so each line's size is searched; the size found (the tunnel MTU's datagram) is
/// more than they need, and they do not confirm it. Its confirmations came every 9 to 18 s on
/// each line (12 in the 34 s after the searches here), each a 1436-byte probe that holds a
/// 64 kbit/s line for 180 ms, and the packets behind one waited up to as long (lab: 14.5 and
/// 18.6 ms of iperf3's jitter). A size nothing sent lately needs is not confirmed on a slow
/// line.
#[test]
fn packets_below_the_size_found_set_off_no_confirmations_on_slow_lines() {
    let s = case_17_at_mtu_1400(|_| {}, packet);
    assert_eq!(s.delivered, s.sent, "packets lost");
    assert_eq!(s.probes, 0, "probes of a size no packet needs");
}

/// Table II case 17 at tunnel MTU 1400 again, for its jitter. `rate` sends each packet where it
/// arrives soonest: on a 128 kbit/s line (81 ms) while its queue is short, on a 64 kbit/s one
/// (162 ms) once the 128 kbit/s queues reach the difference, so that the one-way delays run
/// from 81 to 162 ms in a saw (iperf3's jitter 9-10 ms in the lab, 6.5 ms here, 5.3 ms for a
/// sender that knew the lines exactly). Where the lines' rates are configured, the receiver
/// knows how long each packet would have taken the farthest way, and holds it until then.
/// Not TCP, which paces itself by the delays its packets meet, queues included; nor without
/// resequencing, when nothing is held.
#[test]
fn a_stream_over_unequal_slow_lines_arrives_as_evenly_as_it_was_sent() {
    let s = case_17_at_mtu_1400(|_| {}, packet);
    assert_eq!(s.delivered, s.sent, "packets lost");
    assert!(s.jitter < 1.0, "jitter {:.2} ms", s.jitter);
    for (what, s) in [
        ("TCP", case_17_at_mtu_1400(|_| {}, tcp_packet)),
        (
            "unordered",
            case_17_at_mtu_1400(|c| c.reorder_window = 0, packet),
        ),
    ] {
        assert_eq!(s.delivered, s.sent, "{what}: packets lost");
        assert!(s.jitter > 3.0, "{what}: jitter {:.2} ms, held", s.jitter);
    }
}

/// What [`case_17_at_mtu_1400`] measured.
struct Stream {
    sent: u32,
    delivered: u32,
    /// Probes after the searches.
    probes: u64,
    /// RFC 3550's jitter (as iperf3 computes it) over the packets sent after the searches, ms.
    jitter: f64,
}

/// Table II case 17 at tunnel MTU 1400, `rate` (its config changed by `tweak`): 40 s of
/// 1228-byte packets (made by `make`) every 37.5 ms over 64/128/64/128 kbit/s lines.
fn case_17_at_mtu_1400(
    tweak: impl Fn(&mut mpt_tunnel::ConnectionConfig),
    make: fn(u32, usize) -> Vec<u8>,
) -> Stream {
    let rates = [
        (64_000, 64_000),
        (128_000, 128_000),
        (64_000, 64_000),
        (128_000, 128_000),
    ];
    let mut p = slow_lines_with(89, mpt_sched::SchedulerKind::Rate, &rates, |c| {
        c.mtu = 1400;
        tweak(c);
    });
    let every = Duration::from_micros(37_500);
    let start = p.now;
    let searched = ms(6000);
    let mut k = 0u32;
    let mut probes_after_search = 0;
    while p.now < start + ms(40_000) {
        if p.now >= start + searched && probes_after_search == 0 {
            probes_after_search = probes_of_four(&mut p);
        }
        let _ = p.send(Side::A, &make(k, 1228));
        k += 1;
        p.run(every);
    }
    p.run(ms(1000));
    let probes = probes_of_four(&mut p) - probes_after_search;
    // one-way delay of each packet sent after the searches, in the order they arrived
    let mut transit = Vec::new();
    let mut jitter = 0.0f64;
    for (t, pk) in &p.node(Side::B).delivered {
        let sent = start + every * sim::number(pk);
        if sent < start + searched {
            continue;
        }
        let d = t.saturating_since(sent).as_secs_f64() * 1000.0;
        if let Some(&last) = transit.last() {
            let step: f64 = d - last;
            jitter += (step.abs() - jitter) / 16.0;
        }
        transit.push(d);
    }
    let (least, most) = span(&transit);
    let delivered = p.node(Side::B).delivered.len() as u32;

    eprintln!(
        "RESULT case 17 at MTU 1400: {delivered} of {k} delivered, {probes} probes after the \
         searches, one-way after them {least:.1}-{most:.1} ms, jitter {jitter:.2} ms"
    );
    Stream {
        sent: k,
        delivered,
        probes,
        jitter,
    }
}

// ---- start-up and order on wrr and rate

/// Table II case 13 on `wrr`: a 128 kbit/s stream of 1498-byte packets over four 128 kbit/s
/// lines, which `wrr` shares out whatever a line carries. While a line's MTU is searched, its
/// data goes in 1200-byte datagrams behind probes of up to 1500 bytes; a packet must not be
/// dropped as if the line's queue were full behind the first probe (one was, 0.46 % lost).
#[test]
fn a_stream_on_wrr_loses_nothing_to_the_searches_at_its_start() {
    let lost = starts_that_lose(
        || four_slow_lines_with(83, mpt_sched::SchedulerKind::WeightedRoundRobin),
        (0..100).step_by(3),
        Duration::from_micros(91_875),
        ms(3000),
    );
    assert!(lost.is_empty(), "packets lost: {lost:?}");
}

/// A stream of 1498-byte packets, one every `every` for `d`, started on a fresh `pair()` after
/// each of `phases` (ms, every phase of the searches' ticks): the (phase, packets lost,
/// packets A dropped as `queue_full`) of the starts that lost any.
fn starts_that_lose(
    pair: impl Fn() -> Pair,
    phases: impl Iterator<Item = u64>,
    every: Duration,
    d: Duration,
) -> Vec<(u64, u32, u64)> {
    let mut lost = Vec::new();
    for phase in phases {
        let mut p = pair();
        p.run(ms(phase));
        let k = stream_1498(&mut p, every, d);
        p.run(ms(1000));
        let queue_full = p.ep(Side::A).drop_counts()[DropReason::QueueFull as usize];
        let got = p.node(Side::B).delivered.len() as u32;
        if queue_full > 0 || got < k {
            lost.push((phase, k - got, queue_full));
        }
    }
    eprintln!("RESULT starts that lost packets (phase ms, lost, queue_full): {lost:?}");
    lost
}

/// Table II case 17 on `wrr`: 256 kbit/s of 1498-byte packets over lines of 64, 128, 64 and
/// 128 kbit/s (weights 1:2:1:2), two thirds of what they carry. A probe holds a 64 kbit/s
/// line 188 ms, and `wrr` sends there regardless: sent while the line carries a packet, it
/// put the next one beyond what the line's queue holds (A dropped it as `queue_full`: lab
/// 0.23-0.69 % lost). A slow line is probed only when it is idle.
#[test]
fn a_stream_on_wrr_over_64_and_128_kbit_lines_loses_nothing_to_probes() {
    let rates = [
        (64_000, 64_000),
        (128_000, 128_000),
        (64_000, 64_000),
        (128_000, 128_000),
    ];
    let lost = starts_that_lose(
        || slow_lines(86, mpt_sched::SchedulerKind::WeightedRoundRobin, &rates),
        (0..280).step_by(7),
        Duration::from_micros(45_937),
        ms(4000),
    );
    assert!(lost.is_empty(), "packets lost: {lost:?}");
}

/// Table II case 14 without resequencing: 256 kbit/s of 1498-byte packets over four 128 kbit/s
/// lines, half what they carry, started on fresh tunnels at phases 0-99 ms: per phase, the
/// packets that arrived after a later one (none may be lost).
fn reordered_at_half_load(kind: mpt_sched::SchedulerKind) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    for phase in (0..100).step_by(9) {
        let mut p = slow_lines_unordered(87, kind, &[(128_000, 128_000); 4]);
        p.run(ms(phase));
        let k = stream_1498(&mut p, Duration::from_micros(45_937), ms(3000));
        p.run(ms(1000));
        let got = p.delivered_numbers(Side::B);
        assert_eq!(got.len() as u32, k, "packets lost at phase {phase}");
        let mut most = 0;
        let late = got
            .iter()
            .filter(|&&n| {
                let late = n < most;
                most = most.max(n);
                late
            })
            .count();
        if late > 0 {
            out.push((phase, late));
        }
    }
    eprintln!("RESULT {kind:?}: (phase ms, packets after a later one) {out:?}");
    out
}

/// [`slow_lines`] with resequencing off at both ends.
fn slow_lines_unordered(seed: u64, kind: mpt_sched::SchedulerKind, rates: &[(u64, u64)]) -> Pair {
    slow_lines_with(seed, kind, rates, |c| c.reorder_window = 0)
}

/// A packet must not wait behind a search probe of 1500 bytes (94 ms of a line) that the
/// stream set off: `wrr` sends to a line whatever it carries (lab: 0.5-1.4 % reordered in the
/// first 1.5 s; here 2-7 packets at every start phase). The search is over before the stream.
#[test]
fn a_stream_at_half_of_four_slow_lines_on_wrr_arrives_in_order_without_resequencing() {
    let late = reordered_at_half_load(mpt_sched::SchedulerKind::WeightedRoundRobin);
    assert!(late.is_empty(), "{late:?}");
}

/// `rate` put no data on one of the lines, and the other three ran at 73 %: the peer reported
/// the idle line at 0 µs measured on a packet of no length, and taken as a measurement that
/// made it look a full packet's serialisation (95 ms) further than the lines measured on full
/// packets (2-8 packets late at every start phase).
#[test]
fn a_stream_at_half_of_four_slow_lines_on_rate_arrives_in_order_without_resequencing() {
    let late = reordered_at_half_load(mpt_sched::SchedulerKind::Rate);
    assert!(late.is_empty(), "{late:?}");
}
