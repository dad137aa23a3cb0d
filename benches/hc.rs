//! Cost of compressed TCP headers per packet (`mpt_core::hc`): compressing a bulk segment's
//! IPv4 and TCP headers (timestamps on) against its flow's reference, and rebuilding them at
//! the receiver. Neither copies the payload (the connection moves it).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_core::hc::{is_compressed, Compressor, Decompressor, Format, Headers, Reference};
use mpt_core::wire::internet_checksum;
use std::hint::black_box;

/// A 1468-byte IPv4 TCP segment with timestamps: sequence `seq`, identification `id`.
fn segment(seq: u32, id: u16) -> Vec<u8> {
    let len = 1468usize;
    let mut p = vec![7u8; len];
    p[..20].copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
    ]);
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    let sum = internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    let t = &mut p[20..52];
    t.fill(0);
    t[..4].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&77u32.to_be_bytes());
    t[12] = 0x80;
    t[13] = 0x10;
    t[14..16].copy_from_slice(&501u16.to_be_bytes());
    t[16..18].copy_from_slice(&0xabcdu16.to_be_bytes());
    t[20..24].copy_from_slice(&[1, 1, 8, 10]);
    t[24..28].copy_from_slice(&(seq / 1000).to_be_bytes());
    p
}

fn hc(c: &mut Criterion) {
    let mut g = c.benchmark_group("hc");
    g.throughput(Throughput::Elements(1));
    // each format padded as the connection pads it
    for (format, pad_to, name) in [(Format::V7, 13, "version 7"), (Format::V6, 20, "version 6")] {
        // a flow's stream of segments after its reference, each compressed against it (a new
        // one whole after every 64, as the connection sends them): in version 7, segments
        // after the reference's end, the identification implied
        let stream: Vec<Vec<u8>> = (1..65u32).map(|n| segment(n * 1416, n as u16)).collect();
        let mut tx = Compressor::new();
        let mut gseq = 0u32;
        tx.sent_whole(gseq, &segment(0, 0));
        // into the caller's header, as the connection does
        let mut h = Headers::new();
        g.bench_function(
            format!("compress a TCP/IPv4 segment's headers ({name})"),
            |b| {
                let mut k = 0;
                b.iter(|| {
                    gseq = gseq.wrapping_add(1);
                    let p = &stream[k % stream.len()];
                    k += 1;
                    match tx.compress_into(gseq, black_box(p), 1436, format, pad_to, &mut h) {
                        Some(replaces) => black_box((h.len(), replaces)),
                        None => {
                            tx.sent_whole(gseq, p);
                            (0, 0)
                        }
                    }
                })
            },
        );
        // one body rebuilt against the reference it names
        let mut tx = Compressor::new();
        let mut rx = Decompressor::new();
        let reference = segment(0, 0);
        tx.sent_whole(0, &reference);
        rx.store(Reference::of(0, &reference).expect("tcp"));
        let p = segment(1416, 1);
        let (h, replaces) = tx
            .compress(1, &p, 1436, format, pad_to)
            .expect("compressed");
        let body = [&h[..], &p[replaces..]].concat();
        assert!(is_compressed(&body));
        g.bench_function(
            format!("rebuild a TCP/IPv4 segment's headers ({name})"),
            |b| {
                b.iter(|| {
                    let (headers, skip) = rx.rebuild(1, black_box(&body)).expect("rebuilt");
                    black_box((headers.len(), skip))
                })
            },
        );
        assert!(
            tx_compressed(&stream, format, pad_to) > 60,
            "the stream compresses"
        );
    }
    g.finish();
}

/// How many of `stream` a fresh compressor sends compressed after a reference.
fn tx_compressed(stream: &[Vec<u8>], format: Format, pad_to: usize) -> usize {
    let mut tx = Compressor::new();
    tx.sent_whole(0, &segment(0, 0));
    (1..)
        .zip(stream)
        .filter(|(gseq, p)| tx.compress(*gseq, p, 1436, format, pad_to).is_some())
        .count()
}

criterion_group!(benches, hc);
criterion_main!(benches);
