//! Cost of traffic classes per packet: reading an inner packet's headers and matching it
//! against the built-in classes (DSCP EF, DNS, TCP SYN) and against eight configured ones
//! before them — for bulk that matches none (the common case: every class is tried) and for a
//! DNS query (found on the way).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use mpt_tunnel::{classify, default_classes, ClassRule, Mode};
use std::hint::black_box;

/// An IPv4 packet of `len` bytes: `protocol`, destination port `port`, TCP flags ACK.
fn ipv4(len: usize, protocol: u8, port: u16) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[9] = protocol;
    p[20..22].copy_from_slice(&40000u16.to_be_bytes());
    p[22..24].copy_from_slice(&port.to_be_bytes());
    p[33] = 0x10;
    p
}

fn class(c: &mut Criterion) {
    let mut g = c.benchmark_group("class");
    let mut many: Vec<ClassRule> = (0..8)
        .map(|i| ClassRule {
            name: format!("c{i}"),
            protocol: Some(17),
            ports: Some((6000 + 10 * i, 6005 + 10 * i)),
            max_size: Some(400),
            mode: Mode::Duplicate,
            ..ClassRule::default()
        })
        .collect();
    many.extend(default_classes());
    for (name, classes) in [("built-in", default_classes()), ("8+built-in", many)] {
        for (what, packet) in [("bulk", ipv4(1400, 6, 443)), ("dns", ipv4(80, 17, 53))] {
            g.bench_with_input(BenchmarkId::new(name, what), &packet, |b, packet| {
                b.iter(|| classify(black_box(&classes), black_box(packet)))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, class);
criterion_main!(benches);
