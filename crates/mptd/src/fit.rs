//! What the TUN reads cut TCP super-packets to ([`crate::datapath::tun_read`]), as one peer's
//! connection knows its paths ([`mpt_tunnel::Connection::segment_sizes`]): written by the tx
//! tasks under the peer's lock, read by every TUN queue's for a read routed to the peer. One
//! per peer, in [`crate::peer::Peer`]; a read routed to no peer is cut by [`Fit::default`]'s
//! (not at all).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};

use mpt_core::hc::{flow_hash, CONTEXTS};

/// What TCP segments are cut to fit: the largest inner packet a path's datagram carries
/// whole, what a TCP segment's headers take there when the connection compresses them (0: it
/// does not), the largest packet once every path found its MTU (0: not yet; what a SYN's MSS
/// is clamped for), and which flows have a reference their segments compress against.
#[derive(Debug)]
pub struct Fit {
    whole: AtomicUsize,
    compressed: AtomicUsize,
    settled: AtomicUsize,
    /// Per context, the flow whose segments compress (`Connection::compress_ready`).
    ready: [AtomicU32; CONTEXTS],
}

impl Default for Fit {
    fn default() -> Self {
        Fit {
            whole: AtomicUsize::new(usize::MAX),
            compressed: AtomicUsize::new(0),
            settled: AtomicUsize::new(0),
            ready: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }
}

impl Fit {
    /// What the peer's connection says now.
    pub fn set(&self, s: mpt_tunnel::SegmentSizes) {
        self.whole.store(s.whole, Relaxed);
        self.compressed.store(s.compressed.unwrap_or(0), Relaxed);
        self.settled.store(s.settled.unwrap_or(0), Relaxed);
    }

    /// The flows whose segments compress now, per context.
    pub fn set_ready(&self, ready: &[u32; CONTEXTS]) {
        for (r, &flow) in self.ready.iter().zip(ready) {
            if r.load(Relaxed) != flow {
                r.store(flow, Relaxed);
            }
        }
    }

    /// The largest packet once every path found its MTU (0: not yet).
    pub fn settled(&self) -> usize {
        self.settled.load(Relaxed)
    }

    pub fn max_packet(&self) -> usize {
        self.whole.load(Relaxed)
    }

    pub fn compressed(&self) -> Option<usize> {
        Some(self.compressed.load(Relaxed)).filter(|&c| c > 0)
    }

    /// Whether the TCP flow whose headers `p` starts with has a reference its segments
    /// compress against.
    pub fn ready(&self, p: &[u8]) -> bool {
        flow_hash(p).is_some_and(|h| h != 0 && self.ready[h as usize % CONTEXTS].load(Relaxed) == h)
    }
}
