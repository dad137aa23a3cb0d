//! The tx task's sends: the runs of a batch (one GSO send each, or one send per datagram
//! where the kernel refuses GSO) and the datagrams the endpoint built whole, each on its
//! path's UDP socket or stream.

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;

use mpt_core::PathId;
use mpt_tunnel::DropReason;
use tracing::{debug, trace, warn};

use super::stream;
use crate::batch::GsoRun;
use crate::tunnel::Tunnel;

/// Send a data datagram the endpoint built whole: a bundle that leaves before a batch, or
/// what leaves after it. Unlike a control datagram ([`Tunnel::send`], which a full socket
/// buffer drops), it waits for room, as the batch's own datagrams do.
pub(super) async fn send_whole(t: &Tunnel, peer: &crate::peer::Peer, b: &mpt_tunnel::Datagram) {
    let Some(s) = t.socket(peer.socket(b.path)) else {
        t.io_drop(DropReason::SendError, 1);
        return;
    };
    let way = crate::tunnel::way(&s, b.destination);
    if !matches!(way, crate::stream::Way::Udp) {
        if crate::tunnel::send_on(&t.counters, &way, &b.contents) {
            peer.sent(b.path, 1, b.contents.len());
        }
        return;
    }
    t.counters.calls.udp_sends.fetch_add(1, Relaxed);
    match s
        .io
        .send(&b.contents, b.destination, peer.source(b.path))
        .await
    {
        Ok(()) => {
            s.wire.sent(b.destination, 1, b.contents.len());
            peer.sent(b.path, 1, b.contents.len());
        }
        Err(e) => t.send_failed(peer, b.path, b.contents.len(), &e),
    }
}

/// Send the run of datagrams (in `bufs`) of peer `i`'s `path`: one GSO send, or one send each
/// if the kernel refuses GSO. Waits for room in the socket buffer rather than drop (the
/// backpressure TCP inside the tunnel needs); a hard error (link down) is counted and the
/// datagrams dropped.
pub(super) async fn flush_run(
    t: &Tunnel,
    peer: &crate::peer::Peer,
    path: PathId,
    run: &mut GsoRun,
    bufs: &[Vec<u8>],
    remote: SocketAddr,
) {
    let (bytes, count) = (run.bytes(), run.count());
    let Some(p) = t.socket(peer.socket(path)) else {
        // the path was removed by a reload while the batch was on its way
        t.io_drop(DropReason::SendError, count as u64);
        run.clear();
        return;
    };
    let way = crate::tunnel::way(&p, remote);
    if !matches!(way, crate::stream::Way::Udp) {
        return stream::send_run(t, peer, path, &way, run, bufs);
    }
    t.counters.calls.udp_sends.fetch_add(1, Relaxed);
    let result = if count > 1 && p.gso_refused.load(Relaxed) {
        Err(std::io::Error::from_raw_os_error(libc::EIO))
    } else {
        p.io.send_run(run, bufs, remote, peer.source(path)).await
    };
    trace!(peer = %peer.cfg().name, path = %t.path_name(peer, path), datagrams = count, bytes,
        ok = result.is_ok(), "sent a run");
    match result {
        Ok(()) => {
            p.wire.sent(remote, count, bytes);
            peer.sent(path, count, bytes);
        }
        Err(e) if count > 1 => {
            if e.raw_os_error() == Some(libc::EIO) && !p.gso_refused.swap(true, Relaxed) {
                warn!(socket = %p.name(), "the kernel refuses UDP GSO on this socket; sending one datagram per call");
            } else {
                debug!(socket = %p.name(), error = %e, "GSO send failed; sending one by one");
            }
            for d in run.datagrams(bufs) {
                match p.io.send(d, remote, peer.source(path)).await {
                    Ok(()) => {
                        p.wire.sent(remote, 1, d.len());
                        peer.sent(path, 1, d.len());
                    }
                    Err(e) => t.send_failed(peer, path, d.len(), &e),
                }
            }
        }
        Err(e) => t.send_failed(peer, path, run.bytes() / count.max(1), &e),
    }
    run.clear();
}
