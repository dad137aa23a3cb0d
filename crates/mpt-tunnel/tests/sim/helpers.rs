//! Helpers that several rule files share: building pairs, reading what a side sent, timing,
//! and the packets and lines more than one area drives.

#![allow(dead_code)]

use std::time::Duration;

use crate::sim::{self, packet, Pair, Side};
use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::PathId;
use mpt_tunnel::Event;

pub const MS: Duration = Duration::from_millis(1);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A sealed pair with keys agreed.
pub fn agreed_pair(default_seed: u64, paths: usize) -> Pair {
    let mut p = Pair::new(sim::seed(default_seed), paths, true);
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p
}

pub fn kind_of(datagram: &[u8]) -> Kind {
    HeaderRepr::parse_outer(datagram)
        .expect("a valid header")
        .0
        .kind
}

/// Datagrams of `kind` that `side` has sent.
pub fn sent(p: &Pair, side: Side, kind: Kind) -> usize {
    p.node(side)
        .sent_log
        .iter()
        .filter(|(_, d)| kind_of(d) == kind)
        .count()
}

/// The last datagram of `kind` that `side` sent.
pub fn last_sent(p: &Pair, side: Side, kind: Kind) -> Vec<u8> {
    let log = &p.node(side).sent_log;
    let d = log.iter().rev().find(|(_, d)| kind_of(d) == kind);
    d.unwrap_or_else(|| panic!("{side:?} sent no {kind:?}"))
        .1
        .clone()
}

pub fn sim_time(ms: u64) -> mpt_core::Time {
    mpt_core::Time::from_millis(ms)
}

/// `got` is exactly `want`, in order (shown compactly when not).
pub fn assert_exactly(got: &[u32], want: std::ops::Range<u32>, what: &str) {
    let want: Vec<u32> = want.collect();
    if got != want {
        let at = got.iter().zip(&want).position(|(g, w)| g != w);
        let at = at.unwrap_or(got.len().min(want.len()));
        let end = (at + 10).min(got.len());
        panic!(
            "{what}: {} delivered, {} sent; first difference at {at}: got {:?}, want from {:?}",
            got.len(),
            want.len(),
            &got[at.min(got.len())..end],
            want.get(at)
        );
    }
}

pub fn down_at(p: &Pair, side: Side, path: u8) -> Option<mpt_core::Time> {
    p.node(side).events.iter().find_map(|(t, e)| {
        matches!(e, Event::PathDown { path: q, .. } if *q == PathId(path)).then_some(*t)
    })
}

/// Restart A and run until B has taken up its new session.
pub fn restart_and_rekey(p: &mut Pair) {
    let before = p.ep(Side::B).peer_restarts();
    p.restart(Side::A);
    p.run_until(ms(500), |p| {
        p.agreed() && p.node(Side::B).ep.peer_restarts() > before
    })
    .expect("B took up the restarted peer");
}

/// A UDP packet of `len` bytes from port `k` to port `port`, DSCP `dscp`: its number (what
/// [`sim::number`] reads back) is `k << 16 | port`.
pub fn udp(k: u32, port: u16, len: usize, dscp: u8) -> Vec<u8> {
    let mut p = packet((k << 16) | u32::from(port), len);
    p[1] = dscp << 2;
    p[9] = 17;
    p
}

/// One 128 kbit/s line (1 ms away, told to both ends, `rate`, tunnel MTU 1500), `link` set
/// further on both directions; keys agreed.
pub fn one_slow_line(seed: u64, link: impl Fn(&mut sim::LinkSpec)) -> Pair {
    let cfg = |side| {
        let mut c = sim::config(side, 1, true);
        c.mtu = 1500;
        c.scheduler = mpt_sched::SchedulerKind::Rate;
        c.paths[0].rate_bps = Some(128_000);
        c
    };
    let mut p = Pair::with(sim::seed(seed), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        let l = p.link(side, 0);
        l.rate_bps = Some(128_000);
        l.delay = ms(1);
        link(l);
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p
}

/// Four 128 kbit/s serial lines (300 ms queues, interface MTU 1500), their rates configured,
/// `rate` scheduling, a 1500-byte tunnel: Table II's cases 13-15.
pub fn four_slow_lines(seed: u64) -> Pair {
    four_slow_lines_with(seed, mpt_sched::SchedulerKind::Rate)
}

/// [`four_slow_lines`] with scheduler `kind`.
pub fn four_slow_lines_with(seed: u64, kind: mpt_sched::SchedulerKind) -> Pair {
    four_slow_lines_at(seed, kind, 128_000)
}

/// [`four_slow_lines_with`], the lines carrying `link_bps` (with framing) where the ends are
/// told 128 kbit/s.
pub fn four_slow_lines_at(seed: u64, kind: mpt_sched::SchedulerKind, link_bps: u64) -> Pair {
    slow_lines(seed, kind, &[(128_000, link_bps); 4])
}

/// Lines of (told, carried) bits/s, as [`four_slow_lines`]' (weights in proportion to the
/// rates told, for `wrr`).
pub fn slow_lines(seed: u64, kind: mpt_sched::SchedulerKind, rates: &[(u64, u64)]) -> Pair {
    slow_lines_with(seed, kind, rates, |_| {})
}

/// [`slow_lines`], both ends' configurations changed by `tweak`.
pub fn slow_lines_with(
    seed: u64,
    kind: mpt_sched::SchedulerKind,
    rates: &[(u64, u64)],
    tweak: impl Fn(&mut mpt_tunnel::ConnectionConfig),
) -> Pair {
    let cfg = |side| {
        let mut c = sim::config(side, rates.len(), true);
        c.mtu = 1500;
        c.scheduler = kind;
        for (p, &(told, _)) in c.paths.iter_mut().zip(rates) {
            p.rate_bps = Some(told);
            p.weight = (told / 64_000) as u32;
        }
        tweak(&mut c);
        c
    };
    let mut p = Pair::with(sim::seed(seed), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        for (i, &(_, carried)) in rates.iter().enumerate() {
            let l = p.link(side, i);
            l.rate_bps = Some(carried);
            l.delay = ms(1);
            l.mtu = Some(1472);
            l.mtu_local = true;
            l.queue = Some(ms(300));
        }
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p.run(ms(300));
    p
}

/// The least and the most of `v`.
pub fn span(v: &[f64]) -> (f64, f64) {
    let least = v.iter().copied().fold(f64::MAX, f64::min);
    (least, v.iter().copied().fold(0.0, f64::max))
}

/// A's iperf-like stream of 1498-byte packets (1470-byte UDP payloads), one every `every`,
/// numbered from 0, for `d`; returns how many were sent.
pub fn stream_1498(p: &mut Pair, every: Duration, d: Duration) -> u32 {
    let end = p.now + d;
    let mut k = 0u32;
    while p.now < end {
        let _ = p.send(Side::A, &packet(k, 1498));
        k += 1;
        p.run(every);
    }
    k
}
