//! What the receive task drops outside the endpoints: the datagrams of a peer that has no
//! endpoint to take them, and released packets whose source the peer may not send from.

use mpt_tunnel::DropReason;
use tracing::warn;

use super::bufs::{Place, RxBufs};
use crate::peer::RxBuf;
use crate::tunnel::Tunnel;

/// The run of datagrams for peer `i` from `places[*k]` on, which has no endpoint to take them:
/// dropped and counted (`unknown_session`).
pub(super) fn drop_run(
    t: &Tunnel,
    i: usize,
    places: &[Place],
    k: &mut usize,
    dropped: &mut Vec<(Option<usize>, DropReason)>,
) {
    while *k < places.len() && places[*k].peer == Some(i) && !places[*k].initiation {
        t.io_drop(DropReason::UnknownSession, 1);
        dropped.push((Some(i), DropReason::UnknownSession));
        *k += 1;
    }
}

/// The packets peer `i` released into `b.out[from..]`: those whose source address the peer
/// may not send from (outside its `allowed`) are dropped and counted.
pub(super) fn check_sources(t: &Tunnel, i: usize, from: usize, b: &mut RxBufs) {
    let table = t.peers.table();
    let routes = &table.routes;
    if routes.single().is_some() || b.out.len() == from {
        return;
    }
    // keep the allowed ones in order at the front of the tail, the others after them
    let mut keep = from;
    for k in from..b.out.len() {
        let bytes = b.out[k].bytes(&b.slices);
        let start = b.out[k].start().min(bytes.len());
        let ok = crate::routes::source(&bytes[start..]).is_some_and(|src| routes.allows(i, src));
        if ok {
            b.out.swap(keep, k);
            keep += 1;
        } else if let Some(n) = t.io_drop(DropReason::SourceNotAllowed, 1) {
            let name = t
                .peers
                .get(i)
                .map(|p| p.cfg().name.clone())
                .unwrap_or_default();
            warn!(peer = %name, dropped = n,
                "a packet from an address outside the peer's `allowed`: dropped");
        }
    }
    for p in b.out.drain(keep..) {
        if let RxBuf::Own { buf, .. } = p {
            b.pool.push(buf);
        }
    }
}
