//! What the `adaptive` scheduler learned of a path, as the status document shows it.

use serde::{Deserialize, Serialize};

/// What the `adaptive` scheduler learned of a path (`mpt_sched::Learned`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct LearnedStatus {
    /// The rate learned, and the most the path is trusted with now (a step above what it
    /// carried lately); the scheduler uses the lower. Bits per second.
    pub rate_bps: u64,
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
    /// Reports taken; times the rate was cut for congestion.
    pub reports: u64,
    pub cuts: u64,
    /// The scheduler's virtual queue on the path now, microseconds.
    pub backlog_us: u64,
}

impl From<mpt_sched::Learned> for LearnedStatus {
    fn from(l: mpt_sched::Learned) -> Self {
        LearnedStatus {
            rate_bps: l.rate_bps,
            cap_bps: l.cap_bps,
            delivery_bps: l.delivery_bps,
            best_delivery_bps: l.best_delivery_bps,
            queue_us: l.queue_us,
            silent: l.silent,
            congested: l.congested,
            saturated: l.saturated,
            busy: l.busy,
            reports: l.reports,
            cuts: l.cuts,
            backlog_us: l.backlog_us,
        }
    }
}
