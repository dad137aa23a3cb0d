//! `tbf` shaping of the lab's paths: the qdisc parameters for a rate and its bucket.

pub(crate) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `tbf` parameters that deliver the configured rate: a burst of at least 4 ms of data and
/// 3000 bytes, and a queue of 50 ms.
pub fn tbf(rate_bps: u64) -> String {
    tbf_with_burst(rate_bps, tbf_burst(rate_bps))
}

/// The bucket [`tbf`] gives a rate: 4 ms of it, at least two full-size packets.
pub fn tbf_burst(rate_bps: u64) -> u64 {
    (rate_bps / 8 * 4 / 1000).max(3000)
}

/// `tbf` with a given bucket. A qdisc re-shaped with `tc qdisc change` must keep a bucket at
/// least as large as before: tbf takes a GSO packet whole when it fits the bucket, and one
/// that fitted the old bucket but not the new one stays at the head of the queue for ever
/// (the link then carries nothing at all).
pub fn tbf_with_burst(rate_bps: u64, burst: u64) -> String {
    format!("tbf rate {rate_bps}bit burst {burst} latency 50ms")
}
