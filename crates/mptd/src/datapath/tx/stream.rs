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
