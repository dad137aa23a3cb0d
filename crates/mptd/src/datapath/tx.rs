//! TUN → connection → path sockets.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use anyhow::{Context, Result};
use mpt_core::seal::TAG_LEN;
use mpt_core::{PathId, Time};
use mpt_tunnel::DropReason;
use tracing::{debug, warn};

use crate::batch::GsoRun;
use crate::tunnel::Tunnel;

mod paced;
mod send;
mod stream;
use paced::HOLD_MAX;
use send::{flush_run, send_whole};

/// Packets the tx task gathers from the TUN device per batch.
const TX_BATCH: usize = 256;

/// The tx task's buffers: the batch read from the TUN device and what numbering and sending
/// it needs, kept from batch to batch (the receive side's are `RxBufs`).
struct TxBatch {
    /// One packet each, after room for the header (and counter), sealed in place; allocated
    /// (`buf_len` bytes) when a read first needs it ([`ready`]), so that slots only pacing
    /// could fill hold no memory until it does.
    bufs: Vec<Vec<u8>>,
    buf_len: usize,
    sizes: Vec<usize>,
    /// Per packet: its path, or none (dropped).
    plan: Vec<Option<PathId>>,
    /// Per packet: the peer it is routed to.
    route: Vec<Option<usize>>,
    /// Per packet: its size if it goes to the peer being sent for, else 0.
    masked: Vec<usize>,
    /// The peers the batch's packets go to.
    peers: Vec<usize>,
    /// The remote of each path of the peer being sent for.
    remotes: Vec<Option<SocketAddr>>,
    /// A GSO run per path of the peer being sent for.
    runs: Vec<GsoRun>,
    /// What numbering gave besides the batch's datagrams.
    out: mpt_tunnel::BatchOut,
    /// "Too big" answers to packets the tunnel could not carry, back into the TUN device.
    answers: Vec<Vec<u8>>,
    /// Per packet: when it was read.
    born: Vec<Time>,
    /// The packets pacing held, of every peer, and the soonest time to offer them again.
    held: Vec<usize>,
    wake: Option<Time>,
    /// What one TUN read gives: the virtio-net header and the packet or super-packet after it.
    original: Vec<u8>,
    /// Room one TUN read may need in `bufs`.
    read_room: usize,
    /// What a read routed to no peer is cut to: nothing (it is dropped, and counted, later).
    unrouted: crate::fit::Fit,
}

impl TxBatch {
    fn new(batch: usize, buf_len: usize, gso: usize, read_room: usize) -> TxBatch {
        TxBatch {
            original: vec![0u8; tun_rs::VIRTIO_NET_HDR_LEN + 65535],
            read_room,
            unrouted: crate::fit::Fit::default(),
            bufs: (0..batch).map(|_| Vec::new()).collect(),
            buf_len,
            sizes: vec![0; batch],
            plan: vec![None; batch],
            route: vec![None; batch],
            masked: vec![0; batch],
            peers: Vec::new(),
            remotes: Vec::with_capacity(mpt_core::MAX_PATHS),
            runs: (0..mpt_core::MAX_PATHS).map(|_| GsoRun::new(gso)).collect(),
            out: Default::default(),
            answers: Vec::new(),
            born: vec![Time::ZERO; batch],
            held: Vec::new(),
            wake: None,
        }
    }
}

/// The first `room` of `bufs` (fewer if there are fewer), each `len` bytes long: where one
/// TUN read is split into.
fn ready(bufs: &mut [Vec<u8>], room: usize, len: usize) -> &mut [Vec<u8>] {
    let room = room.min(bufs.len());
    let room = &mut bufs[..room];
    for b in room.iter_mut().filter(|b| b.len() < len) {
        b.resize(len, 0);
    }
    room
}

/// What the read `raw` (the virtio-net header and the packet or super-packet after it) is cut
/// to: the fit of the peer its destination routes to.
fn read_fit<'a>(
    peers: &'a [Arc<crate::peer::Peer>],
    routes: &crate::routes::Routes,
    raw: &[u8],
) -> Option<&'a crate::fit::Fit> {
    let i = match routes.single() {
        Some(only) => only,
        None => {
            let packet = raw.get(tun_rs::VIRTIO_NET_HDR_LEN..)?;
            routes.lookup(crate::routes::destination(packet)?)?
        }
    };
    peers.get(i).map(|p| &p.fit)
}

/// TUN → scheduler → path socket, a batch at a time: one TUN read (a TCP super-packet from
/// TSO is split into segments that fit a path's datagram), one lock of the endpoint to schedule and number the
/// whole batch, sealing in place without the lock, and per path one GSO send for each run of
/// datagrams.
pub async fn tx_task(t: Arc<Tunnel>, queue: usize) -> Result<()> {
    let tun = &t.tun[queue];
    let mtu = usize::from(t.cfg().tunnel.mtu);
    let prefix = t.prefix;
    // Each packet is read after room for the header (and counter), and sealed in place.
    // Room one TUN read may need: a 64 KiB TSO super-packet split into MTU-sized packets, or
    // into segments that fit a path.
    let read_room =
        (65_535 / mtu.saturating_sub(40).max(1) + 2).max(crate::datapath::tun_read::max_segments());
    let batch = TX_BATCH.max(2 * read_room);
    let gso = t
        .sockets()
        .iter()
        .map(|s| s.io.max_gso_segments())
        .min()
        .unwrap_or(1);
    // room for a batch behind the packets pacing holds
    let slots = batch + HOLD_MAX;
    let mut b = TxBatch::new(slots, prefix + mtu + TAG_LEN, gso, read_room);
    // for the rare ICMP answers only: made when the first is written (a GRO table holds
    // about 2 MB of flow slots)
    let mut gro: Option<tun_rs::GROTable> = None;
    // the packets pacing held, at the front of the batch's buffers
    let mut held = 0;
    loop {
        // wait for the TUN device, or, while pacing holds packets, until they may go
        let read = match b.wake.filter(|_| held > 0) {
            None => Some(tun.recv(&mut b.original).await),
            Some(wake) => tokio::select! {
                r = tun.recv(&mut b.original) => Some(r),
                () = tokio::time::sleep_until(t.clock.instant(wake)) => None,
            },
        };
        let mut n = held;
        if let Some(read) = read {
            match read.and_then(|len| b.split(&t, len, held)) {
                Ok(got) => {
                    t.counters.calls.tun_reads.fetch_add(1, Relaxed);
                    n += got;
                }
                Err(e) => {
                    // A malformed super-packet or a full batch: counted, not fatal; a device
                    // that is gone ends the daemon.
                    if e.raw_os_error() == Some(libc::EBADFD) {
                        return Err(e).context("reading from the TUN device");
                    }
                    if let Some(n) = t.io_drop(DropReason::TunReadError, 1) {
                        warn!(error = %e, failed = n, "reading from the TUN device failed");
                    }
                    if held == 0 {
                        continue;
                    }
                }
            }
        }
        if n > held {
            n = b.gather(&t, tun, n);
        }
        // With several TUN queues the tx tasks take turns from numbering to sending, so that
        // each path's datagrams leave in the order of their numbers (the peer takes a
        // per-path number that jumps ahead as loss). The reads above run in parallel.
        let _turn = match t.tun.len() {
            1 => None,
            _ => Some(t.send_turn.lock().await),
        };
        let now = t.clock.now();
        b.born[held..n].fill(now);
        b.route(&t, n, prefix);
        if held > 0 {
            b.pace_drop(&t, held, now);
        }
        // every held packet is offered again: when to wake is this round's to say (a time
        // kept from an earlier round has passed, and would wake the task at once, over and
        // over, while packets are held)
        b.wake = None;
        for j in 0..b.peers.len() {
            send_for_peer(&t, b.peers[j], n, &mut b).await;
        }
        held = b.keep_held(&t);
        for a in b.answers.drain(..) {
            write_answer(&t, tun, &mut gro, prefix, &a).await;
        }
    }
}

/// Write an ICMP answer `a` to the TUN device (its GRO table made at the first).
async fn write_answer(
    t: &Tunnel,
    tun: &tun_rs::AsyncDevice,
    gro: &mut Option<tun_rs::GROTable>,
    prefix: usize,
    a: &[u8],
) {
    let mut buf = vec![0u8; prefix + a.len()];
    buf[prefix..].copy_from_slice(a);
    if let Err(e) = tun
        .send_multiple(gro.get_or_insert_with(Default::default), &mut [buf], prefix)
        .await
    {
        if let Some(n) = t.io_drop(DropReason::TunWriteError, 1) {
            warn!(error = %e, dropped = n, "writing an ICMP answer to the TUN device failed");
        }
    }
}

impl TxBatch {
    /// Gather what else is waiting after the batch's first `n` packets (small packets such as
    /// TCP ACKs come one per read), so that runs to a path leave in one GSO send: how many
    /// there are then.
    fn gather(&mut self, t: &Tunnel, tun: &tun_rs::AsyncDevice, mut n: usize) -> usize {
        while self.bufs.len() - n >= self.read_room {
            let more = tun
                .try_recv(&mut self.original)
                .and_then(|len| self.split(t, len, n));
            match more {
                Ok(more) => {
                    t.counters.calls.tun_reads.fetch_add(1, Relaxed);
                    n += more;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    if let Some(n) = t.io_drop(DropReason::TunReadError, 1) {
                        warn!(error = %e, failed = n, "reading from the TUN device failed");
                    }
                    break;
                }
            }
        }
        n
    }

    /// Split one read of `len` bytes in `original` into packets from slot `at` on, cut for
    /// the peer it routes to; returns how many.
    fn split(&mut self, t: &Tunnel, len: usize, at: usize) -> std::io::Result<usize> {
        let raw = &mut self.original[..len];
        let room = crate::datapath::tun_read::segments_at_most(raw);
        let table = t.peers.table();
        let fit = read_fit(&table.peers, &table.routes, raw).unwrap_or(&self.unrouted);
        crate::datapath::tun_read::split(
            raw,
            ready(&mut self.bufs[at..], room, self.buf_len),
            &mut self.sizes[at..],
            t.prefix,
            fit,
        )
    }

    /// Each of the batch's `n` packets goes to the peer its destination routes to
    /// (`route`), and `peers` lists them; a packet no peer's `allowed` covers is dropped.
    fn route(&mut self, t: &Tunnel, n: usize, prefix: usize) {
        self.peers.clear();
        let table = t.peers.table();
        let routes = &table.routes;
        if let Some(only) = routes.single() {
            self.route[..n].fill(Some(only));
            self.peers.push(only);
            return;
        }
        for k in 0..n {
            let dst = crate::routes::destination(&self.bufs[k][prefix..prefix + self.sizes[k]]);
            self.route[k] = dst.and_then(|d| routes.lookup(d));
            match self.route[k] {
                Some(i) if !self.peers.contains(&i) => self.peers.push(i),
                Some(_) => {}
                None if self.sizes[k] > 0 => {
                    if let Some(c) = t.io_drop(DropReason::NoRoute, 1) {
                        debug!(destination = ?dst, dropped = c,
                            "no peer's `allowed` covers the destination: dropped");
                    }
                }
                None => {}
            }
        }
    }
}

/// Number, seal and send the packets of the batch (`n` of `b`) routed to peer `i`.
async fn send_for_peer(t: &Tunnel, i: usize, n: usize, b: &mut TxBatch) {
    // routes only name slots the peer list has (it never shrinks)
    let Some(peer) = t.peers.get(i) else {
        return;
    };
    for k in 0..n {
        b.masked[k] = if b.route[k] == Some(i) { b.sizes[k] } else { 0 };
    }
    let now = t.clock.now();
    let sealer = {
        let mut guard = peer.lock();
        let Some(c) = guard.as_mut() else {
            let waiting = b.masked[..n].iter().filter(|&&s| s > 0).count();
            t.io_drop(DropReason::NoSession, waiting as u64);
            return;
        };
        peer.apply_too_big(c, now);
        stream::stream_queues(t, &peer, c, now);
        peer.fit.set(c.segment_sizes());
        let sealer = c.number_batch(
            now,
            &mut b.masked[..n],
            &mut b.bufs[..n],
            &mut b.plan[..n],
            &mut b.out,
        );
        // the flags matter only to a cut for compressed headers
        if c.compressed_headers().is_some() {
            let mut ready = [0; mpt_core::hc::CONTEXTS];
            c.compress_ready(&mut ready);
            peer.fit.set_ready(&ready);
        }
        b.answers.append(&mut b.out.icmp);
        b.held.append(&mut b.out.held);
        if let Some(until) = b.out.paced_until {
            b.wake = Some(b.wake.map_or(until, |w| w.min(until)));
        }
        b.remotes.clear();
        b.remotes
            .extend((0..c.path_count()).map(|p| c.remote(PathId(p as u8))));
        if peer.note_deadline(c) {
            t.timers_moved.notify_one();
        }
        sealer
    };
    let Some(sealer) = sealer else { return };
    // in the order the connection gave: what leaves before the batch, the batch, what after
    for d in &b.out.before {
        send_whole(t, &peer, d).await;
    }
    for k in 0..n {
        let Some(path) = b.plan[k] else { continue };
        let p = path.index();
        // (the scheduler uses no path whose remote is unknown)
        let Some(remote) = b.remotes.get(p).copied().flatten() else {
            t.io_drop(DropReason::NoPath, 1);
            continue;
        };
        let len = match sealer.seal(k, &mut b.bufs[k], b.masked[k]) {
            Ok(len) => len,
            Err(e) => {
                warn!(error = %e, "cannot seal a packet");
                continue;
            }
        };
        if !b.runs[p].fits(len) {
            flush_run(t, &peer, path, &mut b.runs[p], &b.bufs, remote).await;
        }
        b.runs[p].push(k, len);
    }
    for (p, run) in b.runs.iter_mut().enumerate().take(b.remotes.len()) {
        if let (false, Some(remote)) = (run.is_empty(), b.remotes[p]) {
            flush_run(t, &peer, PathId(p as u8), run, &b.bufs, remote).await;
        }
    }
    for d in &b.out.after {
        send_whole(t, &peer, d).await;
    }
    // This batch has left: control messages may fence it now.
    if let Some(c) = peer.lock().as_mut() {
        c.batch_sent(sealer.used());
    };
}
