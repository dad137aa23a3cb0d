//! Datagrams for a path whose socket has streams ([`crate::stream`]): to an address with a
//! stream, they go in its queue, which never waits (full, the datagram is dropped and
//! counted); a dialling side whose stream is not up sends nothing.

use mpt_core::PathId;

use crate::batch::GsoRun;
use crate::peer::Peer;
use crate::stream::Way;
use crate::tunnel::{send_on, Tunnel};

/// Send the run of datagrams (in `bufs`) of `peer`'s `path` the way `way` says.
pub(super) fn send_run(
    t: &Tunnel,
    peer: &Peer,
    path: PathId,
    way: &Way,
    run: &mut GsoRun,
    bufs: &[Vec<u8>],
) {
    for d in run.datagrams(bufs) {
        if send_on(&t.counters, way, d) {
            peer.sent(path, 1, d.len());
        }
    }
    run.clear();
}

/// Tell `c` what each of its stream paths holds below the tunnel (the stream's queue and its
/// kernel's unsent bytes) before a batch is numbered, so that its scheduler sends bulk where
/// it arrives sooner ([`mpt_tunnel::Connection::set_path_queue`]).
pub(super) fn stream_queues(
    t: &Tunnel,
    peer: &Peer,
    c: &mut mpt_tunnel::Connection<crate::peer::RxBuf>,
    now: mpt_core::Time,
) {
    for p in 0..c.path_count() {
        let path = PathId(p as u8);
        if c.path_transport(path) != mpt_tunnel::Transport::Stream {
            continue;
        }
        let Some(sock) = t.socket(peer.socket(path)) else {
            continue;
        };
        let (Some(side), Some(remote)) = (&sock.stream, c.remote(path)) else {
            continue;
        };
        if let Some(conn) = side.conn(remote) {
            c.set_path_queue(now, path, conn.backlog());
        }
    }
}
