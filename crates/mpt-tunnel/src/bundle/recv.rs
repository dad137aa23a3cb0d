//! Bundles on arrival: a bundle's (or a continued datagram's) entries, whole packets to the
//! resequencer and head pieces to the reassembly.

use mpt_core::wire::{BundleEntries, HeaderRepr};
use mpt_core::Time;
use mpt_reseq::PacketMeta;

use crate::fec::FecRx;
use crate::reassembly::{Assembled, Piece};
use crate::{DropReason, Incoming};

/// The entries of a bundle (or of a continued datagram) that arrived: its header, its body,
/// where the body starts in the buffer, how many entries it has, and the entries.
pub(crate) struct Entries<'a> {
    pub(crate) header: &'a HeaderRepr,
    pub(crate) body: &'a [u8],
    pub(crate) at: usize,
    pub(crate) count: usize,
    pub(crate) entries: BundleEntries<'a>,
}

/// What taking a bundle's entries made: its whole packets still in the buffer, for the
/// resequencer in order, and the pieces dropped (with why, to count).
pub(crate) struct Taken {
    pub(crate) packets: Vec<Incoming>,
    pub(crate) dropped: Option<DropReason>,
}

/// Bundles and continued datagrams as they arrive.
impl Assembled {
    /// The entries `e` of a bundle (or of a continued datagram), kept for their path's
    /// `parity`: whole packets for the resequencer, in order; a head piece to the reassembly,
    /// of a packet of at most `max` bytes. They take consecutive path sequences from the
    /// header's. When one is compressed (its headers rebuilt, so not in the buffer), all of
    /// them go as packets of their own ([`Assembled::ready`]), in the same order.
    pub(crate) fn take_entries(
        &mut self,
        now: Time,
        e: Entries<'_>,
        parity: &mut FecRx,
        max: usize,
    ) -> Taken {
        let Entries {
            header: h,
            body,
            at,
            count,
            entries,
        } = e;
        let mut out: Vec<Incoming> = Vec::with_capacity(count);
        let mut dropped = None;
        let mut owned = false;
        for (k, e) in entries.flatten().enumerate() {
            let meta = PacketMeta {
                path: h.path,
                seq: e.seq,
                path_seq: h.path_seq.wrapping_add(k as u16),
                sent_us: h.timestamp,
                len: e.len,
            };
            if e.is_head() {
                let piece = Piece::Head {
                    meta,
                    total: e.total,
                    bytes: &body[e.start..e.start + e.len],
                };
                dropped = self.take_piece(now, max, piece).err().or(dropped);
                continue;
            }
            let packet = e.packet(body);
            let meta = PacketMeta {
                len: packet.len(),
                ..meta
            };
            parity.arrived(now, &meta, &packet);
            let data = Incoming {
                meta,
                packet: at + e.start..at + e.start + e.len,
                express: false,
                resent: false,
                opens: false,
                pieces: false,
            };
            if e.headers.is_some() && !owned {
                // the first compressed entry: those before it go as packets of their own too,
                // ahead of it
                owned = true;
                for d in out.drain(..) {
                    let bytes = body[d.packet.start - at..d.packet.end - at].to_vec();
                    let d = Incoming {
                        packet: 0..bytes.len(),
                        ..d
                    };
                    self.ready.push_back((d, bytes));
                }
            }
            if owned {
                let data = Incoming {
                    packet: 0..packet.len(),
                    ..data
                };
                self.ready.push_back((data, packet.into_owned()));
            } else {
                out.push(data);
            }
        }
        Taken {
            packets: out,
            dropped,
        }
    }
}
