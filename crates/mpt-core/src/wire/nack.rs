//! Resend requests ([`Kind::Nack`]): the receiver names the data datagrams a path lost, by
//! their path sequences, and the sender sends the packets they carried again
//! ([`Kind::Resent`]) on the path that delivers soonest.
//!
//! The body after the header is a count, a reserved byte, and that many ranges:
//!
//! ```text
//! | count (8) | reserved (8) | path id (8) | n (8) | first path seq (16) | ...
//! ```
//!
//! A range names `n` (1..=255) consecutive path sequences of one path from `first` on. The
//! datagram's length is exactly `HEADER_LEN + 2 + 4 × count`, with 1..=[`MAX_NACK_RANGES`]
//! ranges.

use super::*;
use crate::PathId;

/// Bytes before the ranges: the count and a reserved byte.
pub const NACK_FIXED_LEN: usize = 2;

/// Bytes of one range.
pub const NACK_RANGE_LEN: usize = 4;

/// Most ranges one request carries.
pub const MAX_NACK_RANGES: usize = 64;

/// Consecutive path sequences of one path that did not arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackRange {
    pub path: PathId,
    /// The first path sequence missing.
    pub first: u16,
    /// How many, from `first` on (at least 1).
    pub count: u8,
}

/// Length of a request with `ranges` ranges.
pub const fn nack_len(ranges: usize) -> usize {
    HEADER_LEN + NACK_FIXED_LEN + NACK_RANGE_LEN * ranges
}

/// Check a request's body (what follows the header): how many ranges it holds.
pub fn check_nack(body: &[u8]) -> Result<usize, WireError> {
    let count = body.first().map_or(0, |&c| usize::from(c));
    exact_len(body, NACK_FIXED_LEN + NACK_RANGE_LEN * count.max(1)).map_err(|_| {
        WireError::ControlLength {
            expected: nack_len(count.max(1)),
            got: HEADER_LEN + body.len(),
        }
    })?;
    if count == 0 || count > MAX_NACK_RANGES {
        return Err(WireError::NackRanges(count));
    }
    let mut ranges = body[NACK_FIXED_LEN..].chunks_exact(NACK_RANGE_LEN);
    if ranges.any(|r| r[1] == 0) {
        return Err(WireError::NackRanges(0));
    }
    Ok(count)
}

/// The ranges of a body checked by [`check_nack`].
pub fn nack_ranges(body: &[u8]) -> impl Iterator<Item = NackRange> + '_ {
    body.get(NACK_FIXED_LEN..)
        .unwrap_or_default()
        .chunks_exact(NACK_RANGE_LEN)
        .map(|r| NackRange {
            path: PathId(r[0]),
            count: r[1],
            first: be16(&r[2..4]),
        })
}

/// Write a request's body for `ranges` (1..=[`MAX_NACK_RANGES`]) into `body`, which must be
/// `nack_len(ranges.len()) - HEADER_LEN` bytes long.
pub fn emit_nack(body: &mut [u8], ranges: &[NackRange]) {
    body[0] = ranges.len() as u8;
    body[1] = 0;
    for (r, out) in ranges
        .iter()
        .zip(body[NACK_FIXED_LEN..].chunks_exact_mut(NACK_RANGE_LEN))
    {
        out[0] = r.path.0;
        out[1] = r.count;
        out[2..4].copy_from_slice(&r.first.to_be_bytes());
    }
}
