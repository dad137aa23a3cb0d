//! Pacing bonded traffic with the queue in the sender: while every path a bonded packet may
//! take holds more than [`PACE_LIMIT`] on the scheduler's clock, [`crate::Connection::number_batch`]
//! holds it (and the bonded packets behind it) for the driver to offer again at
//! [`crate::BatchOut::paced_until`], so that a sender's burst or probe builds delay here
//! instead of drops in a link's queue. The driver's queue of held packets is kept short by
//! CoDel's sojourn-time rule (RFC 8289), [`crate::Connection::pace_drop`].

use std::time::Duration;

use mpt_core::Time;

/// A path is full, and bonded packets wait in the sender, once the scheduler's clock runs this
/// far ahead on it: the queue each link may hold at the rate learned for it.
pub const PACE_LIMIT: Duration = Duration::from_millis(20);

/// Most packets a driver holds for pacing: beyond them it drops the oldest (counted as
/// [`crate::DropReason::Paced`]). CoDel answers a sender that backs off; one that does not (a UDP
/// stream faster than the paths) would fill any queue.
pub const PACE_HOLD_MAX: usize = 512;

/// CoDel's target: the sojourn time the queue of held packets may keep standing, at least.
/// On slow lines it is longer: a held packet waits for a path to take its next datagram, so
/// the target is at least the time a largest datagram takes on the fastest paced path (RFC
/// 8289, 4.4: at least a maximum-size packet's transmission time at the bottleneck), and
/// the interval grows with it ([`Codel::drop_head`]).
pub const TARGET: Duration = Duration::from_millis(30);

/// CoDel's interval: how long the sojourn time must stay above the target before the first
/// drop, and the base of the spacing between drops; at least this, and the target's
/// multiple it is of [`TARGET`].
pub const INTERVAL: Duration = Duration::from_millis(100);

/// The target and interval when a largest datagram takes `granule` on the fastest paced
/// path.
fn target_interval(granule: Option<Duration>) -> (Duration, Duration) {
    let target = TARGET.max(granule.unwrap_or_default());
    let interval = INTERVAL.max(target.mul_f64(INTERVAL.as_secs_f64() / TARGET.as_secs_f64()));
    (target, interval)
}

/// CoDel's state for the queue of held packets (RFC 8289's `dodequeue`, sans-IO).
#[derive(Debug, Clone, Default)]
pub(crate) struct Codel {
    /// When the sojourn time, above the target since, will have been so for an interval.
    first_above: Option<Time>,
    /// In the dropping state: the time of the next drop.
    dropping: bool,
    drop_next: Time,
    /// Drops since the dropping state began, and at its last start.
    count: u32,
    last_count: u32,
}

impl Codel {
    /// The packet at the head of the queue leaves at `now` after waiting `sojourn`, while a
    /// largest datagram takes `granule` on the fastest paced path: whether to drop it
    /// instead.
    pub(crate) fn drop_head(
        &mut self,
        now: Time,
        sojourn: Duration,
        granule: Option<Duration>,
    ) -> bool {
        let (target, interval) = target_interval(granule);
        let ok_to_drop = if sojourn < target {
            self.first_above = None;
            false
        } else {
            match self.first_above {
                None => {
                    self.first_above = Some(now + interval);
                    false
                }
                Some(t) => now >= t,
            }
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return false;
            }
            if now >= self.drop_next {
                self.count += 1;
                self.drop_next = control_law(self.drop_next, self.count, interval);
                return true;
            }
            return false;
        }
        if !ok_to_drop {
            return false;
        }
        self.dropping = true;
        // a queue that stands again soon after the last dropping state starts near the drop
        // rate that controlled it then
        let delta = self.count.wrapping_sub(self.last_count);
        self.count = if delta > 1 && now.saturating_since(self.drop_next) < 16 * interval {
            delta
        } else {
            1
        };
        self.last_count = self.count;
        self.drop_next = control_law(now, self.count, interval);
        true
    }

    /// The queue emptied.
    pub(crate) fn empty(&mut self) {
        self.first_above = None;
    }
}

/// The next drop: `interval / sqrt(count)` after `t`.
fn control_law(t: Time, count: u32, interval: Duration) -> Time {
    t + interval.div_f64(f64::from(count.max(1)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: u64) -> Time {
        Time::from_nanos(t * 1_000_000)
    }

    #[test]
    fn a_queue_standing_above_the_target_for_an_interval_drops_ever_faster() {
        let mut c = Codel::default();
        let mut drops = Vec::new();
        for t in 0..400 {
            if c.drop_head(ms(t), TARGET + Duration::from_millis(3), None) {
                drops.push(t);
            }
        }
        // the first after an interval, then interval/sqrt(2) after the second (70.7 ms),
        // interval/sqrt(3) after that (57.7 ms), on a clock of whole milliseconds
        assert_eq!(drops[..4], [100, 200, 271, 329]);
        // a queue under the target ends it at once
        assert!(!c.drop_head(ms(400), TARGET - Duration::from_millis(1), None));
        assert!(!c.drop_head(ms(401), TARGET + Duration::from_millis(3), None));
    }

    #[test]
    fn on_slow_lines_a_queue_may_stand_for_a_datagram_on_the_fastest_path() {
        // a largest datagram takes 94 ms at 128 kbit/s: a held packet may wait that long
        let granule = Some(Duration::from_millis(94));
        let mut c = Codel::default();
        for t in 0..2000 {
            assert!(!c.drop_head(ms(t), Duration::from_millis(90), granule));
        }
        // a queue that stands above it is still dropped from, after the longer interval (313 ms)
        let mut drops = Vec::new();
        for t in 2000..3000 {
            if c.drop_head(ms(t), Duration::from_millis(100), granule) {
                drops.push(t);
            }
        }
        assert_eq!(drops.first(), Some(&2314), "{drops:?}");
        assert!(drops.len() >= 3, "{drops:?}");
    }

    #[test]
    fn a_short_or_emptied_queue_drops_nothing() {
        let mut c = Codel::default();
        for t in 0..1000 {
            assert!(!c.drop_head(ms(t), TARGET - Duration::from_millis(1), None));
        }
        for t in 1000..2000 {
            if t % 50 == 0 {
                c.empty();
            }
            assert!(!c.drop_head(ms(t), 2 * TARGET, None));
        }
    }
}
