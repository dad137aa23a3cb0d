//! The resequencer's histograms (hold times, occupancy) as OpenMetrics histograms, one per
//! peer.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;

/// Upper bounds of the hold-time histogram's buckets, seconds.
const HOLD_BOUNDS: [f64; 14] = [
    0.0, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// One histogram per peer, given whole (sum, count and bucket counts).
#[derive(Debug, Default)]
pub(super) struct PeerHistograms(pub(super) Vec<(String, Buckets)>);

/// A histogram given whole: sum, count, and the count of each bucket by its upper bound.
type Buckets = (f64, u64, Vec<(f64, u64)>);

impl EncodeMetric for PeerHistograms {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (peer, (sum, count, buckets)) in &self.0 {
            let labels = vec![("peer".to_owned(), peer.clone())];
            encoder
                .encode_family(&labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    *sum, *count, buckets, None,
                )?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// A hold-time histogram in [`HOLD_BOUNDS`] buckets (each of the resequencer's fine buckets
/// counted in the first bound at or above its top), and its sum in seconds.
pub(super) fn hold_buckets(h: &mpt_reseq::LogHistogram) -> Buckets {
    let mut counts = vec![0u64; HOLD_BOUNDS.len() + 1];
    for (i, &n) in h.buckets.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let top = mpt_reseq::LogHistogram::bucket_upper(i) as f64 / 1e9;
        let k = HOLD_BOUNDS
            .iter()
            .position(|&b| top <= b)
            .unwrap_or(HOLD_BOUNDS.len());
        counts[k] += n;
    }
    let mut buckets: Vec<(f64, u64)> = HOLD_BOUNDS
        .iter()
        .copied()
        .zip(counts.iter().copied())
        .collect();
    // the encoder writes f64::MAX as le="+Inf"
    buckets.push((f64::MAX, counts[HOLD_BOUNDS.len()]));
    (h.sum as f64 / 1e9, h.count, buckets)
}

/// A peer's resequencer histograms: hold times and occupancy.
pub type ReseqHistograms = (
    String,
    mpt_reseq::LogHistogram,
    mpt_reseq::OccupancyHistogram,
);

/// Upper bounds of the occupancy histogram's buckets, packets held.
const OCCUPANCY_BOUNDS: [f64; 14] = [
    0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
];

/// The occupancy histogram (a count per number of packets held, the last bucket for that
/// many or more) in [`OCCUPANCY_BOUNDS`] buckets, and its sum.
pub(super) fn occupancy_buckets(h: &mpt_reseq::OccupancyHistogram) -> Buckets {
    let mut counts = vec![0u64; OCCUPANCY_BOUNDS.len() + 1];
    let mut sum = 0.0;
    for (held, &n) in h.buckets.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let k = OCCUPANCY_BOUNDS
            .iter()
            .position(|&b| held as f64 <= b)
            .unwrap_or(OCCUPANCY_BOUNDS.len());
        counts[k] += n;
        sum += held as f64 * n as f64;
    }
    let mut buckets: Vec<(f64, u64)> = OCCUPANCY_BOUNDS
        .iter()
        .copied()
        .zip(counts.iter().copied())
        .collect();
    buckets.push((f64::MAX, counts[OCCUPANCY_BOUNDS.len()]));
    (sum, h.count(), buckets)
}
