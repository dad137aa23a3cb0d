//! Cost of compressed TCP headers per packet (`mpt_core::hc`): compressing a bulk segment's
//! IPv4 and TCP headers (timestamps on) against its flow's reference, and rebuilding them at
//! the receiver. Neither copies the payload (the connection moves it).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_core::hc::{is_compressed, Compressor, Decompressor, Format, Headers, Reference};
use mpt_core::wire::internet_checksum;
use std::hint::black_box;

/// An IPv4 TCP segment with timestamps and `payload` bytes of payload: sequence `seq`,
/// identification `id`.
fn segment(seq: u32, id: u16, payload: usize) -> Vec<u8> {
    let len = 52 + payload;
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

/// Room for a packet in a 1500-byte datagram.
const ROOM: usize = 1436;
/// Payload of a flow's reference, cut to go whole in one (52 bytes of headers).
const REFERENCE: u32 = 1384;

/// A flow's reference: sequence 0, identification 0.
fn reference() -> Vec<u8> {
    segment(0, 0, REFERENCE as usize)
}

fn hc(c: &mut Criterion) {
    let mut g = c.benchmark_group("hc");
    g.throughput(Throughput::Elements(1));
    // each format padded as the connection pads it
    for (format, pad_to, name) in [(Format::V7, 13, "version 7"), (Format::V6, 20, "version 6")] {
        // the payload of a segment cut to go compressed, its header padded to `pad_to`
        let segment_len = ROOM - pad_to;
        // a flow's stream of segments after its reference, each compressed against it (a new
        // one whole after every 64, as the connection sends them), cut as the connection
        // cuts them for a 1500-byte datagram: the reference shorter, so that it fits whole.
        // In version 7, segments after the reference's end, the identification implied
        let stream: Vec<Vec<u8>> = (1..65u32)
            .map(|n| {
                segment(
                    REFERENCE + (n - 1) * segment_len as u32,
                    n as u16,
                    segment_len,
                )
            })
            .collect();
        let mut tx = Compressor::new();
        let mut gseq = 0u32;
        tx.sent_whole(gseq, &reference());
        // into the caller's header, as the connection does
        let mut h = Headers::new();
        g.bench_function(
            format!("compress a TCP/IPv4 segment's headers ({name})"),
            |b| {
                // in a cycle, not indexed modulo its length (a division per iteration)
                let mut stream = stream.iter().cycle();
                b.iter(|| {
                    gseq = gseq.wrapping_add(1);
                    let p = stream.next().expect("endless");
                    match tx.compress_into(gseq, black_box(p), ROOM, format, pad_to, &mut h) {
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
        let reference = reference();
        tx.sent_whole(0, &reference);
        rx.store(Reference::of(0, &reference).expect("tcp"));
        let p = segment(REFERENCE, 1, segment_len);
        let (h, replaces) = tx
            .compress(1, &p, ROOM, format, pad_to)
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
    tx.sent_whole(0, &reference());
    (1..)
        .zip(stream)
        .filter(|(gseq, p)| tx.compress(*gseq, p, ROOM, format, pad_to).is_some())
        .count()
}

criterion_group!(benches, hc);
criterion_main!(benches);
