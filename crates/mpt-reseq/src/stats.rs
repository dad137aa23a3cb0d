//! Statistics kept by the [`Resequencer`](crate::Resequencer): plain structs with public
//! fields, cumulative across [`reset`](crate::Resequencer::reset).

use std::time::Duration;

/// Number of buckets of a [`LogHistogram`]: 8 exact buckets for 0..8, then 8 linear
/// sub-buckets for each power of two from 2^3 to 2^63.
pub const LOG_HISTOGRAM_BUCKETS: usize = 8 + 61 * 8;

/// A log-linear histogram of `u64` values (each power of two split into 8 linear sub-buckets,
/// so a reported percentile is at most 12.5 % above the true value). Records in O(1), no
/// allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHistogram {
    /// Sample counts; bucket `i` covers the values in
    /// [`bucket_lower(i)`](Self::bucket_lower)`..=`[`bucket_upper(i)`](Self::bucket_upper).
    pub buckets: [u64; LOG_HISTOGRAM_BUCKETS],
    /// Number of samples.
    pub count: u64,
    /// Sum of all samples (saturating).
    pub sum: u64,
    /// Largest sample (exact); 0 when empty.
    pub max: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram {
            buckets: [0; LOG_HISTOGRAM_BUCKETS],
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

impl LogHistogram {
    /// The bucket that holds `v`.
    pub fn bucket_index(v: u64) -> usize {
        if v < 8 {
            v as usize
        } else {
            let e = 63 - v.leading_zeros(); // 3..=63
            let sub = (v >> (e - 3)) & 7;
            ((e - 2) * 8) as usize + sub as usize
        }
    }

    /// Smallest value that falls into bucket `i`.
    pub fn bucket_lower(i: usize) -> u64 {
        if i < 8 {
            i as u64
        } else {
            let e = (i / 8 + 2) as u32;
            let sub = (i % 8) as u64;
            (8 + sub).checked_shl(e - 3).unwrap_or(u64::MAX)
        }
    }

    /// Largest value that falls into bucket `i`.
    pub fn bucket_upper(i: usize) -> u64 {
        if i < 8 {
            i as u64
        } else {
            let e = (i / 8 + 2) as u32;
            Self::bucket_lower(i).saturating_add((1u64 << (e - 3)) - 1)
        }
    }

    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, v: u64) {
        if let Some(b) = self.buckets.get_mut(Self::bucket_index(v)) {
            *b += 1;
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        if v > self.max {
            self.max = v;
        }
    }

    /// Mean of the samples (exact unless the sum saturated); 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// An upper bound of the `q`-quantile (`q` in 0..=1, clamped): the upper edge of the bucket
    /// holding the sample of rank ⌈q·count⌉, never more than [`max`](Self::max). `percentile(1.0)`
    /// is the exact maximum. 0 when empty.
    pub fn percentile(&self, q: f64) -> u64 {
        let Some(rank) = quantile_rank(q, self.count) else {
            return 0;
        };
        let mut acc = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Self::bucket_upper(i).min(self.max);
            }
        }
        self.max
    }
}

/// Rank (1-based) of the `q`-quantile among `count` samples, `None` when there are none.
fn quantile_rank(q: f64, count: u64) -> Option<u64> {
    if count == 0 {
        return None;
    }
    let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
    Some(((q * count as f64).ceil() as u64).clamp(1, count))
}

/// Most buckets of an [`OccupancyHistogram`] (4096 exact values + "this many or more").
pub const MAX_OCCUPANCY_BUCKETS: usize = 4097;

/// Histogram of the number of packets held by the resequencer, sampled after every push.
///
/// Bucket `n` counts the samples with exactly `n` packets held, except the last bucket, which
/// counts "this many or more" (it is only reached with windows above 4096). The buckets grow
/// to the largest occupancy sampled: an idle connection's holds one (a full one's, 32 KiB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OccupancyHistogram {
    /// Sample counts by occupancy, as far as the largest sampled.
    pub buckets: Vec<u64>,
    /// How many buckets it may grow to: `window + 1`, at most [`MAX_OCCUPANCY_BUCKETS`].
    limit: usize,
}

impl OccupancyHistogram {
    /// A histogram for a window of `window` packets: up to `window + 1` buckets, at most
    /// [`MAX_OCCUPANCY_BUCKETS`], none allocated until a sample comes.
    pub fn for_window(window: usize) -> Self {
        OccupancyHistogram {
            buckets: Vec::new(),
            limit: window.saturating_add(1).min(MAX_OCCUPANCY_BUCKETS),
        }
    }

    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, held: usize) {
        if self.limit == 0 {
            return;
        }
        let at = held.min(self.limit - 1);
        if at >= self.buckets.len() {
            self.buckets.resize(at + 1, 0);
        }
        self.buckets[at] += 1;
    }

    /// How many buckets it may grow to (the last counts "this many or more").
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Mean occupancy (the last bucket counts as its lower bound); 0 when empty.
    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            return 0.0;
        }
        let total: f64 = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &c)| i as f64 * c as f64)
            .sum();
        total / n as f64
    }

    /// The `q`-quantile of the occupancy (`q` in 0..=1, clamped); 0 when empty. A result equal
    /// to the last bucket index means "at least this many".
    pub fn percentile(&self, q: f64) -> usize {
        let Some(rank) = quantile_rank(q, self.count()) else {
            return 0;
        };
        let mut acc = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return i;
            }
        }
        self.buckets.len().saturating_sub(1)
    }

    /// Fraction of samples with at least `n` packets held; 0 when empty.
    pub fn fraction_at_least(&self, n: usize) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let above: u64 = self.buckets.iter().skip(n).sum();
        above as f64 / total as f64
    }
}

/// Counters over all paths. "Packets" are data packets handed to
/// [`push`](crate::Resequencer::push) on a valid path.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Data packets received.
    pub packets: u64,
    /// Their bytes (`PacketMeta::len`).
    pub bytes: u64,
    /// Packets passed to the caller.
    pub delivered: u64,
    /// Packets delivered with a seq below one delivered before: in passthrough mode every
    /// reordered one, with a window only late ones.
    pub delivered_out_of_order: u64,
    /// Packets dropped because the same global seq had already been received.
    pub duplicates: u64,
    /// Packets that arrived after their seq had been given up (with a window), delivered at
    /// once, out of order (also counted in `delivered_out_of_order`). One too old to tell from
    /// a duplicate counts in `too_old` instead.
    pub late: u64,
    /// Packets dropped because their seq is too old to tell from a duplicate.
    pub too_old: u64,
    /// Global seqs given up as lost (released past without having arrived).
    pub skipped: u64,
    /// RFC 4737 reordered packets (seq below the highest seq received before).
    pub reordered: u64,
    /// Largest RFC 4737 reordering extent seen.
    pub reorder_extent_max: u64,
    /// Sum of the extents of all reordered packets (mean = sum / reordered).
    pub reorder_extent_sum: u64,
    /// Gap releases because the oldest held packet waited `timeout` (one per release).
    pub released_by_timeout: u64,
    /// Gap releases because every counting path had progressed past the gap (fences,
    /// packets on other paths, `path_down`).
    pub released_by_fence: u64,
    /// Gap releases because the buffer was full or a packet lay beyond the ring.
    pub released_by_overflow: u64,
    /// Calls to [`reset`](crate::Resequencer::reset).
    pub resets: u64,
    /// Held packets dropped by `reset`.
    pub dropped_on_reset: u64,
    /// Per-path sequence gaps, summed over paths (see [`PathStats::lost`]).
    pub lost: u64,
    /// Packets the sender sent again because we asked ([`crate::Resequencer::push_resent`]).
    pub resent: u64,
    /// Of those, the ones that filled their gap before it was given up: losses recovered.
    pub recovered: u64,
    /// Per-path sequence errors, summed over paths.
    pub path_seq_errors: u64,
    /// Packets and fences naming a path outside the configuration (ignored).
    pub invalid_path: u64,
    /// Time from push to delivery of every delivered packet (0 for in-order ones), nanoseconds.
    pub hold_time_ns: LogHistogram,
    /// Number of packets held, sampled after every push.
    pub occupancy: OccupancyHistogram,
}

impl Totals {
    /// Mean RFC 4737 reordering extent over the reordered packets; 0 when none.
    pub fn reorder_extent_mean(&self) -> f64 {
        mean(self.reorder_extent_sum, self.reordered)
    }

    /// An upper bound of the `q`-quantile of the hold time.
    pub fn hold_time_percentile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.hold_time_ns.percentile(q))
    }

    /// The longest hold time.
    pub fn hold_time_max(&self) -> Duration {
        Duration::from_nanos(self.hold_time_ns.max)
    }
}

fn mean(sum: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        sum as f64 / n as f64
    }
}

/// Counters and delay figures of one path.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathStats {
    /// Data packets received on the path (duplicates included).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets missing from the path's sequence (`path_seq` gaps, and tail loss announced by a
    /// fence).
    pub lost: u64,
    /// Of those, lost where the path's queue overflowed ([`crate::CONGESTED_SHARE`]):
    /// asked for, but not waited for.
    pub congestion_lost: u64,
    /// `path_seq` going backwards or jumping forward by 32768 or more (the counter resyncs).
    pub path_seq_errors: u64,
    /// Duplicates that arrived on this path.
    pub duplicates: u64,
    /// Late packets (delivered out of order) that arrived on this path.
    pub late: u64,
    /// Packets too old to tell from a duplicate that arrived on this path (dropped).
    pub too_old: u64,
    /// RFC 4737 reordered packets that arrived on this path.
    pub reordered: u64,
    /// Largest reordering extent of those.
    pub reorder_extent_max: u64,
    /// Sum of their extents.
    pub reorder_extent_sum: u64,
    /// Fences (control messages) received on the path.
    pub fences: u64,
    /// The newest `path_seq` received on the path (paths are FIFO, so also the highest).
    pub highest_path_seq: Option<u16>,
    /// Send timestamp (sender's clock, µs) and arrival time of the newest data packet, echoed
    /// in reports so the sender can measure the RTT.
    pub last_sent_us: Option<u32>,
    pub last_arrival: Option<mpt_core::Time>,
    /// RFC 3550 interarrival jitter, microseconds.
    pub jitter_us: f64,
    /// Smoothed (EWMA, gain [`crate::OWD_GAIN`]) relative one-way delay, microseconds, minus
    /// the smallest delay seen on any path this session (so the fastest path is near 0).
    /// `None` before the first packet of the session on this path.
    pub owd_us: Option<f64>,
    /// Smallest relative one-way delay of the path, minus the smallest over all paths.
    pub owd_min_us: Option<i64>,
    /// Length (inner packet bytes) of the packet that saw the path's smallest delay.
    pub owd_min_len: Option<usize>,
    /// Relative one-way delay of the last packet, minus the smallest over all paths.
    pub owd_last_us: Option<i64>,
}

impl PathStats {
    /// The queue the path's packets meet: smoothed minus smallest one-way delay, microseconds
    /// (0 before the first packet).
    pub fn queue_us(&self) -> f64 {
        match (self.owd_us, self.owd_min_us) {
            (Some(owd), Some(min)) => (owd - min as f64).max(0.0),
            _ => 0.0,
        }
    }

    /// Mean RFC 4737 reordering extent of the packets reordered on this path; 0 when none.
    pub fn reorder_extent_mean(&self) -> f64 {
        mean(self.reorder_extent_sum, self.reordered)
    }
}

/// Everything the resequencer measures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Counters over all paths.
    pub total: Totals,
    /// One entry per configured path, indexed by [`PathId::index`](mpt_core::PathId::index).
    pub paths: Vec<PathStats>,
}

impl Stats {
    /// The statistics of one path, `None` outside the configuration.
    pub fn path(&self, path: mpt_core::PathId) -> Option<&PathStats> {
        self.paths.get(path.index())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_buckets_are_contiguous_and_tight() {
        assert_eq!(LogHistogram::bucket_lower(0), 0);
        for i in 0..LOG_HISTOGRAM_BUCKETS - 1 {
            let lo = LogHistogram::bucket_lower(i);
            let hi = LogHistogram::bucket_upper(i);
            assert!(lo <= hi);
            assert_eq!(LogHistogram::bucket_lower(i + 1), hi + 1, "bucket {i}");
            assert_eq!(LogHistogram::bucket_index(lo), i);
            assert_eq!(LogHistogram::bucket_index(hi), i);
            // relative width at most 1/8
            assert!((hi - lo) as f64 <= lo as f64 / 8.0 + 0.5, "bucket {i}");
        }
        assert_eq!(
            LogHistogram::bucket_upper(LOG_HISTOGRAM_BUCKETS - 1),
            u64::MAX
        );
        assert_eq!(
            LogHistogram::bucket_index(u64::MAX),
            LOG_HISTOGRAM_BUCKETS - 1
        );
    }

    #[test]
    fn log_percentiles() {
        let mut h = LogHistogram::default();
        assert_eq!(h.percentile(0.5), 0);
        for v in 1..=100u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count, 100);
        assert_eq!(h.max, 100_000);
        assert_eq!(h.percentile(1.0), 100_000);
        let p50 = h.percentile(0.5);
        assert!((50_000..=50_000 * 9 / 8).contains(&p50), "{p50}");
        let p99 = h.percentile(0.99);
        assert!((99_000..=100_000).contains(&p99), "{p99}");
        assert_eq!(h.percentile(f64::NAN), 100_000);
        assert!((h.mean() - 50_500.0).abs() < 1e-9);
    }

    #[test]
    fn occupancy_histogram() {
        let mut o = OccupancyHistogram::for_window(3);
        assert_eq!((o.limit(), o.buckets.len()), (4, 0));
        for n in [0, 0, 1, 2, 3, 7] {
            o.record(n);
        }
        assert_eq!(o.buckets, vec![2, 1, 1, 2]);
        assert_eq!(o.count(), 6);
        assert!((o.mean() - 9.0 / 6.0).abs() < 1e-12);
        assert_eq!(o.percentile(0.0), 0);
        assert_eq!(o.percentile(0.5), 1);
        assert_eq!(o.percentile(1.0), 3);
        assert!((o.fraction_at_least(2) - 0.5).abs() < 1e-12);
        assert_eq!(OccupancyHistogram::for_window(0).limit(), 1);
        assert_eq!(
            OccupancyHistogram::for_window(1 << 20).limit(),
            MAX_OCCUPANCY_BUCKETS
        );
        // grows to the largest sampled
        let mut big = OccupancyHistogram::for_window(4096);
        big.record(0);
        assert_eq!(big.buckets, [1]);
        big.record(2);
        assert_eq!(big.buckets, [1, 0, 1]);
        let mut empty = OccupancyHistogram::default();
        empty.record(5);
        assert_eq!(empty.percentile(0.5), 0);
    }
}
