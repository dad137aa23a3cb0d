//! The running daemon: its shared state and the tasks that move packets.
//!
//! * **tx**: TUN → scheduler → path socket. Owns nothing but a buffer; locks the send state
//!   briefly per packet to choose a path and number the packet.
//! * **rx**: all path sockets → parser → resequencer → TUN. Also runs path liveness and the
//!   resequencer's timer, so that every write to the TUN device happens in this one task and
//!   in order.
//! * **keepalive**: a keepalive on every path every `keepalive_ms`.
//! * **report**: a receiver report to the peer every second while data flows.
//! * **control**: the unix socket `mptctl` talks to.
//!
//! Locks are never held across an await; the order is always `rx` before `tx`.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use anyhow::{Context, Result};
use mpt_core::config::{Config, PathConfig};
use mpt_core::seal::{
    self, Cipher, CipherChoice, Handshake, HelloOutcome, Psk, ReplayWindow, SealError, SealKey,
    COUNTER_LEN, SEALED_HEADER_LEN, SEAL_OVERHEAD, TAG_LEN,
};
use mpt_core::wire::{
    self, AckRepr, Datagram, HeaderRepr, HelloRepr, Kind, Report, ReportEntry, HEADER_LEN,
};
use mpt_core::{bits, PathId, Time};
use mpt_reseq::feedback::ReportPacer;
use mpt_reseq::{PacketMeta, PathStats, Resequencer};
use mpt_sched::{PathSpec, Scheduler};
use tracing::{debug, info, warn};

use crate::batch::{BatchSocket, GsoRun};
use crate::clock::Clock;
use crate::status::{Drops, PathStatus, PeerReport, ReseqStatus, Status, TunnelStatus};

/// Link-layer framing counted per datagram (an Ethernet header, as `tbf` counts it): a
/// configured path rate is a link rate, and a 200-byte packet is 7 % more on the wire.
pub const FRAMING: usize = 14;

/// How often the report task asks the pacer whether a report is due.
const REPORT_TICK: Duration = Duration::from_millis(10);
/// Datagrams a path must deliver, over at least one keepalive interval, before a path that
/// was down is used again (hold-down against flapping).
const RECOVER_DATAGRAMS: u32 = 3;
/// Least time between two hellos sent in answer to requests on one path: a flood of replayed
/// requests costs the peer at most this many answers.
const HELLO_REPLY_GAP: Duration = Duration::from_millis(20);
/// On a path we send data on, keepalives are answered at most this often.
const BUSY_ACK_INTERVAL: Duration = Duration::from_secs(1);

/// The keys that do not change while the daemon runs (`encryption` other than `"none"`).
pub struct Crypto {
    psk: Psk,
    choice: CipherChoice,
    /// Our hellos offer AES-256-GCM (`auto`, and this CPU has AES in hardware).
    offer_aes: bool,
    /// Seals and opens hellos.
    hello_key: SealKey,
}

impl std::fmt::Debug for Crypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Crypto({}, offer AES {})", self.choice, self.offer_aes)
    }
}

/// `N` bytes from the kernel's random source. Without it nothing can be sealed safely.
fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the kernel's random source failed");
    b
}

/// Everything the tasks share.
pub struct Shared {
    pub cfg: Config,
    pub clock: Clock,
    /// `None` with `encryption = "none"`.
    crypto: Option<Crypto>,
    /// Where the prefix before an inner packet ends: [`HEADER_LEN`], or
    /// [`SEALED_HEADER_LEN`] when sealing.
    prefix: usize,
    /// Our session id, random per start.
    pub session: u32,
    pub paths: Vec<PathIo>,
    /// The TUN device's queues (one unless `tunnel.queues` says more): the tx task of each
    /// reads its own; the rx task writes to the first.
    pub tun: Vec<tun_rs::AsyncDevice>,
    tx: Mutex<TxState>,
    rx: Mutex<RxState>,
    pub drops: Drops,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    /// Bytes of receiver reports sent (outer headers included).
    report_bytes: AtomicU64,
    keepalives_sent: AtomicU64,
    keepalive_acks_sent: AtomicU64,
    /// Held by a tx task from numbering a batch until it has been sent (several TUN queues).
    send_turn: tokio::sync::Mutex<()>,
    /// System calls of the datapath, to show how well it batches.
    calls: Calls,
}

/// Datapath system calls (each may carry many packets).
#[derive(Debug, Default)]
struct Calls {
    tun_reads: AtomicU64,
    tun_write_batches: AtomicU64,
    udp_sends: AtomicU64,
    udp_recvs: AtomicU64,
}

/// One path's socket and send-side counters.
#[derive(Debug)]
pub struct PathIo {
    pub cfg: PathConfig,
    /// The path's socket, with GSO/GRO batching.
    pub io: BatchSocket,
    /// Bytes a datagram costs on the link beyond its UDP payload, for the scheduler's
    /// accounting: outer IP + UDP and [`FRAMING`].
    overhead: usize,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    /// Data datagrams sent (control messages not counted): a path that carried data since the
    /// last keepalive tick needs no keepalive.
    data_sent: AtomicU64,
    /// The kernel refused a GSO send on this path (EIO: the device cannot segment): runs go
    /// one datagram per call from then on.
    gso_refused: std::sync::atomic::AtomicBool,
    /// Smoothed RTT in microseconds; `u64::MAX` until measured.
    srtt_us: AtomicU64,
    /// `data_sent` and the time (µs) when we last answered a keepalive on this path: see
    /// [`PathIo::answer_keepalive`].
    acked_data: AtomicU64,
    acked_us: AtomicU64,
}

#[derive(Debug)]
struct TxState {
    sched: Box<dyn Scheduler>,
    /// Next global sequence number.
    seq: u32,
    /// Next sequence number per path.
    path_seq: Vec<u16>,
    /// Per path: batches whose numbered datagrams the tx task has not yet handed to the
    /// path's socket, and the fence that held before the oldest of them (see
    /// [`fence_header`]).
    unsent: Vec<u16>,
    fence_before: Vec<(u32, u16)>,
    /// The peer's address per path: configured, then wherever authenticated datagrams come
    /// from (NAT rebinding, renumbering).
    remote: Vec<SocketAddr>,
    /// This session's send key once the handshake agreed (sealing only).
    seal: Option<Arc<SealKey>>,
    /// Next counter (nonce) under `seal`.
    counter: u64,
}

/// A received data datagram on its way to the TUN device, the inner packet at `start..end` of
/// it. In order, it stays in the receive slice it arrived in and is written out before that
/// slice is reused; only a datagram the resequencer holds is copied into a buffer of its own.
#[derive(Debug)]
enum RxBuf {
    /// At `at` in receive slice `slice`.
    Slice {
        slice: usize,
        at: usize,
        start: usize,
        end: usize,
    },
    Own {
        buf: Vec<u8>,
        start: usize,
        end: usize,
    },
}

impl RxBuf {
    /// The datagram up to the inner packet's end (the prefix before the packet included).
    fn bytes<'a>(&'a self, slices: &'a [Vec<u8>]) -> &'a [u8] {
        match self {
            RxBuf::Slice { slice, at, end, .. } => &slices[*slice][*at..*at + *end],
            RxBuf::Own { buf, end, .. } => &buf[..*end],
        }
    }

    fn start(&self) -> usize {
        match self {
            RxBuf::Slice { start, .. } | RxBuf::Own { start, .. } => *start,
        }
    }
}

/// Receive-side sealing state.
#[derive(Debug)]
struct RxCrypto {
    hs: Handshake,
    /// Opens the agreed peer's datagrams.
    open: Option<SealKey>,
    /// The cipher agreed with that peer.
    cipher: Option<Cipher>,
    replay: ReplayWindow,
    /// When a hello was last sent in answer on each path.
    hello_sent: Vec<Option<Time>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkState {
    /// Not heard from since start; used optimistically.
    Unknown,
    Up,
    Down,
}

#[derive(Debug)]
struct Liveness {
    state: LinkState,
    last_heard: Option<Time>,
    /// While down: when the current run of datagrams began, and how many it has.
    recovering_since: Option<Time>,
    recover_count: u32,
    down_events: u64,
}

#[derive(Debug)]
struct RxState {
    reseq: Resequencer<RxBuf>,
    peer_session: Option<u32>,
    peer_restarts: u64,
    live: Vec<Liveness>,
    peer_reports: Vec<Option<(Time, ReportEntry)>>,
    delivered: u64,
    pacer: ReportPacer,
    crypto: Option<RxCrypto>,
    /// The peer's address per path as the receive side last confirmed it (the send state
    /// holds the copy it sends to).
    remote: Vec<SocketAddr>,
}

impl PathIo {
    /// `datagrams` datagrams of `bytes` bytes in all left on this path.
    fn sent(&self, datagrams: usize, bytes: usize) {
        self.tx_packets.fetch_add(datagrams as u64, Relaxed);
        self.tx_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// Whether to answer a keepalive the peer sent on this path at `now`. Always, unless we
    /// sent data on the path since the last answer and that was less than
    /// [`BUSY_ACK_INTERVAL`] ago: the peer hears the path alive from our data, and an answer
    /// per keepalive would only cost the busy direction (on a 64 kbit/s line, a tenth of it);
    /// one a second still gives the peer its RTT.
    fn answer_keepalive(&self, now: Time) -> bool {
        let data = self.data_sent.load(Relaxed);
        let busy = self.acked_data.load(Relaxed) != data;
        let since = now.as_micros().saturating_sub(self.acked_us.load(Relaxed));
        if busy && since < BUSY_ACK_INTERVAL.as_micros() as u64 {
            return false;
        }
        self.acked_data.store(data, Relaxed);
        self.acked_us.store(now.as_micros(), Relaxed);
        true
    }

    /// Fold an RTT sample (µs) into the smoothed RTT; absurd values are ignored.
    fn rtt_sample(&self, rtt: u32) {
        if rtt >= 60_000_000 {
            return;
        }
        let old = self.srtt_us.load(Relaxed);
        let srtt = if old == u64::MAX {
            u64::from(rtt)
        } else {
            (old * 7 + u64::from(rtt)) / 8
        };
        self.srtt_us.store(srtt, Relaxed);
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("tunnel", &self.cfg.tunnel.name)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock is a bug elsewhere; the state is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Set up the sockets and the TUN device. Fails with a message naming what is wrong.
    /// `psk` is required unless the config says `encryption = "none"`.
    pub fn new(cfg: Config, psk: Option<Psk>) -> Result<Shared> {
        let crypto = match (cfg.security.cipher, psk) {
            (Some(choice), Some(psk)) => Some(Crypto {
                hello_key: seal::handshake_key(&psk, choice.hello_cipher()),
                psk,
                choice,
                offer_aes: choice.offers_aes(seal::aes_in_hardware()),
            }),
            (Some(_), None) => anyhow::bail!("encryption is on but no pre-shared key was loaded"),
            (None, _) => None,
        };
        let mut paths = Vec::with_capacity(cfg.paths.len());
        for p in &cfg.paths {
            let sock = crate::net::path_socket(p)?;
            let io = BatchSocket::new(sock)
                .with_context(|| format!("path {:?}: cannot set up batched I/O", p.name))?;
            paths.push(PathIo {
                overhead: FRAMING + crate::net::outer_header_len(p),
                cfg: p.clone(),
                io,
                tx_packets: AtomicU64::new(0),
                tx_bytes: AtomicU64::new(0),
                data_sent: AtomicU64::new(0),
                gso_refused: std::sync::atomic::AtomicBool::new(false),
                srtt_us: AtomicU64::new(u64::MAX),
                acked_data: AtomicU64::new(0),
                acked_us: AtomicU64::new(0),
            });
        }
        let tun = crate::net::tun_device(&cfg.tunnel)?;
        let specs: Vec<PathSpec> = cfg
            .paths
            .iter()
            .zip(&paths)
            .map(|(p, io)| {
                let header = HEADER_LEN + crate::net::seal_overhead(crypto.is_some());
                PathSpec::new(p.weight, p.rate_bps, p.backup).with_overhead(header + io.overhead)
            })
            .collect();
        let sched = mpt_sched::build(cfg.connection.scheduler, &specs);
        let reseq = Resequencer::new(mpt_reseq::Config {
            window: cfg.connection.reorder_window,
            timeout: cfg.connection.reorder_timeout,
            paths: cfg.paths.len(),
        });
        let n = cfg.paths.len();
        let mut session = [0u8; 4];
        getrandom::fill(&mut session)
            .map_err(|e| anyhow::anyhow!("no randomness for the session id: {e}"))?;
        let rx_crypto = crypto.as_ref().map(|_| RxCrypto {
            hs: Handshake::new(random(), random()),
            open: None,
            cipher: None,
            replay: ReplayWindow::default(),
            hello_sent: vec![None; n],
        });
        Ok(Shared {
            clock: Clock::new(),
            session: u32::from_be_bytes(session),
            prefix: if crypto.is_some() {
                SEALED_HEADER_LEN
            } else {
                HEADER_LEN
            },
            crypto,
            tx: Mutex::new(TxState {
                sched,
                seq: 0,
                path_seq: vec![0; n],
                unsent: vec![0; n],
                fence_before: vec![(0, 0); n],
                remote: cfg.paths.iter().map(|p| p.remote).collect(),
                seal: None,
                counter: 0,
            }),
            rx: Mutex::new(RxState {
                reseq,
                peer_session: None,
                peer_restarts: 0,
                live: (0..n)
                    .map(|_| Liveness {
                        state: LinkState::Unknown,
                        last_heard: None,
                        recovering_since: None,
                        recover_count: 0,
                        down_events: 0,
                    })
                    .collect(),
                peer_reports: vec![None; n],
                delivered: 0,
                pacer: ReportPacer::default(),
                crypto: rx_crypto,
                remote: cfg.paths.iter().map(|p| p.remote).collect(),
            }),
            paths,
            tun,
            drops: Drops::default(),
            tx_packets: AtomicU64::new(0),
            tx_bytes: AtomicU64::new(0),
            report_bytes: AtomicU64::new(0),
            keepalives_sent: AtomicU64::new(0),
            keepalive_acks_sent: AtomicU64::new(0),
            send_turn: tokio::sync::Mutex::new(()),
            calls: Calls::default(),
            cfg,
        })
    }

    /// Whether datagrams are sealed.
    pub fn sealing(&self) -> Option<CipherChoice> {
        self.crypto.as_ref().map(|c| c.choice)
    }

    fn send(&self, p: &PathIo, datagram: &[u8], remote: SocketAddr) {
        match p.io.try_send(datagram, remote) {
            Ok(()) => p.sent(1, datagram.len()),
            Err(e) => self.send_failed(p, &e),
        }
    }

    /// Build a control datagram on path `i` under the send lock (`build` writes its plain form
    /// into the buffer and returns the length), seal it, account it and send it. Not sent
    /// while sealing has no session key yet.
    fn send_control(
        &self,
        i: usize,
        now: Time,
        buf: &mut [u8],
        build: impl FnOnce(&Shared, &TxState, &mut [u8]) -> usize,
    ) -> Option<usize> {
        let p = &self.paths[i];
        let (len, remote) = {
            let mut tx = lock(&self.tx);
            let plain = build(self, &tx, buf);
            let len = if self.crypto.is_some() {
                let key = tx.seal.clone()?;
                let counter = tx.counter;
                tx.counter += 1;
                match key.seal_plain(counter, buf, plain) {
                    Ok(len) => len,
                    Err(e) => {
                        warn!(error = %e, "cannot seal a control message");
                        return None;
                    }
                }
            } else {
                plain
            };
            tx.sched.on_control_sent(now, p.cfg.id, len + p.overhead);
            (len, tx.remote[i])
        };
        self.send(p, &buf[..len], remote);
        Some(len)
    }

    /// Send `hello` on path `i`, sealed with the handshake key under a random counter.
    fn send_hello(&self, c: &Crypto, i: usize, now: Time, hello: &HelloRepr) {
        let p = &self.paths[i];
        let mut buf = [0u8; wire::HELLO_LEN + SEAL_OVERHEAD];
        let (header, remote) = {
            let tx = lock(&self.tx);
            (
                fence_header(self, &tx, Kind::Hello, p.cfg.id, now),
                tx.remote[i],
            )
        };
        let offer = if c.offer_aes { HelloRepr::FLAG_AES } else { 0 };
        let hello = HelloRepr {
            flags: hello.flags | offer,
            ..*hello
        };
        let plain = hello.emit(&header, &mut buf);
        match c
            .hello_key
            .seal_plain(u64::from_be_bytes(random()), &mut buf, plain)
        {
            Ok(len) => self.send(p, &buf[..len], remote),
            Err(e) => warn!(error = %e, "cannot seal a hello"),
        }
    }

    /// Bytes sealing adds to every datagram (counter and tag), 0 without encryption.
    fn seal_overhead(&self) -> usize {
        crate::net::seal_overhead(self.crypto.is_some())
    }

    /// The largest datagram a valid peer sends: a full inner packet with its header (and
    /// counter and tag).
    fn max_datagram(&self) -> usize {
        HEADER_LEN + usize::from(self.cfg.tunnel.mtu) + self.seal_overhead()
    }

    fn send_failed(&self, p: &PathIo, e: &std::io::Error) {
        let n = self.drops.send_error.fetch_add(1, Relaxed);
        // Rate-limited: the first, then every 1000th.
        if n % 1000 == 0 {
            warn!(path = %p.cfg.name, error = %e, dropped = n + 1, "send failed");
        }
    }
}

/// Packets the tx task gathers from the TUN device per batch.
const TX_BATCH: usize = 256;

/// TUN → scheduler → path socket, a batch at a time: one TUN read (a TCP super-packet from
/// TSO is split into tunnel-MTU packets), one lock of the send state to schedule and number
/// the whole batch, sealing in place, and per path one GSO send for each run of datagrams.
pub async fn tx_task(sh: Arc<Shared>, queue: usize) -> Result<()> {
    let tun = &sh.tun[queue];
    let mtu = usize::from(sh.cfg.tunnel.mtu);
    let prefix = sh.prefix;
    let sealing = sh.crypto.is_some();
    let wire_extra = sh.seal_overhead();
    // Each packet is read after room for the header (and counter), and sealed in place.
    let mut original = vec![0u8; tun_rs::VIRTIO_NET_HDR_LEN + 65535];
    // Room one TUN read may need: a 64 KiB TSO super-packet split into MTU-sized packets.
    let read_room = 65_535 / mtu.saturating_sub(40).max(1) + 2;
    let batch = TX_BATCH.max(2 * read_room);
    let mut bufs: Vec<Vec<u8>> = (0..batch)
        .map(|_| vec![0u8; prefix + mtu + TAG_LEN])
        .collect();
    let mut sizes = vec![0usize; batch];
    // per packet of the batch: its path, or none (dropped)
    let mut plan: Vec<Option<usize>> = vec![None; batch];
    let mut remotes: Vec<SocketAddr> = Vec::with_capacity(sh.paths.len());
    // paths that carry datagrams of the current batch, one bit each
    let mut used: u64;
    let mut runs: Vec<GsoRun> = sh
        .paths
        .iter()
        .map(|p| GsoRun::new(p.io.max_gso_segments()))
        .collect();
    loop {
        let n = match tun
            .recv_multiple(&mut original, &mut bufs, &mut sizes, prefix)
            .await
        {
            Ok(n) => n,
            Err(e) => {
                // A malformed super-packet or a full batch: counted, not fatal; a device that
                // is gone ends the daemon.
                if e.raw_os_error() == Some(libc::EBADFD) {
                    return Err(e).context("reading from the TUN device");
                }
                let n = sh.drops.tun_read_error.fetch_add(1, Relaxed);
                if n % 1000 == 0 {
                    warn!(error = %e, failed = n + 1, "reading from the TUN device failed");
                }
                continue;
            }
        };
        sh.calls.tun_reads.fetch_add(1, Relaxed);
        // Gather what else is waiting (small packets such as TCP ACKs come one per read), so
        // that runs to a path leave in one GSO send.
        let mut n = n;
        while batch - n >= read_room {
            match tun.try_recv_multiple(&mut original, &mut bufs[n..], &mut sizes[n..], prefix) {
                Ok(more) => {
                    sh.calls.tun_reads.fetch_add(1, Relaxed);
                    n += more;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    sh.drops.tun_read_error.fetch_add(1, Relaxed);
                    debug!(error = %e, "reading from the TUN device failed");
                    break;
                }
            }
        }
        // With several TUN queues the tx tasks take turns from numbering to sending, so that
        // each path's datagrams leave in the order of their numbers (the peer takes a
        // per-path number that jumps ahead as loss). The reads above run in parallel.
        let _turn = match sh.tun.len() {
            1 => None,
            _ => Some(sh.send_turn.lock().await),
        };
        let now = sh.clock.now();
        let (key, first_counter) = {
            let mut tx = lock(&sh.tx);
            let key = match (&tx.seal, sealing) {
                (Some(k), _) => Some(k.clone()),
                (None, false) => None,
                (None, true) => {
                    drop(tx);
                    sh.drops.no_session.fetch_add(n as u64, Relaxed);
                    continue;
                }
            };
            let first_counter = tx.counter;
            used = 0;
            for k in 0..n {
                plan[k] = None;
                let inner = sizes[k];
                if inner == 0 {
                    continue;
                }
                let len = HEADER_LEN + inner + wire_extra;
                let Some(path) = tx.sched.select(now, len + FRAMING + 28) else {
                    sh.drops.no_path.fetch_add(1, Relaxed);
                    continue;
                };
                let i = path.index();
                if used & (1 << i) == 0 {
                    used |= 1 << i;
                    if tx.unsent[i] == 0 {
                        tx.fence_before[i] = (tx.seq, tx.path_seq[i]);
                    }
                    tx.unsent[i] += 1;
                }
                HeaderRepr {
                    kind: Kind::Data,
                    path,
                    path_seq: tx.path_seq[i],
                    session: sh.session,
                    seq: tx.seq,
                    timestamp: now.wire_micros(),
                }
                .emit(&mut bufs[k]);
                tx.seq = tx.seq.wrapping_add(1);
                tx.path_seq[i] = tx.path_seq[i].wrapping_add(1);
                tx.sched.on_sent(now, path, len + sh.paths[i].overhead);
                plan[k] = Some(i);
            }
            // one counter per packet of the batch, planned or not: simple, and never reused
            if key.is_some() {
                tx.counter += n as u64;
            }
            remotes.clear();
            remotes.extend_from_slice(&tx.remote);
            (key, first_counter)
        };
        for k in 0..n {
            let Some(i) = plan[k] else { continue };
            let inner = sizes[k];
            let len = match &key {
                Some(key) => match key.seal(first_counter + k as u64, &mut bufs[k], inner) {
                    Ok(len) => len,
                    Err(e) => {
                        warn!(error = %e, "cannot seal a packet");
                        continue;
                    }
                },
                None => HEADER_LEN + inner,
            };
            sh.tx_packets.fetch_add(1, Relaxed);
            sh.tx_bytes.fetch_add(inner as u64, Relaxed);
            if !runs[i].fits(len) {
                flush_run(&sh, i, &mut runs[i], &bufs, remotes[i]).await;
            }
            runs[i].push(k, len);
        }
        for (i, run) in runs.iter_mut().enumerate() {
            if !run.is_empty() {
                flush_run(&sh, i, run, &bufs, remotes[i]).await;
            }
        }
        // This batch has left: control messages may fence it now.
        let mut tx = lock(&sh.tx);
        for i in bits(used) {
            tx.unsent[i] -= 1;
        }
    }
}

/// Send path `i`'s run of datagrams (in `bufs`): one GSO send, or one send each if the kernel
/// refuses GSO. Waits for room in the socket buffer rather than drop (the backpressure TCP
/// inside the tunnel needs); a hard error (link down) is counted and the datagrams dropped.
async fn flush_run(sh: &Shared, i: usize, run: &mut GsoRun, bufs: &[Vec<u8>], remote: SocketAddr) {
    let p = &sh.paths[i];
    let (bytes, count) = (run.bytes(), run.count());
    sh.calls.udp_sends.fetch_add(1, Relaxed);
    p.data_sent.fetch_add(count as u64, Relaxed);
    let result = if count > 1 && p.gso_refused.load(Relaxed) {
        Err(std::io::Error::from_raw_os_error(libc::EIO))
    } else {
        p.io.send_run(run, bufs, remote).await
    };
    match result {
        Ok(()) => p.sent(count, bytes),
        Err(e) if count > 1 => {
            if e.raw_os_error() == Some(libc::EIO) && !p.gso_refused.swap(true, Relaxed) {
                warn!(path = %p.cfg.name, "the kernel refuses UDP GSO on this path; sending one datagram per call");
            } else {
                debug!(path = %p.cfg.name, error = %e, "GSO send failed; sending one by one");
            }
            for d in run.datagrams(bufs) {
                match p.io.send(d, remote).await {
                    Ok(()) => p.sent(1, d.len()),
                    Err(e) => sh.send_failed(p, &e),
                }
            }
        }
        Err(e) => sh.send_failed(p, &e),
    }
    run.clear();
}

/// A keepalive every `keepalive_ms` on every path that carried no data since the last one,
/// carrying our fences. A path that carries data needs none: the data keeps the path alive
/// at the peer (and through NATs) and advances its resequencer, reports bring the RTT, and
/// the keepalive after the data stops fences its tail. On MPT's 64 kbit/s lines a keepalive
/// and its answer every 100 ms took a fifth of each line. While sealing has no session key, a
/// hello asking for an answer instead.
pub async fn keepalive_task(sh: Arc<Shared>) -> Result<()> {
    let mut tick = tokio::time::interval(sh.cfg.connection.keepalive);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut buf = [0u8; HEADER_LEN + SEAL_OVERHEAD];
    // data datagrams per path as of the last tick
    let mut data_seen: Vec<u64> = vec![0; sh.paths.len()];
    loop {
        tick.tick().await;
        if let Some(c) = &sh.crypto {
            if lock(&sh.tx).seal.is_none() {
                let hello = {
                    let rx = lock(&sh.rx);
                    rx.crypto.as_ref().map(|rc| rc.hs.hello(true))
                };
                if let Some(hello) = hello {
                    for i in 0..sh.paths.len() {
                        sh.send_hello(c, i, sh.clock.now(), &hello);
                    }
                }
                continue;
            }
        }
        for (i, p) in sh.paths.iter().enumerate() {
            let sent = p.data_sent.load(Relaxed);
            if std::mem::replace(&mut data_seen[i], sent) != sent {
                continue;
            }
            let now = sh.clock.now();
            let sent = sh.send_control(i, now, &mut buf, |sh, tx, b| {
                fence_header(sh, tx, Kind::Keepalive, p.cfg.id, now).emit(b);
                HEADER_LEN
            });
            if sent.is_some() {
                sh.keepalives_sent.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A control header: the sequence fields are our fences on `path` — the next global and
/// per-path numbers, which tell the peer that every data datagram sent on the path before has
/// lower ones. While the tx task holds numbered datagrams for the path that it has not yet
/// handed to the path's socket, the fence is the one from before them: the control message
/// may leave first, and a fence that overtook them would make the peer give them up as lost.
fn fence_header(sh: &Shared, tx: &TxState, kind: Kind, path: PathId, now: Time) -> HeaderRepr {
    let i = path.index();
    let (seq, path_seq) = if tx.unsent[i] > 0 {
        tx.fence_before[i]
    } else {
        (tx.seq, tx.path_seq[i])
    };
    HeaderRepr {
        kind,
        path,
        path_seq,
        session: sh.session,
        seq,
        timestamp: now.wire_micros(),
    }
}

/// A path gone quiet this much longer than the last one heard from is passed over for reports.
const REPORT_QUIET: Duration = Duration::from_millis(5);

/// The path a report goes on: the one with the lowest RTT among those that are up and were
/// heard from lately — within [`REPORT_QUIET`] of the last path heard from. A path that stopped
/// delivering a moment ago (an outage `dead_ms` has not yet confirmed) would lose the very
/// report that tells the sender, and a sender whose TCP flow stalls with it has nothing more to
/// report for a while.
fn report_path(sh: &Shared, rx: &RxState) -> Option<usize> {
    pick_report_path((0..sh.paths.len()).map(|i| {
        let l = &rx.live[i];
        let heard_if_up = l.last_heard.filter(|_| l.state == LinkState::Up);
        (heard_if_up, sh.paths[i].srtt_us.load(Relaxed))
    }))
}

/// [`report_path`]'s rule over (when heard from, if up; RTT) per path.
fn pick_report_path(paths: impl Iterator<Item = (Option<Time>, u64)> + Clone) -> Option<usize> {
    let latest = paths.clone().filter_map(|(heard, _)| heard).max()?;
    paths
        .enumerate()
        .filter(|(_, (heard, _))| heard.is_some_and(|h| latest - h <= REPORT_QUIET))
        .min_by_key(|(_, (_, rtt))| *rtt)
        .map(|(i, _)| i)
}

/// Receiver reports, paced by [`ReportPacer`] (a share of the received bandwidth, at least one
/// a second while data arrives, at once when a queue grows), on [`report_path`].
pub async fn report_task(sh: Arc<Shared>) -> Result<()> {
    let mut tick = tokio::time::interval(REPORT_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let n = sh.paths.len();
    let mut entries = Vec::with_capacity(n);
    let mut counts: Vec<(u64, u64)> = Vec::with_capacity(n);
    let mut queues: Vec<f64> = Vec::with_capacity(n);
    let mut buf = vec![0u8; wire::report_len(n) + SEAL_OVERHEAD];
    let seal_extra = sh.seal_overhead();
    let outer = sh.paths.iter().map(|p| p.overhead).max().unwrap_or(0);
    loop {
        tick.tick().await;
        let now = sh.clock.now();
        let best = {
            let mut guard = lock(&sh.rx);
            let rx = &mut *guard;
            let stats = rx.reseq.stats();
            let rx_bytes = stats.total.bytes;
            // Counted as `report_bytes` counts them: outer headers and framing included.
            let report_bytes = wire::report_len(n) + seal_extra + outer;
            // The queue building on each path: a growing one is reported at once.
            queues.clear();
            queues.extend(stats.paths.iter().take(n).map(PathStats::queue_us));
            if !rx.pacer.urgent(now, rx_bytes, report_bytes, &queues)
                && !rx.pacer.due(now, rx_bytes, report_bytes)
            {
                continue;
            }
            entries.clear();
            counts.clear();
            for (i, ps) in stats.paths.iter().enumerate().take(n) {
                let clamp = |v: i64| v.clamp(0, i64::from(u32::MAX)) as u32;
                entries.push(ReportEntry {
                    path: PathId(i as u8),
                    flags: if rx.live[i].state == LinkState::Up {
                        ReportEntry::FLAG_UP
                    } else {
                        0
                    },
                    path_seq: ps.highest_path_seq.unwrap_or(0),
                    packets: ps.packets as u32,
                    bytes: ps.bytes,
                    lost: ps.lost as u32,
                    owd_min_us: clamp(ps.owd_min_us.unwrap_or(0)),
                    jitter_us: ps.jitter_us.max(0.0) as u32,
                    owd_us: clamp(ps.owd_us.unwrap_or(0.0) as i64),
                    echo: ps.last_sent_us.unwrap_or(0),
                    echo_age_us: ps.last_arrival.map_or(0, |a| (now - a).as_micros() as u32),
                    owd_min_len: ps.owd_min_len.unwrap_or(0).min(usize::from(u16::MAX)) as u16,
                });
                counts.push((ps.packets, ps.lost));
            }
            rx.pacer.sent(now, rx_bytes, report_bytes, &counts, &queues);
            report_path(sh.as_ref(), rx)
        };
        let Some(best) = best else { continue };
        let p = &sh.paths[best];
        let sent = sh.send_control(best, now, &mut buf, |sh, tx, b| {
            let h = fence_header(sh, tx, Kind::Report, p.cfg.id, now);
            wire::emit_report(&h, &entries, b)
        });
        if let Some(len) = sent {
            sh.report_bytes
                .fetch_add((len + p.overhead) as u64, Relaxed);
        }
    }
}

/// What woke the receive task.
enum RxEvent {
    /// This path's socket has datagrams.
    Readable(usize),
    Timeout,
    Tick,
}

/// Receive buffers per batch (`recvmmsg`), each holding up to the kernel's GRO segments.
const RX_SLICES: usize = 8;
/// Most packets coalesced per TUN write batch (GRO's cost grows with the batch).
const TUN_WRITE_BATCH: usize = 64;
/// Batches taken from one socket before the others get a turn (fewer while the resequencer
/// waits for another path).
const RX_BATCHES_PER_TURN: usize = 4;

/// All path sockets → resequencer → TUN; liveness; resequencer timer. Datagrams arrive in
/// batches (recvmmsg, UDP GRO); what the resequencer releases goes to the TUN device in one
/// batch per turn, coalesced into super-packets (GRO) where the device takes them.
pub async fn rx_task(sh: Arc<Shared>) -> Result<()> {
    // One byte more than the largest valid datagram, so that a larger one is seen as such.
    let cap = sh.max_datagram() + 1;
    let alloc = || vec![0u8; cap];
    let window = sh.cfg.connection.reorder_window;
    // Buffers for the datagrams the resequencer holds, enough for a full window.
    let mut pool: Vec<Vec<u8>> = (0..window + 8).map(|_| alloc()).collect();
    let mut out: Vec<RxBuf> = Vec::with_capacity(window + 8);
    let mut writer = TunWriter::new(sh.prefix);
    let gro_segments = sh
        .paths
        .iter()
        .map(|p| p.io.gro_segments())
        .max()
        .unwrap_or(1);
    let slice_len = cap.max(1500) * gro_segments.max(1);
    let mut slices: Vec<Vec<u8>> = (0..RX_SLICES).map(|_| vec![0u8; slice_len]).collect();
    let mut metas = [quinn_udp::RecvMeta::default(); RX_SLICES];
    let mut next_sock = 0usize;
    let tick_every = (sh.cfg.connection.keepalive / 4)
        .clamp(Duration::from_millis(5), Duration::from_millis(50));
    let mut tick = tokio::time::interval(tick_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut recv_errors = 0u64;
    loop {
        let deadline = lock(&sh.rx).reseq.poll_timeout();
        let sleep_to = sh.clock.instant(deadline.unwrap_or(Time::ZERO));
        let ev = tokio::select! {
            biased;
            i = readable_any(&sh.paths, &mut next_sock) => RxEvent::Readable(i),
            _ = tokio::time::sleep_until(sleep_to), if deadline.is_some() => RxEvent::Timeout,
            _ = tick.tick() => RxEvent::Tick,
        };
        match ev {
            RxEvent::Readable(path) => {
                for _ in 0..RX_BATCHES_PER_TURN {
                    let got = {
                        let mut each = slices.iter_mut();
                        let mut io: [std::io::IoSliceMut<'_>; RX_SLICES] =
                            std::array::from_fn(|_| {
                                std::io::IoSliceMut::new(each.next().expect("RX_SLICES slices"))
                            });
                        sh.paths[path].io.try_recv(&mut io, &mut metas)
                    };
                    sh.calls.udp_recvs.fetch_add(1, Relaxed);
                    let n = match got {
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(error) => {
                            recv_errors += 1;
                            if recv_errors % 1000 == 1 {
                                warn!(path = %sh.paths[path].cfg.name, %error, "receive failed");
                            }
                            break;
                        }
                    };
                    let now = sh.clock.now();
                    // one lock of the receive state for the whole batch
                    let lagging = {
                        let mut rx = lock(&sh.rx);
                        for (slice, meta) in metas.iter().enumerate().take(n) {
                            let stride = meta.stride.max(1);
                            let mut at = 0;
                            // each datagram of the slice (an empty one counts as one of length 0)
                            loop {
                                let len = (meta.len - at).min(stride);
                                let d = &mut slices[slice][at..at + len];
                                if let Some((data, start, end)) =
                                    handle_datagram(&sh, &mut rx, now, path, d, meta.addr, &mut out)
                                {
                                    let here = RxBuf::Slice {
                                        slice,
                                        at,
                                        start,
                                        end,
                                    };
                                    // held: copied out of the slice, which the next batch reuses
                                    let keep = |p: RxBuf| {
                                        let mut buf = pool.pop().unwrap_or_else(alloc);
                                        let bytes = p.bytes(&slices);
                                        buf[..bytes.len()].copy_from_slice(bytes);
                                        RxBuf::Own { buf, start, end }
                                    };
                                    rx.reseq
                                        .push_keeping(now, data, here, keep, &mut |p| out.push(p));
                                }
                                at += len;
                                if at >= meta.len {
                                    break;
                                }
                            }
                        }
                        // A gap waits for another path's datagrams, which sit in that path's
                        // socket: the turn goes to the path the resequencer waits for, or the
                        // window overflows and gives up the gap (two unshaped paths at Gbit/s lost
                        // 3 % of their packets so, reading the sockets in turn).
                        match sh.paths.len() {
                            1 => None,
                            _ => rx.reseq.lagging_path().map(PathId::index),
                        }
                    };
                    if let Some(p) = lagging {
                        next_sock = p;
                    }
                    // what came out may lie in the slices the next batch is received into
                    writer.write(&sh, &mut out, &mut slices, &mut pool).await?;
                    if n < RX_SLICES || lagging.is_some_and(|p| p != path) {
                        break;
                    }
                }
            }
            RxEvent::Timeout => {
                let now = sh.clock.now();
                lock(&sh.rx).reseq.handle_timeout(now, &mut |p| out.push(p));
            }
            RxEvent::Tick => check_liveness(&sh, sh.clock.now(), &mut out),
        }
        writer.write(&sh, &mut out, &mut slices, &mut pool).await?;
    }
}

/// A packet on its way to tun0, written from where it lies (its receive slice, or the buffer
/// the resequencer held it in), unless GRO makes it the head of a super-packet: then it moves
/// to `spare`, a buffer with room for 64 KiB, where the packets of its flow are appended. So
/// only one packet per super-packet is copied here.
struct TunBuf<'a> {
    data: &'a mut [u8],
    spare: &'a mut Vec<u8>,
    moved: bool,
}

impl TunBuf<'_> {
    fn move_to_spare(&mut self) {
        if !self.moved {
            self.spare.clear();
            self.spare.extend_from_slice(self.data);
            self.moved = true;
        }
    }
}

impl AsRef<[u8]> for TunBuf<'_> {
    fn as_ref(&self) -> &[u8] {
        if self.moved {
            self.spare
        } else {
            self.data
        }
    }
}

impl AsMut<[u8]> for TunBuf<'_> {
    fn as_mut(&mut self) -> &mut [u8] {
        if self.moved {
            self.spare
        } else {
            self.data
        }
    }
}

impl tun_rs::ExpandBuffer for TunBuf<'_> {
    /// What the packet can grow to: the spare's room.
    fn buf_capacity(&self) -> usize {
        self.spare.capacity()
    }

    fn buf_resize(&mut self, new_len: usize, value: u8) {
        self.move_to_spare();
        self.spare.resize(new_len, value);
    }

    fn buf_extend_from_slice(&mut self, src: &[u8]) {
        self.move_to_spare();
        self.spare.extend_from_slice(src);
    }
}

/// The packets of `chunk` as [`TunBuf`]s, in order: the held ones in their own buffers, the
/// others cut out of the receive slices (disjoint pieces: each datagram is in `chunk` once).
/// `places` is scratch space.
fn tun_bufs<'a>(
    chunk: &'a mut [RxBuf],
    slices: &'a mut [Vec<u8>],
    spares: &'a mut [Vec<u8>],
    places: &mut Vec<(usize, usize, usize, usize)>,
) -> Vec<TunBuf<'a>> {
    places.clear();
    let mut bufs: Vec<TunBuf<'a>> = Vec::with_capacity(chunk.len());
    for ((k, p), spare) in chunk.iter_mut().enumerate().zip(spares.iter_mut()) {
        let data: &'a mut [u8] = match p {
            RxBuf::Own { buf, end, .. } => &mut buf[..*end],
            RxBuf::Slice { slice, at, end, .. } => {
                places.push((*slice, *at, *end, k));
                &mut [] // cut out of its slice below
            }
        };
        bufs.push(TunBuf {
            data,
            spare,
            moved: false,
        });
    }
    // each slice cut front to back
    places.sort_unstable();
    let mut rest: Vec<(&'a mut [u8], usize)> = slices.iter_mut().map(|s| (&mut s[..], 0)).collect();
    for &(slice, at, end, k) in places.iter() {
        let (left, base) = &mut rest[slice];
        let piece = std::mem::take(left);
        let (_, tail) = piece.split_at_mut(at - *base);
        let (mine, tail) = tail.split_at_mut(end);
        *left = tail;
        *base = at + end;
        bufs[k].data = mine;
    }
    bufs
}

/// The rx task's state for writing to the TUN device.
struct TunWriter {
    /// Where GRO builds its super-packets, one per packet of a batch.
    spares: Vec<Vec<u8>>,
    /// Scratch for [`tun_bufs`].
    places: Vec<(usize, usize, usize, usize)>,
    gro: tun_rs::GROTable,
}

impl TunWriter {
    fn new(prefix: usize) -> TunWriter {
        TunWriter {
            spares: (0..TUN_WRITE_BATCH)
                .map(|_| Vec::with_capacity(2 * prefix + 65_535 + 64))
                .collect(),
            places: Vec::with_capacity(TUN_WRITE_BATCH),
            gro: tun_rs::GROTable::default(),
        }
    }

    /// Write the packets the resequencer released (`out`, emptied) to the TUN device in
    /// batches, coalesced by GRO into super-packets where the device takes them, from where
    /// they lie (see [`TunBuf`]); every inner packet starts at the same offset (`prefix`),
    /// after room for the virtio header. The buffers of held ones go back to `pool`.
    async fn write(
        &mut self,
        sh: &Shared,
        out: &mut Vec<RxBuf>,
        slices: &mut [Vec<u8>],
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        lock(&sh.rx).delivered += out.len() as u64;
        for chunk in out.chunks_mut(TUN_WRITE_BATCH) {
            debug_assert!(chunk.iter().all(|p| p.start() == sh.prefix));
            let mut batch = tun_bufs(chunk, slices, &mut self.spares, &mut self.places);
            sh.calls.tun_write_batches.fetch_add(1, Relaxed);
            if let Err(e) = sh.tun[0]
                .send_multiple(&mut self.gro, &mut batch, sh.prefix)
                .await
            {
                if e.raw_os_error() == Some(libc::EBADFD) {
                    return Err(e).context("writing to the TUN device");
                }
                let n = sh.drops.tun_write_error.fetch_add(1, Relaxed);
                if n % 1000 == 0 {
                    warn!(error = %e, dropped = n + 1, "writing to the TUN device failed");
                }
            }
        }
        pool.extend(out.drain(..).filter_map(|p| match p {
            RxBuf::Own { buf, .. } => Some(buf),
            RxBuf::Slice { .. } => None,
        }));
        Ok(())
    }
}

/// Wait until some path socket has datagrams; returns its index. The scan starts after the
/// socket served last so that no path starves the others.
async fn readable_any(paths: &[PathIo], next: &mut usize) -> usize {
    poll_fn(|cx| {
        let n = paths.len();
        for k in 0..n {
            let i = (*next + k) % n;
            if paths[i].io.sock.poll_recv_ready(cx).is_ready() {
                *next = (i + 1) % n;
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}

/// Validate (open in place, when sealing) and act on one datagram, `buf`, with
/// the receive state locked by the caller (once per batch). Returns the resequencer metadata
/// and where the inner packet lies in `buf` when it is data to be queued (by the caller);
/// control messages are handled here.
fn handle_datagram(
    sh: &Shared,
    rx: &mut RxState,
    now: Time,
    i: usize,
    buf: &mut [u8],
    from: SocketAddr,
    out: &mut Vec<RxBuf>,
) -> Option<(PacketMeta, usize, usize)> {
    let path = &sh.paths[i];
    let len = buf.len();
    if len > sh.max_datagram() {
        sh.drops.oversize.fetch_add(1, Relaxed);
        return None;
    }
    let (start, end) = match &sh.crypto {
        None => {
            // Plain mode never moves a path's peer: the configured address is the only one.
            if from != path.cfg.remote {
                let n = sh.drops.unknown_source.fetch_add(1, Relaxed);
                if n % 1000 == 0 {
                    debug!(path = %path.cfg.name, %from, "datagram from an unknown source dropped");
                }
                return None;
            }
            (0, len)
        }
        Some(c) => open_datagram(sh, rx, c, now, i, buf)?,
    };
    let d = match Datagram::parse(&buf[start..end]) {
        Ok(d) => d,
        Err(e) => {
            sh.drops.malformed(&e);
            debug!(path = %path.cfg.name, error = %e, "malformed datagram dropped");
            return None;
        }
    };
    let h = *d.header();
    if h.path != path.cfg.id {
        sh.drops.path_mismatch.fetch_add(1, Relaxed);
        return None;
    }
    if sh.crypto.is_some() {
        // Authenticated, from the agreed session: the peer may have moved. The receive side
        // keeps its own copy of the addresses, so the send state is locked only on a change.
        if rx.remote[i] != from {
            info!(path = %path.cfg.name, old = %rx.remote[i], new = %from, "peer address changed");
            rx.remote[i] = from;
            lock(&sh.tx).remote[i] = from;
        }
    } else {
        match rx.peer_session {
            Some(s) if s == h.session => {}
            Some(s) => {
                info!(
                    old = format_args!("{s:08x}"),
                    new = format_args!("{:08x}", h.session),
                    "peer restarted: resetting the resequencer"
                );
                rx.reseq.reset();
                rx.peer_session = Some(h.session);
                rx.peer_restarts += 1;
            }
            None => {
                info!(path = %path.cfg.name, session = format_args!("{:08x}", h.session), "peer heard");
                rx.peer_session = Some(h.session);
            }
        }
    }
    heard(sh, rx, i, now);
    match d {
        Datagram::Data { packet, .. } => {
            return Some((
                PacketMeta {
                    path: h.path,
                    seq: h.seq,
                    path_seq: h.path_seq,
                    sent_us: h.timestamp,
                    len: packet.len(),
                },
                start + HEADER_LEN,
                end,
            ));
        }
        Datagram::Keepalive { .. } => {
            rx.reseq
                .fence(now, h.path, h.seq, h.path_seq, &mut |p| out.push(p));
            if !path.answer_keepalive(now) {
                return None;
            }
            let mut buf = [0u8; wire::ACK_LEN + SEAL_OVERHEAD];
            let sent = sh.send_control(i, now, &mut buf, |sh, tx, b| {
                AckRepr {
                    header: fence_header(sh, tx, Kind::KeepaliveAck, h.path, now),
                    echo: h.timestamp,
                    hold_us: sh.clock.now().wire_micros().wrapping_sub(now.wire_micros()),
                }
                .emit(b)
            });
            if sent.is_some() {
                sh.keepalive_acks_sent.fetch_add(1, Relaxed);
            }
        }
        Datagram::KeepaliveAck { echo, hold_us, .. } => {
            rx.reseq
                .fence(now, h.path, h.seq, h.path_seq, &mut |p| out.push(p));
            path.rtt_sample(now.wire_micros().wrapping_sub(echo).wrapping_sub(hold_us));
        }
        Datagram::Report { report, .. } => {
            rx.reseq
                .fence(now, h.path, h.seq, h.path_seq, &mut |p| out.push(p));
            take_report(sh, rx, now, &report);
        }
        Datagram::Hello { .. } => {
            // Only valid sealed with the handshake key, handled in `open_datagram`.
            sh.drops.unexpected.fetch_add(1, Relaxed);
        }
    }
    None
}

/// Open a sealed datagram in place. Returns where its plain form lies in `buf`; `None` when it
/// was dropped (and counted) or was a hello (handled here).
fn open_datagram(
    sh: &Shared,
    rx: &mut RxState,
    c: &Crypto,
    now: Time,
    i: usize,
    buf: &mut [u8],
) -> Option<(usize, usize)> {
    let (h, sealed) = match HeaderRepr::parse_outer(buf) {
        Ok(x) => x,
        Err(e) => {
            sh.drops.malformed(&e);
            return None;
        }
    };
    if !sealed {
        sh.drops.unauthenticated.fetch_add(1, Relaxed);
        return None;
    }
    if h.kind == Kind::Hello {
        take_hello(sh, rx, c, now, i, buf);
        return None;
    }
    let peer_session = rx.peer_session;
    let rc = rx.crypto.as_mut()?;
    let Some(key) = rc.open.as_ref().filter(|_| peer_session == Some(h.session)) else {
        sh.drops.unknown_session.fetch_add(1, Relaxed);
        return None;
    };
    let Some(counter) = seal::counter_of(buf) else {
        sh.drops.truncated.fetch_add(1, Relaxed);
        return None;
    };
    if rc.replay.check(counter).is_err() {
        sh.drops.replayed.fetch_add(1, Relaxed);
        return None;
    }
    let body = match key.open(buf) {
        Ok(n) => n,
        Err(SealError::BadTag) => {
            let n = sh.drops.bad_tag.fetch_add(1, Relaxed);
            if n % 1000 == 0 {
                debug!(path = %sh.paths[i].cfg.name, "datagram failed authentication");
            }
            return None;
        }
        Err(_) => {
            sh.drops.truncated.fetch_add(1, Relaxed);
            return None;
        }
    };
    rc.replay.mark(counter);
    seal::unseal_in_place(buf);
    Some((COUNTER_LEN, SEALED_HEADER_LEN + body))
}

/// A sealed hello arrived on path `i`: run the handshake, install new session keys, answer.
fn take_hello(sh: &Shared, rx: &mut RxState, c: &Crypto, now: Time, i: usize, buf: &mut [u8]) {
    let body = match c.hello_key.open(buf) {
        Ok(n) => n,
        Err(_) => {
            let n = sh.drops.bad_tag.fetch_add(1, Relaxed);
            if n % 1000 == 0 {
                warn!(path = %sh.paths[i].cfg.name, "a hello failed authentication: is the peer's key (and encryption) the same as ours?");
            }
            return;
        }
    };
    seal::unseal_in_place(buf);
    let (header, hello) = match Datagram::parse(&buf[COUNTER_LEN..SEALED_HEADER_LEN + body]) {
        Ok(Datagram::Hello { header, hello }) => (header, hello),
        Ok(_) => return,
        Err(e) => {
            sh.drops.malformed(&e);
            return;
        }
    };
    if header.path != sh.paths[i].cfg.id {
        sh.drops.path_mismatch.fetch_add(1, Relaxed);
        return;
    }
    let Some(rc) = rx.crypto.as_mut() else { return };
    match rc.hs.on_hello(header.session, &hello, random()) {
        HelloOutcome::Reflected => {
            sh.drops.bad_hello.fetch_add(1, Relaxed);
        }
        HelloOutcome::Accepted { install, reply } => {
            if install {
                if let Some(peer) = rc.hs.peer() {
                    let cipher = c.choice.agree(c.offer_aes, hello.offers_aes());
                    let keys = seal::session_keys(&c.psk, cipher, rc.hs.random(), &peer.random);
                    rc.open = Some(keys.rx);
                    rc.cipher = Some(cipher);
                    rc.replay = ReplayWindow::default();
                    {
                        let mut tx = lock(&sh.tx);
                        tx.seal = Some(Arc::new(keys.tx));
                        tx.counter = 0;
                    }
                    if rx.peer_session.is_some() {
                        info!(
                            session = format_args!("{:08x}", peer.session),
                            %cipher,
                            "peer restarted: new session keys, resetting the resequencer"
                        );
                        rx.reseq.reset();
                        rx.peer_restarts += 1;
                    } else {
                        info!(path = %sh.paths[i].cfg.name, session = format_args!("{:08x}", peer.session), %cipher, "peer authenticated: session keys agreed");
                    }
                    rx.peer_session = Some(peer.session);
                }
            }
            let Some(rc) = rx.crypto.as_mut() else { return };
            if let Some(reply) = reply {
                let due = rc.hello_sent[i].is_none_or(|t| now - t >= HELLO_REPLY_GAP);
                if due {
                    rc.hello_sent[i] = Some(now);
                    sh.send_hello(c, i, now, &reply);
                }
            }
        }
    }
}

fn take_report(sh: &Shared, rx: &mut RxState, now: Time, report: &Report<'_>) {
    let mut tx = lock(&sh.tx);
    for e in report.entries() {
        let Some(slot) = rx.peer_reports.get_mut(e.path.index()) else {
            continue;
        };
        *slot = Some((now, e));
        tx.sched.on_report(now, e.path, &e);
        if e.echo != 0 {
            let rtt = now
                .wire_micros()
                .wrapping_sub(e.echo)
                .wrapping_sub(e.echo_age_us);
            sh.paths[e.path.index()].rtt_sample(rtt);
        }
    }
}

/// Something valid arrived on path `i`.
fn heard(sh: &Shared, rx: &mut RxState, i: usize, now: Time) {
    let keepalive = sh.cfg.connection.keepalive;
    let l = &mut rx.live[i];
    let prev = l.last_heard.replace(now);
    match l.state {
        LinkState::Up => {}
        LinkState::Unknown => {
            l.state = LinkState::Up;
            info!(path = %sh.paths[i].cfg.name, "path up");
        }
        LinkState::Down => {
            let continuing = prev.is_some_and(|p| now - p <= keepalive * 2);
            match l.recovering_since {
                Some(_) if continuing => l.recover_count += 1,
                _ => {
                    l.recovering_since = Some(now);
                    l.recover_count = 1;
                }
            }
            let since = l.recovering_since.unwrap_or(now);
            if l.recover_count >= RECOVER_DATAGRAMS && now - since >= keepalive {
                l.state = LinkState::Up;
                l.recovering_since = None;
                info!(path = %sh.paths[i].cfg.name, "path up again");
                lock(&sh.tx).sched.on_path_state(now, PathId(i as u8), true);
            }
        }
    }
}

/// Mark paths down that have been silent for `dead_ms`.
fn check_liveness(sh: &Shared, now: Time, out: &mut Vec<RxBuf>) {
    let dead = sh.cfg.connection.dead;
    let mut rx = lock(&sh.rx);
    for i in 0..rx.live.len() {
        let l = &mut rx.live[i];
        if l.state == LinkState::Down || now - l.last_heard.unwrap_or(Time::ZERO) < dead {
            continue;
        }
        l.state = LinkState::Down;
        l.recovering_since = None;
        l.down_events += 1;
        warn!(path = %sh.paths[i].cfg.name, silent_ms = (now - l.last_heard.unwrap_or(Time::ZERO)).as_millis() as u64, "path down");
        lock(&sh.tx)
            .sched
            .on_path_state(now, PathId(i as u8), false);
        rx.reseq
            .path_down(now, PathId(i as u8), &mut |p| out.push(p));
    }
}

impl Shared {
    /// The document `mptctl status` shows.
    pub fn status(&self) -> Status {
        let now = self.clock.now();
        let rx = lock(&self.rx);
        let tx = lock(&self.tx);
        let st = rx.reseq.stats();
        let t = &st.total;
        let mut drops = self.drops.snapshot();
        drops.duplicate = t.duplicates;
        drops.too_old = t.too_old;
        let paths = self
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let ps = st.paths.get(i).cloned().unwrap_or_default();
                let l = &rx.live[i];
                let srtt = p.srtt_us.load(Relaxed);
                let expected = ps.packets + ps.lost;
                PathStatus {
                    id: p.cfg.id.0,
                    name: p.cfg.name.clone(),
                    state: match l.state {
                        LinkState::Unknown => "unknown",
                        LinkState::Up => "up",
                        LinkState::Down => "down",
                    }
                    .to_owned(),
                    backup: p.cfg.backup,
                    local: p.cfg.local.to_string(),
                    remote: tx.remote[i].to_string(),
                    tx_packets: p.tx_packets.load(Relaxed),
                    tx_bytes: p.tx_bytes.load(Relaxed),
                    rx_packets: ps.packets,
                    rx_bytes: ps.bytes,
                    last_heard_ms: l.last_heard.map(|h| (now - h).as_millis() as u64),
                    rtt_us: (srtt != u64::MAX).then_some(srtt),
                    rate_bps: tx.sched.learned_rate(p.cfg.id).or(p.cfg.rate_bps),
                    lost: ps.lost,
                    loss_pct: if expected == 0 {
                        0.0
                    } else {
                        100.0 * ps.lost as f64 / expected as f64
                    },
                    jitter_us: ps.jitter_us,
                    owd_us: ps.owd_us.unwrap_or(0.0),
                    owd_min_us: ps.owd_min_us.unwrap_or(0) as f64,
                    reordered: ps.reordered,
                    reorder_extent_max: ps.reorder_extent_max,
                    peer: rx.peer_reports[i].map(|(at, e)| PeerReport {
                        age_ms: (now - at).as_millis() as u64,
                        rx_packets: u64::from(e.packets),
                        rx_bytes: e.bytes,
                        lost: u64::from(e.lost),
                        jitter_us: u64::from(e.jitter_us),
                        owd_us: u64::from(e.owd_us),
                    }),
                    down_events: l.down_events,
                }
            })
            .collect();
        let c = &self.cfg.connection;
        Status {
            version: 2,
            tunnel: TunnelStatus {
                name: self.cfg.tunnel.name.clone(),
                scheduler: c.scheduler.to_string(),
                encryption: self
                    .sealing()
                    .map_or_else(|| "none".to_owned(), |c| c.name().to_owned()),
                cipher: rx
                    .crypto
                    .as_ref()
                    .and_then(|rc| rc.cipher)
                    .map(|c| c.name().to_owned()),
                keys_agreed: tx.seal.is_some(),
                uptime_ms: now.as_nanos() / 1_000_000,
                session: format!("{:08x}", self.session),
                peer_session: rx.peer_session.map(|s| format!("{s:08x}")),
                peer_restarts: rx.peer_restarts,
                tx_packets: self.tx_packets.load(Relaxed),
                tx_bytes: self.tx_bytes.load(Relaxed),
                rx_packets: t.packets,
                rx_bytes: t.bytes,
                delivered: rx.delivered,
                tx_report_bytes: self.report_bytes.load(Relaxed),
                keepalives_sent: self.keepalives_sent.load(Relaxed),
                keepalive_acks_sent: self.keepalive_acks_sent.load(Relaxed),
                calls: crate::status::CallCounts {
                    tun_reads: self.calls.tun_reads.load(Relaxed),
                    tun_write_batches: self.calls.tun_write_batches.load(Relaxed),
                    udp_sends: self.calls.udp_sends.load(Relaxed),
                    udp_recvs: self.calls.udp_recvs.load(Relaxed),
                },
                report_fraction: rx.pacer.fraction(),
                drops,
                reseq: ReseqStatus {
                    window: c.reorder_window,
                    timeout_ms: c.reorder_timeout.as_millis() as u64,
                    held: rx.reseq.held(),
                    reordered: t.reordered,
                    reorder_extent_max: t.reorder_extent_max,
                    delivered_out_of_order: t.delivered_out_of_order,
                    skipped: t.skipped,
                    late: t.late,
                    released_by_timeout: t.released_by_timeout,
                    released_by_fence: t.released_by_fence,
                    released_by_overflow: t.released_by_overflow,
                    hold_p50_us: t.hold_time_percentile(0.5).as_micros() as u64,
                    hold_p90_us: t.hold_time_percentile(0.9).as_micros() as u64,
                    hold_p99_us: t.hold_time_percentile(0.99).as_micros() as u64,
                    hold_max_us: t.hold_time_max().as_micros() as u64,
                    occupancy_mean: t.occupancy.mean(),
                    occupancy_p50: t.occupancy.percentile(0.5) as u64,
                    occupancy_p90: t.occupancy.percentile(0.9) as u64,
                    occupancy_p99: t.occupancy.percentile(0.99) as u64,
                    occupancy_max: t.occupancy.percentile(1.0) as u64,
                },
            },
            paths,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_go_on_the_fastest_path_heard_from_lately() {
        let at = Time::from_millis;
        let pick = |p: &[(Option<Time>, u64)]| pick_report_path(p.iter().copied());
        // Both heard from within 5 ms: the lower RTT.
        assert_eq!(pick(&[(Some(at(100)), 900), (Some(at(97)), 300)]), Some(1));
        // Path 1 has been quiet for 20 ms while path 0 delivers: path 0, though slower.
        assert_eq!(pick(&[(Some(at(100)), 900), (Some(at(80)), 300)]), Some(0));
        // Path 1 is down: never it.
        assert_eq!(pick(&[(Some(at(100)), 900), (None, 300)]), Some(0));
        assert_eq!(pick(&[(None, 900), (None, 300)]), None);
    }
}
