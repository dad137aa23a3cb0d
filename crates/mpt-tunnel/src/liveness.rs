//! Per-path liveness as the receiver sees it, and what it changes in the connection (the
//! scheduler, the resequencer, keepalives, events): a path is up while something valid arrives on
//! it, down after `dead` of silence, and up again only after a run of datagrams (hold-down
//! against flapping).

use std::time::Duration;

use mpt_core::{PathId, Time};

use crate::pending::Pending;
use crate::{Connection, Event};

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

/// What a path's liveness changes in the connection: the scheduler, the resequencer and the
/// driver's events follow it.
impl<P> Connection<P> {
    /// The peer said goodbye: every path is down at once.
    pub(crate) fn peer_closed(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if !self.paths[i].live.peer_closed() {
                continue;
            }
            self.path_went_down(now, PathId(i as u8), crate::DownReason::PeerClosed);
        }
    }

    /// `path` went down (its liveness says so already): the scheduler leaves it, the
    /// resequencer stops waiting for it, and the driver hears why.
    pub(crate) fn path_went_down(&mut self, now: Time, path: PathId, reason: crate::DownReason) {
        self.paths[path.index()].down_reason = Some(reason);
        self.tx.sched.on_path_state(now, path, false);
        // what waits to match the other paths goes on: this one no longer needs matching
        self.release_equalised(now, true, Some(path.index()));
        let out = &mut self.rx.released;
        self.rx.reseq.path_down(now, path, &mut |p| out.push(p));
        self.events.push_back(Event::PathDown { path, reason });
    }

    /// A new peer session: paths its predecessor closed with a goodbye are used again.
    pub(crate) fn reopen_closed(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if self.paths[i].live.reopen() {
                let path = PathId(i as u8);
                self.tx.sched.on_path_state(now, path, true);
                self.events.push_back(Event::PathUp { path, again: true });
            }
        }
    }

    /// Our uplink for `path` cannot carry anything (`Some`: why), or can again (`None`). The
    /// driver watches its interfaces: a path whose interface is absent or whose link is down
    /// goes down at once, rather than after `dead` of silence, and sends nothing; when the
    /// uplink is back, a keepalive goes at once so that the peer (and a NAT) hears us, and the
    /// path comes up as the peer is heard on it.
    pub fn set_uplink(&mut self, now: Time, path: PathId, down: Option<crate::UplinkDown>) {
        let Some(p) = self.paths.get_mut(path.index()) else {
            return;
        };
        match down {
            Some(reason) if p.live.uplink_lost() => {
                self.path_went_down(now, path, crate::DownReason::Uplink(reason));
            }
            // down already (for silence, or the link went down before the interface went), or
            // never up: not used until its uplink is back
            Some(reason) => {
                p.down_reason = Some(crate::DownReason::Uplink(reason));
                if p.live.state == crate::LinkState::Unknown {
                    self.tx.sched.on_path_state(now, path, false);
                }
            }
            None if p.live.uplink_down => {
                p.live.uplink_back(now);
                if self.session.theirs.is_some() && p.remote.is_some() {
                    self.outbox.pending.push_back(Pending::Keepalive(path));
                }
            }
            None => {}
        }
    }

    /// A keepalive on `path` says whether the peer hears us there (`silent`: it hears
    /// nothing). A path the peer hears nothing on carries no data of ours, though we hear the
    /// peer on it: the two ends agree that it is down until the peer hears us again.
    pub(crate) fn peer_view(&mut self, now: Time, path: PathId, silent: bool) {
        let p = &mut self.paths[path.index()];
        if p.peer_silent == silent {
            return;
        }
        p.peer_silent = silent;
        // only a path that is up goes down (or back) for what the peer says; one never up
        // is just not used meanwhile
        let ours_up = p.live.state == crate::LinkState::Up && !p.live.uplink_down;
        if silent {
            // our uplink being down is the cause, and stays the reason
            if !p.live.uplink_down {
                p.down_reason = Some(crate::DownReason::PeerHearsNothing);
            }
            if ours_up {
                self.tx.sched.on_path_state(now, path, false);
                self.events.push_back(Event::PathDown {
                    path,
                    reason: crate::DownReason::PeerHearsNothing,
                });
            } else if p.live.state == crate::LinkState::Unknown {
                self.tx.sched.on_path_state(now, path, false);
            }
        } else if ours_up {
            self.tx.sched.on_path_state(now, path, true);
            self.events.push_back(Event::PathUp { path, again: true });
        }
    }

    /// Whether path `i` is idle at `now` ([`crate::ConnectionConfig::idle_keepalive`]).
    pub(crate) fn idle_path(&self, i: usize, now: Time) -> bool {
        self.cfg.idle_keepalive.is_some()
            && now.saturating_since(self.paths[i].active_at) >= crate::IDLE_AFTER
    }

    /// Data goes on path `i` at `now`. An idle path that is not down wakes: a keepalive goes
    /// at once, and until the peer is heard on it (down if not within `dead`), what it carries
    /// is copied to another path ([`Connection::woken`]).
    pub(crate) fn data_on(&mut self, i: usize, now: Time) {
        if self.idle_path(i, now) && self.paths[i].live.state != LinkState::Down {
            self.paths[i].woken_at = Some(now);
            if self.paths[i].remote.is_some() {
                self.outbox
                    .pending
                    .push_back(Pending::Keepalive(PathId(i as u8)));
            }
        }
        self.paths[i].active_at = now;
    }

    /// Data woke path `i` from idle, and the peer has not been heard on it since.
    pub(crate) fn woken(&self, i: usize) -> bool {
        self.paths[i].woken_at.is_some()
    }

    /// How long path `i` may be silent at `now` before it is down: `dead`, or while it is
    /// idle [`crate::idle_dead`]. A path that is down is not idle: with every path down, the
    /// initiator seeks the peer again after `dead` (and its handshake retries), whether or not
    /// data goes there.
    pub(crate) fn silence_limit(&self, i: usize, now: Time) -> Duration {
        match self.cfg.idle_keepalive {
            Some(every)
                if self.idle_path(i, now) && self.paths[i].live.state != LinkState::Down =>
            {
                crate::idle_dead(every, self.cfg.dead)
            }
            _ => self.cfg.dead,
        }
    }

    /// Something valid arrived on `path`.
    pub(crate) fn heard(&mut self, now: Time, path: PathId) {
        self.crypto.last_heard = Some(now);
        let keepalive = self.keepalive();
        let p = &mut self.paths[path.index()];
        p.woken_at = None;
        let change = p.live.heard(now, keepalive);
        // we told the peer we hear nothing here: it sends no data on the path until told
        // otherwise, and an idle path's next keepalive may be 10 s away
        if p.told_silent && !p.live.uplink_down {
            p.told_silent = false;
            self.outbox.pending.push_back(Pending::Keepalive(path));
        }
        if p.peer_silent {
            // we hear the peer, it does not hear us: still no data of ours there
            return;
        }
        match change {
            Change::None => {}
            Change::Up => {
                // a path whose remote was unknown is used from now on
                self.tx.sched.on_path_state(now, path, true);
                self.events.push_back(Event::PathUp { path, again: false });
            }
            Change::Recovered => {
                self.tx.sched.on_path_state(now, path, true);
                self.events.push_back(Event::PathUp { path, again: true });
            }
        }
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
