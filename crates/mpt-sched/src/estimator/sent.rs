//! [`SentLog`]: when the sender put data on a path, and how many bytes by then: whether a path
//! that was sent to has gone silent, and how a queue a report shows for a packet sent a round
//! trip ago carries forward to now.

use mpt_core::{wire_micros_between, Time};

/// Entries kept: one a millisecond at most, so the log spans at least this many
/// milliseconds, longer than a 200 ms path's round trip and its report's wait.
const ENTRIES: usize = 512;

/// A ring of (send time in wire microseconds, bytes sent on the path before it, wrapping),
/// 4 KiB a path, allocated with the path's first data: a peer that only keeps its session
/// alive never pays for it.
#[derive(Clone, PartialEq, Default)]
pub(super) struct SentLog {
    at: Vec<(u32, u32)>,
    /// Entries written so far.
    len: u64,
    /// Bytes sent on the path so far (wrapping: only differences over the log's span, at most
    /// a few hundred megabytes, are taken).
    total: u32,
}

impl std::fmt::Debug for SentLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SentLog {{ entries: {}, bytes: {} }}",
            self.len, self.total
        )
    }
}

impl SentLog {
    /// `len` bytes were sent at `now`.
    pub(super) fn on_sent(&mut self, now: Time, len: usize) {
        if self.at.is_empty() {
            self.at = vec![(0, 0); ENTRIES];
        }
        let t = now.wire_micros();
        let newest = (self.len > 0).then(|| self.at[((self.len - 1) % ENTRIES as u64) as usize]);
        if newest.is_none_or(|(last, _)| t.wrapping_sub(last) >= 1_000) {
            self.at[(self.len % ENTRIES as u64) as usize] = (t, self.total);
            self.len += 1;
        }
        self.total = self.total.wrapping_add(len as u32);
    }

    /// Bytes sent from the packet sent at `sent` (wire microseconds) until now, that packet
    /// included, give or take what went in the millisecond before it; `None` when the log no
    /// longer reaches back that far (or nothing was sent since the path came up).
    pub(super) fn since(&self, sent: u32) -> Option<u64> {
        let kept = self.len.min(ENTRIES as u64);
        // newest first: the first entry not after `sent`
        (1..=kept)
            .map(|k| self.at[((self.len - k) % ENTRIES as u64) as usize])
            .find(|&(t, _)| wire_micros_between(t, sent) >= 0)
            .map(|(_, before)| u64::from(self.total.wrapping_sub(before)))
    }

    /// The send times of the newest `n` entries, newest first.
    pub(super) fn newest_times(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        (1..=self.len.min(ENTRIES.min(n) as u64))
            .map(|k| self.at[((self.len - k) % ENTRIES as u64) as usize].0)
    }

    /// Forget what was sent: the path came back up, and its reports start afresh.
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_bytes_from_a_send_time_on() {
        let mut log = SentLog::default();
        for ms in 0..100u64 {
            log.on_sent(Time::from_millis(ms), 1000);
            log.on_sent(Time::from_micros(ms * 1000 + 500), 1000);
        }
        // packets sent at 40.0 ms and after: 60 ms of two packets
        assert_eq!(log.since(40_000), Some(120_000));
        // the newest entry not after 40.5 ms is 40.0's: that millisecond counts whole
        assert_eq!(log.since(40_500), Some(120_000));
        assert_eq!(log.since(99_000), Some(2_000));
        assert_eq!(log.since(0), Some(200_000));
    }

    #[test]
    fn a_send_time_older_than_the_log_is_not_counted() {
        let mut log = SentLog::default();
        assert_eq!(log.since(0), None);
        for ms in 0..2 * ENTRIES as u64 {
            log.on_sent(Time::from_millis(ms), 100);
        }
        assert_eq!(log.since(0), None);
        let first_kept = ENTRIES as u32 * 1000;
        assert_eq!(log.since(first_kept), Some(ENTRIES as u64 * 100));
        log.clear();
        assert_eq!(log.since(first_kept), None);
    }

    #[test]
    fn the_byte_count_wraps() {
        let mut log = SentLog {
            total: u32::MAX - 999,
            ..Default::default()
        };
        log.on_sent(Time::from_millis(1), 3000);
        log.on_sent(Time::from_millis(2), 3000);
        assert_eq!(log.since(1000), Some(6000));
        assert_eq!(log.since(2000), Some(3000));
    }

    #[test]
    fn a_path_that_sent_nothing_holds_no_log() {
        let log = SentLog::default();
        assert!(log.at.is_empty());
        assert_eq!(log.since(0), None);
    }
}
