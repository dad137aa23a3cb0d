//! Path MTU discovery per path, in the manner of RFC 8899 (DPLPMTUD): padded probes sent
//! with DF set find the largest datagram a path carries; data never waits for them.
//!
//! A path starts at [`BASE_DATAGRAM`], which every IPv4 or IPv6 path carries, and searches
//! up at once: the largest useful size first (the tunnel MTU's datagram), then halving the
//! interval between the largest size that passed and the smallest that did not. A size fails
//! when a probe of it goes unanswered (or the driver says the kernel refused it as too big).
//! Once found, the size is confirmed every [`Pmtu::confirm_interval`]: a confirmation that
//! goes unanswered [`PROBE_TRIES`] times means the path's MTU dropped (a route
//! change, an LTE reattach), and the path falls back to the base and searches again. Every
//! [`RAISE_INTERVAL`] a path below the largest useful size tries to go up again.

use std::time::Duration;

use mpt_core::Time;

mod watch;

pub(crate) use watch::Seen;

/// The datagram (UDP payload) every path is assumed to carry (RFC 8899's `BASE_PLPMTU`, what
/// an IPv6 path of the minimum MTU 1280 carries with room to spare).
pub const BASE_DATAGRAM: usize = 1200;
/// The smallest datagram a path is ever taken to carry (an IPv4 path of the minimum MTU,
/// 576, less its IP and UDP headers), however the kernel or probes disagree.
pub const MIN_DATAGRAM: usize = 548;
/// Probes of the size found that must go unanswered before it counts as no longer passing
/// (RFC 8899's `MAX_PROBES`; a search gives a size up after one). A probe lost while the
/// path's queue overflows counts for nothing: it is sent again.
pub const PROBE_TRIES: u8 = 3;
/// Link MTUs met often (jumbo, Ethernet, PPPoE, DS-Lite, LTE and other tunnels, IPv6's
/// minimum): a search tries them first, largest first, before it halves intervals.
const COMMON_MTUS: [usize; 15] = [
    9000, 4470, 1500, 1492, 1480, 1472, 1460, 1450, 1440, 1420, 1400, 1380, 1360, 1340, 1280,
];

/// A search stops when the largest size that passed and the smallest that failed are this
/// close.
pub const SEARCH_GRANULARITY: usize = 8;
/// How often a path below the largest useful size tries to raise it.
pub const RAISE_INTERVAL: Duration = Duration::from_secs(30);
/// How often a path's size is confirmed at the least (more seldom on slow paths, see
/// [`Pmtu::confirm_interval`]).
pub const CONFIRM_INTERVAL: Duration = Duration::from_secs(1);

/// The shortest time over which [`Pmtu::watch_delivery`] compares what a path
/// carried with what was sent on it.
pub const DELIVERY_WINDOW: Duration = Duration::from_millis(100);
/// The fewest data datagrams sent (or found missing) over that time for a shortfall to count.
pub const DELIVERY_SHORTFALL: u64 = 8;
/// How long probes lost while the path's queue overflows are sent again without counting: a
/// transfer's start overshoots for a second or so, and a queue that the reports keep showing
/// full for longer (a stale report of a path that went dark) must not hide a drop for ever.
pub const OVERFLOW_GRACE: Duration = Duration::from_secs(2);

/// How long a path of `rate` bits/s takes to carry `size` bytes (unknown rate: none).
pub(crate) fn airtime(size: usize, rate: Option<u64>) -> Duration {
    rate.filter(|&r| r > 0).map_or(Duration::ZERO, |r| {
        Duration::from_nanos((size as u64 * 8).saturating_mul(1_000_000_000) / r)
    })
}

/// A probe in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InFlight {
    size: usize,
    sent: Time,
    tries: u8,
    /// The path's queue overflowed while it was out.
    overflowed: bool,
    /// When the first probe of this size went (its sending again while the queue overflows
    /// is bounded by [`OVERFLOW_GRACE`]).
    first: Time,
}

/// One path's discovery.
#[derive(Debug, Clone)]
pub(crate) struct Pmtu {
    /// The largest datagram known to pass: what data is sized to.
    pub(crate) size: usize,
    /// The largest worth having: the tunnel MTU's datagram, or the user's cap.
    ceiling: usize,
    /// The outer IP and UDP headers: a link MTU less these is a datagram size.
    pub(crate) outer: usize,
    /// The smallest size known not to pass (above `ceiling`: none).
    fails_at: usize,
    probe: Option<InFlight>,
    /// When the next probe goes, when none is in flight.
    next: Time,
    /// `size` is confirmed: the search is over.
    found: bool,
    /// When the search last ended (for raising).
    found_at: Time,
    /// How often the size found is confirmed, as [`Pmtu::poll`] was last told.
    confirm: Duration,
    /// A data datagram of the size found, sent while no probe is out: the last per-path
    /// sequence it carried, and the losses the peer had counted on the path before it (see
    /// [`Pmtu::data_sent`]).
    data_check: Option<(u16, u32)>,
    /// Confirmations that data made (no probe sent).
    pub(crate) data_confirmed: u64,
    /// Probes sent; drops of the size found (black holes).
    pub(crate) probes_sent: u64,
    pub(crate) drops: u64,
    /// When the data sent on the path was last compared with what the peer received
    /// ([`Pmtu::watch_delivery`]): then, the data datagrams sent on the path and the peer's
    /// counts of packets received and lost.
    delivery_mark: Option<(Time, u64, u32, u32)>,
    /// The data sent lately may not have arrived ([`Pmtu::suspect`]): the size found is to be
    /// confirmed at once.
    suspected: bool,
}

impl Pmtu {
    /// Discovery from `now` on a path whose datagrams are worth at most `ceiling` bytes and
    /// carry `outer` bytes of IP and UDP headers.
    pub(crate) fn new(now: Time, ceiling: usize, outer: usize) -> Pmtu {
        Pmtu {
            size: BASE_DATAGRAM.min(ceiling),
            ceiling,
            outer,
            fails_at: ceiling + 1,
            probe: None,
            next: now,
            found: ceiling <= BASE_DATAGRAM,
            found_at: now,
            confirm: CONFIRM_INTERVAL,
            data_check: None,
            data_confirmed: 0,
            probes_sent: 0,
            drops: 0,
            delivery_mark: None,
            suspected: false,
        }
    }

    /// A path whose transport carries any datagram up to `ceiling` (a stream: TCP or TLS cut
    /// and join them as they please): found at the ceiling from the start, no search.
    pub(crate) fn fixed(now: Time, ceiling: usize, outer: usize) -> Pmtu {
        Pmtu {
            size: ceiling,
            found: true,
            ..Pmtu::new(now, ceiling, outer)
        }
    }

    /// The ceiling changed (a reload, another MTU): search again from what passes.
    pub(crate) fn set_ceiling(&mut self, now: Time, ceiling: usize) {
        if ceiling == self.ceiling {
            return;
        }
        *self = Pmtu {
            probes_sent: self.probes_sent,
            drops: self.drops,
            delivery_mark: self.delivery_mark,
            ..Pmtu::new(now, ceiling, self.outer)
        };
    }

    /// The size found (the search is over).
    pub(crate) fn found(&self) -> bool {
        self.found
    }

    /// A probe is out, waiting for its answer.
    pub(crate) fn in_flight(&self) -> bool {
        self.probe.is_some()
    }

    /// How long a probe waits for its answer on a path of smoothed RTT `srtt` and `rate`
    /// bits/s: twice the RTT and 20 ms (0.1 to 1 s; 0.2 s before an RTT is known), and twice
    /// the time the path takes to carry the largest probe (on a 64 kbit/s line, 0.18 s).
    pub(crate) fn probe_timeout(&self, srtt: Option<Duration>, rate: Option<u64>) -> Duration {
        let rtt = srtt.map_or(Duration::from_millis(200), |r| {
            (r * 2 + Duration::from_millis(20))
                .clamp(Duration::from_millis(100), Duration::from_secs(1))
        });
        rtt + airtime(self.ceiling, rate) * 2
    }

    /// How often the size found is confirmed on a path of `rate` bits/s: every
    /// [`CONFIRM_INTERVAL`], or seldom enough that probes take at most 1 % of the path.
    pub(crate) fn confirm_interval(&self, rate: Option<u64>) -> Duration {
        CONFIRM_INTERVAL.max(airtime(self.size, rate) * 100)
    }

    /// The size of a probe to send at `now`, if one is due (it counts as sent). `timeout`:
    /// how long an earlier probe waits for its answer; `confirm`: how often the size found
    /// is confirmed; `overflowing`: the path's queue is full lately (the peer's last report
    /// shows it at the highest it has been, [`mpt_core::queue::QueuePeak`]), so that a probe
    /// lost now says nothing of its size.
    pub(crate) fn poll(
        &mut self,
        now: Time,
        timeout: Duration,
        confirm: Duration,
        overflowing: bool,
    ) -> Option<usize> {
        self.confirm = confirm;
        if let Some(p) = &mut self.probe {
            p.overflowed |= overflowing;
        }
        if let Some(p) = self.probe {
            if now.saturating_since(p.sent) < timeout {
                return None;
            }
            // unanswered: a search moves on at once (a probe lost to chance costs a lower size
            // until the next raise); a confirmation tries again before it gives the size up.
            // Lost in a queue that overflows (a transfer's start overshoots by half), it is
            // sent again as the same try: a false drop sends TCP on the path in pieces until
            // the next raise
            let tries = if self.found { PROBE_TRIES } else { 1 };
            let free = p.overflowed && now.saturating_since(p.first) < OVERFLOW_GRACE;
            if free || p.tries < tries {
                self.probe = Some(InFlight {
                    sent: now,
                    tries: if free { p.tries } else { p.tries + 1 },
                    overflowed: overflowing,
                    ..p
                });
                self.probes_sent += 1;
                return Some(p.size);
            }
            self.probe = None;
            self.failed(now, p.size);
        }
        if now < self.next {
            return None;
        }
        let size = if self.found {
            if self.size < self.ceiling && now.saturating_since(self.found_at) >= RAISE_INTERVAL {
                // try to go up again
                self.found = false;
                self.fails_at = self.ceiling + 1;
                self.candidate()
            } else {
                self.next = now + confirm;
                self.size
            }
        } else {
            self.candidate()
        };
        // the probe answers the suspicion (lost, it is tried again as a confirmation is)
        self.suspected = false;
        self.probe = Some(InFlight {
            size,
            sent: now,
            tries: 1,
            overflowed: overflowing,
            first: now,
        });
        self.probes_sent += 1;
        Some(size)
    }

    /// The next size a search tries: the ceiling first, then the largest common link MTU's
    /// between what passed and what failed, then halfway.
    fn candidate(&self) -> usize {
        if self.fails_at > self.ceiling {
            return self.ceiling;
        }
        COMMON_MTUS
            .iter()
            .map(|m| m.saturating_sub(self.outer))
            .find(|&d| d > self.size && d < self.fails_at)
            .unwrap_or((self.size + self.fails_at) / 2)
    }

    /// A probe of `size` came back.
    pub(crate) fn acked(&mut self, now: Time, size: usize) {
        if self.probe.is_some_and(|p| p.size == size) {
            self.probe = None;
        }
        if size > self.ceiling {
            return;
        }
        if size >= self.size {
            self.size = size;
        }
        if !self.found {
            if self.fails_at.saturating_sub(self.size) <= SEARCH_GRANULARITY
                || self.size == self.ceiling
            {
                self.end_search(now);
            } else {
                self.next = now;
            }
        }
    }

    /// Sending a datagram of `size` failed as too big (the kernel knows the route's MTU is
    /// lower): a probe of that size fails at once; data that large means the size found no
    /// longer passes.
    pub(crate) fn too_big(&mut self, now: Time, size: usize) {
        if self.probe.is_some_and(|p| p.size == size) {
            self.probe = None;
            self.failed(now, size);
        } else if size <= self.size {
            self.failed(now, size);
        }
    }

    /// No datagram of `size` passes.
    fn failed(&mut self, now: Time, size: usize) {
        self.data_check = None;
        if size <= self.size {
            // what passed no longer does: back to the base, search again
            if self.found && size == self.size {
                self.drops += 1;
            }
            self.size = BASE_DATAGRAM
                .min(size.saturating_sub(1))
                .min(self.ceiling)
                .max(MIN_DATAGRAM);
            self.fails_at = size;
            self.found = false;
            self.next = now;
            return;
        }
        self.fails_at = self.fails_at.min(size);
        if self.fails_at.saturating_sub(self.size) <= SEARCH_GRANULARITY {
            self.end_search(now);
        } else {
            self.next = now;
        }
    }

    fn end_search(&mut self, now: Time) {
        self.found = true;
        self.found_at = now;
        self.next = now + self.confirm;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(100);

    /// Run discovery against a path that carries `mtu`-byte datagrams, every probe answered
    /// (or not) after 10 ms; returns the size after `ms` milliseconds.
    fn run(p: &mut Pmtu, from: u64, ms: u64, passes: impl Fn(u64) -> usize) -> usize {
        run_lossy(p, from, ms, passes, |_| false)
    }

    /// As [`run`], with the path's queue full (and every probe lost) while `overflowing`.
    fn run_lossy(
        p: &mut Pmtu,
        from: u64,
        ms: u64,
        passes: impl Fn(u64) -> usize,
        overflowing: impl Fn(u64) -> bool,
    ) -> usize {
        let mut answer: Option<(Time, usize)> = None;
        for t in from..from + ms {
            let now = Time::ZERO + Duration::from_millis(t);
            if let Some((at, size)) = answer {
                if at <= now {
                    p.acked(now, size);
                    answer = None;
                }
            }
            if let Some(size) = p.poll(now, T, CONFIRM_INTERVAL, overflowing(t)) {
                if size <= passes(t) && !overflowing(t) {
                    answer = Some((now + Duration::from_millis(10), size));
                }
            }
        }
        p.size
    }

    #[test]
    fn finds_the_largest_size_a_path_carries_within_a_few_seconds() {
        for mtu in [1540, 1464, 1452, 1252, 1212] {
            let mut p = Pmtu::new(Time::ZERO, 1540, 28);
            let got = run(&mut p, 0, 3000, |_| mtu);
            assert!(p.found(), "{mtu}");
            assert!(
                got <= mtu && got + SEARCH_GRANULARITY >= mtu.min(1540),
                "{mtu}: {got}"
            );
        }
    }

    #[test]
    fn a_drop_is_noticed_within_two_seconds_and_the_size_raised_again_later() {
        let mut p = Pmtu::new(Time::ZERO, 1540, 28);
        assert_eq!(run(&mut p, 0, 3000, |_| 1540), 1540);
        // the path's MTU drops at 3 s
        let size = run(&mut p, 3000, 2000, |_| 1464);
        assert!(size <= 1464, "{size}");
        assert_eq!(p.drops, 1);
        // and comes back: raised within the raise interval and a search
        let size = run(
            &mut p,
            5000,
            RAISE_INTERVAL.as_millis() as u64 + 3000,
            |_| 1540,
        );
        assert_eq!(size, 1540);
    }

    #[test]
    fn data_that_stops_arriving_has_the_size_confirmed_at_once() {
        let mut p = Pmtu::new(Time::ZERO, 1540, 28);
        assert_eq!(run(&mut p, 0, 3000, |_| 1540), 1540);
        // just after a confirmation, the next is a second away; a suspicion sends it now,
        // and the drop is taken after its tries
        let due = p.next.saturating_since(Time::ZERO).as_millis() as u64;
        assert_eq!(run(&mut p, 3000, due + 50 - 3000, |_| 1540), 1540);
        let now = due + 50;
        assert!(
            p.probe.is_none() && p.next.saturating_since(Time::ZERO).as_millis() as u64 > now + 900
        );
        p.suspect(Time::ZERO + Duration::from_millis(now));
        let tries = u64::from(PROBE_TRIES);
        let size = run(&mut p, now, tries * T.as_millis() as u64 + 2, |_| 1464);
        assert_eq!(p.drops, 1, "{size}");
        // a suspicion while the search runs, or a probe is out, changes nothing
        let before = p.clone();
        p.suspect(Time::ZERO + Duration::from_millis(now + tries * 100 + 100));
        assert_eq!(p.next, before.next);
    }

    #[test]
    fn probes_lost_while_the_queue_overflows_are_no_drop() {
        let mut p = Pmtu::new(Time::ZERO, 1540, 28);
        assert_eq!(run(&mut p, 0, 3000, |_| 1540), 1540);
        // two seconds of a queue that overflows: every probe lost, none counts
        let size = run_lossy(&mut p, 3000, 2000, |_| 1540, |_| true);
        assert_eq!((size, p.drops), (1540, 0));
        // but a queue shown full for ever (a stale report) hides a drop no longer than the
        // grace and the tries
        let grace = OVERFLOW_GRACE.as_millis() as u64;
        let tries = u64::from(PROBE_TRIES) * T.as_millis() as u64;
        let size = run_lossy(&mut p, 5000, grace + tries + 1200, |_| 1464, |_| true);
        assert!(p.drops == 1 && size < 1540, "{size}");
        // nor does a search's probe: it is sent again
        let mut p = Pmtu::new(Time::ZERO, 1540, 28);
        let size = run_lossy(&mut p, 0, 3000, |_| 1540, |t| t < 1000);
        assert_eq!((size, p.found()), (1540, true));
    }

    #[test]
    fn the_kernel_refusing_a_size_fails_it_at_once() {
        let mut p = Pmtu::new(Time::ZERO, 1540, 28);
        let now = Time::ZERO;
        assert_eq!(p.poll(now, T, CONFIRM_INTERVAL, false), Some(1540));
        p.too_big(now, 1540);
        let next = p.poll(now, T, CONFIRM_INTERVAL, false).unwrap();
        assert!(next < 1540 && next > BASE_DATAGRAM);
    }

    #[test]
    fn slow_paths_are_confirmed_seldom() {
        let p = Pmtu::new(Time::ZERO, 1540, 28);
        assert_eq!(p.confirm_interval(Some(100_000_000)), CONFIRM_INTERVAL);
        // 1200 bytes at 128 kbit/s take 75 ms: once in 7.5 s
        assert_eq!(
            p.confirm_interval(Some(128_000)),
            Duration::from_millis(7500)
        );
    }

    #[test]
    fn a_full_data_datagram_that_arrives_confirms_the_size_and_one_lost_does_not() {
        let mut p = Pmtu::new(Time::ZERO, 1472, 28);
        assert_eq!(run(&mut p, 0, 2000, |_| 1472), 1472);
        let at = |ms: u64| Time::ZERO + Duration::from_millis(ms);
        // a confirmation is due by 3 s; data of the size found, delivered with no loss counted
        // since, puts it off by an interval from the report
        let probes = p.probes_sent;
        p.data_sent(1472, 100, Some(7));
        p.data_sent(1472, 101, Some(7)); // one watched at a time
        p.report(at(2500), 99, 7); // not there yet
        p.report(at(2600), 101, 7);
        assert_eq!(p.data_confirmed, 1);
        assert_eq!(p.poll(at(3500), T, CONFIRM_INTERVAL, false), None);
        // smaller data says nothing, and a loss counted since the full one went leaves the
        // confirmation to the probe
        p.data_sent(1400, 102, Some(7));
        p.data_sent(1472, 103, Some(7));
        p.report(at(3550), 104, 8);
        assert_eq!(p.data_confirmed, 1);
        assert_eq!(p.poll(at(3600), T, CONFIRM_INTERVAL, false), Some(1472));
        assert_eq!(p.probes_sent, probes + 1);
        // no report yet (nothing to compare losses with): nothing watched
        let mut q = Pmtu::new(Time::ZERO, 1472, 28);
        run(&mut q, 0, 2000, |_| 1472);
        q.data_sent(1472, 5, None);
        q.report(at(2100), 6, 0);
        assert_eq!(q.data_confirmed, 0);
    }

    #[test]
    fn data_that_confirms_a_size_below_the_ceiling_does_not_put_off_the_raise() {
        let mut p = Pmtu::new(Time::ZERO, 1472, 28);
        assert_eq!(run(&mut p, 0, 3000, |_| 1464), 1464);
        let at = |ms: u64| Time::ZERO + Duration::from_millis(ms);
        let mut raised = false;
        for s in 0..40u16 {
            let now = at(3000 + u64::from(s) * 1000);
            p.data_sent(1464, s * 2, Some(0));
            p.report(now, s * 2 + 1, 0);
            if p.poll(now, T, CONFIRM_INTERVAL, false) == Some(1472) {
                raised = true;
                break;
            }
        }
        assert!(raised, "no raise within 40 s of data confirming the size");
    }
}
