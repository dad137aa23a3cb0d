//! Cost of packets in pieces per packet: a stream of 1500-byte packets cut to fill 1432-byte
//! datagram bodies (what the sender adds: a copy of each piece into its datagram), and the
//! pieces checked, walked and put back together at the receiver (what it adds before the
//! packet goes to the resequencer).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpt_core::wire::{
    bundle_entries, check_bundle, check_continued, continued_entries, push_bundle_entry,
    push_continuation, CONTINUATION_LEN,
};
use mpt_core::{PathId, Time};
use mpt_reseq::PacketMeta;
use mpt_tunnel::{Piece, Reassembly};
use std::hint::black_box;

const BODY: usize = 1432;

fn ipv4(len: usize, fill: u8) -> Vec<u8> {
    let mut p = vec![fill; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p
}

fn pieces(c: &mut Criterion) {
    let mut g = c.benchmark_group("pieces");
    g.throughput(Throughput::Elements(1));
    let packet = ipv4(1500, 7);
    // one packet: its head piece ends a datagram, its rest starts the next
    let head_len = BODY - 1 - 68;
    let mut head = Vec::with_capacity(BODY);
    let mut rest = Vec::with_capacity(BODY);
    g.bench_function("split 1500 into 1432-byte bodies", |b| {
        b.iter(|| {
            head.clear();
            rest.clear();
            push_bundle_entry(&mut head, None, 1000, black_box(&packet[..head_len])).expect("fits");
            push_continuation(&mut rest, head_len, black_box(&packet[head_len..]));
            black_box((head.len(), rest.len()))
        })
    });
    let mut r = Reassembly::default();
    let mut now = Time::ZERO;
    g.bench_function("check and put back together", |b| {
        b.iter(|| {
            now = now + std::time::Duration::from_micros(1);
            let mut out = None;
            check_bundle(black_box(&head)).expect("valid");
            for e in bundle_entries(&head, 1000).flatten() {
                let meta = PacketMeta {
                    path: PathId(0),
                    seq: e.seq,
                    path_seq: 1,
                    sent_us: 0,
                    len: e.len,
                };
                let piece = Piece::Head {
                    meta,
                    total: e.total,
                    bytes: &head[e.start..e.start + e.len],
                };
                out = r.add(now, 1500, piece).expect("taken");
            }
            let (cont, _) = check_continued(black_box(&rest)).expect("valid");
            let piece = Piece::Rest {
                seq: 1000,
                offset: cont.offset,
                bytes: &rest[CONTINUATION_LEN..CONTINUATION_LEN + cont.len],
            };
            if let Some(done) = r.add(now, 1500, piece).expect("taken") {
                out = Some(done);
            }
            for e in continued_entries(&rest, 1000).flatten() {
                black_box(e);
            }
            black_box(out.map(|(_, p)| p.len()))
        })
    });
    g.finish();
}

criterion_group!(benches, pieces);
criterion_main!(benches);
