//! An in-memory pair of connections joined by simulated links (rate, delay, jitter, loss, up or
//! down, satellite handovers: `handover.rs`), on a virtual clock: seeded and replayable. `MPT_SIM_SEED=N` replays a seed; every
//! test prints the seed it ran with.

mod handover;
pub mod helpers;
mod paced;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::seal::{Cipher, CipherChoice, PrivateKey};
use mpt_core::{PathId, Time};
use mpt_sched::SchedulerKind;
use mpt_tunnel::{
    Connection, ConnectionConfig, Event, KeySettings, Outcome, Overhead, PathSettings, Via,
};

pub use mpt_core::rng::Rng;

/// The seed of this run: `MPT_SIM_SEED`, or `default`.
pub fn seed(default: u64) -> u64 {
    let s = std::env::var("MPT_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    eprintln!("simulator seed {s} (replay with MPT_SIM_SEED={s})");
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    A,
    B,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One direction of one path.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Serialisation rate (with framing and the outer IPv4/UDP headers); `None`:
    /// infinite.
    pub rate_bps: Option<u64>,
    pub delay: Duration,
    /// Each datagram gets up to this much more delay (uniform): reordering, unless `in_order`.
    pub jitter: Duration,
    /// The link keeps its datagrams in order, as a real link does: one arrives no sooner than
    /// the one sent before it (jitter then delays what follows a late one, as the lab's
    /// emulator does).
    pub in_order: bool,
    /// Probability that a datagram is lost.
    pub loss: f64,
    pub up: bool,
    /// Largest datagram (UDP payload) the link carries; larger ones vanish (a black hole:
    /// no ICMP). `None`: any.
    pub mtu: Option<usize>,
    /// The `mtu` is the sender's own interface's: the kernel refuses a larger datagram at
    /// once (EMSGSIZE, handed to the connection as the daemon does) instead of losing it.
    pub mtu_local: bool,
    /// Most backlog the link queues before it drops (tail drop), as a serial line's buffer;
    /// `None`: no limit.
    pub queue: Option<Duration>,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            rate_bps: None,
            delay: Duration::from_millis(10),
            jitter: Duration::ZERO,
            in_order: false,
            loss: 0.0,
            up: true,
            mtu: None,
            mtu_local: false,
            queue: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Link {
    spec: LinkSpec,
    busy_until: Time,
    /// Lose this many of the next datagrams (targeted loss), after passing `pass_first`.
    drop_next: usize,
    pass_first: usize,
    /// Datagrams lost for being larger than the link's MTU.
    too_big: u64,
    /// Datagrams lost to a full queue.
    overflowed: u64,
    /// Time the link spent serialising datagrams.
    busy: Duration,
    /// The link's handovers, when it has them (`handover.rs`): its delay then, not `spec`'s.
    handovers: Option<mpt_core::handover::Handovers>,
    /// Datagrams lost for leaving while the link was dark.
    dark: u64,
    /// When the latest datagram on the link arrives.
    last_arrival: Time,
}

impl Link {
    fn new() -> Link {
        Link {
            spec: LinkSpec::default(),
            busy_until: Time::ZERO,
            drop_next: 0,
            pass_first: 0,
            too_big: 0,
            overflowed: 0,
            busy: Duration::ZERO,
            handovers: None,
            dark: 0,
            last_arrival: Time::ZERO,
        }
    }
}

/// A datagram on its way.
#[derive(Debug, Clone)]
struct Flight {
    to: Side,
    path: usize,
    from: SocketAddr,
    dest: SocketAddr,
    bytes: Vec<u8>,
}

/// One end: its connection and what came out of it.
pub struct Node {
    pub ep: Connection<Vec<u8>>,
    /// Inner packets delivered, with when.
    pub delivered: Vec<(Time, Vec<u8>)>,
    pub events: Vec<(Time, Event)>,
    /// Control datagrams sent, per path.
    pub control_sent: Vec<u64>,
    /// Every datagram this end sent, as it left (for replays).
    pub sent_log: Vec<(usize, Vec<u8>)>,
    /// ICMP answers the connection gave for its TUN device, not yet taken ([`Pair::take_icmp`]).
    pub icmp: std::collections::VecDeque<Vec<u8>>,
    /// Packets pacing held, with when the application sent them, and when to offer them
    /// again (`paced.rs`).
    pub paced: std::collections::VecDeque<(Time, Vec<u8>)>,
    pub wake: Option<Time>,
}

pub struct Pair {
    pub now: Time,
    pub rng: Rng,
    pub nodes: [Node; 2],
    /// links[side][path]: the direction from `side`.
    links: [Vec<Link>; 2],
    /// By arrival time (and a sequence for ties: arrival order).
    flights: BTreeMap<(Time, u64), Flight>,
    order: u64,
    /// Per path: the address A's datagrams appear to come from at B (a NAT), when set.
    pub nat: Vec<Option<SocketAddr>>,
    /// Datagrams the network could not deliver (sent to an address nobody has).
    pub undeliverable: u64,
    /// Receive as a locking driver does: open with an [`mpt_tunnel::Opener`] first, then
    /// hand the result in ([`Connection::handle_datagram`]).
    pub split_open: bool,
}

fn addr(side: Side, path: usize) -> SocketAddr {
    let host = match side {
        Side::A => 1,
        Side::B => 2,
    };
    SocketAddr::from(([198, 18, path as u8, host], 4000 + path as u16))
}

/// `side`'s private key.
pub fn private_key(side: Side) -> PrivateKey {
    PrivateKey::from_bytes([side as u8 + 1; 32])
}

/// Connection settings for `paths` paths toward `side`'s peer. A initiates, as a site does; B
/// answers, as a server does (its remotes are configured all the same, as in the two-host
/// lab).
pub fn config(side: Side, paths: usize, sealing: bool) -> ConnectionConfig {
    ConnectionConfig {
        paths: (0..paths)
            .map(|i| PathSettings {
                name: format!("p{i}"),
                remote: Some(addr(side.other(), i)),
                weight: 1,
                rate_bps: None,
                backup: false,
                priority: 1,
                overhead: Overhead::new(sealing, false).outer_link(),
                mtu: None,
            })
            .collect(),
        scheduler: SchedulerKind::RoundRobin,
        reorder_window: 64,
        reorder_timeout: Duration::from_millis(100),
        keepalive: Duration::from_millis(100),
        dead: Duration::from_millis(500),
        // the rules' tests watch paths at the active pace; `idle.rs` sets it
        idle_keepalive: None,
        mtu: 1400,
        keys: KeySettings {
            private: private_key(side),
            peer: private_key(side.other()).public(),
            psk: None,
            encryption: sealing.then_some(CipherChoice::Only(Cipher::ChaCha20Poly1305)),
            aes_in_hardware: false,
            initiate: side == Side::A,
            unix_nanos_at_zero: 1_800_000_000_000_000_000,
            rekey_after: mpt_tunnel::REKEY_AFTER,
        },
        index_slot: None,
        follow_peer_paths: false,
        bundle: true,
        resend: true,
        parity: true,
        equalise: true,
        compress: true,
        pace: false,
        classes: mpt_tunnel::default_classes(),
    }
}

/// A minimal IPv4 packet of `len` bytes carrying `n`.
pub fn packet(n: u32, len: usize) -> Vec<u8> {
    mpt_tunnel::fuzz::hostile::packet(n, len)
}

/// A [`packet`] that says it is TCP (IP protocol 6, a 20-byte TCP header with no flags, whose
/// checksum is not right: it never compresses), `len` bytes (at least 40).
pub fn tcp_packet(n: u32, len: usize) -> Vec<u8> {
    let mut p = packet(n, len.max(40));
    p[9] = 6;
    p[32] = 0x50;
    p
}

/// Inner packets as mptd's driver holds them: one that arrived whole in a data datagram stays
/// there (here: a marker of where it lies) until the connection keeps it
/// ([`mpt_tunnel::Payloads::keep`]), so that a packet delivered after the datagram it lay in is
/// caught, as it would be a packet of stale bytes in mptd. It holds the number of the datagram
/// being handled (`None` between datagrams).
struct InDatagram(Option<u32>);

/// First byte of a marker: no IP version.
const MARKER: u8 = 0xee;

/// Datagrams handed to connections so far (each one's number, for its markers).
static DATAGRAMS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl InDatagram {
    /// For the next datagram handled.
    fn next() -> InDatagram {
        InDatagram(Some(
            DATAGRAMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        ))
    }

    /// The packet `p` stands for: its own bytes, or those it marks in `datagram`, the one being
    /// handled. Panics if it lies in another datagram.
    fn resolve(&self, p: Vec<u8>, datagram: Option<&[u8]>) -> Vec<u8> {
        if p.first() != Some(&MARKER) {
            return p;
        }
        let at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let datagram = datagram
            .filter(|_| self.0 == Some(at(1)))
            .expect("a packet delivered after the datagram it lay in");
        datagram[at(5) as usize..at(9) as usize].to_vec()
    }
}

impl mpt_tunnel::Payloads<Vec<u8>> for InDatagram {
    fn in_datagram(&mut self, _: &[u8], packet: std::ops::Range<usize>) -> Vec<u8> {
        let mut m = vec![MARKER];
        m.extend_from_slice(&self.0.unwrap_or(u32::MAX).to_be_bytes());
        m.extend_from_slice(&(packet.start as u32).to_be_bytes());
        m.extend_from_slice(&(packet.end as u32).to_be_bytes());
        m
    }

    fn own(&mut self, packet: &[u8]) -> Vec<u8> {
        packet.to_vec()
    }

    fn keep(&mut self, p: Vec<u8>, datagram: &[u8]) -> Vec<u8> {
        self.resolve(p, Some(datagram))
    }
}

/// The number a [`packet`] carries.
pub fn number(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[20], p[21], p[22], p[23]])
}

impl Pair {
    /// Two connections with `paths` paths of default links; sealed or plain.
    pub fn new(seed: u64, paths: usize, sealing: bool) -> Pair {
        Pair::with(
            seed,
            config(Side::A, paths, sealing),
            config(Side::B, paths, sealing),
        )
    }

    pub fn with(seed: u64, a: ConnectionConfig, b: ConnectionConfig) -> Pair {
        let mut rng = Rng::new(seed);
        let paths = a.paths.len();
        let node = |cfg: ConnectionConfig, rng: &mut Rng| Node {
            ep: new_connection(cfg, Time::ZERO, rng.next_u64()),
            delivered: Vec::new(),
            events: Vec::new(),
            control_sent: vec![0; paths],
            sent_log: Vec::new(),
            icmp: Default::default(),
            paced: Default::default(),
            wake: None,
        };
        let nodes = [node(a, &mut rng), node(b, &mut rng)];
        let link = Link::new;
        let mut pair = Pair {
            now: Time::ZERO,
            rng,
            nodes,
            links: [
                (0..paths).map(|_| link()).collect(),
                (0..paths).map(|_| link()).collect(),
            ],
            flights: BTreeMap::new(),
            order: 0,
            nat: vec![None; paths],
            undeliverable: 0,
            split_open: false,
        };
        pair.drive(Side::A);
        pair.drive(Side::B);
        pair
    }

    /// A sealed pair on `adaptive` at both ends over links shaped alike both ways, one per
    /// `(one-way delay, jitter, rate in Mbit/s, loss)`, each with 50 ms of queue.
    pub fn shaped_adaptive(seed: u64, links: &[(Duration, Duration, u64, f64)]) -> Pair {
        Pair::shaped_adaptive_with(seed, links, |_| {})
    }

    /// As [`Pair::shaped_adaptive`], with both ends' settings changed by `change`.
    pub fn shaped_adaptive_with(
        seed: u64,
        links: &[(Duration, Duration, u64, f64)],
        change: impl Fn(&mut ConnectionConfig),
    ) -> Pair {
        let mut a = config(Side::A, links.len(), true);
        let mut b = config(Side::B, links.len(), true);
        a.scheduler = SchedulerKind::Adaptive;
        b.scheduler = SchedulerKind::Adaptive;
        change(&mut a);
        change(&mut b);
        let mut p = Pair::with(seed, a, b);
        for side in [Side::A, Side::B] {
            for (path, &(delay, jitter, mbit, loss)) in links.iter().enumerate() {
                let l = p.link(side, path);
                l.delay = delay;
                l.jitter = jitter;
                l.rate_bps = Some(mbit * 1_000_000);
                l.queue = Some(Duration::from_millis(50));
                l.loss = loss;
            }
        }
        p
    }

    /// Links for `n` paths in all, so that connections reconfigured with more paths have them.
    pub fn add_links(&mut self, n: usize) {
        for side in [Side::A, Side::B] {
            let links = &mut self.links[side.index()];
            while links.len() < n {
                links.push(Link::new());
            }
            let sent = &mut self.nodes[side.index()].control_sent;
            sent.resize(sent.len().max(n), 0);
        }
        self.nat.resize(self.nat.len().max(n), None);
    }

    pub fn node(&self, side: Side) -> &Node {
        &self.nodes[side.index()]
    }

    #[allow(dead_code)] // (not every test binary uses it)
    pub fn node_mut(&mut self, side: Side) -> &mut Node {
        &mut self.nodes[side.index()]
    }

    pub fn ep(&mut self, side: Side) -> &mut Connection<Vec<u8>> {
        &mut self.nodes[side.index()].ep
    }

    /// The link of `path` in the direction from `side`.
    pub fn link(&mut self, side: Side, path: usize) -> &mut LinkSpec {
        &mut self.links[side.index()][path].spec
    }

    /// Both directions of `path` up or down.
    pub fn set_up(&mut self, path: usize, up: bool) {
        self.link(Side::A, path).up = up;
        self.link(Side::B, path).up = up;
    }

    /// Datagrams `side`'s link `path` lost to a full queue.
    pub fn overflowed(&self, side: Side, path: usize) -> u64 {
        self.links[side.index()][path].overflowed
    }

    /// Time `side`'s link `path` has spent serialising datagrams.
    pub fn link_busy(&self, side: Side, path: usize) -> Duration {
        self.links[side.index()][path].busy
    }

    /// Lose the next `n` datagrams `side` sends on `path`.
    pub fn drop_next(&mut self, side: Side, path: usize, n: usize) {
        self.drop_after(side, path, 0, n);
    }

    /// Pass the next `pass` datagrams `side` sends on `path`, then lose `n`.
    pub fn drop_after(&mut self, side: Side, path: usize, pass: usize, n: usize) {
        let link = &mut self.links[side.index()][path];
        link.pass_first = pass;
        link.drop_next = n;
    }

    /// `side` stops cleanly: its goodbyes go out now.
    pub fn close(&mut self, side: Side) {
        let now = self.now;
        self.nodes[side.index()].ep.close(now);
        self.drive(side);
    }

    /// Replace `side`'s connection by a new one (a restart).
    pub fn restart(&mut self, side: Side) {
        let cfg = self.nodes[side.index()].ep.config().clone();
        let seed = self.rng.next_u64();
        self.nodes[side.index()].ep = new_connection(cfg, self.now, seed);
        self.drive(side);
    }

    /// `side`'s application sends an inner packet into the tunnel now: the path it took, or
    /// `None` when it waits in a bundle.
    pub fn send(
        &mut self,
        side: Side,
        inner: &[u8],
    ) -> Result<Option<PathId>, mpt_tunnel::SendError> {
        let now = self.now;
        let node = &mut self.nodes[side.index()];
        let prefix = node.ep.prefix();
        let mut buf = vec![0u8; prefix + inner.len() + 16];
        buf[prefix..prefix + inner.len()].copy_from_slice(inner);
        let mut out = mpt_tunnel::BatchOut::default();
        let sent = node.ep.send_one(now, &mut buf, inner.len(), &mut out);
        node.icmp.extend(out.icmp.drain(..));
        // what leaves before the packet goes whether or not the packet does
        for b in out.before.drain(..) {
            self.put_on_link(side, b.path.index(), b.destination, b.contents);
        }
        let path = sent.map(|s| {
            s.map(|(path, dest, len)| {
                buf.truncate(len);
                self.put_on_link(side, path.index(), dest, buf);
                path
            })
        });
        // and what leaves after it, whether or not it went
        for c in out.after {
            self.put_on_link(side, c.path.index(), c.destination, c.contents);
        }
        let path = path?;
        self.drive(side);
        Ok(path)
    }

    /// `side`'s application sends `packets` at once, and the connection takes them as one batch,
    /// as the daemon's tx task does: numbered together; the bundles closed by the batch leave
    /// first, then the batch's datagrams in order, then what leaves after it (copies).
    pub fn send_batch(&mut self, side: Side, packets: &[Vec<u8>]) {
        self.number_and_send(side, packets);
    }

    /// [`Pair::send_batch`]: returns the packets pacing held (by index), and when to offer
    /// them again.
    fn number_and_send(&mut self, side: Side, packets: &[Vec<u8>]) -> (Vec<usize>, Option<Time>) {
        let now = self.now;
        let node = &mut self.nodes[side.index()];
        let prefix = node.ep.prefix();
        let mut sizes: Vec<usize> = packets.iter().map(Vec::len).collect();
        let mut bufs: Vec<Vec<u8>> = packets
            .iter()
            .map(|p| {
                let mut b = vec![0u8; prefix + p.len() + 16];
                b[prefix..prefix + p.len()].copy_from_slice(p);
                b
            })
            .collect();
        let mut plan = vec![None; packets.len()];
        let mut out = mpt_tunnel::BatchOut::default();
        let sealer = node
            .ep
            .number_batch(now, &mut sizes, &mut bufs, &mut plan, &mut out);
        node.icmp.extend(out.icmp.drain(..));
        let held = (std::mem::take(&mut out.held), out.paced_until);
        let Some(sealer) = sealer else {
            return held;
        };
        let (before, after) = (out.before, out.after);
        let remotes: Vec<_> = (0..node.ep.path_count())
            .map(|i| node.ep.remote(PathId(i as u8)))
            .collect();
        let mut batch = Vec::new();
        for (k, mut buf) in bufs.into_iter().enumerate() {
            let Some(path) = plan[k] else { continue };
            let len = sealer.seal(k, &mut buf, sizes[k]).expect("sealed");
            buf.truncate(len);
            let dest = remotes[path.index()].expect("remote");
            batch.push((path, dest, buf));
        }
        for t in before {
            self.put_on_link(side, t.path.index(), t.destination, t.contents);
        }
        for (path, dest, buf) in batch {
            self.put_on_link(side, path.index(), dest, buf);
        }
        for t in after {
            self.put_on_link(side, t.path.index(), t.destination, t.contents);
        }
        self.nodes[side.index()].ep.batch_sent(sealer.used());
        self.drive(side);
        held
    }

    /// The next ICMP answer `side`'s connection gave for its TUN device.
    pub fn take_icmp(&mut self, side: Side) -> Option<Vec<u8>> {
        self.nodes[side.index()].icmp.pop_front()
    }

    /// Inject a datagram as if it arrived now at `to` on `path` from `from`.
    pub fn inject(
        &mut self,
        to: Side,
        path: usize,
        from: SocketAddr,
        mut bytes: Vec<u8>,
    ) -> Outcome {
        let now = self.now;
        let out = self.receive(to, path, from, &mut bytes, now);
        self.drive(to);
        out
    }

    /// The address `side`'s datagrams on `path` appear to come from.
    pub fn source(&self, side: Side, path: usize) -> SocketAddr {
        match side {
            Side::A => self.nat[path].unwrap_or(addr(Side::A, path)),
            Side::B => addr(Side::B, path),
        }
    }

    fn put_on_link(&mut self, from: Side, path: usize, dest: SocketAddr, bytes: Vec<u8>) {
        self.nodes[from.index()]
            .sent_log
            .push((path, bytes.clone()));
        let now = self.now;
        let src = self.source(from, path);
        let link = &mut self.links[from.index()][path];
        if !link.spec.up {
            return;
        }
        if link.drop_next > 0 {
            if link.pass_first > 0 {
                link.pass_first -= 1;
            } else {
                link.drop_next -= 1;
                return;
            }
        }
        if link.spec.mtu.is_some_and(|m| bytes.len() > m) {
            link.too_big += 1;
            if link.spec.mtu_local {
                let len = bytes.len();
                self.nodes[from.index()]
                    .ep
                    .datagram_too_big(now, PathId(path as u8), len);
            }
            return;
        }
        if link.spec.loss > 0.0 && self.rng.unit() < link.spec.loss {
            return;
        }
        let ser = link.spec.rate_bps.map_or(Duration::ZERO, |r| {
            let bits = (bytes.len() + Overhead::new(false, false).outer_link()) as u64 * 8;
            Duration::from_nanos(bits * 1_000_000_000 / r)
        });
        let start = if link.busy_until > now {
            link.busy_until
        } else {
            now
        };
        if link
            .spec
            .queue
            .is_some_and(|q| start.saturating_since(now) > q)
        {
            link.overflowed += 1;
            return;
        }
        let depart = start + ser;
        link.busy_until = depart;
        link.busy += ser;
        let delay = match &mut link.handovers {
            Some(h) => h.at(depart.saturating_since(Time::ZERO)),
            None => Some(link.spec.delay),
        };
        let Some(delay) = delay else {
            link.dark += 1;
            return;
        };
        let jitter = link.spec.jitter.mul_f64(self.rng.unit());
        let mut at = depart + delay + jitter;
        if link.spec.in_order {
            at = at.max(link.last_arrival);
        }
        link.last_arrival = link.last_arrival.max(at);
        self.order += 1;
        self.flights.insert(
            (at, self.order),
            Flight {
                to: from.other(),
                path,
                from: src,
                dest,
                bytes,
            },
        );
    }

    fn receive(
        &mut self,
        to: Side,
        path: usize,
        from: SocketAddr,
        bytes: &mut [u8],
        now: Time,
    ) -> Outcome {
        let node = &mut self.nodes[to.index()];
        let id = PathId(path as u8);
        let opened = match self.split_open {
            true => node.ep.opener().and_then(|o| o.open(bytes)),
            false => None,
        };
        let mut delivered = Vec::new();
        let mut payloads = InDatagram::next();
        let out = node.ep.handle_datagram(
            now,
            Via { path: id, from },
            bytes,
            opened,
            &mut payloads,
            &mut delivered,
        );
        let delivered = delivered
            .into_iter()
            .map(|p| payloads.resolve(p, Some(bytes)));
        node.delivered.extend(delivered.map(|p| (now, p)));
        out
    }

    /// Collect what `side`'s connection has to give: control datagrams onto the links, events,
    /// delivered packets.
    fn drive(&mut self, side: Side) {
        let now = self.now;
        while let Some(t) = self.nodes[side.index()].ep.poll_datagram(now) {
            self.nodes[side.index()].control_sent[t.path.index()] += 1;
            self.put_on_link(side, t.path.index(), t.destination, t.contents);
        }
        let node = &mut self.nodes[side.index()];
        while let Some(e) = node.ep.poll_event() {
            node.events.push((now, e));
        }
        let mut out = Vec::new();
        let mut payloads = InDatagram(None);
        node.ep.take_delivered(&mut payloads, &mut out);
        let out = out.into_iter().map(|p| payloads.resolve(p, None));
        node.delivered.extend(out.map(|p| (now, p)));
    }

    /// Advance to the next thing that happens, if it is no later than `until`.
    fn step(&mut self, until: Time) -> bool {
        let arrival = self.flights.keys().next().map(|k| k.0);
        let timeouts = [Side::A, Side::B].map(|s| self.nodes[s.index()].ep.poll_timeout());
        let wakes = [Side::A, Side::B].map(|s| self.nodes[s.index()].wake);
        let next = [
            arrival,
            Some(timeouts[0]),
            Some(timeouts[1]),
            wakes[0],
            wakes[1],
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next.filter(|&t| t <= until) else {
            self.now = until;
            return false;
        };
        self.now = self.now.max(next);
        let now = self.now;
        if arrival == Some(next) {
            let Some((_, f)) = self.flights.pop_first() else {
                return true;
            };
            let to = f.to;
            // a datagram reaches the end that owns the address it was sent to
            let owner = match to {
                Side::A => self.nat[f.path].unwrap_or(addr(Side::A, f.path)),
                Side::B => addr(Side::B, f.path),
            };
            if f.dest != owner {
                self.undeliverable += 1;
                return true;
            }
            let mut bytes = f.bytes;
            self.receive(to, f.path, f.from, &mut bytes, now);
            self.drive(to);
        }
        for s in [Side::A, Side::B] {
            if timeouts[s.index()] <= now {
                self.nodes[s.index()].ep.handle_timeout(now);
                self.drive(s);
            }
            if wakes[s.index()].is_some_and(|w| w <= now) {
                self.offer_paced(s);
            }
        }
        true
    }

    /// Run for `d` with no application traffic.
    pub fn run(&mut self, d: Duration) {
        let until = self.now + d;
        while self.step(until) {}
    }

    /// Run for `d` while `side` sends a packet of `len` bytes every `every`, numbered from
    /// `first`; returns how many were sent.
    pub fn stream(
        &mut self,
        side: Side,
        d: Duration,
        every: Duration,
        len: usize,
        first: u32,
    ) -> u32 {
        self.stream_of(side, d, every, len, first, packet)
    }

    /// As [`Pair::stream`], with packets `make` makes.
    pub fn stream_of(
        &mut self,
        side: Side,
        d: Duration,
        every: Duration,
        len: usize,
        first: u32,
        make: fn(u32, usize) -> Vec<u8>,
    ) -> u32 {
        self.stream_each(d, every, |p, n| {
            let _ = p.send(side, &make(first + n, len));
        })
    }

    /// Run for `d`, calling `send` with the count so far every `every`; returns the count.
    fn stream_each(
        &mut self,
        d: Duration,
        every: Duration,
        mut send: impl FnMut(&mut Pair, u32),
    ) -> u32 {
        let until = self.now + d;
        let mut n = 0;
        while self.now < until {
            send(self, n);
            n += 1;
            let next = (self.now + every).min(until);
            while self.step(next) {}
        }
        n
    }

    /// Run until `cond` holds, for at most `limit`; returns the time it took, or `None`.
    pub fn run_until(
        &mut self,
        limit: Duration,
        mut cond: impl FnMut(&Pair) -> bool,
    ) -> Option<Duration> {
        let start = self.now;
        let until = start + limit;
        loop {
            if cond(self) {
                return Some(self.now - start);
            }
            if !self.step(until) {
                return cond(self).then(|| self.now - start);
            }
        }
    }

    /// Whether both ends are in one session (the handshake runs with and without sealing).
    pub fn agreed(&self) -> bool {
        let [a, b] = &self.nodes;
        a.ep.peer_session() == Some(b.ep.session()) && b.ep.peer_session() == Some(a.ep.session())
    }

    /// The numbers of the packets `side` delivered, in delivery order.
    pub fn delivered_numbers(&self, side: Side) -> Vec<u32> {
        self.node(side)
            .delivered
            .iter()
            .map(|(_, p)| number(p))
            .collect()
    }

    /// Events of `side` since `since`.
    pub fn events_since(&self, side: Side, since: Time) -> Vec<Event> {
        self.node(side)
            .events
            .iter()
            .filter(|(t, _)| *t >= since)
            .map(|(_, e)| e.clone())
            .collect()
    }
}

fn new_connection(cfg: ConnectionConfig, now: Time, seed: u64) -> Connection<Vec<u8>> {
    let mut rng = Rng::new(seed);
    Connection::new(cfg, now, Box::new(move |b: &mut [u8]| rng.fill(b)))
}

/// Length of the inner packets the tests send.
pub const LEN: usize = 200;
