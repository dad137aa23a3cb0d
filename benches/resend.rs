//! Cost of loss recovery per packet: what every packet sent whole costs while resending is on
//! (its copy kept by path and path sequence), and what a resend request costs the sender per
//! packet it names (the packet found and taken).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_core::{PathId, Time};
use mpt_tunnel::{ResendBuffer, RESEND_KEPT};
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
            );
        })
    });
    // a full buffer, every packet asked for once
    let mut buf = ResendBuffer::default();
    let n = RESEND_KEPT as u32;
    for s in 0..n {
        buf.keep(PathId(0), s as u16, s, Time::ZERO, &packet);
    }
    let mut k = 0u32;
    g.bench_function("find and take a packet asked for (refill amortized)", |b| {
        b.iter(|| {
            k = (k + 1) % n;
            if k == 0 {
                for s in 0..n {
                    buf.keep(PathId(0), s as u16, s, Time::ZERO, &packet);
                }
            }
            let got = buf.take(PathId(0), k as u16, Time::ZERO, Duration::from_millis(100));
            black_box(got.map(|(s, p)| (s, p.len())))
        })
    });
    g.finish();
}

criterion_group!(benches, resend);
criterion_main!(benches);
