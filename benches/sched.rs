//! Scheduler decision time: one `select` + `on_sent` per packet, per algorithm and path count.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_core::Time;
use mpt_sched::PathSpec;
use mpt_sched::SchedulerKind;
use std::hint::black_box;

const BATCH: u64 = 1024;

fn decisions(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler_decision");
    g.throughput(Throughput::Elements(BATCH));
    for kind in [
        SchedulerKind::RoundRobin,
        SchedulerKind::WeightedRoundRobin,
        SchedulerKind::Rate,
    ] {
        for n in [2usize, 4, 16, 64] {
            let specs: Vec<PathSpec> = (0..n)
                .map(|i| {
                    PathSpec::new(
                        1 + (i % 3) as u32,
                        Some(10_000_000 * (1 + (i % 3) as u64)),
                        false,
                    )
                })
                .collect();
            let mut s = mpt_sched::build(kind, &specs);
            let mut t = 0u64;
            g.bench_with_input(BenchmarkId::new(kind.name(), n), &n, |b, _| {
                b.iter(|| {
                    for _ in 0..BATCH {
                        t += 400; // 1200 bytes every 400 ns: ~24 Gbit/s offered
                        let now = Time::from_nanos(t);
                        if let Some(p) = s.select(now, black_box(1244)) {
                            s.on_sent(now, p, 1244);
                        }
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
