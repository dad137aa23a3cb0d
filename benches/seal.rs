//! Cost of sealing and opening one datagram (header + counter + body + tag) per body size and
//! cipher, as the daemon does it: in place, no allocation.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mpt_core::seal::{session_keys, Cipher, Psk, KEY_LEN, SEALED_HEADER_LEN, TAG_LEN};
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
    let psk = Psk::from_bytes([9; KEY_LEN]);
    for cipher in [Cipher::ChaCha20Poly1305, Cipher::Aes256Gcm] {
        let ours = session_keys(&psk, cipher, &[1; 32], &[2; 32]);
        let theirs = session_keys(&psk, cipher, &[2; 32], &[1; 32]);
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
                    black_box(theirs.rx.open(&mut buf[..n]).expect("opens"))
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, seal);
criterion_main!(benches);
