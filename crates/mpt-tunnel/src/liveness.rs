//! Per-path liveness as the receiver sees it, and what it changes in the connection (the
//! scheduler, the resequencer, keepalives, events): a path is up while something valid arrives on
//! it, down after `dead` of silence, and up again only after a run of datagrams (hold-down
//! against flapping).

use std::time::Duration;

use mpt_core::Time;

/// Datagrams a path must deliver, over at least one keepalive interval, before a path that
/// was down is used again.
pub const RECOVER_DATAGRAMS: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Not heard from since start; used optimistically.
    Unknown,
    Up,
    Down,
}

impl LinkState {
    /// The state's name in the status document.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Unknown => "unknown",
            LinkState::Up => "up",
            LinkState::Down => "down",
        }
    }
}

/// What hearing from a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    None,
    /// Up for the first time.
    Up,
    /// Up again after being down.
    Recovered,
}

#[derive(Debug, Clone)]
pub struct Liveness {
    pub state: LinkState,
    pub last_heard: Option<Time>,
    /// When the path began to be watched: silence counts from here until it is first heard.
    since: Time,
    /// Down because the peer said goodbye (not because it fell silent).
    closed: bool,
    /// Our uplink cannot carry anything: down, and nothing heard counts, until it can.
    pub uplink_down: bool,
    /// While down: when the current run of datagrams began, and how many it has.
    recovering_since: Option<Time>,
    recover_count: u32,
    pub down_events: u64,
}

impl Liveness {
    /// A path watched from `now` on, not heard from yet.
    pub fn new(now: Time) -> Liveness {
        Liveness {
            state: LinkState::Unknown,
            last_heard: None,
            since: now,
            closed: false,
            uplink_down: false,
            recovering_since: None,
            recover_count: 0,
            down_events: 0,
        }
    }

    /// The first session was made at `now`: a path not heard from yet counts its silence from
    /// here.
    pub fn session_made(&mut self, now: Time) {
        if self.state == LinkState::Unknown && self.last_heard.is_none() {
            self.since = now;
        }
    }

    /// Something valid arrived at `now`.
    pub fn heard(&mut self, now: Time, keepalive: Duration) -> Change {
        let prev = self.last_heard.replace(now);
        if self.uplink_down {
            // the driver has not seen the uplink back yet: it will say so
            return Change::None;
        }
        match self.state {
            LinkState::Up => Change::None,
            LinkState::Unknown => {
                self.state = LinkState::Up;
                Change::Up
            }
            LinkState::Down => {
                let continuing = prev.is_some_and(|p| now - p <= keepalive * 2);
                match self.recovering_since {
                    Some(_) if continuing => self.recover_count += 1,
                    _ => {
                        self.recovering_since = Some(now);
                        self.recover_count = 1;
                    }
                }
                let since = self.recovering_since.unwrap_or(now);
                if self.recover_count >= RECOVER_DATAGRAMS && now - since >= keepalive {
                    self.state = LinkState::Up;
                    self.recovering_since = None;
                    Change::Recovered
                } else {
                    Change::None
                }
            }
        }
    }

    /// At `now`, a path not already down that has been silent for `dead` goes down: returns
    /// for how long it was silent. Silence counts from `from` at the earliest (when data woke
    /// an idle path).
    pub fn check(&mut self, now: Time, dead: Duration, from: Option<Time>) -> Option<Duration> {
        let last = self.last_heard.unwrap_or(self.since);
        let silent = now - from.map_or(last, |f| f.max(last));
        // a path never up whose uplink is down is not used, nor watched, until it is back
        if self.state == LinkState::Down || self.uplink_down || silent < dead {
            return None;
        }
        self.go_down();
        Some(silent)
    }

    /// The peer said it is stopping: down at once, unless down already.
    pub fn peer_closed(&mut self) -> bool {
        if self.state == LinkState::Down {
            return false;
        }
        self.go_down();
        self.closed = true;
        true
    }

    /// A new peer session began: a path closed by the old one's goodbye is used again at once,
    /// as at start (it was not a link that failed). Returns whether it was.
    pub fn reopen(&mut self) -> bool {
        if !self.closed {
            return false;
        }
        self.closed = false;
        self.state = LinkState::Unknown;
        true
    }

    /// Our uplink for the path cannot carry anything: down at once, unless down already.
    /// Returns whether it went down now.
    pub fn uplink_lost(&mut self) -> bool {
        self.uplink_down = true;
        // A path that was never up (its uplink down from the start) did not go down: it stays
        // unknown, unusable until its uplink is back, and then comes up when first heard,
        // without the run of datagrams a path that failed must show (and without telling
        // the peer that we hear nothing on it).
        if self.state != LinkState::Up {
            return false;
        }
        self.go_down();
        true
    }

    /// Our uplink for the path is back at `now`: a path never up is watched from now on.
    pub fn uplink_back(&mut self, now: Time) {
        self.uplink_down = false;
        if self.state == LinkState::Unknown {
            self.since = now;
            self.last_heard = None;
        }
    }

    /// A handshake crossed the path: it works now, so a path down for silence (the peer had
    /// restarted, or a NAT forgot us) is up at once, without the run of datagrams a flapping
    /// link must show. Returns whether it was down.
    pub fn handshake_crossed(&mut self) -> bool {
        if self.state != LinkState::Down {
            return false;
        }
        self.state = LinkState::Up;
        self.closed = false;
        self.recovering_since = None;
        true
    }

    fn go_down(&mut self) {
        self.state = LinkState::Down;
        self.recovering_since = None;
        self.down_events += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KA: Duration = Duration::from_millis(100);
    const DEAD: Duration = Duration::from_millis(500);

    #[test]
    fn down_after_silence_and_up_after_a_run_of_datagrams() {
        let at = Time::from_millis;
        let mut l = Liveness::new(Time::ZERO);
        assert_eq!(l.heard(at(0), KA), Change::Up);
        assert_eq!(l.check(at(499), DEAD, None), None);
        assert_eq!(l.check(at(500), DEAD, None), Some(DEAD));
        assert_eq!(l.check(at(900), DEAD, None), None, "down once");
        // three datagrams over less than a keepalive interval: still down
        for t in [1000, 1010, 1020] {
            assert_eq!(l.heard(at(t), KA), Change::None);
        }
        assert_eq!(l.heard(at(1100), KA), Change::Recovered);
        assert_eq!(l.state, LinkState::Up);
        assert_eq!(l.down_events, 1);
    }

    #[test]
    fn a_goodbye_takes_a_path_down_until_the_next_session() {
        let at = Time::from_millis;
        let mut l = Liveness::new(Time::ZERO);
        l.heard(at(10), KA);
        assert!(l.peer_closed());
        assert!(!l.peer_closed(), "down once");
        assert_eq!((l.state, l.down_events), (LinkState::Down, 1));
        assert!(l.reopen());
        assert_eq!(l.state, LinkState::Unknown);
        assert!(!l.reopen());
        // a path down for silence is not reopened by a new session
        l.check(at(2_000), DEAD, None);
        assert!(!l.reopen());
    }

    #[test]
    fn silence_counts_from_when_the_path_began_to_be_watched() {
        let at = Time::from_millis;
        // a connection made at 10 s (a peer session that starts late)
        let mut l = Liveness::new(at(10_000));
        assert_eq!(l.check(at(10_100), DEAD, None), None);
        assert_eq!(l.check(at(10_500), DEAD, None), Some(DEAD));
    }

    #[test]
    fn a_run_broken_by_a_gap_starts_again() {
        let at = Time::from_millis;
        let mut l = Liveness::new(Time::ZERO);
        l.heard(at(0), KA);
        l.check(at(600), DEAD, None);
        l.heard(at(1000), KA);
        l.heard(at(1050), KA);
        // 250 ms of silence (more than two keepalive intervals) breaks the run
        assert_eq!(l.heard(at(1300), KA), Change::None);
        assert_eq!(l.heard(at(1350), KA), Change::None);
        assert_eq!(l.heard(at(1400), KA), Change::Recovered);
    }
}
