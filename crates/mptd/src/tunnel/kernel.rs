//! What follows the peers going up and down ([`KernelRoutes`]): the kernel's routes through
//! the device (`tunnel.routes`), which are there while a peer of theirs is up, a full tunnel's
//! default route ([`crate::fulltunnel`]), and which peer carries each prefix several peers
//! share ([`crate::standby`]).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::warn;

use super::Peers;
use crate::config::{IpNet, TunnelConfig};
use crate::fulltunnel::FullTunnel;
use crate::hooks::Hooks;
use crate::peer::Peer;
use crate::standby::{choose, Candidate, Shared, Why};

/// See the module documentation.
#[derive(Debug)]
pub struct KernelRoutes {
    /// The routes through the TUN device that `tunnel.routes` installed.
    installed: Mutex<Vec<IpNet>>,
    /// Told when a peer went up or down: the kernel's routes follow
    /// ([`KernelRoutes::sync`]), and the shared prefixes are considered again.
    pub peers_changed: tokio::sync::Notify,
    /// The prefixes several peers share, and which carries each ([`crate::standby`]).
    standby: Mutex<Vec<Shared>>,
    /// A full tunnel (a peer allowed a default prefix): its default route follows its peers.
    pub full_tunnel: Option<DefaultRoute>,
}

/// A full tunnel, and whether a peer of it is up: its default route is there while one is
/// (the daemon's task that installs it watches [`DefaultRoute::up`]).
#[derive(Debug)]
pub struct DefaultRoute {
    pub tunnel: FullTunnel,
    pub up: tokio::sync::watch::Sender<bool>,
}

/// A shared prefix that another peer carries now, and why.
#[derive(Debug, Clone, Copy)]
struct Move {
    net: IpNet,
    /// The slot positions of the peer that carried it, and of the one that carries it now.
    from: usize,
    to: usize,
    why: Why,
}

impl KernelRoutes {
    /// No routes installed yet; the prefixes the peers share are `shared`, the full tunnel
    /// `full_tunnel` (its peers not up yet).
    pub(super) fn new(shared: Vec<Shared>, full_tunnel: Option<FullTunnel>) -> KernelRoutes {
        KernelRoutes {
            installed: Mutex::new(Vec::new()),
            peers_changed: tokio::sync::Notify::new(),
            standby: Mutex::new(shared),
            full_tunnel: full_tunnel.map(|tunnel| DefaultRoute {
                tunnel,
                up: tokio::sync::watch::Sender::new(false),
            }),
        }
    }

    /// A peer went up or down: a full tunnel's default route is there while one of its
    /// `peers` is up (its task is told when that changes).
    pub(super) fn follow_full_tunnel(&self, peers: &[Arc<Peer>]) {
        let Some(d) = &self.full_tunnel else {
            return;
        };
        let any_up = peers.iter().any(|p| {
            !p.retired && p.up.load(Relaxed) && d.tunnel.peers.contains(&p.cfg().public_key)
        });
        d.up.send_if_modified(|was| std::mem::replace(was, any_up) != any_up);
    }

    fn lock_standby(&self) -> std::sync::MutexGuard<'_, Vec<Shared>> {
        self.standby.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ask again which of `peers` carries each shared prefix, with the failback hold
    /// `failback`, at the clock's `now_ms`. On a change, packets follow at once (the routes are
    /// replaced), and the log and `hooks.peer_active` are told.
    pub(super) fn reconsider(&self, peers: &Peers, failback: Duration, now_ms: u64, hooks: &Hooks) {
        let mut shared = self.lock_standby();
        if shared.is_empty() {
            return;
        }
        let list = peers.list();
        let candidates = candidates(&list, now_ms);
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
                moved.push(Move {
                    net: s.net,
                    from: s.active,
                    to: active,
                    why,
                });
            }
            s.active = active;
            s.why = why;
        }
        if moved.is_empty() {
            return;
        }
        peers.route(&shared);
        drop(shared);
        for m in moved {
            announce(m, &candidates, &list, hooks);
        }
    }

    /// Whether a shared prefix waits for a peer's failback hold (then
    /// [`KernelRoutes::reconsider`] is due again soon).
    pub fn holding(&self) -> bool {
        self.lock_standby()
            .iter()
            .any(|s| matches!(s.why, Why::Holding { .. } | Why::OnlyHeld))
    }

    /// What `mptctl show` says of peer `i`'s part in the shared prefixes (`peers` by slot).
    pub fn describe(&self, i: usize, peers: &[Arc<Peer>]) -> Option<String> {
        let shared = self.lock_standby();
        crate::standby::describe(i, &shared, &|k| {
            peers
                .get(k)
                .map_or_else(String::new, |p| p.cfg().name.clone())
        })
    }

    /// Reset the shared prefixes for `peers` (after a reload), keeping who carries each where
    /// that peer still holds it.
    pub(super) fn reset(&self, peers: &[Arc<Peer>]) -> Vec<Shared> {
        let cfgs = super::peers::live_configs(peers);
        let slots: Vec<(usize, &crate::config::PeerConfig)> =
            cfgs.iter().map(|(i, c)| (*i, &**c)).collect();
        let mut shared = self.lock_standby();
        *shared = crate::standby::shared(&slots, &shared);
        shared.clone()
    }

    /// With `tunnel.routes`: the routes through the device that the `peers` up want (their
    /// `allowed`, but the tunnel's own subnets and a full tunnel's default prefixes), installed
    /// in `tunnel.route_table` with `tunnel.route_protocol`; those of peers down or gone,
    /// removed. Runs `ip`: call it off the datapath.
    pub fn sync(&self, tunnel: &TunnelConfig, peers: &[Arc<Peer>]) {
        let mut installed = self.installed.lock().unwrap_or_else(|p| p.into_inner());
        let mut wanted: Vec<(IpNet, String)> = Vec::new();
        if tunnel.routes {
            let up: Vec<crate::config::PeerConfig> = peers
                .iter()
                .filter(|p| !p.retired && p.up.load(Relaxed))
                .map(|p| (**p.cfg()).clone())
                .collect();
            for (net, peer) in crate::net::wanted_routes(tunnel, &up) {
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
            crate::net::remove_route(tunnel, *net);
        }
        installed.retain(|n| !gone.contains(n));
        for (net, peer) in wanted {
            if installed.contains(&net) {
                continue;
            }
            match crate::net::add_route(tunnel, net, &peer) {
                Ok(()) => installed.push(net),
                Err(e) => warn!("{e:#}"),
            }
        }
    }

    /// The routes installed, taken (to remove them when stopping).
    pub fn take_installed(&self) -> Vec<IpNet> {
        std::mem::take(&mut *self.installed.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// `peer` went up (`true`) or down at the clock's `now_ms`: note when, for its failback hold.
pub(super) fn note_peer_change(peer: &Peer, up: bool, now_ms: u64) {
    if up {
        peer.up_since_ms.store(now_ms, Relaxed);
    } else {
        peer.failed.store(true, Relaxed);
    }
}

/// `peers` (by slot position) as the choice of a shared prefix's peer sees them at `now_ms`.
fn candidates(peers: &[Arc<Peer>], now_ms: u64) -> Vec<Candidate> {
    peers
        .iter()
        .map(|p| {
            let up = !p.retired && p.up.load(Relaxed);
            Candidate {
                priority: p.cfg().priority.unwrap_or(u8::MAX),
                up,
                failed: p.failed.load(Relaxed),
                up_for: if up {
                    Duration::from_millis(now_ms.saturating_sub(p.up_since_ms.load(Relaxed)))
                } else {
                    Duration::ZERO
                },
            }
        })
        .collect()
}

/// Tell the log and `hooks.peer_active` that another of `peers` carries a shared prefix now
/// (`m`), with `candidates` as the choice saw them.
fn announce(m: Move, candidates: &[Candidate], peers: &[Arc<Peer>], hooks: &Hooks) {
    let Move { net, from, to, why } = m;
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
    if hooks.any() {
        if let Some(p) = peers.get(to) {
            hooks.fire(crate::hooks::HookRun {
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
