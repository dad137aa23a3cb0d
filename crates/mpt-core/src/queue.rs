//! Whether a path's queue is full: a loss there is the queue overflowing, the inner congestion
//! control's signal, and not a random loss that the tunnel recovers. The receiver tells the
//! two apart per gap (`mpt-reseq`), the sender per report (its parity and its rate estimator).

use crate::Time;

/// A loss on a path is its queue overflowing, not a random loss, when the packet after it (or
/// the report after it) leaves the path's queue (its smoothed one-way delay above its least)
/// at this share of the highest it has shown lately or more...
pub const CONGESTED_SHARE: f64 = 0.8;
/// ...and at least this much queue (µs). Such a loss is counted apart (`congestion_lost`),
/// and left out of the loss rate that sizes parity: it is the signal the inner congestion
/// control needs, which parity would not help.
pub const CONGESTED_MIN_US: i64 = 10_000;
/// The highest queue a path has shown falls to half (or to the current queue) after this
/// long without a higher one.
pub const QUEUE_PEAK_AGE: std::time::Duration = std::time::Duration::from_secs(2);

/// The highest queue a path has shown lately, to tell a queue that overflows from one with
/// room ([`CONGESTED_SHARE`], [`CONGESTED_MIN_US`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueuePeak {
    peak_us: i64,
    at: Time,
}

impl QueuePeak {
    /// The path's queue stood at `queue_us` at `now`: whether it is near the highest it has
    /// shown lately, where a queue overflows (a loss there is the queue's, not random). The
    /// highest follows `queue_us`, and falls to half (or to `queue_us`) after
    /// [`QUEUE_PEAK_AGE`] without a higher one.
    pub fn full(&mut self, now: Time, queue_us: i64) -> bool {
        if queue_us >= self.peak_us {
            self.peak_us = queue_us;
            self.at = now;
        } else if now.saturating_since(self.at) > QUEUE_PEAK_AGE {
            self.peak_us = queue_us.max(self.peak_us / 2);
            self.at = now;
        }
        queue_us >= CONGESTED_MIN_US && queue_us as f64 >= CONGESTED_SHARE * self.peak_us as f64
    }
}
