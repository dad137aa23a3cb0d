//! Parity on arrival: packets kept while their path carries parity, and a parity that makes
//! one again ([`FecRx::repair`]).

use mpt_core::wire::HeaderRepr;
use mpt_core::Time;
use mpt_reseq::PacketMeta;

use super::{FecRx, ParityCounts};
use crate::Incoming;

/// A parity that arrived: its header, the size of its group, whether it carries the
/// packets' lengths (a session of version 5 or later), and its body (their XOR).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Parity<'a> {
    pub(crate) header: &'a HeaderRepr,
    pub(crate) k: usize,
    pub(crate) lengths: bool,
    pub(crate) body: &'a [u8],
}

impl FecRx {
    /// A data or express datagram arrived: kept while the path carries parity.
    pub(crate) fn arrived(&mut self, now: Time, meta: &PacketMeta, packet: &[u8]) {
        if self.active(now) {
            self.keep(meta.path_seq, meta.seq, packet);
        }
    }

    /// A parity arrived at `now`: the packet it makes again, to go to the resequencer (its
    /// gap, if the resequencer has not seen it yet, the group's last packet, is not asked for).
    pub(crate) fn repair(
        &mut self,
        now: Time,
        parity: Parity<'_>,
        counts: &mut ParityCounts,
    ) -> Option<(Incoming, Vec<u8>)> {
        let (seq, path_seq, packet) = self.take_parity(now, parity, counts)?;
        let meta = PacketMeta {
            path: parity.header.path,
            seq,
            path_seq,
            sent_us: now.wire_micros(),
            len: packet.len(),
        };
        let incoming = Incoming {
            meta,
            packet: 0..packet.len(),
            express: false,
            resent: true,
            opens: false,
            pieces: false,
        };
        Some((incoming, packet))
    }
}
