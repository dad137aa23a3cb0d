//! The connection's side of bundles on arrival: a bundle's (or a continued datagram's)
//! entries, whole packets to the resequencer and head pieces to the reassembly.

use mpt_core::wire::HeaderRepr;
use mpt_core::Time;
use mpt_reseq::PacketMeta;

use crate::{Connection, Incoming};

/// Bundles and continued datagrams as they arrive.
impl<P> Connection<P> {
    /// The entries of a bundle (or of a continued datagram) with header `h`, whose body
    /// `body` starts at `at` in the buffer: whole packets for the resequencer, in order; a head
    /// piece to the reassembly. They take consecutive path sequences from the header's. When
    /// one is compressed (its headers rebuilt, so not in the buffer), all of them go as
    /// packets of their own (`assembled`), in the same order.
    pub(crate) fn take_entries(
        &mut self,
        now: Time,
        h: &HeaderRepr,
        body: &[u8],
        at: usize,
        count: usize,
        entries: mpt_core::wire::BundleEntries<'_>,
    ) -> Vec<Incoming> {
        let mut out: Vec<Incoming> = Vec::with_capacity(count);
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
                let piece = crate::reassembly::Piece::Head {
                    meta,
                    total: e.total,
                    bytes: &body[e.start..e.start + e.len],
                };
                self.take_piece(now, piece);
                continue;
            }
            let packet = e.packet(body);
            let meta = PacketMeta {
                len: packet.len(),
                ..meta
            };
            self.parity_keep(now, &meta, &packet);
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
                    self.assembled.push_back((d, bytes));
                }
            }
            if owned {
                let data = Incoming {
                    packet: 0..packet.len(),
                    ..data
                };
                self.assembled.push_back((data, packet.into_owned()));
            } else {
                out.push(data);
            }
        }
        out
    }
}
