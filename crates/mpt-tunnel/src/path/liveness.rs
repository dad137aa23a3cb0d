//! How a path's liveness turns as what arrives, what the peer says and the driver's uplinks
//! change it.

use mpt_core::Time;
use std::time::Duration;

use super::PathState;
use crate::liveness::{Change, LinkState};
use crate::{DownReason, UplinkDown};

/// What a change in a path's liveness asks of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The scheduler uses the path (again, if `again`), and the driver hears so.
    Up { again: bool },
    /// The path went down: the scheduler leaves it, the resequencer stops waiting for it,
    /// what waits to match it goes on, and the driver hears why.
    Down(DownReason),
    /// The peer hears nothing of ours there: the scheduler leaves the path, and the driver
    /// hears why (what comes from the peer there is still taken).
    Unheard(DownReason),
    /// Not used meanwhile (never up): the scheduler leaves it, and nobody is told.
    Unused,
}

/// A path's liveness as what arrives, what the peer says and the driver's uplinks change it.
impl PathState {
    /// Something valid arrived on the path at `now` (`keepalive`: the interval). Returns how
    /// the path turns, if it does, and whether a keepalive should go at once: we told the peer
    /// we hear nothing here, and it sends no data on the path until told otherwise (an idle
    /// path's next keepalive may be 10 s away).
    pub(crate) fn heard(&mut self, now: Time, keepalive: Duration) -> (Option<Turn>, bool) {
        self.woken_at = None;
        let change = self.live.heard(now, keepalive);
        let tell = self.told_silent && !self.live.uplink_down;
        if tell {
            self.told_silent = false;
        }
        if self.peer_silent {
            // we hear the peer, it does not hear us: still no data of ours there
            return (None, tell);
        }
        let turn = match change {
            Change::None => None,
            // a path whose remote was unknown is used from now on
            Change::Up => Some(Turn::Up { again: false }),
            Change::Recovered => Some(Turn::Up { again: true }),
        };
        (turn, tell)
    }

    /// A keepalive says whether the peer hears us on the path (`silent`: it hears nothing).
    /// A path the peer hears nothing on carries no data of ours, though we hear the peer on
    /// it: the two ends agree that it is down until the peer hears us again.
    pub(crate) fn peer_view(&mut self, silent: bool) -> Option<Turn> {
        if self.peer_silent == silent {
            return None;
        }
        self.peer_silent = silent;
        // only a path that is up goes down (or back) for what the peer says; one never up
        // is just not used meanwhile
        let ours_up = self.live.state == LinkState::Up && !self.live.uplink_down;
        if !silent {
            return ours_up.then_some(Turn::Up { again: true });
        }
        // our uplink being down is the cause, and stays the reason
        if !self.live.uplink_down {
            self.down_reason = Some(DownReason::PeerHearsNothing);
        }
        if ours_up {
            Some(Turn::Unheard(DownReason::PeerHearsNothing))
        } else {
            (self.live.state == LinkState::Unknown).then_some(Turn::Unused)
        }
    }

    /// Our uplink for the path cannot carry anything (`Some`: why), or can again (`None`), at
    /// `now`. Returns how the path turns, and whether a keepalive should go at once (the
    /// uplink is back, with a session and a remote: the peer, and a NAT, hear us).
    pub(crate) fn set_uplink(
        &mut self,
        now: Time,
        down: Option<UplinkDown>,
        has_session: bool,
    ) -> (Option<Turn>, bool) {
        match down {
            Some(reason) if self.live.uplink_lost() => {
                (Some(Turn::Down(DownReason::Uplink(reason))), false)
            }
            // down already (for silence, or the link went down before the interface went), or
            // never up: not used until its uplink is back
            Some(reason) => {
                self.down_reason = Some(DownReason::Uplink(reason));
                let unused = self.live.state == LinkState::Unknown;
                (unused.then_some(Turn::Unused), false)
            }
            None if self.live.uplink_down => {
                self.live.uplink_back(now);
                (None, has_session && self.remote.is_some())
            }
            None => (None, false),
        }
    }
}
