//! Losses recovered inside the tunnel: receiver-driven resending (`docs/protocol.md`, "Resend
//! requests").
//!
//! The receiver sees a path lose data datagrams as gaps in that path's sequence (paths are
//! FIFO). It names them in a resend request ([`Kind::Nack`]) on its fastest path at once, and
//! its resequencer waits for them a little longer than the progress rule alone would (a
//! round trip, never past the hold time). The sender keeps the packets it sent lately, by path
//! and path sequence, and sends each requested one once more as [`Kind::Resent`] on the path
//! where it arrives soonest. A packet comes again only if it is still kept and not older than
//! the hold time: after that the receiver has given its gap up. A packet sent in pieces is
//! kept whole by its head piece's path sequence, and goes again whole, on a path it fits.
//!
//! Keeping a copy of every packet costs the sender a copy into memory that is cold by the
//! time it is written again (a tenth of an unshaped AES-GCM tunnel's throughput): a path's
//! packets are kept only while the path loses some, from its first resend request on until
//! [`KEEP_AFTER_LOSS`] without one. The first loss of a path that lost nothing for that long
//! is not recovered.

use std::time::Duration;

use mpt_core::wire::{self, HeaderRepr, Kind, NackRange, MAX_NACK_RANGES};
use mpt_core::{PathId, Time};
use mpt_reseq::Gap;

use crate::control::Pending;
use crate::Connection;

/// Packets kept for resending (the latest ones sent; a power of two). At 1 Gbit/s of
/// 1400-byte packets that is the last 46 ms; at 100 Mbit/s, the last 460 ms.
pub const RESEND_KEPT: usize = 4096;

/// A path sequence gap longer than this is an outage, not a loss: it is not asked for (the
/// resend would come as a burst on top of the traffic that failed over).
pub const MAX_RESEND_GAP: u16 = 32;

/// How long a path's packets are kept for resending after the peer last asked for one of them.
pub const KEEP_AFTER_LOSS: Duration = Duration::from_secs(60);

/// Per path, the path sequences whose global sequence is remembered (a power of two).
const PATH_SLOTS: usize = 4096;

/// One packet kept: where it went first, when, and its bytes.
#[derive(Debug, Default)]
struct Kept {
    valid: bool,
    path: u8,
    path_seq: u16,
    seq: u32,
    sent: Time,
    packet: Vec<u8>,
}

/// The packets sent lately, by global sequence, and per path which global sequence each
/// path sequence carried. Allocated as it fills (an idle peer costs nothing).
#[derive(Debug, Default)]
pub struct ResendBuffer {
    kept: Vec<Kept>,
    /// Per path: global sequence by path sequence (modulo [`PATH_SLOTS`]).
    by_path: Vec<Vec<u32>>,
}

impl ResendBuffer {
    /// `packet`, global sequence `seq`, was sent at `now` on `path` as its path sequence
    /// `path_seq`.
    pub fn keep(&mut self, path: PathId, path_seq: u16, seq: u32, now: Time, packet: &[u8]) {
        if self.kept.is_empty() {
            self.kept.resize_with(RESEND_KEPT, Kept::default);
        }
        let i = path.index();
        if self.by_path.len() <= i {
            self.by_path.resize_with(i + 1, Vec::new);
        }
        let map = &mut self.by_path[i];
        if map.is_empty() {
            map.resize(PATH_SLOTS, 0);
        }
        map[usize::from(path_seq) % PATH_SLOTS] = seq;
        let k = &mut self.kept[seq as usize % RESEND_KEPT];
        k.valid = true;
        k.path = path.0;
        k.path_seq = path_seq;
        k.seq = seq;
        k.sent = now;
        k.packet.clear();
        k.packet.extend_from_slice(packet);
    }

    /// The packet sent on `path` as `path_seq`, if still kept and sent within `max_age` of
    /// `now`: its global sequence and bytes. Taken: it is resent once.
    pub fn take(
        &mut self,
        path: PathId,
        path_seq: u16,
        now: Time,
        max_age: Duration,
    ) -> Option<(u32, &[u8])> {
        let seq = *self
            .by_path
            .get(path.index())?
            .get(usize::from(path_seq) % PATH_SLOTS)?;
        let k = self.kept.get_mut(seq as usize % RESEND_KEPT)?;
        let fresh = now.saturating_since(k.sent) <= max_age;
        if !k.valid || k.path != path.0 || k.path_seq != path_seq || k.seq != seq || !fresh {
            return None;
        }
        k.valid = false;
        Some((seq, &k.packet))
    }
}

/// What resending did, per path (by the path that lost the packets).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResendCounts {
    /// Path sequences the peer asked for.
    pub requested: u64,
    /// Packets sent again, and the bytes that cost on the links (outer headers included).
    pub resent: u64,
    pub resent_bytes: u64,
    /// Asked for but no longer kept (or older than the hold time): not sent again.
    pub missed: u64,
    /// Parities sent on the path ([`crate::fec`]), and their bytes on the links.
    pub parity_sent: u64,
    pub parity_bytes: u64,
}

impl<P> Connection<P> {
    /// Whether resending is on: both ends' handshakes said they take resend requests and
    /// resent packets.
    pub fn resending(&self) -> bool {
        self.peer_resend && self.cfg.resend
    }

    /// Whether a packet sent on path `i` at `now` is kept for resending: the path lost
    /// something lately.
    #[inline]
    pub(crate) fn keeps(&self, i: usize, now: Time) -> bool {
        self.paths[i].keep_until.is_some_and(|t| now < t) && self.resending()
    }

    /// The receiver's half: the path sequence gaps the resequencer saw since the last call go
    /// into resend requests (queued for [`Connection::poll_transmit`]), but for packets a parity
    /// made again already ([`crate::fec`]).
    pub(crate) fn request_resends(&mut self) {
        if !self.resending() {
            return;
        }
        self.collect_gaps();
        if self.asked.is_empty() {
            return;
        }
        let ranges: Vec<NackRange> = self
            .asked
            .drain(..)
            .map(|g: Gap| NackRange {
                path: g.path,
                first: g.first,
                count: g.count as u8,
            })
            .collect();
        let Some(path) = self.report_path() else {
            return;
        };
        for chunk in ranges.chunks(MAX_NACK_RANGES) {
            self.counts.nacks_sent += 1;
            self.counts.nacked += chunk.iter().map(|r| u64::from(r.count)).sum::<u64>();
            self.pending.push_back(Pending::Nack {
                path,
                ranges: chunk.to_vec(),
            });
        }
    }

    /// Tell the resequencer whether resending is on: it then keeps the gaps to ask for, and
    /// a gap the progress rule gives up does not wait for its packet to come again (zero
    /// wait): the packets behind it go on at once, and the resent one is delivered late,
    /// when it comes.
    ///
    /// Why not wait: a request and its resend take the fastest path's round trip and the
    /// queue the resend waits in, tens of milliseconds, and every bonded packet behind the
    /// gap would wait with it: the inner TCP's receiver would get nothing meanwhile, then a
    /// burst above the bundle's rate (which BBR takes for bandwidth). Delivered at once, TCP
    /// acknowledges what came after the gap (SACK), keeps sending, and the resend fills the
    /// gap before its own retransmission would.
    pub(crate) fn update_repair_wait(&mut self) {
        let wait = self.resending().then_some(Duration::ZERO);
        self.reseq.set_repair(wait);
    }

    /// The sender's half: the peer asks for the packets `ranges` name. Each one still kept
    /// goes again, once, on the path where it arrives soonest.
    pub(crate) fn take_nack(&mut self, now: Time, ranges: impl Iterator<Item = NackRange>) {
        let Some(session) = self.peer_session else {
            return;
        };
        let max_age = self.cfg.reorder_timeout;
        self.grow_resend_counts();
        // not on the path light traffic keeps short, while another path is up: a burst of
        // resends there is a queue the light stream waits behind
        let kept = self.classes.kept_path(now);
        for r in ranges {
            let lost = r.path.index();
            if lost >= self.paths.len() {
                continue;
            }
            self.paths[lost].keep_until = Some(now + KEEP_AFTER_LOSS);
            for k in 0..u16::from(r.count) {
                let path_seq = r.first.wrapping_add(k);
                self.counts.resend[lost].requested += 1;
                let prefix = self.prefix();
                let Some((seq, buf)) =
                    self.resend
                        .take(r.path, path_seq, now, max_age)
                        .map(|(seq, packet)| {
                            let mut buf = Vec::with_capacity(prefix + packet.len() + wire::TAG_LEN);
                            buf.resize(prefix, 0);
                            buf.extend_from_slice(packet);
                            (seq, buf)
                        })
                else {
                    self.counts.resend[lost].missed += 1;
                    continue;
                };
                // on a path the packet fits whole (one first sent in pieces may not)
                let len = buf.len() - prefix;
                let fits = |p: PathId| self.body_cap(p.index()) >= len;
                let Some(via) = self
                    .soonest_where(now, |p| Some(p) != kept && fits(p))
                    .or_else(|| self.soonest_where(now, fits))
                else {
                    self.counts.resend[lost].missed += 1;
                    continue;
                };
                let header = HeaderRepr {
                    kind: Kind::Resent,
                    path: via,
                    // not a number of the path's: its next, not taken
                    path_seq: self.paths[via.index()].path_seq,
                    session,
                    seq,
                    timestamp: now.wire_micros(),
                };
                let body = buf.len() - prefix;
                let Some(contents) = self.seal_owned(&header, buf, body) else {
                    continue;
                };
                let Some(destination) = self.remote(via) else {
                    continue;
                };
                let cost = contents.len() + self.cfg.paths[via.index()].overhead;
                self.sched.on_control_sent(now, via, cost);
                let c = &mut self.counts.resend[lost];
                c.resent += 1;
                c.resent_bytes += cost as u64;
                self.pending.push_back(Pending::Raw {
                    path: via,
                    destination,
                    contents,
                });
            }
        }
    }

    /// Keep the whole packets of a data, bundle or continued datagram with `header` and plain
    /// `body` for resending (not a continuation or a head piece: a packet in pieces is kept
    /// whole where it is cut, in [`Connection::bundle_packet`]).
    pub(crate) fn keep_bundled(&mut self, now: Time, header: &HeaderRepr, body: &[u8]) {
        if !self.keeps(header.path.index(), now) {
            return;
        }
        let path = header.path;
        whole_packets(header, body, |path_seq, seq, packet| {
            self.resend.keep(path, path_seq, seq, now, packet)
        });
    }

    /// [`ResendCounts`] for every path.
    pub(crate) fn grow_resend_counts(&mut self) {
        if self.counts.resend.len() < self.paths.len() {
            self.counts
                .resend
                .resize(self.paths.len(), ResendCounts::default());
        }
    }

    /// What resending did for the packets first sent on `path`.
    pub fn resend_counts(&self, path: PathId) -> ResendCounts {
        self.counts
            .resend
            .get(path.index())
            .copied()
            .unwrap_or_default()
    }

    /// Resend requests we sent, and the path sequences they named.
    pub fn nack_counts(&self) -> (u64, u64) {
        (self.counts.nacks_sent, self.counts.nacked)
    }

    /// Bytes our resend requests took on the links (outer headers included).
    pub fn nack_bytes(&self) -> u64 {
        self.counts.nack_bytes
    }
}

/// The whole packets of a data, bundle or continued datagram with `header` and plain `body`,
/// in the order of their path sequences: `f(path sequence, global sequence, packet)` for
/// each. A head piece (and a continuation) is no whole packet: the rest of it went in other
/// datagrams.
pub(crate) fn whole_packets(header: &HeaderRepr, body: &[u8], mut f: impl FnMut(u16, u32, &[u8])) {
    let entries = match header.kind {
        Kind::Data => return f(header.path_seq, header.seq, body),
        Kind::Bundle => wire::bundle_entries(body, header.seq),
        Kind::Continued => wire::continued_entries(body, header.seq),
        _ => return,
    };
    for (k, e) in entries.flatten().enumerate() {
        if !e.is_head() {
            let path_seq = header.path_seq.wrapping_add(k as u16);
            f(path_seq, e.seq, &e.packet(body));
        }
    }
}
