//! Peers named by host name: their names looked up again, and each path without a `remote` of
//! its own sent to the address of the family its uplink has ([`crate::families`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use mpt_core::{PathId, Time};
use mpt_tunnel::LinkState;
use tracing::{info, warn};

use super::{Outputs, Tunnel};
use crate::families::{self, Families};
use crate::peer::Peer;

/// How often the peers named by host name are looked at.
const RESOLVE_EVERY: Duration = Duration::from_secs(1);

impl Tunnel {
    /// Look up the endpoints of the peers named by host name that need it, and choose each of
    /// their paths' addresses among what the name gives; all of them when `all` (an
    /// interface's address families changed).
    ///
    /// A peer's name is looked up when we have not heard the peer for `dead_ms` (or ever), or
    /// every path of it is down, or a dual-stack path of it whose uplink is there is not up
    /// (it tries the next family), or the last lookup is [`families::REFRESH_EVERY`] old.
    async fn resolve_peers(&self, all: bool) {
        let now = self.clock.now();
        for (i, peer) in self.peers.list().iter().enumerate() {
            if peer.listening {
                continue;
            }
            let Some(e) = peer.cfg().endpoint.clone() else {
                continue;
            };
            if e.host.parse::<IpAddr>().is_ok() || !(all || self.needs_lookup(peer, now)) {
                continue;
            }
            let addrs: Vec<SocketAddr> =
                match tokio::net::lookup_host((e.host.as_str(), e.port)).await {
                    Ok(a) => a.collect(),
                    Err(err) => {
                        warn!(peer = %peer.cfg().name, endpoint = %e, error = %err,
                            "cannot resolve the peer's endpoint");
                        continue;
                    }
                };
            {
                let mut r = peer.resolved.lock().unwrap_or_else(|p| p.into_inner());
                r.addrs = addrs;
                r.at = Some(now);
            }
            self.choose_remotes(i, peer, now);
        }
    }

    /// Whether `peer`'s name is to be looked up at `now` ([`Tunnel::resolve_peers`]).
    fn needs_lookup(&self, peer: &Peer, now: Time) -> bool {
        let cfg = self.cfg();
        if peer
            .resolved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stale(now)
        {
            return true;
        }
        let up = self.dual_uplinks_up(&cfg);
        let guard = peer.lock();
        let Some(ep) = guard.as_ref() else {
            return false;
        };
        let state = |p: usize| ep.path_info(PathId(p as u8)).state;
        let silent = ep
            .last_heard()
            .is_none_or(|h| now - h >= cfg.connection.dead)
            || (0..ep.path_count()).all(|p| state(p) == LinkState::Down);
        silent || (0..ep.path_count().min(up.len())).any(|p| up[p] && state(p) != LinkState::Up)
    }

    /// Per `[[path]]`: a dual-stack path whose uplink is there and has an address.
    fn dual_uplinks_up(&self, cfg: &crate::config::Config) -> Vec<bool> {
        let socks = self.sockets();
        cfg.paths
            .iter()
            .map(|p| {
                p.dual
                    && p.remote.is_none()
                    && socks.iter().any(|s| {
                        s.path() == Some(p.id) && {
                            let u = s.lock_uplink();
                            u.down.is_none() && u.families != Families::default()
                        }
                    })
            })
            .collect()
    }

    /// Choose where each of peer `i`'s paths without a `remote` of its own sends, among its
    /// name's addresses as last looked up ([`families::choose`]), and tell its connection.
    fn choose_remotes(&self, i: usize, peer: &Peer, now: Time) {
        let cfg = self.cfg();
        let socks = self.sockets();
        // what each path can send from: a dual-stack path's interface's families
        let fams: Vec<Families> = cfg
            .paths
            .iter()
            .map(|p| match p.dual {
                true => socks
                    .iter()
                    .find(|s| s.path() == Some(p.id))
                    .map(|s| s.lock_uplink().families)
                    .unwrap_or_default(),
                false => Families::of_local(p.local),
            })
            .collect();
        let mut out = Outputs::default();
        let mut r = peer.resolved.lock().unwrap_or_else(|p| p.into_inner());
        r.since.resize(cfg.paths.len(), Time::ZERO);
        if let Some(ep) = peer.lock().as_mut() {
            for (k, p) in cfg.paths.iter().enumerate() {
                if p.remote.is_some() {
                    continue;
                }
                let path = PathId(k as u8);
                let current = ep.remote(path);
                let cands = families::candidates(&r.addrs, fams[k], current);
                let answered = ep.path_info(path).state == LinkState::Up;
                let Some(to) = families::choose(&cands, current, answered, r.since[k], now) else {
                    continue;
                };
                if current != Some(to) {
                    info!(peer = %peer.cfg().name, path = %p.name, %to,
                        families = fams[k].name(), was = ?current, "endpoint chosen");
                    ep.set_remote(path, to);
                    r.since[k] = now;
                }
            }
            Tunnel::gather(ep, now, i, &mut out);
            peer.note_deadline(ep);
        }
        drop(r);
        self.act(&mut out);
    }

    /// Choose again where the paths of every peer named by host name send, among its name's
    /// addresses as last looked up (an uplink's address families changed: before the next
    /// lookup).
    pub(super) fn choose_cached(&self, now: Time) {
        for (i, peer) in self.peers.list().iter().enumerate() {
            let known = !peer
                .resolved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .addrs
                .is_empty();
            if !peer.listening && known {
                self.choose_remotes(i, peer, now);
            }
        }
    }

    /// Look at the peers named by host name every [`RESOLVE_EVERY`], and at once when an
    /// uplink's address families change, for as long as the daemon runs.
    pub async fn resolver_task(self: Arc<Self>) -> Result<()> {
        // (a reload may add peers named by host name: looked at every second even without any)
        loop {
            let all = tokio::select! {
                _ = tokio::time::sleep(RESOLVE_EVERY) => false,
                _ = self.resolve_now.notified() => true,
            };
            self.resolve_peers(all).await;
        }
    }
}
