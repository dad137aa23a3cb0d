//! What the tunnel counts outside its peers' endpoints (which count their own): drops of TUN
//! reads and writes, sends and datagrams for no peer, by reason and rate-limited for the log;
//! the rate limits for logging the endpoints' drops; receive errors; and the datapath's system
//! calls.

use std::sync::atomic::AtomicU64;

use mpt_tunnel::DropReason;

use crate::log::RateLimit;

/// See the module documentation.
#[derive(Debug)]
pub struct Counters {
    /// Drops outside the endpoints, counted and rate-limited for the log.
    io_drops: [RateLimit; DropReason::COUNT],
    /// Rate limits for logging the endpoints' drops (they count them themselves).
    drop_logs: [RateLimit; DropReason::COUNT],
    /// Receive errors on the sockets (not a drop: nothing was received).
    pub recv_errors: RateLimit,
    pub calls: Calls,
}

/// Datapath system calls (each may carry many packets).
#[derive(Debug, Default)]
pub struct Calls {
    pub tun_reads: AtomicU64,
    pub tun_write_batches: AtomicU64,
    pub udp_sends: AtomicU64,
    pub udp_recvs: AtomicU64,
    /// Cookie replies sent (one send each) while under handshake load.
    pub cookie_replies: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            io_drops: std::array::from_fn(|_| RateLimit::default()),
            drop_logs: std::array::from_fn(|_| RateLimit::default()),
            recv_errors: RateLimit::default(),
            calls: Calls::default(),
        }
    }
}

impl Counters {
    /// Count `n` drops for `reason` outside the endpoints; `Some(count)` when one should be
    /// logged.
    pub fn io_drop(&self, reason: DropReason, n: u64) -> Option<u64> {
        self.io_drops[reason as usize].hit_n(n)
    }

    /// Drops outside the endpoints, by reason.
    pub fn io_drop_counts(&self) -> [u64; DropReason::COUNT] {
        std::array::from_fn(|i| self.io_drops[i].count())
    }

    /// An endpoint dropped a datagram for `reason`: `Some(count)` when one should be logged.
    pub fn drop_logged(&self, reason: DropReason) -> Option<u64> {
        self.drop_logs[reason as usize].hit()
    }
}
