//! Peers going up and down: which peer carries each prefix several peers share
//! ([`crate::standby`]), and the kernel's routes through the device (`tunnel.routes`), which
//! are there while a peer of theirs is up.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tracing::warn;

use crate::config::IpNet;
use crate::routes::Routes;
use crate::standby::{choose, Candidate, Shared, Why};

use super::Tunnel;

impl Tunnel {
    /// The clock's milliseconds now.
    fn now_ms(&self) -> u64 {
        self.clock.now().as_nanos() / 1_000_000
    }

    /// Peer `i` went up (`true`) or down: note when, for its failback hold.
    pub(super) fn note_peer_change(&self, peer: &crate::peer::Peer, up: bool) {
        if up {
            peer.up_since_ms.store(self.now_ms(), Relaxed);
        } else {
            peer.failed.store(true, Relaxed);
        }
    }

    /// Ask again which peer carries each shared prefix. On a change, packets follow at once
    /// (the routes are replaced), and the log and `hooks.peer_active` are told.
    pub fn reconsider_shared(&self) {
        let mut shared = self.standby.lock().unwrap_or_else(|p| p.into_inner());
        if shared.is_empty() {
            return;
        }
        let peers = self.peers();
        let now = self.now_ms();
        let candidates: Vec<Candidate> = peers
            .iter()
            .map(|p| {
                let up = !p.retired && p.up.load(Relaxed);
                Candidate {
                    priority: p.cfg().priority.unwrap_or(u8::MAX),
                    up,
                    failed: p.failed.load(Relaxed),
                    up_for: if up {
                        Duration::from_millis(now.saturating_sub(p.up_since_ms.load(Relaxed)))
                    } else {
                        Duration::ZERO
                    },
                }
            })
            .collect();
        let failback = self.cfg().tunnel.failback;
        let mut moved = Vec::new();
        for s in shared.iter_mut() {
            let holders: Vec<usize> = s
                .holders
                .iter()
                .copied()
                .filter(|&k| k < candidates.len())
                .collect();
            if holders.is_empty() {
                continue;
            }
            let (active, why) = choose(&candidates, &holders, Some(s.active), failback);
            if active != s.active {
                moved.push((s.net, s.active, active, why));
            }
            s.active = active;
            s.why = why;
        }
        if moved.is_empty() {
            return;
        }
        let live = live_configs(&peers);
        self.routes.store(std::sync::Arc::new(Routes::new(
            live.iter().map(|(i, c)| (*i, &**c)),
            &shared,
        )));
        drop(shared);
        for (net, from, to, why) in moved {
            let name = |k: usize| {
                peers
                    .get(k)
                    .map_or_else(String::new, |p| p.cfg().name.clone())
            };
            let reason = match why {
                Why::Best if candidates[from].up && candidates[to].failed => {
                    "it is back and has been up for the failback hold (tunnel.failback_ms)"
                }
                Why::Best if candidates[from].up => "it is up, with a higher priority",
                Why::Best | Why::Holding { .. } => "the peer that carried it is down",
                Why::OnlyHeld => "it is the only one up",
                Why::NoneUp => "no peer of it is up",
            };
            let (to_name, from_name) = (name(to), name(from));
            if matches!(why, Why::NoneUp) {
                warn!(prefix = %net, peer = %to_name, previous = %from_name, "no peer of a shared prefix is up: it waits for {to_name}");
            } else {
                warn!(prefix = %net, peer = %to_name, previous = %from_name, "{to_name} carries {net} now: {reason}");
            }
            if self.hooks.any() {
                if let Some(p) = peers.get(to) {
                    self.hooks.fire(crate::hooks::HookRun {
                        event: crate::config::HookEvent::PeerActive,
                        vars: vec![
                            ("MPTD_PEER", to_name),
                            ("MPTD_PEER_KEY", p.cfg().public_key.encode()),
                            ("MPTD_PREFIX", net.to_string()),
                            ("MPTD_PREVIOUS", from_name),
                            ("MPTD_REASON", reason.to_owned()),
                        ],
                    });
                }
            }
        }
    }

    /// Whether a shared prefix waits for a peer's failback hold (then
    /// [`Tunnel::reconsider_shared`] is due again soon).
    pub fn shared_holding(&self) -> bool {
        self.standby
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|s| matches!(s.why, Why::Holding { .. } | Why::OnlyHeld))
    }

    /// What `mptctl show` says of peer `i`'s part in the shared prefixes.
    pub fn describe_shared(&self, i: usize) -> Option<String> {
        let shared = self.standby.lock().unwrap_or_else(|p| p.into_inner());
        let peers = self.peers();
        crate::standby::describe(i, &shared, &|k| {
            peers
                .get(k)
                .map_or_else(String::new, |p| p.cfg().name.clone())
        })
    }

    /// Reset the shared prefixes for the peers now (after a reload), keeping who carries each
    /// where that peer still holds it.
    pub(super) fn reset_shared(&self) -> Vec<Shared> {
        let peers = self.peers();
        let cfgs = live_configs(&peers);
        let slots: Vec<(usize, &crate::config::PeerConfig)> =
            cfgs.iter().map(|(i, c)| (*i, &**c)).collect();
        let mut shared = self.standby.lock().unwrap_or_else(|p| p.into_inner());
        *shared = crate::standby::shared(&slots, &shared);
        shared.clone()
    }

    /// With `tunnel.routes`: the routes through the device that the peers up want (their
    /// `allowed`, but the tunnel's own subnets and a full tunnel's default prefixes), installed
    /// in `tunnel.route_table` with `tunnel.route_protocol`; those of peers down or gone,
    /// removed. Runs `ip`: call it off the datapath.
    pub fn sync_kernel_routes(&self) {
        let cfg = self.cfg();
        let mut installed = self
            .installed_routes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let mut wanted: Vec<(IpNet, String)> = Vec::new();
        if cfg.tunnel.routes {
            let peers = self.peers();
            let up: Vec<crate::config::PeerConfig> = peers
                .iter()
                .filter(|p| !p.retired && p.up.load(Relaxed))
                .map(|p| (**p.cfg()).clone())
                .collect();
            for (net, peer) in crate::net::wanted_routes(&cfg.tunnel, &up) {
                if !wanted.iter().any(|(n, _)| *n == net) {
                    wanted.push((net, peer));
                }
            }
        }
        let gone: Vec<IpNet> = installed
            .iter()
            .filter(|n| !wanted.iter().any(|(w, _)| w == *n))
            .copied()
            .collect();
        for net in &gone {
            crate::net::remove_route(&cfg.tunnel, *net);
        }
        installed.retain(|n| !gone.contains(n));
        for (net, peer) in wanted {
            if installed.contains(&net) {
                continue;
            }
            match crate::net::add_route(&cfg.tunnel, net, &peer) {
                Ok(()) => installed.push(net),
                Err(e) => warn!("{e:#}"),
            }
        }
    }
}

/// The configs of `peers` that a reload has not retired, each with its slot position.
pub(super) fn live_configs(
    peers: &[std::sync::Arc<crate::peer::Peer>],
) -> Vec<(usize, std::sync::Arc<crate::config::PeerConfig>)> {
    peers
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.retired)
        .map(|(i, p)| (i, arc_swap::Guard::into_inner(p.cfg())))
        .collect()
}
