//! A link that changes satellite at fixed times, as a low-orbit dish does: at each handover it
//! goes dark for a moment (everything sent then is lost) and its propagation delay steps to
//! another value within a range. The lab's link emulator and the simulated pair both use it,
//! so that a handover is the same thing in either; jitter, random loss and the rate stay the
//! links' own.
//!
//! Sans-IO: the caller passes the time since the link's start, and the randomness is seeded.
//! Both directions of one path built with the same spec and seed go dark and step together,
//! as one satellite does: every draw happens at a handover, in handover order.

use std::time::Duration;

use crate::rng::Rng;

/// When a link hands over and what a handover does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandoverSpec {
    /// Time between handovers.
    pub period: Duration,
    /// When the first handover comes, from the link's start (the phase).
    pub first: Duration,
    /// Each handover's dark time: uniform in this range (least, most).
    pub dark: (Duration, Duration),
    /// At each handover the one-way delay steps by up to this much, up or down (uniform)...
    pub step: Duration,
    /// ...and stays in this range (least, most): a step that would leave it goes the other way.
    pub delay: (Duration, Duration),
}

impl HandoverSpec {
    /// Starlink's, one way (`docs/results.md` cites the measurements): a handover every 15 s,
    /// at 12, 27, 42 and 57 s of each minute (the link's start is taken as a minute's); dark
    /// 50-300 ms; the delay steps by up to ±20 ms each way (the round trip by up to ±40 ms)
    /// within 12-40 ms (round trips of 24-80 ms).
    pub const STARLINK: HandoverSpec = HandoverSpec {
        period: Duration::from_secs(15),
        first: Duration::from_secs(12),
        dark: (Duration::from_millis(50), Duration::from_millis(300)),
        step: Duration::from_millis(20),
        delay: (Duration::from_millis(12), Duration::from_millis(40)),
    };
}

/// One direction of a link with handovers: where it is in its schedule.
#[derive(Debug, Clone)]
pub struct Handovers {
    spec: HandoverSpec,
    rng: Rng,
    /// When the next handover comes.
    next: Duration,
    /// Dark until then (the last handover's dark time).
    dark_until: Duration,
    delay: Duration,
    count: u64,
    /// The latest time asked about.
    last: Duration,
}

impl Handovers {
    /// The link at its start: its delay drawn within the range.
    pub fn new(spec: HandoverSpec, seed: u64) -> Handovers {
        let mut rng = Rng::new(seed);
        let delay = uniform(&mut rng, spec.delay.0, spec.delay.1);
        Handovers {
            spec,
            rng,
            next: spec.first,
            dark_until: Duration::ZERO,
            delay,
            count: 0,
            last: Duration::ZERO,
        }
    }

    /// The link at `t` (time since its start; an earlier time than the latest asked about is
    /// taken as that one): `None` while it is dark, else its one-way propagation delay.
    pub fn at(&mut self, t: Duration) -> Option<Duration> {
        let t = t.max(self.last);
        self.last = t;
        while self.spec.period > Duration::ZERO && t >= self.next {
            self.hand_over();
        }
        (t >= self.dark_until).then_some(self.delay)
    }

    /// Handovers so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// When the next handover comes, from the link's start.
    pub fn next(&self) -> Duration {
        self.next
    }

    fn hand_over(&mut self) {
        let s = self.spec;
        self.dark_until = self.next + uniform(&mut self.rng, s.dark.0, s.dark.1);
        let step = s.step.mul_f64(self.rng.unit());
        let up = self.rng.unit() < 0.5;
        let (least, most) = (s.delay.0, s.delay.1.max(s.delay.0));
        let moved = match up {
            true if self.delay + step <= most => self.delay + step,
            true => self.delay.saturating_sub(step),
            false if self.delay >= least + step => self.delay - step,
            false => self.delay + step,
        };
        self.delay = moved.clamp(least, most);
        self.next += s.period;
        self.count += 1;
    }
}

/// Uniform in `[least, most]` (`least` when the range is empty).
fn uniform(rng: &mut Rng, least: Duration, most: Duration) -> Duration {
    least + most.saturating_sub(least).mul_f64(rng.unit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn dark_at_each_handover_for_its_dark_time_and_the_delay_steps_within_its_range() {
        let spec = HandoverSpec::STARLINK;
        let mut h = Handovers::new(spec, 7);
        let mut delays = vec![h.at(ms(0)).expect("not dark at the start")];
        let mut darks = Vec::new();
        for k in 0..40u64 {
            let at = spec.first + spec.period * k as u32;
            assert_eq!(
                h.at(at - ms(1)),
                Some(*delays.last().unwrap()),
                "steady before"
            );
            // dark from the handover on, for 50-300 ms
            let mut t = at;
            while h.at(t).is_none() {
                t += ms(1);
            }
            let dark = t - at;
            assert!(dark >= ms(50) && dark <= ms(301), "dark {dark:?}");
            darks.push(dark);
            let d = h.at(t).expect("lit");
            assert!(d >= spec.delay.0 && d <= spec.delay.1, "delay {d:?}");
            let last = *delays.last().unwrap();
            let step = d.max(last) - d.min(last);
            assert!(step <= spec.step, "step {step:?}");
            delays.push(d);
        }
        assert_eq!(h.count(), 40);
        // the draws spread over their ranges
        let (lo, hi) = (darks.iter().min().unwrap(), darks.iter().max().unwrap());
        assert!(*lo < ms(100) && *hi > ms(250), "dark {lo:?}..{hi:?}");
        assert!(delays.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn both_directions_with_one_seed_hand_over_alike_whenever_they_are_asked() {
        let mut a = Handovers::new(HandoverSpec::STARLINK, 3);
        let mut b = Handovers::new(HandoverSpec::STARLINK, 3);
        // b is asked rarely, a often: they agree wherever both are asked
        for t in (0..120_000).step_by(7) {
            let x = a.at(ms(t));
            if t % 91 == 0 {
                assert_eq!(b.at(ms(t)), x, "at {t} ms");
            }
        }
    }
}
