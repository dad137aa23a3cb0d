//! Cost of bundling per packet: packing voice-sized packets into a bundle body (what the
//! sender adds: one copy each) and checking and walking a received one (what the receiver
//! adds before the packets go to the resequencer), 7 packets of 188 bytes (a full bundle at
//! MTU 1400) and 64 of 20; and 8 IPv4 UDP packets of 188 bytes of one flow, compressed
//! (checked against the one before and packed without their headers; rebuilt whole).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_core::wire::{
    bundle_entries, check_bundle, compresses, internet_checksum, push_bundle_entry,
    push_compressed_entry, udp4_headers,
};
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

/// A 188-byte IPv4 UDP packet (160 bytes of payload) with identification `id`.
fn udp4(id: u16) -> Vec<u8> {
    let mut p = vec![7u8; 188];
    p[..20].copy_from_slice(&[
        0x45, 0, 0, 188, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ]);
    p[4..6].copy_from_slice(&id.to_be_bytes());
    let sum = internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p[20..28].copy_from_slice(&[15, 160, 19, 136, 0, 168, 0x12, 0x34]);
    p
}

fn compressed(c: &mut Criterion) {
    let mut g = c.benchmark_group("bundle");
    let packets: Vec<Vec<u8>> = (0..8).map(udp4).collect();
    let mut body = Vec::with_capacity(1500);
    g.throughput(Throughput::Elements(8));
    g.bench_function("pack-compressed/8x188", |b| {
        b.iter(|| {
            body.clear();
            let mut prev = None;
            for (s, p) in packets.iter().enumerate() {
                let s = s as u32;
                let own = udp4_headers(black_box(p));
                match (prev, own) {
                    (Some(h), Some(o)) if compresses(&h, &o) => {
                        push_compressed_entry(&mut body, s - 1, s, p).expect("fits")
                    }
                    _ => push_bundle_entry(&mut body, s.checked_sub(1), s, p).expect("fits"),
                }
                prev = own;
            }
            black_box(body.len())
        })
    });
    assert_eq!(body.len(), 189 + 7 * 168);
    g.bench_function("unpack-compressed/8x188", |b| {
        b.iter(|| {
            let n = check_bundle(black_box(&body)).expect("valid");
            let mut sum = 0usize;
            for e in bundle_entries(&body, 0).flatten() {
                sum += e.packet(&body).len();
            }
            black_box((n, sum))
        })
    });
    g.finish();
}

criterion_group!(benches, bundle, compressed);
criterion_main!(benches);
