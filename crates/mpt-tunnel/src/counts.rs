//! What a connection counts and shows of it: drops by reason (the resequencer's included),
//! packets and bytes sent and delivered, control traffic, bundles.

use crate::{Connection, DropCounts, DropReason, Drops};

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

/// What the connection counts.
impl<P> Connection<P> {
    /// Drops by reason, the resequencer's duplicates and too-old packets included.
    pub fn drop_counts(&self) -> [u64; DropReason::COUNT] {
        let mut c = *self.counts.drops.counts();
        let t = &self.reseq.stats().total;
        c[DropReason::Duplicate as usize] += t.duplicates;
        c[DropReason::TooOld as usize] = t.too_old;
        c
    }

    /// [`Connection::drop_counts`] by name.
    pub fn drops(&self) -> DropCounts {
        DropCounts::from_counts(&self.drop_counts())
    }

    pub fn drop_count(&self, reason: DropReason) -> u64 {
        self.drop_counts()[reason as usize]
    }

    /// Inner packets numbered for sending, and their bytes.
    pub fn tx_counts(&self) -> (u64, u64) {
        (self.counts.tx_packets, self.counts.tx_bytes)
    }

    /// Inner packets released for delivery so far.
    pub fn delivered(&self) -> u64 {
        self.counts.delivered
    }

    /// Bytes of receiver reports sent (outer headers included).
    pub fn report_bytes(&self) -> u64 {
        self.counts.report_bytes
    }

    /// Keepalives sent, and keepalives answered.
    pub fn keepalive_counts(&self) -> (u64, u64) {
        (self.counts.keepalives_sent, self.counts.keepalive_acks_sent)
    }

    /// Share of the received bandwidth the report pacer spends on reports.
    pub fn report_fraction(&self) -> f64 {
        self.pacer.fraction()
    }

    /// What header compression did on our side: packets sent compressed, flows' references
    /// sent whole, header bytes saved, TCP sent whole for want of a layout it takes.
    pub fn compression_counts(&self) -> mpt_core::hc::TxCounts {
        self.hc_tx.counts()
    }

    /// Bundles sent (of two packets or more), the inner packets they carried, and how many of
    /// those went without their IPv4 and UDP headers (compressed entries).
    pub fn bundle_counts(&self) -> (u64, u64, u64) {
        (
            self.counts.bundles_sent,
            self.counts.bundled_packets,
            self.counts.compressed_packets,
        )
    }

    /// Packets that waited to match the farthest path, packets that went on early because too
    /// many waited, and packets waiting now (`equalise.rs`).
    pub fn equalise_counts(&self) -> (u64, u64, usize) {
        self.equal.counts()
    }

    /// How long bonded packets arriving on `path` wait now to match the farthest path.
    pub fn equalise_lag(&self, path: mpt_core::PathId) -> std::time::Duration {
        self.equal.lag(path.index())
    }

    /// Count a drop for `reason`; returns it.
    pub(crate) fn count(&mut self, reason: DropReason) -> DropReason {
        self.counts.drops.add(reason, 1);
        reason
    }
}
