//! Packets that came in pieces are put back together here before they go to the resequencer
//! (`docs/protocol.md`, "Packets in pieces").
//!
//! A packet's head piece (the last entry of a bundle) says its length and carries its path
//! sequence; continuations bring the rest, on any path, in any order. Memory is bounded: at
//! most [`MAX_INCOMPLETE`] packets wait, each at most the tunnel MTU, for at most the timeout
//! the connection gives. Pieces that overlap, exceed their packet or the MTU drop the packet;
//! a piece that arrives twice is dropped alone. Nothing here trusts the sender: a stranger's
//! pieces (without encryption) cost at most this memory and never reach the TUN device unless
//! they make a whole, valid IP packet.

use std::collections::VecDeque;
use std::time::Duration;

use mpt_core::wire::check_inner_packet;
use mpt_core::Time;
use mpt_reseq::PacketMeta;

use crate::{DropReason, Incoming};

/// Most packets waiting for pieces at once; a new one pushes the oldest out.
pub const MAX_INCOMPLETE: usize = 64;
/// Most pieces one packet may come in.
pub const MAX_PIECES: usize = 64;

/// A piece of a packet that arrived.
#[derive(Debug, Clone, Copy)]
pub enum Piece<'a> {
    /// The start of a packet of `total` bytes: `meta` is its (path, sequences, timestamp).
    Head {
        meta: PacketMeta,
        total: usize,
        bytes: &'a [u8],
    },
    /// Bytes from `offset` on of packet `seq`.
    Rest {
        seq: u32,
        offset: usize,
        bytes: &'a [u8],
    },
}

#[derive(Debug)]
struct Incomplete {
    seq: u32,
    /// From the head piece.
    total: Option<usize>,
    head: Option<PacketMeta>,
    buf: Vec<u8>,
    /// Byte ranges received.
    ranges: Vec<(usize, usize)>,
    got: usize,
    since: Time,
}

/// Packets waiting for the rest of their pieces.
#[derive(Debug, Default)]
pub struct Reassembly {
    waiting: Vec<Incomplete>,
    /// Packets put together.
    pub assembled: u64,
    /// Packets pushed out for room since [`Reassembly::expire`] last counted them.
    evicted: u64,
}

/// Packets made whole, to go to the resequencer ahead of what else the datagram that
/// completed them brought: put back together from their pieces, made again by a parity, or
/// rebuilt from a bundle's compressed entries.
#[derive(Debug, Default)]
pub(crate) struct Assembled {
    /// Packets waiting for the rest of their pieces.
    pub(crate) pieces: Reassembly,
    /// Packets made whole, in the order they go.
    pub(crate) ready: VecDeque<(Incoming, Vec<u8>)>,
}

impl Assembled {
    /// A piece of a packet, arrived at `now`, of a packet of at most `max` bytes: the packet,
    /// once whole, waits in [`Assembled::ready`]. Returns why the piece (and maybe its packet)
    /// was dropped.
    pub(crate) fn take_piece(
        &mut self,
        now: Time,
        max: usize,
        piece: Piece<'_>,
    ) -> Result<(), DropReason> {
        if let Some((meta, bytes)) = self.pieces.add(now, max, piece)? {
            let len = bytes.len();
            let whole = Incoming {
                meta,
                packet: 0..len,
                express: false,
                resent: false,
                opens: false,
                pieces: true,
            };
            self.ready.push_back((whole, bytes));
        }
        Ok(())
    }
}

impl Reassembly {
    /// Packets waiting for pieces (at most [`MAX_INCOMPLETE`]), and the pieces they hold.
    pub(crate) fn held(&self) -> (usize, usize) {
        let pieces = self.waiting.iter().map(|w| w.ranges.len()).sum();
        (self.waiting.len(), pieces)
    }

    /// Packets waiting for pieces now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Take piece `piece`, arrived at `now`, of a packet of at most `max` bytes. Returns the
    /// packet if it is whole now (its meta the head's), or why the piece (and maybe its
    /// packet) was dropped.
    pub fn add(
        &mut self,
        now: Time,
        max: usize,
        piece: Piece<'_>,
    ) -> Result<Option<(PacketMeta, Vec<u8>)>, DropReason> {
        let (seq, offset, bytes) = match piece {
            Piece::Head { meta, bytes, .. } => (meta.seq, 0, bytes),
            Piece::Rest { seq, offset, bytes } => (seq, offset, bytes),
        };
        let end = offset + bytes.len();
        if end > max {
            return Err(DropReason::FragmentOverlap);
        }
        let k = match self.waiting.iter().position(|w| w.seq == seq) {
            Some(k) => k,
            None => {
                if self.waiting.len() >= MAX_INCOMPLETE {
                    // the one waiting longest makes room
                    let oldest = (0..self.waiting.len())
                        .min_by_key(|&k| self.waiting[k].since)
                        .unwrap_or(0);
                    self.waiting.swap_remove(oldest);
                    self.evicted += 1;
                }
                self.waiting.push(Incomplete {
                    seq,
                    total: None,
                    head: None,
                    buf: Vec::new(),
                    ranges: Vec::new(),
                    got: 0,
                    since: now,
                });
                self.waiting.len() - 1
            }
        };
        let w = &mut self.waiting[k];
        if w.ranges.contains(&(offset, end)) {
            return Err(DropReason::Duplicate);
        }
        let overlaps = w.ranges.iter().any(|&(a, b)| offset < b && a < end);
        let mut bad = overlaps || w.ranges.len() >= MAX_PIECES;
        if let Piece::Head { meta, total, .. } = piece {
            bad |= total > max || w.ranges.iter().any(|&(_, b)| b > total);
            w.total = Some(total);
            w.head = Some(meta);
        }
        bad |= w.total.is_some_and(|t| end > t);
        if bad {
            self.waiting.swap_remove(k);
            return Err(DropReason::FragmentOverlap);
        }
        if w.buf.len() < end {
            w.buf.resize(end, 0);
        }
        w.buf[offset..end].copy_from_slice(bytes);
        w.ranges.push((offset, end));
        w.got += bytes.len();
        if w.total != Some(w.got) {
            return Ok(None);
        }
        let w = self.waiting.swap_remove(k);
        let Some(mut meta) = w.head else {
            return Ok(None);
        };
        check_inner_packet(&w.buf).map_err(|e| DropReason::malformed(&e))?;
        meta.len = w.buf.len();
        self.assembled += 1;
        Ok(Some((meta, w.buf)))
    }

    /// Packet `seq` came whole (sent again): its pieces waiting here are not waited for.
    pub fn forget(&mut self, seq: u32) {
        self.waiting.retain(|w| w.seq != seq);
    }

    /// Give up the packets that waited longer than `timeout` at `now`; returns how many,
    /// with those pushed out for room since the last call.
    pub fn expire(&mut self, now: Time, timeout: Duration) -> u64 {
        let before = self.waiting.len();
        self.waiting
            .retain(|w| now.saturating_since(w.since) <= timeout);
        (before - self.waiting.len()) as u64 + std::mem::take(&mut self.evicted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::PathId;
    use proptest::prelude::*;

    const MAX: usize = 1500;

    fn packet(len: usize, fill: u8) -> Vec<u8> {
        let mut p = vec![fill; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p
    }

    fn meta(seq: u32) -> PacketMeta {
        PacketMeta {
            path: PathId(1),
            seq,
            path_seq: 7,
            sent_us: 99,
            len: 0,
        }
    }

    fn head(seq: u32, p: &[u8], n: usize) -> Piece<'_> {
        Piece::Head {
            meta: meta(seq),
            total: p.len(),
            bytes: &p[..n],
        }
    }

    fn rest(seq: u32, p: &[u8], a: usize, b: usize) -> Piece<'_> {
        Piece::Rest {
            seq,
            offset: a,
            bytes: &p[a..b],
        }
    }

    #[test]
    fn pieces_in_any_order_make_the_packet_with_its_heads_meta() {
        let p = packet(1500, 3);
        let mut r = Reassembly::default();
        let t = Time::ZERO;
        assert_eq!(r.add(t, MAX, rest(5, &p, 1000, 1500)), Ok(None));
        assert_eq!(r.add(t, MAX, rest(5, &p, 400, 1000)), Ok(None));
        let (m, got) = r.add(t, MAX, head(5, &p, 400)).unwrap().unwrap();
        assert_eq!(got, p);
        assert_eq!((m.path, m.path_seq, m.len), (PathId(1), 7, 1500));
        assert_eq!(r.waiting(), 0);
        assert_eq!(r.assembled, 1);
    }

    #[test]
    fn a_piece_twice_is_dropped_alone_and_an_overlap_drops_the_packet() {
        let p = packet(1500, 3);
        let mut r = Reassembly::default();
        let t = Time::ZERO;
        r.add(t, MAX, head(5, &p, 800)).unwrap();
        assert_eq!(r.add(t, MAX, head(5, &p, 800)), Err(DropReason::Duplicate));
        assert_eq!(r.waiting(), 1);
        assert_eq!(
            r.add(t, MAX, rest(5, &p, 700, 1500)),
            Err(DropReason::FragmentOverlap)
        );
        assert_eq!(r.waiting(), 0);
        // past the packet's length, or the MTU
        r.add(t, MAX, head(6, &p[..1000], 800)).unwrap();
        assert_eq!(
            r.add(t, MAX, rest(6, &p, 800, 1100)),
            Err(DropReason::FragmentOverlap)
        );
        let big = packet(1600, 1);
        assert_eq!(
            r.add(t, MAX, rest(7, &big, 1000, 1600)),
            Err(DropReason::FragmentOverlap)
        );
        // pieces that make no valid IP packet never come out
        let mut forged = packet(1500, 3);
        forged[0] = 0x75;
        r.add(t, MAX, rest(8, &forged, 800, 1500)).unwrap();
        let h = Piece::Head {
            meta: meta(8),
            total: 1500,
            bytes: &forged[..800],
        };
        assert!(r.add(t, MAX, h).is_err());
    }

    #[test]
    fn incomplete_packets_expire_and_their_number_is_bounded() {
        let p = packet(1500, 3);
        let mut r = Reassembly::default();
        for s in 0..(MAX_INCOMPLETE as u32 + 10) {
            let t = Time::ZERO + Duration::from_millis(u64::from(s));
            r.add(t, MAX, head(s, &p, 800)).unwrap();
        }
        assert_eq!(r.waiting(), MAX_INCOMPLETE);
        let later = Time::ZERO + Duration::from_millis(60);
        // 10 pushed out, then those older than 50 ms at 60 ms (10..=9: none) ...
        assert_eq!(r.expire(later, Duration::from_millis(50)), 10);
        assert_eq!(
            r.expire(
                later + Duration::from_millis(100),
                Duration::from_millis(50)
            ),
            MAX_INCOMPLETE as u64
        );
        assert_eq!(r.waiting(), 0);
    }

    proptest! {
        #[test]
        fn split_shuffled_and_repeated_pieces_make_each_packet_once(
            lens in proptest::collection::vec(100usize..=MAX, 1..8),
            cuts in proptest::collection::vec(1usize..8, 8),
            order in Just(()).prop_perturb(|_, mut rng| rng.random::<u64>()),
        ) {
            let mut pieces = Vec::new();
            let packets: Vec<Vec<u8>> = lens.iter().enumerate().map(|(k, &l)| packet(l, k as u8)).collect();
            for (s, p) in packets.iter().enumerate() {
                let n = cuts[s].min(p.len() / 70);
                let step = p.len() / (n + 1);
                let mut bounds: Vec<usize> = (0..=n).map(|k| k * step).collect();
                bounds[0] = 0;
                bounds.push(p.len());
                bounds[1] = bounds[1].max(64);
                bounds.dedup();
                for w in bounds.windows(2) {
                    pieces.push((s as u32, w[0], w[1]));
                    if w[0] % 3 == 0 { pieces.push((s as u32, w[0], w[1])); }
                }
            }
            // a simple shuffle from the seed
            let mut x = order | 1;
            for k in (1..pieces.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                pieces.swap(k, (x % (k as u64 + 1)) as usize);
            }
            let mut r = Reassembly::default();
            let mut made = std::collections::BTreeSet::new();
            for &(s, a, b) in &pieces {
                let p = &packets[s as usize];
                let piece = if a == 0 { head(s, p, b) } else { rest(s, p, a, b) };
                match r.add(Time::ZERO, MAX, piece) {
                    Ok(Some((m, bytes))) => {
                        // a repeat after its packet was whole may make it again: the
                        // resequencer drops that copy as a duplicate
                        prop_assert!(bytes == packets[m.seq as usize], "packet {} garbled", m.seq);
                        made.insert(m.seq);
                    }
                    Ok(None) => {}
                    Err(e) => prop_assert_eq!(e, DropReason::Duplicate),
                }
            }
            prop_assert_eq!(made.len(), packets.len());
        }

        #[test]
        fn any_pieces_keep_memory_bounded_and_never_panic(
            pieces in proptest::collection::vec((0u32..100, any::<bool>(), 0usize..2000, 0usize..1600), 0..300),
        ) {
            let junk = packet(4000, 9);
            let mut r = Reassembly::default();
            for (k, &(s, is_head, a, len)) in pieces.iter().enumerate() {
                let t = Time::ZERO + Duration::from_millis(k as u64);
                let piece = if is_head {
                    Piece::Head { meta: meta(s), total: a, bytes: &junk[..len.max(1)] }
                } else {
                    Piece::Rest { seq: s, offset: a.max(1), bytes: &junk[..len.max(1)] }
                };
                if let Ok(Some((_, p))) = r.add(t, MAX, piece) {
                    prop_assert!(p.len() <= MAX);
                    prop_assert!(check_inner_packet(&p).is_ok());
                }
                prop_assert!(r.waiting() <= MAX_INCOMPLETE);
                prop_assert!(r.waiting.iter().all(|w| w.buf.len() <= MAX));
            }
        }
    }
}
