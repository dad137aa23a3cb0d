//! Forward error correction on paths that lose packets (`docs/protocol.md`, "Parity").
//!
//! The sender learns each path's loss rate from the peer's reports. While it is at least
//! [`FEC_ON_LOSS`], every `k` consecutive data datagrams on the path are followed by a parity
//! ([`Kind::Parity`]): the XOR of their packets, with `k` chosen so that parity costs about
//! the loss rate's worth of bytes ([`group_size`]). The receiver keeps a copy of the packets
//! that arrive on a path that carries parity; a parity whose group lacks exactly one packet
//! makes that packet again, as soon as the parity arrives. Losses are still asked for at once
//! ([`crate::resend`]): a parity only comes sooner than the resend (without the round trip),
//! or makes what a lost request or resend would not. (Holding a gap's request back until its
//! parity had come cost cubic a third of its throughput on jittery paths: the losses parity
//! could not make waited longer.)
//!
//! Parity is sent only where resending is on at both ends and both take parity.

mod repair;

pub(crate) use repair::Parity;

use std::time::Duration;

use mpt_core::wire::{self, ReportEntry, MAX_PARITY_GROUP, MIN_PARITY_GROUP};
use mpt_core::Time;

/// A path's parity starts when its smoothed loss rate reaches this.
pub const FEC_ON_LOSS: f64 = 0.005;
/// ... and stops when it falls below this.
pub const FEC_OFF_LOSS: f64 = 0.002;
/// Packets a loss sample spans at least (between two of the peer's reports).
const LOSS_SAMPLE: u32 = 200;
/// Weight of a new sample in the smoothed loss rate.
const LOSS_GAIN: f64 = 0.125;
/// Packets of a path the receiver keeps copies of (a power of two, at least two groups).
const RING: usize = 2 * MAX_PARITY_GROUP;
/// A group not complete this long after its first packet was sent has no parity: on a path
/// that carries fewer than `k` packets in that time, a parity would come later than a resend.
const MAX_GROUP_AGE: Duration = Duration::from_millis(40);
/// Packets made again that a receiver remembers, per path.
const REPAIRED: usize = 8;
/// A receiver keeps copies for this long after a path's last parity.
const PARITY_QUIET: Duration = Duration::from_secs(2);

/// Packets per parity at loss rate `loss`: parity then costs about the loss rate (`1 / k`),
/// within 8 (from 12.5 % loss on) and [`MAX_PARITY_GROUP`] (up to 1.5 % loss). With every
/// loss also resent, recovery costs about twice the loss rate, within the budget of twice the
/// loss rate plus 1 % of the traffic.
pub fn group_size(loss: f64) -> usize {
    let k = if loss > 0.0 {
        (1.0 / loss) as usize
    } else {
        MAX_PARITY_GROUP
    };
    k.clamp(8.max(MIN_PARITY_GROUP), MAX_PARITY_GROUP)
}

/// What a parity and the packets kept make ([`FecRx::solve`]): how many of its group are
/// missing, the last of them, and the sums: with one missing, its bytes (zero-padded) and
/// global sequence.
#[derive(Debug, Clone)]
pub struct Solved {
    pub missing: usize,
    pub last_missing: Option<u16>,
    pub sum: Vec<u8>,
    pub seq: u32,
    /// The XOR of the kept packets' lengths.
    pub lens: u16,
}

/// The sender's side, per path: the loss rate and the group being summed.
#[derive(Debug, Clone, Default)]
pub struct FecTx {
    /// Packets per parity while parity is on; 0: off.
    pub k: usize,
    /// Smoothed loss rate.
    pub(crate) loss: f64,
    /// The last report's counters (packets, lost), and the packets received and lost in the
    /// sample so far.
    last: Option<(u32, u32)>,
    sample: (u32, u32),
    /// The highest queue the reports have shown lately, and whether the last report showed
    /// the queue full (its losses the queue's, not random).
    queue_peak: mpt_reseq::QueuePeak,
    pub(crate) queue_full: bool,
    /// The group: its first path sequence, how many so far, their packets' global
    /// sequences', lengths' and packets' XOR.
    first: u16,
    count: usize,
    seqs: u32,
    lens: u16,
    sum: Vec<u8>,
    /// When its first packet was sent.
    started: Time,
}

impl FecTx {
    /// Parity on, a parity every `k` packets (for tests and benchmarks: a connection sets `k`
    /// from the peer's reports).
    pub fn with_group(k: usize) -> FecTx {
        FecTx {
            k,
            ..FecTx::default()
        }
    }

    /// The peer reported `e` on the path: sample its loss (once enough packets passed) and
    /// decide whether parity is on, and its group size. Only report intervals that end with
    /// the path's queue short of full count ([`mpt_reseq::QueuePeak`], as the peer tells a
    /// loss of a queue that overflowed): parity would not help such a loss (the inner
    /// congestion control needs it), and a random loss is as likely
    /// with the queue low as high, so the other intervals give its rate.
    pub(crate) fn take_report(&mut self, now: Time, e: &ReportEntry) {
        let Some((packets, lost)) = self.last.replace((e.packets, e.lost)) else {
            return;
        };
        let got = e.packets.wrapping_sub(packets);
        let missed = e.lost.wrapping_sub(lost);
        // counters that went back (a new session) start sampling again
        if got > u32::MAX / 2 || missed > u32::MAX / 2 {
            self.sample = (0, 0);
            return;
        }
        let queue = e.owd_us.saturating_sub(e.owd_min_us);
        self.queue_full = self.queue_peak.full(now, i64::from(queue));
        if self.queue_full {
            return;
        }
        self.sample.0 = self.sample.0.saturating_add(got);
        self.sample.1 = self.sample.1.saturating_add(missed);
        let (got, missed) = self.sample;
        if got.saturating_add(missed) < LOSS_SAMPLE {
            return;
        }
        self.sample = (0, 0);
        let rate = f64::from(missed) / f64::from(got + missed);
        self.loss += LOSS_GAIN * (rate - self.loss);
        if self.k == 0 && self.loss >= FEC_ON_LOSS {
            self.k = group_size(self.loss);
        } else if self.k > 0 {
            self.k = if self.loss < FEC_OFF_LOSS {
                0
            } else {
                group_size(self.loss)
            };
        }
    }

    /// Add a data datagram's packet (path sequence `path_seq`, global sequence `seq`) to the
    /// group; the group when it is complete.
    pub fn add(&mut self, now: Time, path_seq: u16, seq: u32, packet: &[u8]) -> Option<Group> {
        // a datagram of another kind took numbers in between, or the group is too old to
        // be of use (a parity later than a resend would be): that group has no parity
        if self.count > 0
            && (path_seq != self.first.wrapping_add(self.count as u16)
                || now.saturating_since(self.started) > MAX_GROUP_AGE)
        {
            self.count = 0;
        }
        if self.count == 0 {
            self.first = path_seq;
            self.seqs = 0;
            self.lens = 0;
            self.sum.clear();
            self.started = now;
        }
        wire::xor_into(&mut self.sum, packet);
        self.seqs ^= seq;
        self.lens ^= packet.len() as u16;
        self.count += 1;
        if self.count < self.k.max(MIN_PARITY_GROUP) {
            return None;
        }
        let k = std::mem::take(&mut self.count);
        let sum = std::mem::replace(&mut self.sum, Vec::with_capacity(packet.len()));
        Some(Group {
            first: self.first,
            k,
            seqs: self.seqs,
            lens: self.lens,
            sum,
        })
    }
}

/// A parity group summed: its first path sequence, its size, and the XOR of its packets'
/// global sequences, lengths and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub first: u16,
    pub k: usize,
    pub seqs: u32,
    pub lens: u16,
    pub sum: Vec<u8>,
}

/// One packet a receiver kept.
#[derive(Debug, Clone, Default)]
struct Kept {
    valid: bool,
    path_seq: u16,
    seq: u32,
    bytes: Vec<u8>,
}

/// The receiver's side, per path: copies of the packets that arrived while the path carries
/// parity.
#[derive(Debug, Clone, Default)]
pub struct FecRx {
    /// When the last parity came.
    last: Option<Time>,
    ring: Vec<Kept>,
    /// The path sequences made again lately: their gaps, seen later, are not asked for.
    repaired: [Option<u16>; REPAIRED],
    next_repaired: usize,
}

impl FecRx {
    /// Whether the path carries parity (one came lately): its packets are kept.
    pub(crate) fn active(&self, now: Time) -> bool {
        self.last
            .is_some_and(|t| now.saturating_since(t) <= PARITY_QUIET)
    }

    /// Keep a copy of `packet`, path sequence `path_seq`, global sequence `seq`.
    pub fn keep(&mut self, path_seq: u16, seq: u32, packet: &[u8]) {
        if self.ring.is_empty() {
            self.ring.resize_with(RING, Kept::default);
        }
        let k = &mut self.ring[usize::from(path_seq) % RING];
        k.valid = true;
        k.path_seq = path_seq;
        k.seq = seq;
        k.bytes.clear();
        k.bytes.extend_from_slice(packet);
    }

    /// A parity over the `k` packets from path sequence `first` on, the XOR of their global
    /// sequences `seq` and of their bytes `body`, summed with the packets kept.
    pub fn solve(&self, first: u16, k: usize, seq: u32, body: &[u8]) -> Solved {
        let mut s = Solved {
            missing: 0,
            last_missing: None,
            sum: body.to_vec(),
            seq,
            lens: 0,
        };
        for j in 0..k {
            let ps = first.wrapping_add(j as u16);
            match self.ring.get(usize::from(ps) % RING) {
                Some(kept)
                    if kept.valid && kept.path_seq == ps && kept.bytes.len() <= body.len() =>
                {
                    wire::xor_into(&mut s.sum, &kept.bytes);
                    s.seq ^= kept.seq;
                    s.lens ^= kept.bytes.len() as u16;
                }
                _ => {
                    s.missing += 1;
                    s.last_missing = Some(ps);
                }
            }
        }
        s
    }

    /// Whether a parity made the packet of path sequence `path_seq` again lately.
    pub(crate) fn repaired(&self, path_seq: u16) -> bool {
        self.repaired.contains(&Some(path_seq))
    }

    /// A parity arrived at `now` with `header`, over `k` packets, their XOR `body` (counted
    /// in `counts`): the group's one missing packet, if it lacks only one, is made again (a
    /// path is FIFO: a packet sent before its parity and not here is lost). Its length is the
    /// XOR of the header's and the kept packets' lengths with `lengths` (a session of version
    /// 5, whose data may be compressed), its IP header's otherwise. Returns it: its global and
    /// path sequences and its bytes.
    pub(crate) fn take_parity(
        &mut self,
        now: Time,
        parity: Parity<'_>,
        counts: &mut ParityCounts,
    ) -> Option<(u32, u16, Vec<u8>)> {
        let Parity {
            header,
            k,
            lengths,
            body,
        } = parity;
        counts.received += 1;
        self.last = Some(now);
        if self.ring.is_empty() {
            // the first parity: nothing kept yet
            self.ring.resize_with(RING, Kept::default);
            return None;
        }
        let Solved {
            missing,
            last_missing,
            mut sum,
            seq,
            lens,
        } = self.solve(header.path_seq, k, header.seq, body);
        let ps = match (missing, last_missing) {
            (0, _) => {
                counts.unneeded += 1;
                return None;
            }
            (1, Some(ps)) => ps,
            _ => {
                counts.unrepairable += 1;
                return None;
            }
        };
        let len = if lengths {
            Some(usize::from(lens ^ (header.timestamp >> 16) as u16))
                .filter(|&l| l <= sum.len() && wire::check_data_body(&sum[..l]).is_ok())
        } else {
            wire::ip_length(&sum).filter(|&l| wire::check_inner_packet(&sum[..l]).is_ok())
        };
        let Some(len) = len else {
            counts.mismatched += 1;
            return None;
        };
        self.repaired[self.next_repaired % REPAIRED] = Some(ps);
        self.next_repaired += 1;
        sum.truncate(len);
        counts.repaired += 1;
        Some((seq, ps, sum))
    }
}

/// What parity did: sent per path (by the sender), and at the receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParityCounts {
    /// Parities received; packets they made again; parities whose group lacked two or more
    /// (the losses were asked for instead); parities whose group lacked nothing.
    pub received: u64,
    pub repaired: u64,
    pub unrepairable: u64,
    pub unneeded: u64,
    /// Parities whose group lacked one packet, but whose sum was no IP packet (a packet
    /// kept that was not the one the sender summed): nothing made.
    pub mismatched: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::PathId;

    fn entry(packets: u32, lost: u32) -> ReportEntry {
        ReportEntry {
            path: PathId(0),
            flags: 1,
            path_seq: 0,
            packets,
            bytes: 0,
            lost,
            owd_min_us: 0,
            jitter_us: 0,
            owd_us: 0,
            echo: 0,
            echo_age_us: 0,
            owd_min_len: 0,
        }
    }

    /// Losses that come with the queue standing are the queue overflowing: no parity for
    /// them, whatever their rate.
    #[test]
    fn losses_of_a_standing_queue_turn_no_parity_on() {
        let mut f = FecTx::default();
        f.take_report(Time::ZERO, &entry(0, 0));
        let (mut packets, mut lost) = (0u32, 0u32);
        for _ in 0..20 {
            packets += 950;
            lost += 50;
            f.take_report(
                Time::ZERO,
                &ReportEntry {
                    owd_us: 40_000,
                    ..entry(packets, lost)
                },
            );
        }
        assert_eq!(f.k, 0, "loss {}", f.loss);
        // the same losses with no queue: on
        for _ in 0..20 {
            packets += 950;
            lost += 50;
            f.take_report(Time::ZERO, &entry(packets, lost));
        }
        assert!(f.k > 0, "loss {}", f.loss);
    }

    #[test]
    fn parity_starts_above_the_loss_threshold_and_stops_below_the_lower_one() {
        let mut f = FecTx::default();
        f.take_report(Time::ZERO, &entry(0, 0));
        let (mut packets, mut lost) = (0u32, 0u32);
        // 1 % loss: on after a few samples, about one parity per 50 packets
        for _ in 0..20 {
            packets += 990;
            lost += 10;
            f.take_report(Time::ZERO, &entry(packets, lost));
        }
        assert!(f.k > 0, "loss {}", f.loss);
        assert!((60..=64).contains(&f.k), "k {}", f.k);
        // a sample of fewer packets than a sample needs changes nothing
        let k = f.k;
        f.take_report(Time::ZERO, &entry(packets + 50, lost + 10));
        assert_eq!(f.k, k);
        // clean again: off
        for _ in 0..30 {
            packets += 1000;
            f.take_report(Time::ZERO, &entry(packets, lost));
        }
        assert_eq!(f.k, 0, "loss {}", f.loss);
        // 0.3 %: between the thresholds, stays off
        for _ in 0..30 {
            packets += 997;
            lost += 3;
            f.take_report(Time::ZERO, &entry(packets, lost));
        }
        assert_eq!(f.k, 0, "loss {}", f.loss);
    }

    #[test]
    fn group_size_spends_about_the_loss_rate_on_parity() {
        assert_eq!(group_size(0.01), 64);
        assert_eq!(group_size(0.02), 50);
        assert_eq!(group_size(0.1), 10);
        assert_eq!(group_size(0.002), MAX_PARITY_GROUP);
        assert_eq!(group_size(0.2), 8);
    }

    #[test]
    fn a_group_is_summed_over_consecutive_path_sequences_only() {
        let mut f = FecTx {
            k: 3,
            ..FecTx::default()
        };
        let t = Time::from_millis(1);
        assert!(f.add(t, 10, 100, &[1, 2, 3]).is_none());
        assert!(f.add(t, 11, 101, &[4, 5]).is_none());
        // path sequence 12 went in a bundle: the group starts again at 13
        assert!(f.add(t, 13, 103, &[7]).is_none());
        assert!(f.add(t, 14, 104, &[8]).is_none());
        let g = f.add(t, 15, 105, &[9, 9]).expect("complete");
        assert_eq!(
            (g.first, g.k, g.seqs, g.lens),
            (13, 3, 103 ^ 104 ^ 105, 2) // lengths 1, 1 and 2
        );
        assert_eq!(g.sum, vec![7 ^ 8 ^ 9, 9]);
        // a group that fills slowly has no parity: the next begins after MAX_GROUP_AGE
        assert!(f.add(t, 16, 106, &[1]).is_none());
        assert!(f.add(t, 17, 107, &[2]).is_none());
        let late = t + MAX_GROUP_AGE + Duration::from_millis(1);
        assert!(f.add(late, 18, 108, &[3]).is_none());
        assert!(f.add(late, 19, 109, &[4]).is_none());
        let g = f.add(late, 20, 110, &[5]).expect("complete");
        assert_eq!((g.first, g.k), (18, 3));
    }
}
