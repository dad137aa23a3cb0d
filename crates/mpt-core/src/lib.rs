//! Core types of mptd: the wire protocol ([`wire`]), compressed TCP headers ([`hc`]), checked
//! views of inner packets ([`inner`]), sealing
//! (`seal`, with the feature of that name), and the small shared vocabulary of paths, queues,
//! randomness and time ([`PathId`], [`queue`], [`rng`], [`Time`]), and the satellite
//! handovers the lab and the simulator model ([`handover`]).
//!
//! This crate does no I/O, spawns nothing and never reads the clock: every function that needs
//! the current time takes it as an argument, so the schedulers and the resequencer built on it
//! can be driven by a simulated clock in tests.
#![forbid(unsafe_code)]

mod checksum;
pub mod handover;
pub mod hc;
pub mod inner;
pub mod queue;
pub mod rng;
#[cfg(feature = "seal")]
pub mod seal;
mod time;
pub mod wire;

pub use time::{wire_micros_between, Time};

/// Index of a path: its position in the `[[path]]` list of the configuration (0-based).
///
/// Both ends must list their paths in the same order; the id travels in every datagram so the
/// receiver can check that a datagram arrived on the socket it was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathId(pub u8);

impl PathId {
    /// The id as an index into per-path arrays.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl std::fmt::Display for PathId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Most paths one tunnel may have.
pub const MAX_PATHS: usize = 64;

/// The indices of the set bits of `mask`, lowest first: the paths of a per-path bit mask.
pub fn bits(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            return None;
        }
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        Some(i)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn bits_lists_the_set_bits_lowest_first() {
        assert_eq!(super::bits(0b1011).collect::<Vec<_>>(), vec![0, 1, 3]);
        assert_eq!(super::bits(0).count(), 0);
        assert_eq!(super::bits(1 << 63).collect::<Vec<_>>(), vec![63]);
    }
}
