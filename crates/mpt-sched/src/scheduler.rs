//! The scheduler contract: what a scheduler knows of a path ([`PathSpec`]), the [`Scheduler`]
//! trait every algorithm implements, and what it shows of what it learned ([`Learned`]). The
//! algorithms depend on this module and it on none of them: [`build`](crate::build()) makes
//! them.

use mpt_core::wire::ReportEntry;
use mpt_core::{PathId, Time};

/// What a scheduler knows about a path from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    /// Share for `wrr` (≥ 1).
    pub weight: u32,
    /// Sending rate for `rate`, bits per second.
    pub rate_bps: Option<u64>,
    /// Used only while no regular path is up: below every priority.
    pub backup: bool,
    /// Its tier: 1 is the highest. Paths of a lower tier carry traffic only while no path of a
    /// higher one is up, or (`rate`, `adaptive`) while every one up there is full.
    pub priority: u8,
    /// Bytes a datagram costs on the link beyond its inner packet: the mptd header (and the
    /// counter and tag when sealing), outer IP/UDP and link framing. Used to take a packet's
    /// serialisation out of a reported delay.
    pub overhead: usize,
}

/// [`PathSpec::overhead`] of a plain datagram over IPv4 and Ethernet framing.
pub const DEFAULT_OVERHEAD: usize = mpt_core::wire::Overhead::new(false, false).link();

impl PathSpec {
    pub fn new(weight: u32, rate_bps: Option<u64>, backup: bool) -> Self {
        PathSpec {
            weight,
            rate_bps,
            backup,
            priority: 1,
            overhead: DEFAULT_OVERHEAD,
        }
    }

    /// The same path in another tier (1 is the highest).
    pub fn with_priority(self, priority: u8) -> Self {
        PathSpec { priority, ..self }
    }

    /// Its tier, backups last: lower comes first.
    pub fn tier(&self) -> u8 {
        if self.backup {
            u8::MAX
        } else {
            self.priority
        }
    }

    /// The same path with another per-datagram overhead.
    pub fn with_overhead(self, overhead: usize) -> Self {
        PathSpec { overhead, ..self }
    }
}

/// A path scheduler. See the crate documentation for the contract.
pub trait Scheduler: Send + std::fmt::Debug {
    /// The algorithm's config name.
    fn name(&self) -> &'static str;

    /// The path for a packet of `len` bytes to be sent at `now`; `None` when no path is up.
    fn select(&mut self, now: Time, len: usize) -> Option<PathId>;

    /// A data datagram of `len` bytes (outer payload) was sent on `path` at `now`.
    fn on_sent(&mut self, _now: Time, _path: PathId, _len: usize) {}

    /// A control datagram (keepalive, keepalive answer, report) of `len` bytes was sent on `path`
    /// at `now`: it takes the link's time like data, but the receiver does not count it as data.
    fn on_control_sent(&mut self, now: Time, path: PathId, len: usize) {
        self.on_sent(now, path, len);
    }

    /// A datagram of `len` bytes given to [`on_sent`](Self::on_sent) or
    /// [`on_control_sent`](Self::on_control_sent) on `path` never left: the kernel refused it
    /// (a path MTU probe larger than the interface's). Its time on the link is given back.
    fn on_unsent(&mut self, _now: Time, _path: PathId, _len: usize) {}

    /// `path` went up (`true`) or down (`false`).
    fn on_path_state(&mut self, now: Time, path: PathId, up: bool);

    /// The receiver reported on `path` (cumulative counters and delay figures, see
    /// `docs/protocol.md`).
    fn on_report(&mut self, _now: Time, _path: PathId, _report: &ReportEntry) {}

    /// Whether `path` is up as far as the scheduler knows.
    fn is_up(&self, path: PathId) -> bool;

    /// How long a datagram sent on `path` at `now` would wait behind what was sent there
    /// before, as far as the scheduler knows (zero for those that keep no virtual clock).
    fn backlog(&self, _now: Time, _path: PathId) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// Keep `path`'s queue short: bulk goes there only while its backlog is at most `limit`,
    /// and to the other paths beyond that (while one is eligible), so that light traffic sent
    /// on it waits behind nothing. `None`: no path is kept short. Only schedulers that keep a
    /// virtual clock (`rate`, `adaptive`) can.
    fn keep_short(&mut self, _path: Option<PathId>, _limit: std::time::Duration) {}

    /// The receiver delays every bonded packet that arrives on a path nearer than the farthest
    /// one (not a backup) to match it, by at most `most` (zero: it does not). A bonded packet's
    /// delivery then depends on its path's queue, not on how near the path is, and a scheduler
    /// that places packets where they arrive soonest spreads them by queue alone instead of
    /// filling the near path's queue first.
    fn equalised(&mut self, _most: std::time::Duration) {}

    /// `path` holds `queue` at the sender already, below the tunnel (a stream path's own
    /// queue and the bytes its kernel has not sent): the scheduler's clock for it runs at
    /// least that far ahead of `now`, so that what follows goes where it arrives sooner. Only
    /// schedulers that keep a virtual clock (`rate`, `adaptive`) can.
    fn local_queue(&mut self, _now: Time, _path: PathId, _queue: std::time::Duration) {}

    /// Pace bonded traffic: with `Some(limit)`, a path is full once its backlog exceeds
    /// `limit`, and while every path a bonded packet may take is full the packet waits in the
    /// sender ([`paced_until`](Self::paced_until)) instead of queueing in a link. Only
    /// schedulers that keep a virtual clock (`rate`, `adaptive`) pace.
    fn pace(&mut self, _limit: Option<std::time::Duration>) {}

    /// When pacing holds bonded traffic at `now`: the time to offer it again; `None` when a
    /// bonded packet may go now.
    fn paced_until(&self, _now: Time) -> Option<Time> {
        None
    }

    /// How long `len` bytes take on the fastest paced path: how long, at least, bonded
    /// traffic held by pacing waits for a path to take its next datagram of that size. `None`
    /// when no path is paced.
    fn pace_granule(&self, _len: usize) -> Option<std::time::Duration> {
        None
    }

    /// The rate the scheduler currently assumes for `path`, when it learns rates.
    fn learned_rate(&self, _path: PathId) -> Option<u64> {
        None
    }

    /// What the scheduler learned of `path` from the receiver's reports, when it learns
    /// rates: for the status document, to tell why a path gets the traffic it gets.
    fn learned(&self, _now: Time, _path: PathId) -> Option<Learned> {
        None
    }
}

/// What [`Scheduler::learned`] shows of a path (with the `serde` feature, as the daemon's
/// status document shows it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Learned {
    /// The rate learned, bits per second (before the cap).
    pub rate_bps: u64,
    /// Most the path may be trusted with now: a step above what it carried lately.
    pub cap_bps: u64,
    /// Smoothed delivery rate, and the best seen, bits per second.
    pub delivery_bps: u64,
    pub best_delivery_bps: u64,
    /// Queueing delay the last report showed, microseconds.
    pub queue_us: u64,
    /// What the last report showed: silent (passed over until a report clears it),
    /// congested, full (a standing queue), busy (offered most of its rate).
    pub silent: bool,
    pub congested: bool,
    pub saturated: bool,
    pub busy: bool,
    /// Reports taken, and times the rate was cut for congestion.
    pub reports: u64,
    pub cuts: u64,
    /// Backlog of the scheduler's virtual clock now, microseconds.
    pub backlog_us: u64,
}
