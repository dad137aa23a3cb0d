//! What an idle peer's connection holds in memory: a concentrator with thousands of sites holds
//! one per site. Counted with a global allocator that keeps the live bytes: ten pairs of
//! connections make their sessions and stay idle (keepalives only) for a minute of simulated
//! time; what the connections hold then, once the simulator is gone, is bounded.

#[allow(dead_code)]
mod sim;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use mpt_tunnel::ConnectionConfig;
use sim::*;

/// The bytes allocated and not freed, by every thread.
static LIVE: AtomicI64 = AtomicI64::new(0);

struct Live;

unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as the caller's contract
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as the caller's contract
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as the caller's contract
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as the caller's contract
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

/// What one idle connection with two paths holds at most, sealed, its session made, with the
/// daemon's reorder window (4096). What grows with traffic is not held before it comes:
/// header compression's references (7 KiB to send, 112 KiB to receive once a peer's packets
/// come compressed), the reordering statistics' history (up to 64 KiB), the resequencer's
/// ring and its occupancy histogram (up to 32 KiB).
const IDLE_MAX: i64 = 24 * 1024;

/// The daemon's default `connection.reorder_window`.
const DAEMON_WINDOW: usize = 4096;

#[test]
fn an_idle_peer_holds_under_24_kib() {
    const PAIRS: usize = 10;
    let before = LIVE.load(Ordering::Relaxed);
    let mut pairs = Vec::with_capacity(PAIRS);
    for seed in 0..PAIRS as u64 {
        let cfg = |side| ConnectionConfig {
            reorder_window: DAEMON_WINDOW,
            ..config(side, 2, true)
        };
        let mut p = Pair::with(seed, cfg(Side::A), cfg(Side::B));
        assert!(p
            .run_until(Duration::from_secs(3), |p| p.agreed())
            .is_some());
        p.run(Duration::from_secs(60));
        pairs.push(p);
    }
    // the connections alone: the simulator's links, logs and flights go
    let conns: Vec<_> = pairs
        .into_iter()
        .flat_map(|p| {
            let Pair { nodes, .. } = p;
            nodes.map(|n| n.ep)
        })
        .collect();
    let per = (LIVE.load(Ordering::Relaxed) - before) / conns.len() as i64;
    println!(
        "RESULT footprint: an idle connection holds {} B ({:.1} KiB), {} B of it inline",
        per,
        per as f64 / 1024.0,
        std::mem::size_of::<mpt_tunnel::Connection<Vec<u8>>>()
    );
    assert!(
        per <= IDLE_MAX,
        "{per} B per idle connection, at most {IDLE_MAX}"
    );
    std::hint::black_box(&conns);
}
