//! Resend requests ([`Kind::Nack`]): the receiver names the data datagrams a path lost, by
//! their path sequences, and the sender sends the packets they carried again
//! ([`Kind::Resent`]) on the path that delivers soonest.
//!
//! The body after the header is a count, what the entries name, and that many entries of 4
//! bytes:
//!
//! ```text
//! | count (8) | names (8) | path id (8) | n (8) | first path seq (16) | ...   names = 0
//! | count (8) | names (8) | global sequence number (32) | ...                 names = 1
//! ```
//!
//! With `names` = [`NACK_PATHS`], an entry names `n` (1..=255) consecutive path sequences of
//! one path from `first` on. With [`NACK_REFERENCES`] (version 7), an entry names a flow's
//! reference for compressed headers by its global sequence number: the receiver got packets
//! compressed against it, and not it. The datagram's length is exactly `HEADER_LEN + 2 + 4 ×
//! count`, with 1..=[`MAX_NACK_RANGES`] entries; other values of `names` are refused.

use super::*;
use crate::PathId;

/// Bytes before the ranges: the count and a reserved byte.
pub const NACK_FIXED_LEN: usize = 2;

/// Bytes of one range.
pub const NACK_RANGE_LEN: usize = 4;

/// Most ranges one request carries.
pub const MAX_NACK_RANGES: usize = 64;

/// A request's entries name path sequences ([`NackRange`]).
pub const NACK_PATHS: u8 = 0;

/// A request's entries name references by their global sequence numbers (version 7).
pub const NACK_REFERENCES: u8 = 1;

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
    match body[1] {
        NACK_PATHS => {
            let mut ranges = body[NACK_FIXED_LEN..].chunks_exact(NACK_RANGE_LEN);
            if ranges.any(|r| r[1] == 0) {
                return Err(WireError::NackRanges(0));
            }
        }
        NACK_REFERENCES => {}
        other => return Err(WireError::NackNames(other)),
    }
    Ok(count)
}

/// What the entries of a body checked by [`check_nack`] name: [`NACK_PATHS`] or
/// [`NACK_REFERENCES`].
pub fn nack_names(body: &[u8]) -> u8 {
    body.get(1).copied().unwrap_or(NACK_PATHS)
}

/// The references (global sequence numbers) a body of [`NACK_REFERENCES`] names.
pub fn nack_references(body: &[u8]) -> impl Iterator<Item = u32> + '_ {
    body.get(NACK_FIXED_LEN..)
        .unwrap_or_default()
        .chunks_exact(NACK_RANGE_LEN)
        .map(be32)
}

/// Write a request's body naming `references` (1..=[`MAX_NACK_RANGES`]) into `body`, which
/// must be `nack_len(references.len()) - HEADER_LEN` bytes long.
pub fn emit_nack_references(body: &mut [u8], references: &[u32]) {
    emit_entries(body, NACK_REFERENCES, references, |r, out| {
        out.copy_from_slice(&r.to_be_bytes())
    });
}

/// A request's count, what its entries name, and each of `entries` written by `put` into its
/// 4 bytes.
fn emit_entries<T>(body: &mut [u8], names: u8, entries: &[T], put: impl Fn(&T, &mut [u8])) {
    body[0] = entries.len() as u8;
    body[1] = names;
    for (e, out) in entries
        .iter()
        .zip(body[NACK_FIXED_LEN..].chunks_exact_mut(NACK_RANGE_LEN))
    {
        put(e, out);
    }
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
    emit_entries(body, NACK_PATHS, ranges, |r, out| {
        out[0] = r.path.0;
        out[1] = r.count;
        out[2..4].copy_from_slice(&r.first.to_be_bytes());
    });
}
