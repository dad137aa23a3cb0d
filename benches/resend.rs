//! Cost of loss recovery per packet: what every packet sent whole costs while resending is on
//! (its copy kept by path and path sequence), and what a resend request costs the sender per
//! packet it names (the packet found and taken); with parity on a path, what every packet
//! costs the sender (summed into its group) and the receiver (a copy kept), and what making a
//! lost packet again from a parity over 64 costs.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_core::{PathId, Time};
use mpt_tunnel::{FecRx, FecTx, MaxAge, ResendBuffer, RESEND_BYTES};
use std::hint::black_box;
use std::time::Duration;

fn resend(c: &mut Criterion) {
    let mut g = c.benchmark_group("resend");
    g.throughput(Throughput::Elements(1));
    let packet = vec![0x45u8; 1400];
    let mut buf = ResendBuffer::default();
    let mut seq = 0u32;
    let mut now = Time::ZERO;
    g.bench_function("keep a 1400-byte packet sent", |b| {
        b.iter(|| {
            seq = seq.wrapping_add(1);
            now = now + Duration::from_micros(1);
            buf.keep(
                PathId((seq & 1) as u8),
                (seq >> 1) as u16,
                seq,
                now,
                black_box(&packet),
                false,
            );
        })
    });
    // a full buffer, every packet asked for once
    let mut buf = ResendBuffer::default();
    // as many 1400-byte packets as the buffer keeps (slots of 1536 bytes)
    let n = (RESEND_BYTES / 1536) as u32;
    for s in 0..n {
        buf.keep(PathId(0), s as u16, s, Time::ZERO, &packet, false);
    }
    let mut k = 0u32;
    g.bench_function("find and take a packet asked for (refill amortized)", |b| {
        b.iter(|| {
            k = (k + 1) % n;
            if k == 0 {
                for s in 0..n {
                    buf.keep(PathId(0), s as u16, s, Time::ZERO, &packet, false);
                }
            }
            let age = MaxAge {
                packet: Duration::from_millis(100),
                reference: Duration::from_millis(500),
            };
            let got = buf.take(PathId(0), k as u16, Time::ZERO, age);
            black_box(got.map(|(s, r, p)| (s, r, p.len())))
        })
    });
    g.finish();
}

fn parity(c: &mut Criterion) {
    let mut g = c.benchmark_group("parity");
    g.throughput(Throughput::Elements(1));
    let packet = vec![0x45u8; 1400];
    let mut tx = FecTx::with_group(64);
    let mut ps = 0u16;
    g.bench_function(
        "sum a 1400-byte packet into its group (a parity per 64)",
        |b| {
            b.iter(|| {
                ps = ps.wrapping_add(1);
                black_box(tx.add(Time::ZERO, ps, u32::from(ps), black_box(&packet)))
            })
        },
    );
    let mut rx = FecRx::default();
    g.bench_function("keep a 1400-byte packet that arrived", |b| {
        b.iter(|| {
            ps = ps.wrapping_add(1);
            rx.keep(ps, u32::from(ps), black_box(&packet));
        })
    });
    // a group of 64 whose packet 17 was lost, and its parity
    let mut rx = FecRx::default();
    let mut tx = FecTx::with_group(64);
    let mut parity = None;
    for j in 0..64u16 {
        let p: Vec<u8> = packet.iter().map(|&x| x ^ j as u8).collect();
        parity = parity.or(tx.add(Time::ZERO, j, u32::from(j), &p));
        if j != 17 {
            rx.keep(j, u32::from(j), &p);
        }
    }
    let mpt_tunnel::Group {
        first,
        k,
        seqs,
        sum,
        ..
    } = parity.expect("a parity");
    g.bench_function("make a lost packet again from a parity over 64", |b| {
        b.iter(|| black_box(rx.solve(first, k, seqs, black_box(&sum))).seq)
    });
    assert_eq!(rx.solve(first, k, seqs, &sum).seq, 17);
    g.finish();
}

criterion_group!(benches, resend, parity);
criterion_main!(benches);
