//! Sockets → endpoints → TUN, and the endpoints' timers.

use std::future::poll_fn;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::Poll;

use anyhow::Result;
use mpt_core::{PathId, Time};
use mpt_tunnel::{DropReason, Outcome, Route};
use tracing::{trace, warn};

use super::payloads::Payloads;
use super::tun_write::TunWriter;
use crate::peer::Peer;
use crate::tunnel::{Arrival, Outputs, SockIo, Tunnel};

mod bufs;
mod checks;
mod frames;
use bufs::{RxBufs, RX_SLICES};
use checks::{check_sources, drop_run};

/// What woke the receive task.
enum RxEvent {
    /// This socket has datagrams.
    Readable(usize),
    /// An endpoint's next timer is due.
    Timeout,
    /// A stream path's reader cut these frames out.
    Frames(crate::stream::Frames),
}

/// Released packets `out` has room for from the start (it grows beyond when a window's worth
/// is released at once).
const OUT_RESERVE: usize = 256;

/// Batches taken from one socket before the others get a turn (fewer while the resequencer
/// waits for another path).
const RX_BATCHES_PER_TURN: usize = 4;

/// All sockets → endpoints → TUN; the endpoints' timers. Datagrams arrive in batches
/// (recvmmsg, UDP GRO); what the resequencers release goes to the TUN device in one batch per
/// turn, coalesced into super-packets (GRO) where the device takes them.
pub async fn rx_task(t: Arc<Tunnel>) -> Result<()> {
    let cap = t.max_datagram + 1;
    let window = t.cfg().connection.reorder_window;
    let gro_segments = t
        .sockets()
        .iter()
        .map(|s| s.io.gro_segments())
        .max()
        .unwrap_or(1);
    let slice_len = cap.max(1500) * gro_segments.max(1);
    let mut b = RxBufs {
        slices: (0..RX_SLICES).map(|_| vec![0u8; slice_len]).collect(),
        metas: [quinn_udp::RecvMeta::default(); RX_SLICES],
        // filled as the resequencers hold packets (`Payloads::spare`), so that it holds as many
        // buffers as were ever in flight at once, not the whole window's
        pool: Vec::new(),
        cap,
        out: Vec::with_capacity(window.min(OUT_RESERVE) + 8),
        places: Vec::with_capacity(RX_SLICES * gro_segments.max(1)),
        opened: Vec::with_capacity(RX_SLICES * gro_segments.max(1)),
        openers: Vec::new(),
        authentic: false,
    };
    let mut inbox = t.streams.take_inbox();
    let mut writer = TunWriter::new();
    let mut outputs = Outputs::default();
    let mut next_sock = 0usize;
    loop {
        let now = t.clock.now();
        t.rx_beat.store(now.as_nanos() / 1_000_000, Relaxed);
        // at least once a second, so that the beat shows the loop turning (the watchdog)
        let deadline = next_deadline(&t).min(now + RX_BEAT_MAX);
        let sleep_to = t.clock.instant(deadline);
        // the sockets now: a reload may replace them, and wakes us to wait on the new ones
        let socks = t.sockets();
        let ev = tokio::select! {
            biased;
            i = readable_any(&socks, &mut next_sock) => RxEvent::Readable(i),
            Some(f) = next_frames(&mut inbox) => RxEvent::Frames(f),
            _ = t.socks.reloaded.notified() => continue,
            _ = t.timers_moved.notified() => continue,
            _ = tokio::time::sleep_until(sleep_to) => RxEvent::Timeout,
        };
        match ev {
            RxEvent::Readable(s) => {
                for _ in 0..RX_BATCHES_PER_TURN {
                    let Some((n, lagging)) = receive_batch(&t, &socks, s, &mut b, &mut outputs)
                    else {
                        break;
                    };
                    if let Some(l) = lagging {
                        next_sock = l;
                    }
                    t.act(&mut outputs);
                    // what came out may lie in the slices the next batch is received into
                    writer
                        .write(&t, &mut b.out, &mut b.slices, &mut b.pool)
                        .await?;
                    if n < RX_SLICES || lagging.is_some_and(|l| l != s) {
                        break;
                    }
                }
            }
            RxEvent::Frames(f) => {
                let mut pending = frames::Pending::new(f);
                while !pending.done() {
                    if let Some(l) = pending.take_batch(&t, &socks, &mut b, &mut outputs) {
                        next_sock = l;
                    }
                    t.act(&mut outputs);
                    writer
                        .write(&t, &mut b.out, &mut b.slices, &mut b.pool)
                        .await?;
                }
            }
            RxEvent::Timeout => run_timers(&t, t.clock.now(), &mut b, &mut outputs),
        }
        t.act(&mut outputs);
        writer
            .write(&t, &mut b.out, &mut b.slices, &mut b.pool)
            .await?;
    }
}

/// The receive loop turns at least this often, idle or not ([`Tunnel::rx_beat`]).
pub const RX_BEAT_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// The earliest timer of any endpoint.
fn next_deadline(t: &Tunnel) -> Time {
    t.peers
        .list()
        .iter()
        .map(|p| p.deadline())
        .min()
        .unwrap_or(Time::from_secs(3600))
}

/// Run the timers of every endpoint due at `now`.
fn run_timers(t: &Tunnel, now: Time, b: &mut RxBufs, outputs: &mut Outputs) {
    for (i, peer) in t.peers.list().iter().enumerate() {
        if peer.deadline() > now {
            continue;
        }
        let mut guard = peer.lock();
        let Some(ep) = guard.as_mut() else { continue };
        peer.apply_too_big(ep, now);
        ep.handle_timeout(now);
        let from = b.out.len();
        b.take_delivered(t.prefix, ep);
        Tunnel::gather(ep, now, i, outputs);
        peer.note_deadline(ep);
        drop(guard);
        check_sources(t, i, from, b);
    }
}

/// Which peer and path a datagram received at socket `s` is for, from its header, among
/// `slots` peer positions ([`mpt_tunnel::Endpoint::route`]; no lock); `None` with the reason
/// when it is for none.
fn demux(s: &SockIo, d: &[u8], slots: usize) -> Result<(Option<usize>, PathId, bool), DropReason> {
    let (route, path) = mpt_tunnel::Endpoint::route(d, slots)?;
    let path = s.path().unwrap_or(path);
    Ok(match route {
        Route::Initiation => (None, path, true),
        Route::Connection(i) => (Some(i), path, false),
    })
}

/// Receive one batch from socket `s`, find each datagram's peer, open them (without any
/// lock) and give them to their endpoints, with one lock per run of datagrams of one peer.
/// Returns how many receive slices it filled and, with several paths, the socket of the path
/// the resequencer waits for; `None` when nothing was waiting.
fn receive_batch(
    t: &Tunnel,
    socks: &[Arc<SockIo>],
    s: usize,
    b: &mut RxBufs,
    outputs: &mut Outputs,
) -> Option<(usize, Option<usize>)> {
    let n = read_batch(t, &socks[s], b)?;
    let lagging = handle_batch(t, socks, s, n, b, outputs);
    if let (true, Some(auto)) = (b.authentic, &socks[s].auto) {
        // an `auto` path's retry by UDP is answered (or UDP carries it)
        auto.heard_udp(t.clock.now());
    }
    Some((n, lagging))
}

/// Handle the `n` buffers of a batch received at socket `s` (read from its UDP socket, or
/// frames from its streams): find each datagram's peer, open them (without any lock) and give
/// them to their endpoints, with one lock per run of datagrams of one peer. Returns the socket
/// of the path the resequencer waits for, with several paths; `None` when nothing was waiting.
fn handle_batch(
    t: &Tunnel,
    socks: &[Arc<SockIo>],
    s: usize,
    n: usize,
    b: &mut RxBufs,
    outputs: &mut Outputs,
) -> Option<usize> {
    let sock = &socks[s];
    // the peers now (a reload may replace the list; slots keep their positions)
    let peers = t.peers.list();
    let now = t.clock.now();
    trace!(socket = %sock.name(), buffers = n, "received a batch");
    b.authentic = false;
    let mut dropped: Vec<(Option<usize>, DropReason)> = Vec::new();
    b.place(t, sock, n, peers.len(), &mut dropped);
    // Open the batch without the endpoints' locks: the AEAD is the costly part of receiving,
    // and the tx task numbers its batches under those locks meanwhile.
    b.open(&peers);
    let here = Here { t, socket: s, now };
    let mut lagging = None;
    let mut k = 0;
    while k < b.places.len() {
        let p = b.places[k];
        if p.initiation {
            let d = &b.slices[p.slice][p.at..p.at + p.len];
            let at = Arrival {
                socket: s,
                path: p.path,
                from: p.from,
                to: p.to,
            };
            match t.take_initiation(now, at, d, outputs) {
                Ok(_) => b.authentic = true,
                Err(reason) => {
                    t.io_drop(reason, 1);
                    dropped.push((None, reason));
                }
            }
            k += 1;
            continue;
        }
        let Some(i) = p.peer else {
            k += 1;
            continue;
        };
        // the run of datagrams of peer `i`, under one lock
        match peers.get(i) {
            Some(peer) => {
                if let Some(l) = here.take_run(i, peer, b, &mut k, outputs, &mut dropped) {
                    lagging = l;
                }
            }
            // (the batch's places name only peers of the list it was read with)
            None => drop_run(t, i, &b.places, &mut k, &mut dropped),
        }
    }
    for (peer, reason) in dropped {
        t.log_drop(s, peer, reason);
    }
    lagging
}

/// One receive from `sock` into `b`'s slices: how many buffers it filled (`None`: nothing to
/// read, or an error, counted and logged now and then).
fn read_batch(t: &Tunnel, sock: &SockIo, b: &mut RxBufs) -> Option<usize> {
    let got = {
        let mut each = b.slices.iter_mut();
        let mut io: [std::io::IoSliceMut<'_>; RX_SLICES] = std::array::from_fn(|_| {
            std::io::IoSliceMut::new(each.next().expect("RX_SLICES slices"))
        });
        sock.io.try_recv(&mut io, &mut b.metas)
    };
    t.counters.calls.udp_recvs.fetch_add(1, Relaxed);
    match got {
        Ok(n) => {
            sock.wire.received(&b.metas[..n]);
            Some(n)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(error) => {
            if let Some(n) = t.counters.recv_errors.hit() {
                warn!(socket = %sock.name(), %error, errors = n, "receive failed");
            }
            None
        }
    }
}

/// Where a batch is handled: the tunnel, the socket it came from, and when.
struct Here<'a> {
    t: &'a Tunnel,
    socket: usize,
    now: Time,
}

impl Here<'_> {
    /// The run of datagrams of peer `i` from `b.places[*k]` on, handed to its endpoint under
    /// one lock (dropped and counted when it has none); `*k` moves past it. Returns the
    /// socket of the path the endpoint's resequencer waits for, if it was locked.
    fn take_run(
        &self,
        i: usize,
        peer: &Peer,
        b: &mut RxBufs,
        k: &mut usize,
        outputs: &mut Outputs,
        dropped: &mut Vec<(Option<usize>, DropReason)>,
    ) -> Option<Option<usize>> {
        let (t, now) = (self.t, self.now);
        let mut guard = peer.lock();
        let Some(ep) = guard.as_mut() else {
            drop_run(t, i, &b.places, k, dropped);
            return None;
        };
        let from_out = b.out.len();
        while *k < b.places.len() && b.places[*k].peer == Some(i) && !b.places[*k].initiation {
            let p = b.places[*k];
            let opened = b.opened[*k].take();
            *k += 1;
            let (slice, at) = (p.slice, p.at);
            let d = &mut b.slices[slice][at..at + p.len];
            let mut payloads = Payloads {
                pool: &mut b.pool,
                cap: b.cap,
                prefix: t.prefix,
                slice,
                at,
            };
            let outcome = ep.handle_datagram(
                now,
                mpt_tunnel::Via {
                    path: p.path,
                    from: p.from,
                },
                d,
                opened,
                &mut payloads,
                &mut b.out,
            );
            match outcome {
                Outcome::Data(_) | Outcome::Handled => {
                    b.authentic = true;
                    if peer.listening {
                        peer.arrived(p.path, self.socket, p.to);
                    }
                }
                Outcome::Dropped(reason) => dropped.push((Some(i), reason)),
            }
        }
        // timers due while the sockets kept us busy: keepalives, reports and liveness do not
        // wait for the paths to fall quiet
        if ep.poll_timeout() <= now {
            ep.handle_timeout(now);
        }
        b.take_delivered(t.prefix, ep);
        Tunnel::gather(ep, t.clock.now(), i, outputs);
        // A gap waits for another path's datagrams, which sit in that path's socket: the turn
        // goes to the path the resequencer waits for, or the window overflows and gives up the
        // gap (`docs/results.md`, "Resequencer": two unshaped fast paths).
        let lagging = ep.lagging_path().map(|path| peer.socket(path));
        peer.note_deadline(ep);
        drop(guard);
        check_sources(t, i, from_out, b);
        Some(lagging)
    }
}

/// The next frames from the stream paths' readers (never, without an inbox).
async fn next_frames(inbox: &mut Option<crate::stream::Inbox>) -> Option<crate::stream::Frames> {
    match inbox {
        Some(i) => i.recv().await,
        None => std::future::pending().await,
    }
}

/// Wait until some socket has datagrams; returns its index. The scan starts after the socket
/// served last so that no socket starves the others.
async fn readable_any(sockets: &[Arc<SockIo>], next: &mut usize) -> usize {
    poll_fn(|cx| {
        let n = sockets.len();
        if n == 0 {
            return Poll::Pending;
        }
        for k in 0..n {
            let i = (*next + k) % n;
            if sockets[i].io.sock.poll_recv_ready(cx).is_ready() {
                *next = (i + 1) % n;
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}
