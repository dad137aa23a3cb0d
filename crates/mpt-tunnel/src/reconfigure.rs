//! Changing a running [`Connection`]'s settings: the operator's change to a path's scheduling,
//! a reloaded configuration, and the paths of a peer that added or removed some.

use mpt_core::{PathId, Time};

use crate::path::PathState;
use crate::{Connection, ConnectionConfig, DropReason, Event, LinkState};

/// Changing a running connection's settings: the operator's change to a path's scheduling, a
/// reloaded configuration, and the paths of a peer that added or removed some.
impl<P> Connection<P> {
    /// The operator changed `path`'s weight, rate or backup flag (`None`: unchanged; a rate of
    /// `Some(None)`: none configured, learned or not assumed). The scheduler is made again with
    /// the new settings and told which paths are usable now; the `adaptive` scheduler learns
    /// its rates again.
    pub fn set_path_spec(
        &mut self,
        now: Time,
        path: PathId,
        weight: Option<u32>,
        rate_bps: Option<Option<u64>>,
        backup: Option<bool>,
    ) {
        let Some(p) = self.cfg.paths.get_mut(path.index()) else {
            return;
        };
        if let Some(w) = weight {
            p.weight = w.max(1);
        }
        if let Some(r) = rate_bps {
            p.rate_bps = r;
        }
        if let Some(b) = backup {
            p.backup = b;
        }
        self.sched = self.cfg.scheduler();
        for i in 0..self.paths.len() {
            let usable = self.usable(PathId(i as u8));
            self.sched.on_path_state(now, PathId(i as u8), usable);
        }
    }

    /// Apply a changed configuration at `now` (a reload), keeping the session, its keys and
    /// sequence numbers, and what is held for delivery.
    ///
    /// Paths are matched by id (their position): one whose name is unchanged keeps its state,
    /// its settings (weight, rate, backup) and, if configured anew, its remote updated; one
    /// new at its id (added, or another name in a removed one's place) starts afresh and
    /// carries no data until the peer is heard on it; ids past the new count are gone. The
    /// scheduler is made again (a learning one learns again), and the hold time, keepalive
    /// interval and `dead` apply from now. Keys, `mtu`, the reorder window and the index slot
    /// stay as they were (the driver refuses to change them without a restart).
    ///
    /// When the number of paths changed and we initiate, a handshake that continues the
    /// session tells the peer at once (its initiation carries the count): a peer that follows
    /// our paths ([`ConnectionConfig::follow_peer_paths`]) takes the new count; one with paths
    /// of its own takes it once its own configuration has as many, until then refusing it
    /// while the session goes on.
    ///
    /// # Panics
    /// With no path or more than [`mpt_core::MAX_PATHS`] (the configuration refuses both).
    pub fn reconfigure(&mut self, now: Time, new: ConnectionConfig) {
        assert!(
            (1..=mpt_core::MAX_PATHS).contains(&new.paths.len()),
            "a connection has 1 to {} paths",
            mpt_core::MAX_PATHS
        );
        let before = self.paths.len();
        let mut fresh = Vec::new();
        let mut paths = Vec::with_capacity(new.paths.len());
        for (i, p) in new.paths.iter().enumerate() {
            let kept = self.cfg.paths.get(i).filter(|o| o.name == p.name);
            let state = match (kept, self.paths.get(i)) {
                (Some(old), Some(s)) => {
                    let mut s = s.clone();
                    if p.remote.is_some() && p.remote != old.remote {
                        s.remote = p.remote;
                    }
                    s
                }
                (None, Some(s)) => {
                    fresh.push(i);
                    s.replaced(p.remote, now, new.datagram_ceiling(i))
                }
                (_, None) => {
                    fresh.push(i);
                    PathState::new(p.remote, now, new.datagram_ceiling(i))
                }
            };
            let mut state = state;
            state.pmtu.set_ceiling(now, new.datagram_ceiling(i));
            paths.push(state);
        }
        // packets waiting in the bundle of a path that is gone are lost with it, counted
        let orphaned: u64 = self.paths[paths.len().min(before)..]
            .iter()
            .map(|s| s.bundled_packets())
            .sum();
        self.counts.drops.add(DropReason::NoPath, orphaned);
        self.paths = paths;
        // per-class counters follow the classes by position: they start again when the
        // classes changed
        let names =
            |c: &ConnectionConfig| c.classes.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        if names(&self.cfg) != names(&new) {
            self.classes.reconfigured();
        }
        let keep = ConnectionConfig {
            keys: self.cfg.keys.clone(),
            mtu: self.cfg.mtu,
            reorder_window: self.cfg.reorder_window,
            index_slot: self.cfg.index_slot,
            ..new
        };
        self.cfg = keep;
        self.release_equalised(now, true, None);
        self.equal.resize(self.cfg.paths.len());
        let out = &mut self.released;
        self.reseq.reconfigure(
            now,
            self.cfg.paths.len(),
            self.cfg.reorder_timeout,
            &mut |p| out.push(p),
        );
        // `resend` may have changed
        self.update_repair_wait();
        self.sched = self.cfg.scheduler();
        for i in 0..self.paths.len() {
            let usable = !fresh.contains(&i) && self.usable(PathId(i as u8));
            self.sched.on_path_state(now, PathId(i as u8), usable);
        }
        if self.paths.len() != before && self.cfg.keys.initiate && self.peer_session.is_some() {
            self.crypto.announce_paths = true;
            self.crypto.next_initiation = Some(now);
        }
    }

    /// The peer's initiation says it has `n` paths now, and we follow its paths: the paths
    /// kept keep their state; new ones wait to be heard on.
    pub(crate) fn follow_paths(&mut self, now: Time, n: usize) {
        let from = self.paths.len();
        self.reconfigure(now, self.cfg.with_peer_paths(n));
        self.events
            .push_back(Event::PeerPathsChanged { from, to: n });
    }

    /// Whether the scheduler may use `path` now, as far as its state goes.
    pub(crate) fn usable(&self, path: PathId) -> bool {
        let p = &self.paths[path.index()];
        p.remote.is_some()
            && !p.live.uplink_down
            && !p.peer_silent
            && p.live.state != LinkState::Down
    }
}
