//! Resequencer cost per packet: in order; two paths with a large delay difference; random
//! reordering within a 1024-packet window.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mpt_benches::{in_order, random_within, two_paths_delay, Arrival};
use mpt_reseq::{Config, Resequencer};
use std::hint::black_box;
use std::time::Duration;

const N: usize = 16_384;

fn run(input: &[Arrival], window: usize, paths: usize) -> u64 {
    let mut r: Resequencer<u32> = Resequencer::new(Config {
        window,
        timeout: Duration::from_millis(100),
        paths,
    });
    let mut delivered = 0u64;
    let mut out = |p: u32| delivered += u64::from(black_box(p) & 1) + 1;
    for a in input {
        r.push(a.now, a.meta, a.meta.seq, &mut out);
    }
    delivered
}

fn reseq(c: &mut Criterion) {
    let mut g = c.benchmark_group("resequencer_per_packet");
    g.throughput(Throughput::Elements(N as u64));
    let cases = [
        ("in_order", in_order(N), 1usize),
        ("two_paths_lag_200", two_paths_delay(N, 200), 2),
        ("random_in_1024", random_within(N, 1024, 7), 4),
    ];
    for (name, input, paths) in &cases {
        g.bench_function(*name, |b| {
            b.iter_batched(|| (), |_| run(input, 2048, *paths), BatchSize::SmallInput)
        });
    }
    g.finish();
}

criterion_group!(benches, reseq);
criterion_main!(benches);
