//! What a connection counts and shows of it: drops by reason (the resequencer's included),
//! packets and bytes sent and delivered, control traffic, bundles.

use crate::{DropReason, Drops};

/// Counters other than drops.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    pub(crate) drops: Drops,
    pub(crate) tx_packets: u64,
    pub(crate) tx_bytes: u64,
    pub(crate) delivered: u64,
    pub(crate) report_bytes: u64,
    pub(crate) keepalives_sent: u64,
    pub(crate) keepalive_acks_sent: u64,
    /// Bundles sent, and the packets they carried.
    pub(crate) bundles_sent: u64,
    pub(crate) bundled_packets: u64,
    /// Of those, packets sent without their IPv4 and UDP headers (compressed entries).
    pub(crate) compressed_packets: u64,
    /// Packets that went into a bundle (one left alone in it is sent as plain data).
    pub(crate) held_packets: u64,
    /// What parity did at the receiver.
    pub(crate) parity: crate::ParityCounts,
}

impl Counts {
    /// Drops by reason, the resequencer's duplicates and too-old packets (`reseq`) included.
    pub(crate) fn drop_counts(&self, reseq: &mpt_reseq::Totals) -> [u64; DropReason::COUNT] {
        let mut c = *self.drops.counts();
        c[DropReason::Duplicate as usize] += reseq.duplicates;
        c[DropReason::TooOld as usize] = reseq.too_old;
        c
    }

    /// Count a drop for `reason`; returns it.
    #[inline]
    pub(crate) fn drop(&mut self, reason: DropReason) -> DropReason {
        self.drops.add(reason, 1);
        reason
    }
}
