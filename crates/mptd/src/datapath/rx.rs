//! Path sockets → endpoint → TUN, and the endpoint's timers.

use std::future::poll_fn;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::Poll;

use anyhow::Result;
use mpt_core::PathId;
use mpt_tunnel::Outcome;
use tracing::warn;

use super::tun_write::{RxBuf, TunWriter};
use crate::tunnel::{Outputs, PathIo, Tunnel};

/// What woke the receive task.
enum RxEvent {
    /// This path's socket has datagrams.
    Readable(usize),
    /// The endpoint's next timer is due.
    Timeout,
}

/// Receive buffers per batch (`recvmmsg`), each holding up to the kernel's GRO segments.
const RX_SLICES: usize = 8;
/// Batches taken from one socket before the others get a turn (fewer while the resequencer
/// waits for another path).
const RX_BATCHES_PER_TURN: usize = 4;

/// The receive task's buffers.
struct RxBufs {
    /// Receive slices, one per `recvmmsg` entry.
    slices: Vec<Vec<u8>>,
    metas: [quinn_udp::RecvMeta; RX_SLICES],
    /// Buffers for the datagrams the resequencer holds, enough for a full window.
    pool: Vec<Vec<u8>>,
    /// Size of a pool buffer: one byte more than the largest valid datagram, so that a larger
    /// one is seen as such.
    cap: usize,
    /// Released packets on their way to the TUN device.
    out: Vec<RxBuf>,
    /// Where each datagram of the current batch lies: (slice, offset, length, sender).
    places: Vec<(usize, usize, usize, std::net::SocketAddr)>,
    /// What opening each of them outside the lock gave.
    opened: Vec<Option<mpt_tunnel::Opened>>,
}

/// All path sockets → endpoint → TUN; the endpoint's timers. Datagrams arrive in batches
/// (recvmmsg, UDP GRO); what the resequencer releases goes to the TUN device in one batch per
/// turn, coalesced into super-packets (GRO) where the device takes them.
pub async fn rx_task(t: Arc<Tunnel>) -> Result<()> {
    let cap = t.max_datagram + 1;
    let window = t.cfg.connection.reorder_window;
    let gro_segments = t
        .paths
        .iter()
        .map(|p| p.io.gro_segments())
        .max()
        .unwrap_or(1);
    let slice_len = cap.max(1500) * gro_segments.max(1);
    let mut b = RxBufs {
        slices: (0..RX_SLICES).map(|_| vec![0u8; slice_len]).collect(),
        metas: [quinn_udp::RecvMeta::default(); RX_SLICES],
        pool: (0..window + 8).map(|_| vec![0u8; cap]).collect(),
        cap,
        out: Vec::with_capacity(window + 8),
        places: Vec::with_capacity(RX_SLICES * gro_segments.max(1)),
        opened: Vec::with_capacity(RX_SLICES * gro_segments.max(1)),
    };
    let mut writer = TunWriter::new(t.prefix);
    let mut outputs = Outputs::default();
    let mut next_sock = 0usize;
    loop {
        let deadline = t.lock().poll_timeout();
        let sleep_to = t.clock.instant(deadline);
        let ev = tokio::select! {
            biased;
            i = readable_any(&t.paths, &mut next_sock) => RxEvent::Readable(i),
            _ = tokio::time::sleep_until(sleep_to) => RxEvent::Timeout,
        };
        match ev {
            RxEvent::Readable(path) => {
                for _ in 0..RX_BATCHES_PER_TURN {
                    let Some((n, lagging)) = receive_batch(&t, path, &mut b, &mut outputs) else {
                        break;
                    };
                    if let Some(p) = lagging {
                        next_sock = p;
                    }
                    t.act(&mut outputs);
                    // what came out may lie in the slices the next batch is received into
                    writer
                        .write(&t, &mut b.out, &mut b.slices, &mut b.pool)
                        .await?;
                    if n < RX_SLICES || lagging.is_some_and(|p| p != path) {
                        break;
                    }
                }
            }
            RxEvent::Timeout => {
                let now = t.clock.now();
                let mut ep = t.lock();
                ep.handle_timeout(now);
                ep.take_delivered(&mut b.out);
                Tunnel::gather(&mut ep, now, &mut outputs);
            }
        }
        t.act(&mut outputs);
        writer
            .write(&t, &mut b.out, &mut b.slices, &mut b.pool)
            .await?;
    }
}

/// Receive one batch from path `path`'s socket, open it (without the lock) and give its
/// datagrams to the endpoint with one lock for the whole batch. Returns how many receive slices it filled and, with several
/// paths, the path the resequencer waits for; `None` when nothing was waiting.
fn receive_batch(
    t: &Tunnel,
    path: usize,
    b: &mut RxBufs,
    outputs: &mut Outputs,
) -> Option<(usize, Option<usize>)> {
    let got = {
        let mut each = b.slices.iter_mut();
        let mut io: [std::io::IoSliceMut<'_>; RX_SLICES] = std::array::from_fn(|_| {
            std::io::IoSliceMut::new(each.next().expect("RX_SLICES slices"))
        });
        t.paths[path].io.try_recv(&mut io, &mut b.metas)
    };
    t.calls.udp_recvs.fetch_add(1, Relaxed);
    let n = match got {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return None,
        Err(error) => {
            if let Some(n) = t.recv_errors.hit() {
                warn!(path = %t.paths[path].cfg.name, %error, errors = n, "receive failed");
            }
            return None;
        }
    };
    let now = t.clock.now();
    let id = PathId(path as u8);
    // where each datagram of the batch lies (an empty one counts as one of length 0)
    b.places.clear();
    for (slice, meta) in b.metas.iter().enumerate().take(n) {
        let stride = meta.stride.max(1);
        let mut at = 0;
        loop {
            let len = (meta.len - at).min(stride);
            b.places.push((slice, at, len, meta.addr));
            at += len;
            if at >= meta.len {
                break;
            }
        }
    }
    // Open the batch without the endpoint's lock: the AEAD is the costly part of receiving,
    // and the tx task numbers its batches under that lock meanwhile.
    let opener = t.lock().opener();
    b.opened.clear();
    for &(slice, at, len, _) in &b.places {
        let d = &mut b.slices[slice][at..at + len];
        b.opened.push(opener.as_ref().and_then(|o| o.open(d)));
    }
    let mut dropped = Vec::new();
    let lagging = {
        let mut ep = t.lock();
        for (&(slice, at, len, from), opened) in b.places.iter().zip(b.opened.drain(..)) {
            let d = &mut b.slices[slice][at..at + len];
            let outcome = match opened {
                Some(o) => ep.handle_opened(now, id, from, d, o),
                None => ep.handle_datagram(now, id, from, d),
            };
            match outcome {
                Outcome::Data(data) => {
                    let (start, end) = (data.packet.start, data.packet.end);
                    let here = RxBuf::Slice {
                        slice,
                        at,
                        start,
                        end,
                    };
                    // held: copied out of the slice, which the next batch reuses
                    let (pool, slices, cap) = (&mut b.pool, &b.slices, b.cap);
                    let keep = |p: RxBuf| {
                        let mut buf = pool.pop().unwrap_or_else(|| vec![0u8; cap]);
                        let bytes = p.bytes(slices);
                        buf[..bytes.len()].copy_from_slice(bytes);
                        RxBuf::Own { buf, start, end }
                    };
                    ep.push_data(now, &data, here, keep);
                }
                Outcome::Handled => {}
                Outcome::Dropped(reason) => dropped.push(reason),
            }
        }
        // timers due while the sockets kept us busy: keepalives, reports and liveness do not
        // wait for the paths to fall quiet
        if ep.poll_timeout() <= now {
            ep.handle_timeout(now);
        }
        ep.take_delivered(&mut b.out);
        Tunnel::gather(&mut ep, t.clock.now(), outputs);
        // A gap waits for another path's datagrams, which sit in that path's socket: the turn
        // goes to the path the resequencer waits for, or the window overflows and gives up the
        // gap (`docs/results.md`, "Two unshaped fast paths").
        ep.lagging_path().map(PathId::index)
    };
    for reason in dropped {
        t.log_drop(path, reason);
    }
    Some((n, lagging))
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
