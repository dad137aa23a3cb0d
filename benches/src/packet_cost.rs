//! The inputs of `benches/packet_cost.rs`: two connections joined in memory (handshake, path
//! MTU found, a bulk flow under way), and one batch of a TCP or UDP flow's inner packets taken
//! the way mptd's datapath takes them: numbered, sealed and sent at one end
//! (`crates/mptd/src/datapath/tx.rs`), opened, resequenced, rebuilt and delivered at the
//! other (`datapath/rx/mod.rs`). Everything but the batch's own work happens here, outside
//! the measured region; [`send`] and [`receive`] are that work.
//!
//! The settings are mptd's defaults for two paths whose rates are configured (the `rate`
//! scheduler, paced; bundles, resending, parity, equalisation and compressed TCP headers on;
//! the default classes; MTU 1500), each path 500 Mbit/s with 5 ms one way. The flow is sent
//! at 80 % of the paths' sum, so no path builds a queue (no bundles, nothing paced).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use mpt_core::seal::{Cipher, CipherChoice, PrivateKey, TAG_LEN};
use mpt_core::wire::internet_checksum;
use mpt_core::{PathId, Time};
use mpt_sched::SchedulerKind;
use mpt_tunnel::{
    BatchOut, Connection, ConnectionConfig, Endpoint, Event, KeySettings, LinkState, Opened,
    Outcome, Overhead, PathSettings, Transmit,
};

/// Inner packets per measured batch (the counts are the batch's: divide by this).
pub const BATCH: usize = 64;
/// Batches sent before the measured one.
pub const WARM_BATCHES: usize = 32;
/// Paths between the two ends.
pub const PATHS: usize = 2;
/// Each path's rate (configured at both ends), bits per second.
pub const PATH_RATE: u64 = 500_000_000;
/// Each path's one-way delay.
pub const DELAY: Duration = Duration::from_millis(5);
/// The tunnel MTU (mptd's default).
pub const MTU: u16 = 1500;

/// What a benchmark sends: a TCP flow's segments (IPv4 + TCP with timestamps, 52 bytes of
/// headers) or a UDP flow's datagrams, each `len` bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inner {
    Tcp(usize),
    Udp(usize),
}

impl Inner {
    pub fn len(self) -> usize {
        match self {
            Inner::Tcp(n) | Inner::Udp(n) => n,
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// How the receiver is handed a batch's datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// In the order they were sent (both paths' datagrams interleaved): nothing waits in
    /// the resequencer.
    Sent,
    /// Path by path, as a receive batch from one socket and then one from the other: every
    /// packet of the second path waits in the resequencer for its predecessor on the first.
    BySocket,
}

/// One benchmark's settings.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub cipher: Cipher,
    pub inner: Inner,
    /// `connection.compress` at both ends.
    pub compress: bool,
    pub arrival: Arrival,
}

impl Case {
    pub fn new(cipher: Cipher, inner: Inner) -> Case {
        Case {
            cipher,
            inner,
            compress: true,
            arrival: Arrival::Sent,
        }
    }

    pub fn uncompressed(self) -> Case {
        Case {
            compress: false,
            ..self
        }
    }

    pub fn by_socket(self) -> Case {
        Case {
            arrival: Arrival::BySocket,
            ..self
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

fn address(side: Side, path: usize) -> SocketAddr {
    let host = match side {
        Side::A => 1,
        Side::B => 2,
    };
    SocketAddr::from(([198, 18, path as u8, host], 4000 + path as u16))
}

fn private_key(side: Side) -> PrivateKey {
    PrivateKey::from_bytes([side as u8 + 1; 32])
}

/// mptd's settings for a peer with [`PATHS`] paths of configured rates, as
/// `crates/mptd/src/tunnel/settings.rs` makes them from a configuration that says no more.
fn config(side: Side, case: &Case) -> ConnectionConfig {
    let other = match side {
        Side::A => Side::B,
        Side::B => Side::A,
    };
    ConnectionConfig {
        paths: (0..PATHS)
            .map(|i| PathSettings {
                name: format!("p{i}"),
                remote: Some(address(other, i)),
                weight: 1,
                rate_bps: Some(PATH_RATE),
                backup: false,
                priority: 1,
                overhead: Overhead::new(true, false).outer_link(),
                mtu: None,
            })
            .collect(),
        // no scheduler named and every path's rate set: `rate`, paced
        scheduler: SchedulerKind::Rate,
        reorder_window: 4096,
        reorder_timeout: Duration::from_millis(100),
        keepalive: Duration::from_millis(100),
        dead: Duration::from_millis(500),
        idle_keepalive: Some(Duration::from_secs(10)),
        mtu: MTU,
        keys: KeySettings {
            private: private_key(side),
            peer: private_key(other).public(),
            psk: None,
            encryption: Some(CipherChoice::Only(case.cipher)),
            aes_in_hardware: case.cipher == Cipher::Aes256Gcm,
            initiate: side == Side::A,
            unix_nanos_at_zero: 1_800_000_000_000_000_000,
            rekey_after: mpt_tunnel::REKEY_AFTER,
        },
        index_slot: Some(1),
        follow_peer_paths: false,
        bundle: true,
        resend: true,
        parity: true,
        equalise: true,
        compress: case.compress,
        pace: true,
        classes: mpt_tunnel::default_classes(),
    }
}

/// Where a received inner packet is held, as mptd's receive task holds it
/// (`crates/mptd/src/peer.rs`, `RxBuf`): in the datagram it arrived in, or in a buffer of
/// its own.
#[derive(Debug)]
pub enum RxPacket {
    /// At `start..end` in datagram `datagram` of the batch.
    Slice {
        datagram: usize,
        start: usize,
        end: usize,
    },
    Own {
        buf: Vec<u8>,
        start: usize,
        end: usize,
    },
}

impl RxPacket {
    /// Its bytes, `datagrams` the batch it was received in.
    pub fn bytes<'a>(&'a self, datagrams: &'a [Datagram]) -> &'a [u8] {
        match self {
            RxPacket::Slice {
                datagram,
                start,
                end,
            } => &datagrams[*datagram].bytes[*start..*end],
            RxPacket::Own { buf, start, end } => &buf[*start..*end],
        }
    }
}

/// mptd's `Payloads` (`crates/mptd/src/datapath/payloads.rs`): a data datagram's packet stays
/// where it lies; anything else, or a packet the resequencer holds past the batch, goes in a
/// buffer from the pool.
#[derive(Debug)]
pub struct RxPayloads<'a> {
    pub pool: &'a mut Vec<Vec<u8>>,
    pub cap: usize,
    pub prefix: usize,
    pub datagram: usize,
}

impl RxPayloads<'_> {
    fn spare(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(|| vec![0u8; self.cap])
    }
}

impl mpt_tunnel::Payloads<RxPacket> for RxPayloads<'_> {
    fn in_datagram(&mut self, _: &[u8], packet: Range<usize>) -> RxPacket {
        RxPacket::Slice {
            datagram: self.datagram,
            start: packet.start,
            end: packet.end,
        }
    }

    fn own(&mut self, packet: &[u8]) -> RxPacket {
        let prefix = self.prefix;
        let mut buf = self.spare();
        if buf.len() < prefix + packet.len() {
            buf.resize(prefix + packet.len(), 0);
        }
        buf[prefix..prefix + packet.len()].copy_from_slice(packet);
        RxPacket::Own {
            buf,
            start: prefix,
            end: prefix + packet.len(),
        }
    }

    fn keep(&mut self, p: RxPacket, datagram: &[u8]) -> RxPacket {
        match p {
            RxPacket::Slice { start, end, .. } => {
                let mut buf = self.spare();
                if buf.len() < end {
                    buf.resize(end, 0);
                }
                buf[..end].copy_from_slice(&datagram[..end]);
                RxPacket::Own { buf, start, end }
            }
            own @ RxPacket::Own { .. } => own,
        }
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.spare()
    }

    fn adopt(&mut self, buf: Vec<u8>, packet: Range<usize>) -> RxPacket {
        if packet.start < self.prefix {
            let p = mpt_tunnel::Payloads::own(self, &buf[packet]);
            self.pool.push(buf);
            return p;
        }
        RxPacket::Own {
            buf,
            start: packet.start,
            end: packet.end,
        }
    }
}

/// A sealed datagram on its way: the path it was sent on and its sender's address.
#[derive(Debug, Clone)]
pub struct Datagram {
    pub path: PathId,
    pub from: SocketAddr,
    pub bytes: Vec<u8>,
}

/// A flow's packets, one after the other (TCP: sequence numbers, identifications and
/// timestamps advancing as a bulk sender's do; checksums right).
#[derive(Debug, Clone)]
pub struct Flow {
    inner: Inner,
    seq: u32,
    id: u16,
    sent: u32,
}

impl Flow {
    pub fn new(inner: Inner) -> Flow {
        Flow {
            inner,
            seq: 1_000_000,
            id: 1,
            sent: 0,
        }
    }

    /// The next packet.
    pub fn next_packet(&mut self) -> Vec<u8> {
        let p = match self.inner {
            Inner::Tcp(len) => tcp4(len, self.id, self.seq, 1_000 + self.sent / 16),
            Inner::Udp(len) => udp4(len, self.id),
        };
        self.id = self.id.wrapping_add(1);
        self.seq = self.seq.wrapping_add(p.len() as u32 - 52);
        self.sent += 1;
        p
    }
}

fn ipv4_header(p: &mut [u8], protocol: u8, id: u16) {
    let len = p.len() as u16;
    p[..20].copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, protocol, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2,
    ]);
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    let sum = internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// The partial sum of the IPv4 pseudo-header of `p`, for its TCP or UDP checksum.
fn pseudo_header(p: &[u8]) -> u32 {
    let words = [
        u16::from_be_bytes([p[12], p[13]]),
        u16::from_be_bytes([p[14], p[15]]),
        u16::from_be_bytes([p[16], p[17]]),
        u16::from_be_bytes([p[18], p[19]]),
        u16::from(p[9]),
        (p.len() - 20) as u16,
    ];
    words.iter().map(|&w| u32::from(w)).sum()
}

/// An IPv4 TCP segment (ACK and PSH, timestamps) of `len` bytes from port 40000 to 5201.
pub fn tcp4(len: usize, id: u16, seq: u32, tsval: u32) -> Vec<u8> {
    assert!(
        len >= 52,
        "a TCP segment with timestamps has 52 bytes of headers"
    );
    let mut p: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    ipv4_header(&mut p, 6, id);
    let t = &mut p[20..52];
    t.fill(0);
    t[..4].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&77u32.to_be_bytes());
    t[12] = 0x80;
    t[13] = 0x18;
    t[14..16].copy_from_slice(&501u16.to_be_bytes());
    t[20..24].copy_from_slice(&[1, 1, 8, 10]);
    t[24..28].copy_from_slice(&tsval.to_be_bytes());
    t[28..32].copy_from_slice(&4321u32.to_be_bytes());
    let sum = internet_checksum(pseudo_header(&p), &[&p[20..]]);
    p[36..38].copy_from_slice(&sum.to_be_bytes());
    p
}

/// An IPv4 UDP datagram of `len` bytes from port 40000 to 5201.
pub fn udp4(len: usize, id: u16) -> Vec<u8> {
    assert!(len >= 28, "IPv4 and UDP headers take 28 bytes");
    let mut p: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    ipv4_header(&mut p, 17, id);
    let u = &mut p[20..28];
    u.copy_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0, 0, 0, 0]);
    u[4..6].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    let sum = internet_checksum(pseudo_header(&p), &[&p[20..]]);
    p[26..28].copy_from_slice(&sum.to_be_bytes());
    p
}

fn new_connection(cfg: ConnectionConfig, seed: u64) -> Connection<RxPacket> {
    let mut rng = mpt_core::rng::Rng::new(seed);
    Connection::new(cfg, Time::ZERO, Box::new(move |b: &mut [u8]| rng.fill(b)))
}

/// Two connections joined by [`PATHS`] lossless links of [`DELAY`] one way, on a virtual
/// clock: A sends the flow, B receives it (and both send their control messages).
struct Pair {
    now: Time,
    ends: [Connection<RxPacket>; 2],
    /// Buffers for received packets, per end.
    pools: [Vec<Vec<u8>>; 2],
    /// By arrival time (and order sent): to which end, and what.
    flights: BTreeMap<(Time, u64), (Side, Datagram)>,
    sent: u64,
}

impl Pair {
    fn new(case: &Case) -> Pair {
        let mut pair = Pair {
            now: Time::ZERO,
            ends: [
                new_connection(config(Side::A, case), 1),
                new_connection(config(Side::B, case), 2),
            ],
            pools: [Vec::new(), Vec::new()],
            flights: BTreeMap::new(),
            sent: 0,
        };
        pair.drive(Side::A);
        pair.drive(Side::B);
        pair
    }

    fn end(&mut self, side: Side) -> &mut Connection<RxPacket> {
        &mut self.ends[side as usize]
    }

    fn put(&mut self, from: Side, path: PathId, bytes: Vec<u8>) {
        let to = match from {
            Side::A => Side::B,
            Side::B => Side::A,
        };
        self.sent += 1;
        let d = Datagram {
            path,
            from: address(from, path.index()),
            bytes,
        };
        self.flights.insert((self.now + DELAY, self.sent), (to, d));
    }

    /// What `side` has to give now: control datagrams onto the links; events and delivered
    /// packets dropped.
    fn drive(&mut self, side: Side) {
        let now = self.now;
        while let Some(t) = self.end(side).poll_datagram(now) {
            self.put(side, t.path, t.contents);
        }
        while self.end(side).poll_event().is_some() {}
        let i = side as usize;
        let mut out = Vec::new();
        let mut payloads = RxPayloads {
            pool: &mut self.pools[i],
            cap: 2048,
            prefix: self.ends[i].prefix(),
            datagram: usize::MAX,
        };
        self.ends[i].take_delivered(&mut payloads, &mut out);
    }

    fn receive(&mut self, to: Side, mut d: Datagram) {
        let i = to as usize;
        let now = self.now;
        let mut out = Vec::new();
        let mut payloads = RxPayloads {
            pool: &mut self.pools[i],
            cap: 2048,
            prefix: self.ends[i].prefix(),
            datagram: usize::MAX,
        };
        let opened = self.ends[i].opener().and_then(|o| o.open(&mut d.bytes));
        // (an initiation's copy on the second path is dropped as stale, as it should be)
        self.ends[i].handle_datagram(
            now,
            mpt_tunnel::Via {
                path: d.path,
                from: d.from,
            },
            &mut d.bytes,
            opened,
            &mut payloads,
            &mut out,
        );
    }

    /// Run arrivals and timers until `until`.
    fn run_until(&mut self, until: Time) {
        loop {
            let arrival = self.flights.keys().next().map(|k| k.0);
            let timer = self.ends[0].poll_timeout().min(self.ends[1].poll_timeout());
            let next = arrival.map_or(timer, |a| a.min(timer));
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if arrival == Some(next) {
                let Some((_, (to, d))) = self.flights.pop_first() else {
                    break;
                };
                self.receive(to, d);
                self.drive(to);
            } else {
                for side in [Side::A, Side::B] {
                    let now = self.now;
                    if self.end(side).poll_timeout() <= now {
                        self.end(side).handle_timeout(now);
                        self.drive(side);
                    }
                }
            }
        }
        self.now = until;
    }

    /// A numbers, seals and sends `packets` as one batch, as mptd's tx task does; returns
    /// the datagrams in the order they leave (and puts them on the links when `send`).
    fn send_batch(&mut self, packets: &[Vec<u8>], send: bool) -> Vec<Datagram> {
        let mut batch = TxBatch::new(self.end(Side::A), packets);
        let now = self.now;
        let a = &mut self.ends[0];
        let sealer = a
            .number_batch(
                now,
                &mut batch.sizes,
                &mut batch.bufs,
                &mut batch.plan,
                &mut batch.out,
            )
            .expect("keys agreed");
        assert!(batch.out.held.is_empty(), "pacing held packets");
        let mut datagrams = Vec::new();
        let from = |path: PathId| address(Side::A, path.index());
        for t in batch.out.before.drain(..) {
            datagrams.push(Datagram {
                path: t.path,
                from: from(t.path),
                bytes: t.contents,
            });
        }
        for (k, mut buf) in batch.bufs.into_iter().enumerate() {
            let Some(path) = batch.plan[k] else { continue };
            let len = sealer.seal(k, &mut buf, batch.sizes[k]).expect("sealed");
            buf.truncate(len);
            datagrams.push(Datagram {
                path,
                from: from(path),
                bytes: buf,
            });
        }
        for t in batch.out.after.drain(..) {
            datagrams.push(Datagram {
                path: t.path,
                from: from(t.path),
                bytes: t.contents,
            });
        }
        a.batch_sent(sealer.used());
        if send {
            for d in &datagrams {
                self.put(Side::A, d.path, d.bytes.clone());
            }
        }
        self.drive(Side::A);
        datagrams
    }
}

/// How long the links take to carry `packets` at 80 % of the paths' sum.
fn batch_gap(packets: &[Vec<u8>]) -> Duration {
    let per = Overhead::new(true, false).datagram() + Overhead::new(true, false).outer_link();
    let bits: u64 = packets.iter().map(|p| (p.len() + per) as u64 * 8).sum();
    let rate = PATH_RATE * PATHS as u64 * 8 / 10;
    Duration::from_nanos(bits * 1_000_000_000 / rate)
}

/// A pair after the handshake, path MTU discovery and [`WARM_BATCHES`] batches of the flow,
/// everything delivered; and the flow.
fn warmed(case: &Case) -> (Pair, Flow) {
    let mut pair = Pair::new(case);
    pair.run_until(Time::from_secs(3));
    for side in [Side::A, Side::B] {
        let c = pair.end(side);
        assert!(c.keys_agreed(), "no session after the handshake");
        for p in 0..PATHS {
            let info = c.path_info(PathId(p as u8));
            assert_eq!(info.state, LinkState::Up, "path {p} is not up");
            assert!(info.pmtu_found, "path {p} has not found its MTU");
        }
    }
    let mut flow = Flow::new(case.inner);
    for _ in 0..WARM_BATCHES {
        let packets: Vec<Vec<u8>> = (0..BATCH).map(|_| flow.next_packet()).collect();
        if case.arrival == Arrival::BySocket {
            // read path by path as the measured batch is: the resequencer has held packets
            // before it (its ring, allocated when a packet first waits, is there, as in a
            // tunnel under way)
            let mut datagrams = pair.send_batch(&packets, false);
            datagrams.sort_by_key(|d| d.path);
            for d in datagrams {
                pair.put(Side::A, d.path, d.bytes);
            }
        } else {
            pair.send_batch(&packets, true);
        }
        let next = pair.now + batch_gap(&packets);
        pair.run_until(next);
    }
    // everything in flight arrives
    let next = pair.now + DELAY * 2;
    pair.run_until(next);
    (pair, flow)
}

/// A batch as mptd's tx task holds it (`TxBatch`): one buffer per packet, the inner packet
/// after room for the header and counter, room for the tag after it.
#[derive(Debug)]
pub struct TxBatch {
    pub bufs: Vec<Vec<u8>>,
    pub sizes: Vec<usize>,
    pub plan: Vec<Option<PathId>>,
    pub out: BatchOut,
    /// The sealed datagrams' lengths (0: none).
    pub lens: Vec<usize>,
    pub remotes: Vec<Option<SocketAddr>>,
}

impl TxBatch {
    fn new(c: &Connection<RxPacket>, packets: &[Vec<u8>]) -> TxBatch {
        let prefix = c.prefix();
        let buf_len = prefix + usize::from(MTU) + TAG_LEN;
        TxBatch {
            bufs: packets
                .iter()
                .map(|p| {
                    let mut b = vec![0u8; buf_len];
                    b[prefix..prefix + p.len()].copy_from_slice(p);
                    b
                })
                .collect(),
            sizes: packets.iter().map(Vec::len).collect(),
            plan: vec![None; packets.len()],
            out: BatchOut::default(),
            lens: vec![0; packets.len()],
            remotes: Vec::with_capacity(mpt_core::MAX_PATHS),
        }
    }
}

/// The sender's state before the measured batch, and the batch.
#[derive(Debug)]
pub struct Sender {
    pub now: Time,
    pub conn: Connection<RxPacket>,
    pub batch: TxBatch,
    /// The batch's inner packets as read.
    pub packets: Vec<Vec<u8>>,
    /// What the receiver made of it (kept only to be dropped outside the measured region).
    pub peer: Connection<RxPacket>,
}

/// The setup of the send benchmark: a warmed pair's sender and the next batch of its flow.
pub fn sender(case: Case) -> Sender {
    let (mut pair, mut flow) = warmed(&case);
    let packets: Vec<Vec<u8>> = (0..BATCH).map(|_| flow.next_packet()).collect();
    let batch = TxBatch::new(pair.end(Side::A), &packets);
    let [conn, peer] = pair.ends;
    Sender {
        now: pair.now,
        conn,
        batch,
        packets,
        peer,
    }
}

/// What mptd's tx task does with a batch read from the TUN device, for one peer
/// (`send_for_peer`, without its sockets): the connection's state for its TCP segment cutting,
/// numbering (classify, schedule, compress, header), sealing each datagram in place, and
/// the batch counted as sent.
pub fn send(s: &mut Sender) {
    let c = &mut s.conn;
    let b = &mut s.batch;
    let now = s.now;
    std::hint::black_box((
        c.largest_whole_packet(),
        c.compressed_headers(),
        c.settled_whole_packet(),
    ));
    let sealer = c.number_batch(now, &mut b.sizes, &mut b.bufs, &mut b.plan, &mut b.out);
    if c.compressed_headers().is_some() {
        let mut ready = [0; mpt_core::hc::CONTEXTS];
        c.compress_ready(&mut ready);
        std::hint::black_box(&ready);
    }
    b.remotes.clear();
    b.remotes
        .extend((0..c.path_count()).map(|p| c.remote(PathId(p as u8))));
    std::hint::black_box(c.poll_timeout());
    let Some(sealer) = sealer else { return };
    for k in 0..b.sizes.len() {
        let Some(path) = b.plan[k] else { continue };
        if b.remotes[path.index()].is_none() {
            continue;
        }
        b.lens[k] = sealer.seal(k, &mut b.bufs[k], b.sizes[k]).expect("room");
    }
    c.batch_sent(sealer.used());
}

/// Checks of a measured send: every packet went whole in a datagram of its own, and with
/// compression on, a bulk TCP flow's packets went compressed. Returns the datagrams'
/// lengths.
pub fn check_sent(s: &Sender, compress: bool) -> Vec<usize> {
    let b = &s.batch;
    assert!(b.out.held.is_empty(), "pacing held packets");
    assert!(
        b.out.before.is_empty() && b.out.after.is_empty(),
        "bundles or copies: {} before, {} after",
        b.out.before.len(),
        b.out.after.len()
    );
    assert!(b.plan.iter().all(Option::is_some), "a packet not sent");
    let overhead = Overhead::new(true, false).datagram();
    let bodies: Vec<usize> = b.lens.iter().map(|l| l - overhead).collect();
    let tcp_bulk = s.packets[0][9] == 6 && s.packets[0].len() >= mpt_core::hc::COMPRESS_FROM;
    let shorter = bodies
        .iter()
        .zip(&s.packets)
        .filter(|(b, p)| **b < p.len())
        .count();
    if compress && tcp_bulk {
        assert!(
            shorter >= BATCH - 2,
            "only {shorter} packets went compressed"
        );
    } else {
        assert_eq!(shorter, 0, "packets went compressed");
    }
    b.lens.clone()
}

/// The bodies (what is sealed: after the header and counter, before the tag) of the datagrams
/// the measured batch of `case` makes, in order.
pub fn sealed_bodies(case: Case) -> Vec<usize> {
    let mut s = sender(case);
    send(&mut s);
    let overhead = Overhead::new(true, false).datagram();
    check_sent(&s, case.compress)
        .iter()
        .map(|l| l - overhead)
        .collect()
}

/// The receiver's state before the measured batch arrives, and the batch.
#[derive(Debug)]
pub struct Receiver {
    pub now: Time,
    pub conn: Connection<RxPacket>,
    /// The batch's datagrams, in the order they are read.
    pub datagrams: Vec<Datagram>,
    pub opened: Vec<Option<Opened>>,
    pub outcomes: Vec<Outcome>,
    pub pool: Vec<Vec<u8>>,
    pub cap: usize,
    /// Packets delivered, in the order they go to the TUN device.
    pub delivered: Vec<RxPacket>,
    /// Control datagrams and events the batch gave.
    pub control: Vec<Transmit>,
    /// Where the control datagrams are written (each over the last).
    pub control_buf: Vec<u8>,
    pub events: Vec<Event>,
    /// The batch's inner packets as sent.
    pub packets: Vec<Vec<u8>>,
    /// The sender (kept only to be dropped outside the measured region).
    pub peer: Connection<RxPacket>,
}

/// The setup of the receive benchmark: a warmed pair's receiver when the next batch of the
/// flow arrives, and that batch's datagrams.
pub fn receiver(case: Case) -> Receiver {
    let (mut pair, mut flow) = warmed(&case);
    let packets: Vec<Vec<u8>> = (0..BATCH).map(|_| flow.next_packet()).collect();
    let mut datagrams = pair.send_batch(&packets, false);
    if case.arrival == Arrival::BySocket {
        datagrams.sort_by_key(|d| d.path);
    }
    // they arrive together, after what was sent before them
    let arrive = pair.now + DELAY;
    pair.run_until(arrive);
    let cap = pair.ends[1].max_datagram() + 1;
    let n = datagrams.len();
    let [peer, conn] = pair.ends;
    Receiver {
        now: arrive,
        conn,
        datagrams,
        opened: Vec::with_capacity(n),
        outcomes: Vec::with_capacity(n),
        // mptd's pool: a reorder window's buffers (here the batch's)
        pool: (0..BATCH + 8).map(|_| vec![0u8; cap]).collect(),
        cap,
        delivered: Vec::with_capacity(BATCH + 8),
        control: Vec::new(),
        control_buf: Vec::new(),
        events: Vec::new(),
        packets,
        peer,
    }
}

/// What mptd's receive task does with a batch of datagrams from a socket, for one peer
/// (`receive_batch`, without its sockets): find the peer of each, open them all (outside the
/// lock, with the session's [`mpt_tunnel::Opener`]), hand each to the connection (replay
/// check, resequencing, rebuilding compressed headers, delivery), timers if due, and what the
/// connection has to send and say ([`Connection::poll_transmit`], events).
pub fn receive(r: &mut Receiver) {
    let now = r.now;
    let c = &mut r.conn;
    let opener = c.opener();
    for d in &mut r.datagrams {
        let routed = Endpoint::route(&d.bytes, 1);
        std::hint::black_box(&routed);
        r.opened
            .push(opener.as_ref().and_then(|o| o.open(&mut d.bytes)));
    }
    let prefix = c.prefix();
    for (k, d) in r.datagrams.iter_mut().enumerate() {
        let mut payloads = RxPayloads {
            pool: &mut r.pool,
            cap: r.cap,
            prefix,
            datagram: k,
        };
        let opened = r.opened[k].take();
        let outcome = c.handle_datagram(
            now,
            mpt_tunnel::Via {
                path: d.path,
                from: d.from,
            },
            &mut d.bytes,
            opened,
            &mut payloads,
            &mut r.delivered,
        );
        r.outcomes.push(outcome);
    }
    if c.poll_timeout() <= now {
        c.handle_timeout(now);
    }
    let mut payloads = RxPayloads {
        pool: &mut r.pool,
        cap: r.cap,
        prefix,
        datagram: usize::MAX,
    };
    c.take_delivered(&mut payloads, &mut r.delivered);
    while let Some(t) = c.poll_transmit(now, &mut r.control_buf) {
        r.control.push(t);
    }
    while let Some(e) = c.poll_event() {
        r.events.push(e);
    }
    std::hint::black_box(c.lagging_path());
}

/// Checks of a measured receive: every datagram taken as data, and the batch's packets
/// delivered in order, exactly as sent.
pub fn check_received(r: &Receiver) {
    for o in &r.outcomes {
        assert!(matches!(o, Outcome::Data(1)), "a datagram was {o:?}");
    }
    assert_eq!(r.delivered.len(), r.packets.len(), "packets delivered");
    for (k, (got, sent)) in r.delivered.iter().zip(&r.packets).enumerate() {
        assert!(
            got.bytes(&r.datagrams) == sent.as_slice(),
            "packet {k} delivered is not the one sent"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for cipher in [Cipher::ChaCha20Poly1305, Cipher::Aes256Gcm] {
            for inner in [Inner::Tcp(1400), Inner::Tcp(100), Inner::Udp(1400)] {
                v.push(Case::new(cipher, inner));
                v.push(Case::new(cipher, inner).uncompressed());
            }
        }
        v.push(Case::new(Cipher::ChaCha20Poly1305, Inner::Tcp(1400)).by_socket());
        v
    }

    /// The benchmarks' inputs are what they say, and what they measure does the whole job:
    /// `cargo test -p mpt-benches --lib packet_cost -- --nocapture` prints the datagrams'
    /// sizes.
    #[test]
    fn batches_go_through() {
        for case in cases() {
            let mut s = sender(case);
            send(&mut s);
            let lens = check_sent(&s, case.compress);
            let mut r = receiver(case);
            receive(&mut r);
            check_received(&r);
            let mut sizes = lens.clone();
            sizes.sort_unstable();
            sizes.dedup();
            eprintln!(
                "{case:?}: datagrams {} of {sizes:?} bytes, {} held at the receiver, \
                 {} control sent back",
                lens.len(),
                r.delivered
                    .iter()
                    .filter(|p| matches!(p, RxPacket::Own { .. }))
                    .count(),
                r.control.len()
            );
        }
    }
}
