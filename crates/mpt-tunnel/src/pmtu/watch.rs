//! Noticing that a path's size found may no longer pass, between confirmations: a data
//! datagram of that size that the peer's reports show arrived confirms it as a probe would,
//! and data that stops arriving (a shortfall in what the peer counts, or no report at all)
//! has it confirmed at once.

use std::time::Duration;

use mpt_core::wire::ReportEntry;
use mpt_core::Time;

use super::{Pmtu, DELIVERY_SHORTFALL, DELIVERY_WINDOW, RAISE_INTERVAL};

/// What the path shows that watching its delivery needs: the data datagrams sent on it so far,
/// its smoothed round trip (µs), and whether its queue overflows lately.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) sent: u64,
    pub(crate) srtt_us: Option<u64>,
    pub(crate) queue_full: bool,
}

/// The time over which what a path carried is compared with what was sent on it, on a path of
/// smoothed RTT `srtt_us`: twice the RTT, and at least [`DELIVERY_WINDOW`].
fn delivery_window(srtt_us: Option<u64>) -> Duration {
    Duration::from_micros(srtt_us.unwrap_or(0) * 2).max(DELIVERY_WINDOW)
}

impl Pmtu {
    /// A data datagram of `len` bytes went on the path, the last of its per-path sequences
    /// `path_seq`, when the peer's last report counted `lost` packets lost on it (`None`: no
    /// report yet). One of the size found is watched for until the peer's reports pass it:
    /// see [`Pmtu::report`].
    pub(crate) fn data_sent(&mut self, len: usize, path_seq: u16, lost: Option<u32>) {
        if let (true, None, None, Some(lost)) = (
            self.found && len >= self.size,
            self.data_check,
            self.probe,
            lost,
        ) {
            self.data_check = Some((path_seq, lost));
        }
    }

    /// The peer reports it has received up to `path_seq` on the path and counted `lost`
    /// packets lost there. When that reaches the data datagram of the size found that is
    /// watched for, with no loss counted since it was sent, it arrived: the size is confirmed
    /// as a probe would have (RFC 8899 lets data confirm it). The next confirmation is put
    /// off, but not a raise that is due.
    pub(crate) fn report(&mut self, now: Time, path_seq: u16, lost: u32) {
        let Some((watched, lost_before)) = self.data_check else {
            return;
        };
        let ahead = path_seq.wrapping_sub(watched);
        if ahead >= 0x8000 {
            // not there yet
            return;
        }
        self.data_check = None;
        if lost != lost_before || !self.found || self.probe.is_some() {
            return;
        }
        self.data_confirmed += 1;
        let mut next = now + self.confirm;
        if self.size < self.ceiling {
            next = next.min(self.found_at + RAISE_INTERVAL);
        }
        self.next = self.next.max(next);
    }

    /// The data sent on the path lately did not arrive (a black hole for its size, perhaps):
    /// confirm the size found now rather than at the next confirmation.
    pub(crate) fn suspect(&mut self, now: Time) {
        if self.found && self.probe.is_none() {
            self.next = self.next.min(now);
            self.suspected = true;
        }
    }

    /// The size found is suspected and not confirmed since ([`Pmtu::suspect`]).
    pub(crate) fn suspected(&self) -> bool {
        self.suspected
    }

    /// The peer reported `e` about the path, on which we sent `sent` data datagrams so far;
    /// `srtt_us` is its smoothed RTT, and `queue_full` whether its queue overflows (as the
    /// parity's sender sees it). When, over at least [`DELIVERY_WINDOW`] and twice the RTT,
    /// the peer received fewer than a quarter of the data datagrams we sent there, or found a
    /// third or more of them missing (at least [`DELIVERY_SHORTFALL`] either way), and the
    /// queue is not full (an overflowing queue loses as much: slow start's overshoot), the
    /// path may have become a black hole for their size (a route change with no ICMP): the
    /// size is confirmed at once instead of at the next confirmation, so that a drop is
    /// noticed in a few RTTs. A false suspicion costs a probe, and a false drop (the probe
    /// lost three times) a search.
    pub(crate) fn watch_delivery(&mut self, now: Time, seen: Seen, e: &ReportEntry) {
        let Seen {
            sent,
            srtt_us,
            queue_full,
        } = seen;
        let mark = (now, sent, e.packets, e.lost);
        let Some((since, sent_then, got, missed)) = self.delivery_mark else {
            self.delivery_mark = Some(mark);
            return;
        };
        if now.saturating_since(since) < delivery_window(srtt_us) {
            return;
        }
        self.delivery_mark = Some(mark);
        let sent = sent.saturating_sub(sent_then);
        let got = u64::from(e.packets.wrapping_sub(got));
        let missed = u64::from(e.lost.wrapping_sub(missed));
        // counters that went back (a new session): not a shortfall
        if got > u64::from(u32::MAX / 2) || missed > u64::from(u32::MAX / 2) {
            return;
        }
        let unheard = sent >= DELIVERY_SHORTFALL && got < sent / 4;
        let lossy = missed >= DELIVERY_SHORTFALL && missed * 2 >= got;
        if (unheard || lossy) && !queue_full {
            self.suspect(now);
        }
    }

    /// No report came from the peer for twice the window of [`Pmtu::watch_delivery`], and for
    /// a window longer than `report_gap` (how far apart its reports came lately, at most
    /// [`mpt_reseq::feedback::MAX_INTERVAL`], its floor while data arrives), while we sent at
    /// least [`DELIVERY_SHORTFALL`] data datagrams on the path (`sent` so far): the peer
    /// heard none of them (when nothing at all arrives it has nothing to report, as when the
    /// inner TCP, its packets black-holed, waits for its retransmission timer): the size is
    /// confirmed at once. Without the reports' own gap, a slow stream that the peer reports on
    /// once a second would be taken for silence on every path every second, and each time a
    /// full-size probe (tens of milliseconds of a slow line) would delay the packet behind it.
    pub(crate) fn watch_silence(&mut self, now: Time, seen: Seen, report_gap: Duration) {
        let Seen { sent, srtt_us, .. } = seen;
        let gap = report_gap.min(mpt_reseq::feedback::MAX_INTERVAL);
        let Some((since, sent_then, got, missed)) = self.delivery_mark else {
            return;
        };
        let window = delivery_window(srtt_us);
        if now.saturating_since(since) < (window * 2).max(gap + window)
            || sent.saturating_sub(sent_then) < DELIVERY_SHORTFALL
        {
            return;
        }
        self.delivery_mark = Some((now, sent, got, missed));
        self.suspect(now);
    }
}
