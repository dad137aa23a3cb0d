//! Input generators shared by the benchmarks (`cargo bench -p mpt-benches`).

pub mod packet_cost;

use mpt_core::{PathId, Time};
use mpt_reseq::PacketMeta;

/// The shared seeded generator, so every run sees the same input.
pub use mpt_core::rng::Rng;

/// One arrival for the resequencer benchmarks.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub now: Time,
    pub meta: PacketMeta,
}

fn meta(seq: u32, path: u8, path_seq: u16) -> PacketMeta {
    PacketMeta {
        path: PathId(path),
        seq,
        path_seq,
        sent_us: seq.wrapping_mul(10),
        len: 1200,
    }
}

/// `n` packets in order on one path, 10 µs apart.
pub fn in_order(n: usize) -> Vec<Arrival> {
    (0..n)
        .map(|i| Arrival {
            now: Time::from_micros(i as u64 * 10),
            meta: meta(i as u32, 0, i as u16),
        })
        .collect()
}

/// `n` packets alternating over two paths, the second `lag` packets behind the first: the
/// steady state of two paths with a large delay difference (every second packet is held).
pub fn two_paths_delay(n: usize, lag: usize) -> Vec<Arrival> {
    let mut order: Vec<(usize, u32)> = (0..n as u32)
        .map(|s| {
            let pos = if s % 2 == 0 {
                s as usize * 2
            } else {
                s as usize * 2 + lag * 2
            };
            (pos, s)
        })
        .collect();
    order.sort();
    order
        .into_iter()
        .enumerate()
        .map(|(i, (_, s))| Arrival {
            now: Time::from_micros(i as u64 * 10),
            meta: meta(s, (s % 2) as u8, (s / 2) as u16),
        })
        .collect()
}

/// `n` packets on 4 paths, each block of `window` shuffled at random.
pub fn random_within(n: usize, window: usize, seed: u64) -> Vec<Arrival> {
    // the state the benchmarks' inputs always came from
    let mut rng = Rng::from_state(seed);
    let mut seqs: Vec<u32> = (0..n as u32).collect();
    for block in seqs.chunks_mut(window) {
        for i in (1..block.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            block.swap(i, j);
        }
    }
    // Per-path sequence numbers are not meaningful under a random shuffle; keep them in
    // arrival order per path so the loss counter stays quiet.
    let mut path_seq = [0u16; 4];
    seqs.into_iter()
        .enumerate()
        .map(|(i, s)| {
            let p = (s % 4) as usize;
            path_seq[p] = path_seq[p].wrapping_add(1);
            Arrival {
                now: Time::from_micros(i as u64 * 10),
                meta: meta(s, p as u8, path_seq[p]),
            }
        })
        .collect()
}
