//! Path measurement, beside resequencing: per-path counters, loss from `path_seq` gaps,
//! RFC 3550 interarrival jitter and the one-way delay of each path relative to the fastest.
//! Every arrival counts, duplicates included; the results live in [`Stats`].

use mpt_core::queue::QueuePeak;
use mpt_core::wire::{seq16_diff, seq_diff};
use mpt_core::Time;

use crate::{PacketMeta, PathStats, Stats};

/// Gain of the smoothed one-way delay per packet. The sender reads a building queue from it,
/// so it must follow within a few packets: on a 64 kbit/s line packets come 30 ms apart, and
/// a gain of 1/16 lagged a queue by half a second.
pub const OWD_GAIN: f64 = 0.25;

/// The smoothed one-way delay `ewma` after a packet whose relative delay is `rel`.
fn owd_step(ewma: f64, rel: f64) -> f64 {
    ewma + (rel - ewma) * OWD_GAIN
}

/// What the measurement keeps per path between arrivals.
#[derive(Debug, Clone, Default)]
struct PathMeasure {
    /// The `path_seq` expected next, once known.
    expected_path_seq: Option<u16>,
    /// Transit time (arrival wire µs − send µs, wrapping) of the previous packet, for jitter.
    last_transit: Option<u32>,
    /// Relative one-way delay (vs the session base): last, min and EWMA; valid once a packet
    /// of this session arrived on the path.
    owd_valid: bool,
    owd_last: i64,
    /// The least delay ([`Floor`]).
    floor: Floor,
    owd_ewma: f64,
    /// The highest queue (µs above the path's least delay) seen lately.
    queue_peak: QueuePeak,
}

/// A silence between two arrivals on a path that is a dark moment (a satellite's handover):
/// at least this, and [`DARK_GAPS`] times the path's usual gap between arrivals.
pub const DARK_MIN: std::time::Duration = std::time::Duration::from_millis(40);
pub const DARK_GAPS: f64 = 8.0;

/// A path's least one-way delay, and the length of the packet that saw it (its serialisation
/// is part of that delay): the least since the session began, or since the path last went
/// dark for a moment ([`DARK_MIN`]). A satellite link's delay steps up or down as it goes dark
/// at a handover: kept for the session, the floor from before the step made the step a
/// standing queue, and the sender held the path's rate down to what it carried until the
/// session ended. A queue that stands while packets keep coming (the path full) stays a queue.
#[derive(Debug, Clone, Copy, Default)]
struct Floor {
    least: (i64, usize),
    /// The previous arrival, and the smoothed gap between arrivals (µs).
    last_at: Option<Time>,
    gap_us: f64,
}

impl Floor {
    /// A packet of `len` bytes arrived at `now` with relative delay `rel`.
    fn take(&mut self, now: Time, rel: i64, len: usize) {
        let dark = match self.last_at {
            None => true,
            Some(t) => {
                let gap = now.saturating_since(t).as_micros() as f64;
                // the first gap is the path's usual one (a slow line's packets come 100 ms
                // and more apart)
                let dark = self.gap_us > 0.0
                    && gap >= (DARK_MIN.as_micros() as f64).max(DARK_GAPS * self.gap_us);
                self.gap_us = if self.gap_us > 0.0 {
                    self.gap_us + (gap - self.gap_us) / 8.0
                } else {
                    gap
                };
                dark
            }
        };
        if dark || rel < self.least.0 {
            self.least = (rel, len);
        }
        self.last_at = Some(now);
    }

    /// The least delay and its packet's length.
    fn least(&self) -> (i64, usize) {
        self.least
    }
}

/// The measurement of every path of one session.
#[derive(Debug, Clone)]
pub(crate) struct Measure {
    paths: Vec<PathMeasure>,
    /// Transit time of the first packet of the session: the zero of relative delays.
    owd_base: Option<u32>,
    /// Smallest relative delay of any path this session.
    owd_min: i64,
    /// Whether path sequence gaps are kept for [`Measure::take_gaps`].
    pub(crate) keep_gaps: bool,
    /// Path sequence gaps seen since the caller last took them: (path, first missing,
    /// how many). At most [`MAX_GAPS`] wait; more are counted lost but not kept.
    gaps: Vec<Gap>,
    /// When a gap was last kept to be asked for ([`Measure::keep_gaps`]).
    pub(crate) gap_kept_at: Option<Time>,
}

/// Path sequences a path skipped: `count` of them from `first` on, on `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub path: mpt_core::PathId,
    pub first: u16,
    pub count: u16,
}

/// Most gaps kept between two [`crate::Resequencer::take_gaps`].
pub const MAX_GAPS: usize = 64;

impl Measure {
    pub(crate) fn new(paths: usize) -> Measure {
        Measure {
            paths: vec![PathMeasure::default(); paths],
            owd_base: None,
            owd_min: i64::MAX,
            keep_gaps: false,
            gaps: Vec::new(),
            gap_kept_at: None,
        }
    }

    /// Path `p` skipped `count` path sequences from `first` on.
    /// Path `p` lost `count` from `first` on, at `now`: kept to be asked for, and, unless
    /// it was its queue overflowing (`overflow`), waited for.
    fn gap(&mut self, now: Time, p: usize, first: u16, count: u16, overflow: bool) {
        if self.keep_gaps && !overflow {
            self.gap_kept_at = Some(now);
        }
        if self.keep_gaps && self.gaps.len() < MAX_GAPS {
            self.gaps.push(Gap {
                path: mpt_core::PathId(p as u8),
                first,
                count,
            });
        }
    }

    /// The gaps kept since the last call.
    pub(crate) fn take_gaps(&mut self, out: &mut Vec<Gap>) {
        out.append(&mut self.gaps);
    }

    /// Measure `n` paths from now on: the first `n` keep what was measured.
    pub(crate) fn resize(&mut self, n: usize) {
        self.paths.resize(n, PathMeasure::default());
    }

    /// A new session: forget the sequence and delay baselines (counters are kept).
    pub(crate) fn reset(&mut self, stats: &mut Stats) {
        for m in self.paths.iter_mut() {
            *m = PathMeasure::default();
        }
        for s in stats.paths.iter_mut() {
            s.owd_us = None;
            s.owd_min_us = None;
            s.owd_last_us = None;
        }
        self.owd_base = None;
        self.owd_min = i64::MAX;
        self.gaps.clear();
        self.gap_kept_at = None;
    }

    /// A data packet arrived on path `p` at `now`.
    #[inline]
    pub(crate) fn arrival(&mut self, now: Time, p: usize, meta: &PacketMeta, stats: &mut Stats) {
        let len = meta.len as u64;
        stats.total.packets += 1;
        stats.total.bytes += len;
        let st = &mut stats.paths[p];
        st.packets += 1;
        st.bytes += len;
        let transit = now.wire_micros().wrapping_sub(meta.sent_us);
        let mut gap = None;
        if let Some(expected) = self.paths[p].expected_path_seq {
            let d = seq16_diff(meta.path_seq, expected);
            if d != 0 {
                if d > 0 && d < i16::MAX {
                    st.lost += d as u64;
                    stats.total.lost += d as u64;
                    gap = Some((expected, d as u16));
                } else {
                    st.path_seq_errors += 1;
                    stats.total.path_seq_errors += 1;
                }
            }
        }
        let congested = self.queue_overflowed(now, p, transit);
        if let Some((first, count)) = gap {
            if congested {
                st.congestion_lost += u64::from(count);
            }
            self.gap(now, p, first, count, congested);
        }
        let m = &mut self.paths[p];
        m.expected_path_seq = Some(meta.path_seq.wrapping_add(1));
        st.highest_path_seq = Some(meta.path_seq);
        st.last_sent_us = Some(meta.sent_us);
        st.last_arrival = Some(now);

        if let Some(prev) = m.last_transit {
            let d = f64::from(seq_diff(transit, prev)).abs();
            st.jitter_us += (d - st.jitter_us) / 16.0;
        }
        m.last_transit = Some(transit);
        self.one_way_delay(now, p, transit, meta.len, stats);
    }

    /// Whether a packet of path `p` whose transit time is `transit` found the path's queue
    /// near the highest it has shown lately ([`CONGESTED_SHARE`], [`CONGESTED_MIN_US`]): a
    /// loss just before it was the queue overflowing. Follows the highest queue.
    fn queue_overflowed(&mut self, now: Time, p: usize, transit: u32) -> bool {
        let (Some(base), true) = (self.owd_base, self.paths[p].owd_valid) else {
            return false;
        };
        let m = &mut self.paths[p];
        // the smoothed delay as this packet leaves it: a single late or early packet (the
        // lab's and the VM's own jitter) moves neither the queue nor its peak far
        let rel = f64::from(seq_diff(transit, base));
        let queue = owd_step(m.owd_ewma, rel) as i64 - m.floor.least().0;
        m.queue_peak.full(now, queue)
    }

    /// A fence on path `p` says the next `path_seq` there: the ones skipped are lost.
    pub(crate) fn fence(&mut self, now: Time, p: usize, next_path_seq: u16, stats: &mut Stats) {
        if let Some(expected) = self.paths[p].expected_path_seq {
            let d = seq16_diff(next_path_seq, expected);
            if d > 0 {
                stats.paths[p].lost += d as u64;
                stats.total.lost += d as u64;
                self.gap(now, p, expected, d as u16, false);
            } else if d < 0 {
                // a fence from before datagrams that arrived already (the sender built it
                // while they were unsent): it says nothing new
                return;
            }
        }
        self.paths[p].expected_path_seq = Some(next_path_seq);
    }

    /// Fold a packet's transit time into path `p`'s delay, relative to the session's first
    /// packet, and export every path's delay relative to the fastest.
    #[inline]
    fn one_way_delay(&mut self, now: Time, p: usize, transit: u32, len: usize, stats: &mut Stats) {
        let base = *self.owd_base.get_or_insert(transit);
        let rel = i64::from(seq_diff(transit, base));
        let m = &mut self.paths[p];
        m.owd_last = rel;
        m.floor.take(now, rel, len);
        if m.owd_valid {
            m.owd_ewma = owd_step(m.owd_ewma, rel as f64);
        } else {
            m.owd_valid = true;
            m.owd_ewma = rel as f64;
        }
        if rel < self.owd_min {
            self.owd_min = rel;
            for (m, st) in self.paths.iter().zip(stats.paths.iter_mut()) {
                if m.owd_valid {
                    export(m, st, rel);
                }
            }
        } else {
            export(&self.paths[p], &mut stats.paths[p], self.owd_min);
        }
    }
}

#[inline]
fn export(m: &PathMeasure, st: &mut PathStats, global_min: i64) {
    st.owd_us = Some(m.owd_ewma - global_min as f64);
    let (least, len) = m.floor.least();
    st.owd_min_us = Some(least - global_min);
    st.owd_min_len = Some(len);
    st.owd_last_us = Some(m.owd_last - global_min);
}
