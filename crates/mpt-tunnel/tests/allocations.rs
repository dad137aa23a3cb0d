//! No allocation per packet in steady state: a counting global allocator watches two sealed
//! connections carry a bulk TCP-like stream (compressible segments one way, their ACKs the
//! other) and a UDP stream over two paths, driven the way mptd drives them (batches numbered
//! and sealed in place, datagrams opened before they are handed in, inner packets held in
//! buffers the driver owns). After a warm-up, every allocation on the test's thread counts,
//! the driver's own included: the driver here allocates nothing once running, so what is
//! counted is the engine's. `MPT_ALLOC_TRACE=N` prints where the first N allocations were made.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;

#[allow(dead_code)]
mod sim;

use mpt_core::rng::Rng;
use mpt_core::{PathId, Time};
use mpt_tunnel::{BatchOut, Connection, ConnectionConfig, Payloads, Via};
use sim::Side;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static TRACE_LEFT: Cell<u32> = const { Cell::new(0) };
    static IN_TRACE: Cell<bool> = const { Cell::new(false) };
}

impl Counting {
    fn note() {
        if !COUNTING.with(Cell::get) || IN_TRACE.with(Cell::get) {
            return;
        }
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        if TRACE_LEFT.with(Cell::get) > 0 {
            IN_TRACE.with(|t| t.set(true));
            TRACE_LEFT.with(|t| t.set(t.get() - 1));
            eprintln!(
                "allocation:\n{}",
                std::backtrace::Backtrace::force_capture()
            );
            IN_TRACE.with(|t| t.set(false));
        }
    }
}

// SAFETY: every call goes to the system allocator unchanged; counting touches only
// thread-locals that need no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Counting::note();
        // SAFETY: as the caller's contract
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Counting::note();
        // SAFETY: as the caller's contract
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Counting::note();
        // SAFETY: as the caller's contract
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's contract
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const PATHS: usize = 2;
/// Long enough for every slot of the resend buffer to have held a reference.
const WARM_UP_MS: u32 = 40_000;
const BUF: usize = 2048;

fn addr(side: usize, path: usize) -> SocketAddr {
    SocketAddr::from(([198, 18, path as u8, side as u8 + 1], 4000 + path as u16))
}

/// The simulator's settings for `side` (0 is A, the initiator), sealed, with the scheduler's
/// clock of each path at 60 Mbit/s: about 85 % of what the stream offers, busy enough that
/// small packets may go in bundles.
fn config(side: usize) -> ConnectionConfig {
    let side = if side == 0 { Side::A } else { Side::B };
    let mut c = sim::config(side, PATHS, true);
    for p in &mut c.paths {
        p.rate_bps = Some(60_000_000);
    }
    c
}

/// Buffers the driver owns, made before the run and used again and again.
struct Pool(Vec<Vec<u8>>);

impl Pool {
    fn new(n: usize) -> Pool {
        Pool((0..n).map(|_| Vec::with_capacity(BUF)).collect())
    }

    fn take(&mut self) -> Vec<u8> {
        let mut b = self.0.pop().expect("the pool is large enough for the run");
        b.clear();
        b
    }

    /// `b` back, if it is one of the pool's size (a control datagram's vector, which the
    /// connection made, is not kept).
    fn give(&mut self, b: Vec<u8>) {
        if b.capacity() >= BUF {
            self.0.push(b);
        }
    }
}

impl Payloads<Vec<u8>> for Pool {
    fn in_datagram(&mut self, datagram: &[u8], packet: std::ops::Range<usize>) -> Vec<u8> {
        self.own(&datagram[packet])
    }

    fn own(&mut self, packet: &[u8]) -> Vec<u8> {
        let mut b = self.take();
        b.extend_from_slice(packet);
        b
    }

    fn keep(&mut self, p: Vec<u8>, _: &[u8]) -> Vec<u8> {
        p
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.take()
    }

    fn adopt(&mut self, mut buf: Vec<u8>, packet: std::ops::Range<usize>) -> Vec<u8> {
        let len = packet.len();
        buf.copy_within(packet, 0);
        buf.truncate(len);
        buf
    }
}

/// A datagram on its way: when it arrives, where, and its bytes.
struct Flight {
    at: Time,
    order: u64,
    to: usize,
    path: usize,
    bytes: Vec<u8>,
}

impl PartialEq for Flight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for Flight {}
impl PartialOrd for Flight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Flight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

/// One end: its connection, its buffers, what it delivered.
struct End {
    c: Connection<Vec<u8>>,
    pool: Pool,
    bufs: Vec<Vec<u8>>,
    sizes: Vec<usize>,
    plan: Vec<Option<PathId>>,
    out: BatchOut,
    delivered: Vec<Vec<u8>>,
    delivered_count: u64,
    sent: u64,
}

struct Net {
    now: Time,
    ends: [End; 2],
    flights: BinaryHeap<Reverse<Flight>>,
    order: u64,
    delays: [Duration; PATHS],
}

impl Net {
    fn new() -> Net {
        let mut rng = Rng::new(7);
        let end = |side: usize, rng: &mut Rng| {
            let mut r = Rng::new(rng.next_u64());
            End {
                c: Connection::new(
                    config(side),
                    Time::ZERO,
                    Box::new(move |b: &mut [u8]| r.fill(b)),
                ),
                pool: Pool::new(8192),
                bufs: (0..16).map(|_| vec![0; BUF]).collect(),
                sizes: vec![0; 16],
                plan: vec![None; 16],
                out: BatchOut::default(),
                delivered: Vec::with_capacity(1024),
                delivered_count: 0,
                sent: 0,
            }
        };
        let ends = [end(0, &mut rng), end(1, &mut rng)];
        Net {
            now: Time::ZERO,
            ends,
            flights: BinaryHeap::with_capacity(1 << 16),
            order: 0,
            delays: [Duration::from_millis(5), Duration::from_millis(12)],
        }
    }

    fn put(&mut self, from: usize, path: usize, bytes: Vec<u8>) {
        self.order += 1;
        self.flights.push(Reverse(Flight {
            at: self.now + self.delays[path],
            order: self.order,
            to: 1 - from,
            path,
            bytes,
        }));
    }

    /// `side` sends the packets `fill` writes (at most 16: each into the buffer given, after
    /// `prefix`, returning its length), as one batch.
    fn send_batch(&mut self, side: usize, count: usize, fill: impl Fn(usize, &mut [u8]) -> usize) {
        let now = self.now;
        let e = &mut self.ends[side];
        let prefix = e.c.prefix();
        for k in 0..count {
            e.sizes[k] = fill(k, &mut e.bufs[k][prefix..]);
        }
        let sealer = e.c.number_batch(
            now,
            &mut e.sizes[..count],
            &mut e.bufs[..count],
            &mut e.plan[..count],
            &mut e.out,
        );
        let Some(sealer) = sealer else { return };
        let mut leaving: [Option<(usize, Vec<u8>)>; 16] = Default::default();
        for (k, slot) in leaving.iter_mut().enumerate().take(count) {
            let Some(path) = e.plan[k] else { continue };
            let len = sealer.seal(k, &mut e.bufs[k], e.sizes[k]).expect("sealed");
            let mut d = e.pool.take();
            d.extend_from_slice(&e.bufs[k][..len]);
            *slot = Some((path.index(), d));
            e.sent += 1;
        }
        e.c.batch_sent(sealer.used());
        let before = std::mem::take(&mut e.out.before);
        let after = std::mem::take(&mut e.out.after);
        let mut before = before;
        let mut after = after;
        for t in before.drain(..) {
            self.put(side, t.path.index(), t.contents);
        }
        for (path, d) in leaving.iter_mut().filter_map(Option::take) {
            self.put(side, path, d);
        }
        for t in after.drain(..) {
            self.put(side, t.path.index(), t.contents);
        }
        self.ends[side].out.before = before;
        self.ends[side].out.after = after;
        self.drive(side);
    }

    /// What `side` has to give: control datagrams, events, delivered packets.
    fn drive(&mut self, side: usize) {
        let now = self.now;
        loop {
            let mut d = self.ends[side].pool.take();
            let Some(t) = self.ends[side].c.poll_transmit(now, &mut d) else {
                self.ends[side].pool.give(d);
                break;
            };
            self.put(side, t.path.index(), d);
        }
        let e = &mut self.ends[side];
        while e.c.poll_event().is_some() {}
        e.c.take_delivered(&mut e.pool, &mut e.delivered);
        e.deliver();
    }

    /// Everything due by `until`: arrivals and timers.
    fn run_to(&mut self, until: Time) {
        loop {
            let arrival = self.flights.peek().map(|f| f.0.at);
            let timers = [0, 1].map(|s| self.ends[s].c.poll_timeout());
            let next = [arrival, Some(timers[0]), Some(timers[1])]
                .into_iter()
                .flatten()
                .min()
                .filter(|&t| t <= until);
            let Some(next) = next else { break };
            self.now = self.now.max(next);
            let now = self.now;
            if arrival == Some(next) {
                let Reverse(f) = self.flights.pop().expect("peeked");
                let mut bytes = f.bytes;
                let e = &mut self.ends[f.to];
                let opened = e.c.opener().and_then(|o| o.open(&mut bytes));
                e.c.handle_datagram(
                    now,
                    Via {
                        path: PathId(f.path as u8),
                        from: addr(1 - f.to, f.path),
                    },
                    &mut bytes,
                    opened,
                    &mut e.pool,
                    &mut e.delivered,
                );
                e.deliver();
                // (the datagram's buffer goes back to the end that sent it)
                self.ends[1 - f.to].pool.give(bytes);
                self.drive(f.to);
            }
            for s in [0, 1] {
                if timers[s] <= now {
                    self.ends[s].c.handle_timeout(now);
                    self.drive(s);
                }
            }
        }
        self.now = until;
    }
}

impl End {
    /// "Write to the TUN device": check, count and give the buffers back.
    fn deliver(&mut self) {
        for p in self.delivered.drain(..) {
            assert!(
                matches!(p.first().map(|b| b >> 4), Some(4)),
                "an IPv4 packet"
            );
            self.delivered_count += 1;
            self.pool.give(p);
        }
    }
}

/// A TCP segment of the bulk flow (IPv4, timestamps), the `n`th, with `payload` bytes, written
/// into `b`; returns its length. Checksums as the kernel leaves them for a TSO'd flow.
fn segment(b: &mut [u8], n: u32, payload: usize, from_a: bool) -> usize {
    let (src, dst, sport, dport) = if from_a {
        ([198, 18, 0, 1], [198, 19, 0, 1], 40000u16, 5201u16)
    } else {
        ([198, 19, 0, 1], [198, 18, 0, 1], 5201, 40000)
    };
    let len = 20 + 32 + payload;
    let h = &mut b[..20];
    h.fill(0);
    h[0] = 0x45;
    h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    h[4..6].copy_from_slice(&(n as u16).to_be_bytes());
    h[6] = 0x40;
    h[8] = 64;
    h[9] = 6;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let sum = mpt_core::wire::internet_checksum(0, &[&b[..20]]);
    b[10..12].copy_from_slice(&sum.to_be_bytes());
    let t = &mut b[20..52];
    t.fill(0);
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&(n.wrapping_mul(payload.max(1) as u32)).to_be_bytes());
    t[8..12].copy_from_slice(&(77 + n / 10).to_be_bytes());
    t[12] = 8 << 4;
    t[13] = 0x10;
    t[14..16].copy_from_slice(&512u16.to_be_bytes());
    t[16..18].copy_from_slice(&(n as u16).wrapping_mul(2654).to_be_bytes());
    t[20..24].copy_from_slice(&[1, 1, 8, 10]);
    t[24..28].copy_from_slice(&(1000 + n / 3).to_be_bytes());
    t[28..32].copy_from_slice(&(500 + n / 5).to_be_bytes());
    for (k, x) in b[52..len].iter_mut().enumerate() {
        *x = (k as u32 ^ n) as u8;
    }
    len
}

/// A UDP datagram of `payload` bytes, the `n`th of its stream, written into `b`.
fn udp(b: &mut [u8], n: u32, payload: usize) -> usize {
    let len = 28 + payload;
    b[..28].fill(0);
    b[0] = 0x45;
    b[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    b[8] = 64;
    b[9] = 17;
    b[12..16].copy_from_slice(&[198, 18, 0, 1]);
    b[16..20].copy_from_slice(&[198, 19, 0, 2]);
    let sum = mpt_core::wire::internet_checksum(0, &[&b[..20]]);
    b[10..12].copy_from_slice(&sum.to_be_bytes());
    b[20..22].copy_from_slice(&5004u16.to_be_bytes());
    b[22..24].copy_from_slice(&5004u16.to_be_bytes());
    b[24..26].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    b[28..len].fill(n as u8);
    len
}

/// One millisecond of traffic: 8 bulk segments and a UDP datagram from A, in two batches, and
/// 4 ACKs from B.
fn one_ms(net: &mut Net, ms: u32) {
    let start = net.now;
    for half in 0..2 {
        let first = ms * 8 + half * 4;
        net.send_batch(0, 5, |k, b| match k {
            4 => udp(b, ms * 2 + half, 160),
            _ => segment(b, first + k as u32, 1296, true),
        });
        net.send_batch(1, 2, |k, b| segment(b, first / 2 + k as u32, 0, false));
        net.run_to(start + Duration::from_micros(500 * (u64::from(half) + 1)));
    }
}

#[test]
fn steady_bulk_tcp_and_udp_allocate_nothing_per_packet() {
    let mut net = Net::new();
    net.run_to(Time::from_millis(500));
    assert!(
        net.ends[0].c.keys_agreed() && net.ends[1].c.keys_agreed(),
        "keys agreed"
    );
    // warm-up: the pools, queues and references reach their working size. The slowest is the
    // resend buffer: a path that loses nothing keeps its flows' references only (one packet
    // in 65), each in the slot of its global sequence, and each of the 4096 slots allocates
    // its buffer when first used (once per connection: idle peers hold none)
    let mut ms = 0;
    while ms < WARM_UP_MS {
        one_ms(&mut net, ms);
        ms += 1;
    }
    let before: [(u64, u64); 2] = [0, 1].map(|s| (net.ends[s].sent, net.ends[s].delivered_count));
    let trace = std::env::var("MPT_ALLOC_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    TRACE_LEFT.with(|t| t.set(trace));
    ALLOCATIONS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    while ms < WARM_UP_MS + 5000 {
        one_ms(&mut net, ms);
        ms += 1;
    }
    COUNTING.with(|c| c.set(false));
    let allocations = ALLOCATIONS.with(Cell::get);
    let [a, b] = [0, 1].map(|s| {
        (
            net.ends[s].sent - before[s].0,
            net.ends[s].delivered_count - before[s].1,
        )
    });
    let compressed = net.ends[0].c.compression_counts();
    let bundles = [0, 1].map(|s| net.ends[s].c.bundle_counts());
    eprintln!(
        "RESULT allocations: {allocations} over 5 s of steady traffic; A sent {} and delivered {}, B sent {} and delivered {}; A's compression {compressed:?}; bundles (sent, packets in them, compressed) {bundles:?}",
        a.0, a.1, b.0, b.1
    );
    // the traffic flowed, both ways, and compressed
    assert!(b.1 >= a.0 * 99 / 100, "B delivered {} of A's {}", b.1, a.0);
    assert!(a.1 >= b.0 * 99 / 100, "A delivered {} of B's {}", a.1, b.0);
    assert!(a.0 > 40_000 && b.0 > 15_000);
    assert_eq!(
        allocations,
        0,
        "{:.4} allocations per packet (MPT_ALLOC_TRACE=5 shows where)",
        allocations as f64 / (a.0 + b.0) as f64
    );
    // the results page's Summary row (`mpt-lab results --log`)
    eprintln!(
        "HEADLINE allocations | the engine in steady bulk TCP and UDP, both ways, sealed \
         (`crates/mpt-tunnel/tests/allocations.rs`, a counting allocator) | **{allocations} \
         allocations** in 5 s of {} packets",
        a.0 + b.0
    );
}
