//! The receive task's buffers: the batch's slices and where each datagram lies, the pool
//! of buffers the resequencers hold, and what goes to the TUN device.

use std::net::SocketAddr;

use mpt_core::PathId;

use super::super::payloads::Payloads;
use crate::peer::RxBuf;

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
