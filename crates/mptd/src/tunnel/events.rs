//! Logging what the endpoints report: their drops (rate-limited) and their events.

use mpt_core::PathId;
use mpt_tunnel::{DownReason, DropReason, Event};
use tracing::{debug, info, warn};

use super::Tunnel;

impl Tunnel {
    /// Log, rate-limited, a datagram dropped at socket `s` (by peer `peer`'s endpoint, or
    /// before one was found).
    pub fn log_drop(&self, s: usize, peer: Option<usize>, reason: DropReason) {
        let Some(n) = self.counters.drop_logged(reason) else {
            return;
        };
        let at = self
            .socket(s)
            .map_or_else(String::new, |s| s.name().to_string());
        let peer = peer
            .and_then(|i| self.peers.get(i))
            .map_or_else(|| "-".to_owned(), |p| p.cfg().name.clone());
        let peer = peer.as_str();
        match reason {
            DropReason::BadTag => warn!(socket = %at, peer, dropped = n,
                "a datagram failed authentication: forged, or corrupted on the way"),
            _ => {
                debug!(socket = %at, peer, reason = reason.name(), dropped = n, "datagram dropped")
            }
        }
    }

    pub(super) fn log_event(&self, i: usize, e: &Event) {
        self.log_event_only(i, e);
        let Some(peer) = self.peers.get(i) else {
            return;
        };
        let change = peer_change(&peer, e);
        if let Some(up) = change {
            super::kernel::note_peer_change(&peer, up, self.now_ms());
            self.reconsider_shared();
            self.kernel.peers_changed.notify_one();
        }
        if self.hooks.any() {
            self.hook_event(&peer, e, change);
        }
        if change.is_some() {
            self.kernel.follow_full_tunnel(&self.peers.list());
        }
    }

    /// Tell the hooks (`[hooks]`) of a path or the peer going up or down (`change`: the peer
    /// went up or down with this event).
    fn hook_event(&self, peer: &crate::peer::Peer, e: &Event, change: Option<bool>) {
        use crate::hooks::{HookEvent, HookRun};
        let hooks = &self.hooks;
        let cfg = peer.cfg();
        let (path, event, reason) = match e {
            Event::PathUp { path, .. } => (Some(*path), HookEvent::PathUp, None),
            Event::PathDown { path, reason } => {
                (Some(*path), HookEvent::PathDown, Some(reason.describe()))
            }
            _ => (None, HookEvent::PeerUp, None),
        };
        let remote = path.and_then(|p| peer.lock().as_ref().and_then(|ep| ep.remote(p)));
        let mut vars = vec![
            ("MPTD_PEER", cfg.name.clone()),
            ("MPTD_PEER_KEY", cfg.public_key.encode()),
        ];
        let peer_vars = vars.clone();
        if let Some(p) = path {
            vars.push(("MPTD_PATH", self.path_name(peer, p)));
            vars.push(("MPTD_PATH_ID", p.0.to_string()));
            if let Some(r) = remote {
                vars.push(("MPTD_REMOTE", r.to_string()));
            }
            if let Some(r) = &reason {
                vars.push(("MPTD_REASON", r.clone()));
            }
            hooks.fire(HookRun { event, vars });
        }
        if let Some(up) = change {
            hooks.fire(HookRun {
                event: if up {
                    HookEvent::PeerUp
                } else {
                    HookEvent::PeerDown
                },
                vars: peer_vars,
            });
        }
    }

    fn log_event_only(&self, i: usize, e: &Event) {
        let Some(peer) = self.peers.get(i) else {
            return;
        };
        let cfg = peer.cfg();
        let pn = cfg.name.as_str();
        let name = |p: &PathId| self.path_name(&peer, *p);
        match e {
            Event::PathUp { path, again: false } => info!(peer = pn, path = name(path), "path up"),
            Event::PathUp { path, again: true } => {
                info!(peer = pn, path = name(path), "path up again")
            }
            Event::PathDown { path, reason } => log_path_down(pn, &name(path), reason),
            Event::HandshakeSent { attempt, rekey } => log_handshake_sent(&cfg, *attempt, *rekey),
            Event::PeerAuthenticated {
                path,
                session,
                cipher,
            } => info!(
                peer = pn,
                path = name(path),
                session = format_args!("{session:08x}"),
                encryption = cipher.map_or("none", |c| c.name()),
                "peer authenticated: session made"
            ),
            Event::Rekeyed { path, old, session } => debug!(
                peer = pn,
                path = name(path),
                old = format_args!("{old:08x}"),
                new = format_args!("{session:08x}"),
                "new keys: session renewed"
            ),
            Event::NewSession {
                path,
                old,
                session,
                cipher,
            } => info!(
                peer = pn,
                path = name(path),
                old = format_args!("{old:08x}"),
                new = format_args!("{session:08x}"),
                encryption = cipher.map_or("none", |c| c.name()),
                "new session with the peer (it restarted, or had not been heard): resequencer reset"
            ),
            Event::CookieReceived { path, again } => info!(
                peer = pn,
                path = name(path),
                again,
                "the peer is under load (a handshake flood?): it sent a cookie, and our \
                 initiations prove our address with it"
            ),
            Event::HandshakeRefused { path, reason } => warn!(
                peer = pn,
                path = name(path),
                reason = reason.name(),
                "handshake refused: {}",
                match reason {
                    DropReason::PathMismatch =>
                        "the peer lists another number of paths (both ends must list the same)",
                    _ => "the peer's encryption setting cannot meet ours",
                }
            ),
            Event::AddressChanged { path, old, new } => {
                info!(peer = pn, path = name(path), %old, %new, "peer address changed")
            }
            Event::PeerPathsChanged { from, to } => info!(
                peer = pn,
                from,
                to,
                "the peer has another number of paths now (it reloaded): ours follow, the \
                 session goes on"
            ),
        }
    }
}

/// Log that peer `pn`'s path `path` (its name) went down for `reason`.
fn log_path_down(pn: &str, path: &str, reason: &DownReason) {
    match reason {
        DownReason::Silent(d) => warn!(
            peer = pn,
            path,
            silent_ms = d.as_millis() as u64,
            "path down: nothing heard"
        ),
        DownReason::PeerClosed => info!(peer = pn, path, "path down: the peer is stopping"),
        DownReason::Uplink(r) => warn!(peer = pn, path, reason = r.name(), "path down: our uplink"),
        DownReason::PeerHearsNothing => warn!(
            peer = pn,
            path, "path down: the peer hears nothing from us on it (it works one way only)"
        ),
    }
}

/// Log that a handshake was sent to the peer of `cfg`: attempt `attempt`, to renew the keys
/// (`rekey`) or not.
fn log_handshake_sent(cfg: &crate::config::PeerConfig, attempt: u32, rekey: bool) {
    let pn = cfg.name.as_str();
    let to = cfg.endpoint.as_ref().map(ToString::to_string);
    if rekey && attempt <= 1 {
        debug!(peer = pn, "rekey: handshake sent");
    } else if attempt <= 1 {
        info!(
            peer = pn,
            endpoint = to.as_deref().unwrap_or("-"),
            "handshake sent"
        );
    } else {
        warn!(
            peer = pn,
            endpoint = to.as_deref().unwrap_or("-"),
            attempt,
            "no answer from the peer: handshake sent again"
        );
    }
}

/// Whether `e` takes `peer` up (`Some(true)`: it made a session, or its first path is up) or
/// down (`Some(false)`: its last path went down), as last told ([`crate::peer::Peer::up`]).
fn peer_change(peer: &crate::peer::Peer, e: &Event) -> Option<bool> {
    use std::sync::atomic::Ordering::Relaxed;
    match e {
        Event::PeerAuthenticated { .. } | Event::NewSession { .. } | Event::PathUp { .. } => {
            (!peer.up.swap(true, Relaxed)).then_some(true)
        }
        Event::PathDown { .. } => {
            let any_up = peer.lock().as_ref().is_some_and(|ep| {
                (0..ep.path_count())
                    .any(|k| ep.path_info(PathId(k as u8)).state == mpt_tunnel::LinkState::Up)
            });
            (!any_up && peer.up.swap(false, Relaxed)).then_some(false)
        }
        _ => None,
    }
}
