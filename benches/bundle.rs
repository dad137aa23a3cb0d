//! Cost of bundling per packet: packing voice-sized packets into a bundle body (what the
//! sender adds: one copy each) and checking and walking a received one (what the receiver
//! adds before the packets go to the resequencer), 7 packets of 188 bytes (a full bundle at
//! MTU 1400) and 64 of 20.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_core::wire::{bundle_entries, check_bundle, push_bundle_entry};
use std::hint::black_box;

fn ipv4(len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

fn bundle(c: &mut Criterion) {
    let mut g = c.benchmark_group("bundle");
    for (count, len) in [(7usize, 188usize), (64, 20)] {
        let packet = ipv4(len);
        let mut body = Vec::with_capacity(1500);
        g.throughput(Throughput::Elements(count as u64));
        let id = format!("{count}x{len}");
        g.bench_with_input(BenchmarkId::new("pack", &id), &count, |b, &count| {
            b.iter(|| {
                body.clear();
                let mut last = None;
                for s in 0..count as u32 {
                    push_bundle_entry(&mut body, last, 1000 + 2 * s, black_box(&packet))
                        .expect("fits");
                    last = Some(1000 + 2 * s);
                }
                black_box(body.len())
            })
        });
        g.bench_with_input(BenchmarkId::new("unpack", &id), &count, |b, _| {
            b.iter(|| {
                let n = check_bundle(black_box(&body)).expect("valid");
                let mut sum = 0usize;
                for e in bundle_entries(&body, 1000).flatten() {
                    sum += e.seq as usize + e.len;
                }
                black_box((n, sum))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bundle);
criterion_main!(benches);
