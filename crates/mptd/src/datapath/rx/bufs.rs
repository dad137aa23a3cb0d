//! The receive task's buffers: the batch's slices and where each datagram lies, the pool
//! of buffers the resequencers hold, and what goes to the TUN device.

use std::net::SocketAddr;
use std::sync::Arc;

use mpt_tunnel::DropReason;

use mpt_core::PathId;

use super::super::payloads::Payloads;
use crate::peer::{Peer, RxBuf};
use crate::tunnel::{SockIo, Tunnel};

/// Receive buffers per batch (`recvmmsg`), each holding up to the kernel's GRO segments.
pub(super) const RX_SLICES: usize = 8;

/// Where one datagram of a batch lies, and whose it is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub(super) slice: usize,
    pub(super) at: usize,
    pub(super) len: usize,
    pub(super) from: SocketAddr,
    /// Our address it was sent to.
    pub(super) to: Option<std::net::IpAddr>,
    /// The peer it is for (from the index in its header), if any.
    pub(super) peer: Option<usize>,
    /// The path it came on: the socket's `[[path]]`, or what a listen socket's datagram says.
    pub(super) path: PathId,
    /// An initiation: handed to [`Tunnel::take_initiation`].
    pub(super) initiation: bool,
}

/// The receive task's buffers.
pub(super) struct RxBufs {
    /// Receive slices, one per `recvmmsg` entry.
    pub(super) slices: Vec<Vec<u8>>,
    pub(super) metas: [quinn_udp::RecvMeta; RX_SLICES],
    /// Buffers for the datagrams the resequencers hold.
    pub(super) pool: Vec<Vec<u8>>,
    /// Size of a pool buffer: one byte more than the largest valid datagram, so that a larger
    /// one is seen as such.
    pub(super) cap: usize,
    /// Released packets on their way to the TUN device.
    pub(super) out: Vec<RxBuf>,
    /// The datagrams of the current batch.
    pub(super) places: Vec<Place>,
    /// What opening each of them outside the lock gave.
    pub(super) opened: Vec<Option<mpt_tunnel::Opened>>,
    /// The openers of the batch's peers: (peer, opener).
    pub(super) openers: Vec<(usize, Option<mpt_tunnel::Opener>)>,
    /// Some datagram of the batch was authentic (an endpoint took it, or it was an initiation
    /// taken): a stream it came on is a peer's.
    pub(super) authentic: bool,
}

impl RxBufs {
    /// What `ep`'s resequencer released outside a datagram's handling (timers), onto `out`.
    pub(super) fn take_delivered(&mut self, prefix: usize, ep: &mut mpt_tunnel::Connection<RxBuf>) {
        let mut payloads = Payloads {
            pool: &mut self.pool,
            cap: self.cap,
            prefix,
            slice: 0,
            at: 0,
        };
        ep.take_delivered(&mut payloads, &mut self.out);
    }
}

impl RxBufs {
    /// Where each of the `n` buffers' datagrams lies (an empty one counts as one of length 0),
    /// and whose it is: `places`. A datagram that is no one's is dropped and counted.
    pub(super) fn place(
        &mut self,
        t: &Tunnel,
        sock: &SockIo,
        n: usize,
        peers: usize,
        dropped: &mut Vec<(Option<usize>, DropReason)>,
    ) {
        let b = self;
        b.places.clear();
        for (slice, meta) in b.metas.iter().enumerate().take(n) {
            let stride = meta.stride.max(1);
            let mut at = 0;
            loop {
                let len = (meta.len - at).min(stride);
                match super::demux(sock, &b.slices[slice][at..at + len], peers) {
                    Ok((peer, path, initiation)) => b.places.push(Place {
                        slice,
                        at,
                        len,
                        from: meta.addr,
                        to: meta.dst_ip,
                        peer,
                        path,
                        initiation,
                    }),
                    Err(reason) => {
                        t.io_drop(reason, 1);
                        dropped.push((None, reason));
                    }
                }
                at += len;
                if at >= meta.len {
                    break;
                }
            }
        }
    }

    /// Each placed datagram opened, without the endpoints' locks (`opened`), by an opener taken
    /// from its peer's endpoint once per batch.
    pub(super) fn open(&mut self, peers: &[Arc<Peer>]) {
        let b = self;
        b.openers.clear();
        b.opened.clear();
        for p in &b.places {
            let opener = match p.peer {
                None => None,
                Some(i) => match b.openers.iter().find(|(j, _)| *j == i) {
                    Some((_, o)) => o.clone(),
                    None => {
                        let o = peers
                            .get(i)
                            .and_then(|p| p.lock().as_ref().and_then(|ep| ep.opener()));
                        b.openers.push((i, o.clone()));
                        o
                    }
                },
            };
            let d = &mut b.slices[p.slice][p.at..p.at + p.len];
            b.opened.push(opener.and_then(|o| o.open(d)));
        }
    }
}
