//! Cost of sealing and opening one datagram (header + counter + body + tag) per body size and
//! cipher, as the daemon does it: in place, no allocation. And the cost of one whole Noise
//! IKpsk2 handshake, each side's half apart (what a server spends per site that connects).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_core::seal::{
    Cipher, Initiator, PrivateKey, Responder, SessionKeys, KEY_LEN, SEALED_HEADER_LEN, TAG_LEN,
};
use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::PathId;
use std::hint::black_box;

fn header() -> HeaderRepr {
    HeaderRepr {
        kind: Kind::Data,
        path: PathId(0),
        path_seq: 1,
        session: 2,
        seq: 3,
        timestamp: 4,
    }
}

fn seal(c: &mut Criterion) {
    let (k1, k2) = ([1; KEY_LEN], [2; KEY_LEN]);
    for cipher in [Cipher::ChaCha20Poly1305, Cipher::Aes256Gcm] {
        let ours = SessionKeys::new(cipher, &k1, &k2);
        let theirs = SessionKeys::new(cipher, &k2, &k1);
        let mut g = c.benchmark_group(format!("seal_{}", cipher.name()));
        for size in [64usize, 512, 1400] {
            let mut buf = vec![0u8; SEALED_HEADER_LEN + size + TAG_LEN];
            g.throughput(Throughput::Bytes(size as u64));
            let mut counter = 0u64;
            g.bench_with_input(BenchmarkId::new("seal", size), &size, |b, &size| {
                b.iter(|| {
                    header().emit(&mut buf);
                    counter += 1;
                    black_box(ours.tx.seal(counter, &mut buf, size).expect("room"))
                })
            });
            header().emit(&mut buf);
            let n = ours.tx.seal(7, &mut buf, size).expect("room");
            let sealed = buf[..n].to_vec();
            g.bench_with_input(BenchmarkId::new("open", size), &size, |b, _| {
                b.iter(|| {
                    // the datagram as received: opening decrypts in place
                    buf[..n].copy_from_slice(&sealed);
                    black_box(theirs.rx.open(&mut buf[..n], 7).expect("opens"))
                })
            });
        }
        g.finish();
    }
}

fn handshake(c: &mut Criterion) {
    let site = PrivateKey::from_bytes([1; KEY_LEN]);
    let server = PrivateKey::from_bytes([2; KEY_LEN]);
    let server_public = server.public();
    let payload = [0u8; 14];
    let mut g = c.benchmark_group("handshake");
    let (mut m1, mut m2, mut p) = ([0u8; 256], [0u8; 256], [0u8; 64]);
    g.bench_function("initiate", |b| {
        b.iter(|| {
            black_box(Initiator::start(
                &site,
                &server_public,
                None,
                &payload,
                &mut m1,
            ))
        })
    });
    let (_, n1) = Initiator::start(&site, &server_public, None, &payload, &mut m1).expect("init");
    g.bench_function("respond", |b| {
        b.iter(|| {
            let (r, _) = Responder::read(&server, &m1[..n1], &mut p).expect("read");
            black_box(r.respond(None, &payload[..5], &mut m2).expect("respond"))
        })
    });
    g.bench_function("both_ends", |b| {
        b.iter(|| {
            let (i, n1) =
                Initiator::start(&site, &server_public, None, &payload, &mut m1).expect("init");
            let (r, _) = Responder::read(&server, &m1[..n1], &mut p).expect("read");
            let (n2, _) = r.respond(None, &payload[..5], &mut m2).expect("respond");
            black_box(i.finish(&m2[..n2], &mut p).expect("finish"))
        })
    });
    g.finish();
}

criterion_group!(benches, seal, handshake);
criterion_main!(benches);
