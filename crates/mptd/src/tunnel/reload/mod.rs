//! Applying a changed configuration while running (SIGHUP, `mptctl reload`, the unit's
//! `ExecReload`), without taking the tunnel down: paths and peers are added, removed or
//! changed, and the connection settings and hooks replaced. What only a restart can change (the
//! TUN device, our key, the listen and control sockets, the reorder window) is compared first:
//! a configuration that changes any of it is refused whole, and the running one kept.
//!
//! A path is its position (its id, as both ends agree): one whose name is unchanged at its id
//! keeps its state in every endpoint; another name at an id is a new path there
//! (`mpt_tunnel::Connection::reconfigure`). Sockets are matched by local address and interface,
//! whatever the id: a kept path keeps its socket, one that moved to another id takes its
//! socket along, and only new addresses are bound.
//!
//! A peer is its public key. One whose preshared key and mode (an endpoint given or not) are
//! unchanged keeps its slot and its session, its name, `allowed` and endpoint updated; one
//! whose preshared key or mode changed is made anew in its slot; a removed one says goodbye and
//! leaves a retired peer in its slot (a later new peer takes it); a new one takes a free slot.
//! The routes to the peers (and, with `tunnel.routes`, the kernel's) follow.

use std::sync::{Arc, MutexGuard};

use mpt_core::{PathId, Time};
use mpt_tunnel::ConnectionConfig;
use tracing::info;

use super::{config_paths, random_source, Outputs, Placement, Settings, SockIo, Sockets, Tunnel};
use crate::config::{Config, Keys, PeerConfig};
use crate::peer::Peer;

mod changes;
use changes::{changes, fresh_paths, restart_only};

impl Tunnel {
    /// One reload at a time; the uplink watcher takes it too, so that it never looks at a
    /// half-made list of sockets.
    pub(crate) fn lock_reload(&self) -> MutexGuard<'_, ()> {
        self.reload_turn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Read the configuration file again (the one the running configuration came from) and
    /// apply it. Says what changed, or why nothing was applied; logs either.
    pub fn reload_file(&self) -> Result<String, String> {
        let file = self.cfg().source.0.clone();
        let loaded = Config::load(&file)
            .and_then(|c| c.load_keys(&file).map(|k| (c, k)))
            .map_err(|e| format!("nothing applied, the running configuration is kept: {e}"));
        let r = loaded.and_then(|(c, k)| self.reload(c, &k));
        if let Err(e) = &r {
            tracing::error!(config = %file.display(), "reload refused: {e}");
        }
        r
    }

    /// Apply `new` (its keys read as `keys`). Says what changed, or why nothing was applied.
    pub fn reload(&self, new: Config, keys: &Keys) -> Result<String, String> {
        let mut out = Outputs::default();
        let said = {
            let _turn = self.lock_reload();
            let old = self.cfg();
            self.refuse_restart_only(&old, &new, keys)?;
            let same = Config {
                source: old.source.clone(),
                ..new.clone()
            };
            if same == **old {
                self.config.store(Arc::new(new));
                return Ok("the configuration is unchanged".to_owned());
            }
            let socks = self.sockets_for(&old, &new)?;
            let plan = PeerPlan::of(&self.peers.list(), &self.peers.lock_endpoint(), &new, keys)?;
            let randoms = plan.randoms(&new)?;
            let now = self.clock.now();
            // the peers removed or made anew say goodbye (theirs take our paths down at once)
            let old_peers = self.peers.list();
            self.goodbye(&old_peers, plan.ended.iter().copied(), now);
            // the new sockets first: what is sent on an id from now on leaves by its socket
            for (k, s) in socks.list[self.socks.listen..].iter().enumerate() {
                s.assign(PathId(k as u8), &new.paths[k].name);
            }
            self.socks.replace(socks.list);
            let settings = Settings {
                cfg: &new,
                private: &keys.private,
                aes_in_hardware: mpt_core::seal::aes_in_hardware(),
                unix_nanos_at_zero: self.clock.unix_nanos_at_zero(),
            };
            let applying = Applying {
                new: &new,
                settings,
                base: self.peers.set_listening(settings.listening()),
                socks: &self.socks,
                fresh: fresh_paths(&old, &new),
                now,
            };
            for &at in &plan.kept {
                applying.keep(&old_peers[at.position], at, &mut out);
            }
            // peers first: a route only names a slot the list has
            let list = applying.peers_after(&old_peers, &plan, randoms, keys);
            self.peers.replace(list);
            let shared = self.kernel.reset(&self.peers.list());
            self.peers.route(&shared);
            // the kernel's routes follow the peers that are up, the shared prefixes their
            // peers
            self.reconsider_shared();
            self.kernel.peers_changed.notify_one();
            self.hooks.replace(&new.hooks);
            let said = changes(&old, &new, socks.bound, plan.said);
            self.config.store(Arc::new(new));
            said
        };
        // the receive task waits on the new sockets; their interfaces are looked at now
        self.socks.reloaded.notify_waiters();
        self.check_uplinks();
        self.act(&mut out);
        info!(changes = %said, "configuration reloaded");
        Ok(format!("reloaded: {said}"))
    }

    /// Refuse `new` (its keys read as `keys`) if it changes from `old` what only a restart
    /// applies, saying what.
    fn refuse_restart_only(&self, old: &Config, new: &Config, keys: &Keys) -> Result<(), String> {
        let mut restart = restart_only(old, new);
        if keys.private.public() != self.peers.lock_endpoint().private_key().public() {
            restart.push("security.private_key_file: another key".to_owned());
        }
        if !restart.is_empty() {
            return Err(format!(
                "nothing applied, the running configuration is kept: only a restart \
                 applies {}",
                restart.join("; ")
            ));
        }
        Ok(())
    }

    /// The sockets of `new`: the listen sockets, then for each `[[path]]` the socket of the
    /// old path with its local address and interface, or a new one. Fails, binding nothing
    /// more, when a new one cannot be bound.
    fn sockets_for(&self, old: &Config, new: &Config) -> Result<NewSockets, String> {
        let current = self.sockets();
        let mut out = NewSockets {
            list: current[..self.socks.listen].to_vec(),
            bound: 0,
        };
        let mut taken = vec![false; old.paths.len()];
        for p in &new.paths {
            let same = old.paths.iter().enumerate().position(|(k, o)| {
                !taken[k]
                    && o.local == p.local
                    && o.interface == p.interface
                    && o.transport == p.transport
            });
            match same.and_then(|k| Some((k, current.get(self.socks.listen + k)?))) {
                Some((k, s)) => {
                    taken[k] = true;
                    out.list.push(s.clone());
                }
                None => {
                    let s = SockIo::for_path(p).map_err(|e| {
                        format!(
                            "nothing applied, the running configuration is kept: path {:?}: {e:#}",
                            p.name
                        )
                    })?;
                    out.list.push(Arc::new(s));
                    out.bound += 1;
                }
            }
        }
        Ok(out)
    }
}

/// The sockets of a reloaded configuration ([`Tunnel::sockets_for`]).
#[derive(Debug)]
struct NewSockets {
    /// The listen sockets, then one per `[[path]]`.
    list: Vec<Arc<SockIo>>,
    /// How many of them are new (bound for this configuration).
    bound: usize,
}

/// What a reload changes the kept peers with, and makes the new ones with.
struct Applying<'a> {
    new: &'a Config,
    settings: Settings<'a>,
    /// What a listening peer's connection is made from now ([`super::Peers::set_listening`]).
    base: Option<ConnectionConfig>,
    /// The sockets now, the listen sockets first.
    socks: &'a Sockets,
    /// The ids of the paths that are new, or have another name there.
    fresh: Vec<usize>,
    now: Time,
}

impl Applying<'_> {
    /// `peer`, kept at `at`: its `[[peer]]` and its connection's settings updated (the session
    /// goes on), its paths' sockets those of now. What its connection asks for goes to `out`.
    fn keep(&self, peer: &Peer, at: Placement, out: &mut Outputs) {
        let (new, now) = (self.new, self.now);
        let pc: &PeerConfig = &new.peers[at.entry];
        if **peer.cfg() != *pc {
            peer.set_cfg(pc.clone());
        }
        let sockets = self.socks.all();
        let path_socks = &sockets[self.socks.listen..];
        let mut guard = peer.lock();
        if let Some(ep) = guard.as_mut() {
            let mut ecfg = match (&self.base, peer.listening) {
                (Some(b), true) => b.with_peer_paths(ep.path_count()),
                _ => self
                    .settings
                    .connection(pc, None, config_paths(new, pc), peer.slot),
            };
            // the keys, and the slot, stay the session's
            ecfg.keys = ep.config().keys.clone();
            ecfg.index_slot = ep.config().index_slot;
            ep.reconfigure(now, ecfg);
            if !peer.listening {
                for (k, s) in path_socks.iter().enumerate() {
                    let down = s.lock_uplink().down;
                    if down.is_some() {
                        ep.set_uplink(now, PathId(k as u8), down);
                    }
                }
            }
            Tunnel::gather(ep, now, at.position, out);
            peer.note_deadline(ep);
        }
        drop(guard);
        if !peer.listening {
            let path_sockets: Vec<usize> = (self.socks.listen..sockets.len()).collect();
            peer.set_path_sockets(&path_sockets, &self.fresh);
        }
    }

    /// The peers by slot after `plan`: the kept ones where they were (`old`), the ended ones
    /// retired, the new ones in free slots, made with `randoms` (one each) and their preshared
    /// keys in `keys`.
    fn peers_after(
        &self,
        old: &[Arc<Peer>],
        plan: &PeerPlan,
        randoms: Vec<Option<mpt_tunnel::Random>>,
        keys: &Keys,
    ) -> Vec<Arc<Peer>> {
        let mut list: Vec<Arc<Peer>> = old.to_vec();
        for &i in &plan.ended {
            list[i] = Arc::new(Peer::retired((**list[i].cfg()).clone(), list[i].slot));
        }
        for (&at, random) in plan.added.iter().zip(randoms) {
            let psk = keys.psks.get(at.entry).cloned().flatten();
            let peer = self
                .settings
                .build_peer(at, psk, random, self.socks, self.now);
            if at.position == list.len() {
                list.push(Arc::new(peer));
            } else {
                list[at.position] = Arc::new(peer);
            }
        }
        list
    }
}

/// How the peers of a reloaded configuration take the slots.
#[derive(Debug, Default)]
struct PeerPlan {
    /// The same key, preshared key and mode (an endpoint given or not): its session goes on.
    kept: Vec<Placement>,
    /// Slot positions whose peer is removed, or made anew (another preshared key or mode).
    ended: Vec<usize>,
    /// New peers, and those made anew (in their own slot): a free slot, or one past the end.
    added: Vec<Placement>,
    said: Vec<String>,
}

impl PeerPlan {
    /// Which peers of `new` (its preshared keys in `keys`) are kept, which are made, and which
    /// end, of `peers` (by slot), which `endpoint` knows by key.
    fn of(
        peers: &[Arc<Peer>],
        endpoint: &mpt_tunnel::Endpoint,
        new: &Config,
        keys: &Keys,
    ) -> Result<PeerPlan, String> {
        let mut plan = PeerPlan::default();
        let mut free: std::collections::VecDeque<usize> = peers
            .iter()
            .enumerate()
            .filter(|(_, p)| p.retired)
            .map(|(i, _)| i)
            .collect();
        let mut next = peers.len();
        let mut seen = Vec::new();
        for (j, pc) in new.peers.iter().enumerate() {
            let psk = keys.psks.get(j).cloned().flatten();
            let listening = new.listening(pc);
            match endpoint.peer_of_key(&pc.public_key) {
                Some(i) => {
                    seen.push(i);
                    let p = &peers[i];
                    let at = Placement {
                        position: i,
                        entry: j,
                    };
                    let same_psk = p.psk.as_ref().map(|k| k.encode()) == psk.map(|k| k.encode());
                    if same_psk && p.listening == listening {
                        if **p.cfg() != *pc {
                            plan.said.push(format!("peer {:?} changed", pc.name));
                        }
                        plan.kept.push(at);
                    } else {
                        plan.said.push(format!(
                            "peer {:?} made anew (another preshared key, or endpoint given or \
                             not): its session starts again",
                            pc.name
                        ));
                        plan.ended.push(i);
                        plan.added.push(at);
                    }
                }
                None => {
                    let i = free.pop_front().unwrap_or_else(|| {
                        next += 1;
                        next - 1
                    });
                    plan.said.push(format!("peer {:?} added", pc.name));
                    plan.added.push(Placement {
                        position: i,
                        entry: j,
                    });
                }
            }
        }
        for (i, p) in peers.iter().enumerate() {
            if !p.retired && !seen.contains(&i) {
                plan.said.push(format!("peer {:?} removed", p.cfg().name));
                plan.ended.push(i);
            }
        }
        if next > crate::config::MAX_PEERS {
            return Err(format!(
                "nothing applied, the running configuration is kept: the peers would need slot \
                 {next}, past the last ({}); restart to number them again",
                crate::config::MAX_PEERS
            ));
        }
        Ok(plan)
    }

    /// A source of randomness for each peer added that is not listening in `new` (`None` for
    /// one that is), in the order of [`PeerPlan::added`].
    fn randoms(&self, new: &Config) -> Result<Vec<Option<mpt_tunnel::Random>>, String> {
        let mut randoms = Vec::with_capacity(self.added.len());
        for at in &self.added {
            if new.listening(&new.peers[at.entry]) {
                randoms.push(None);
                continue;
            }
            randoms.push(Some(random_source().map_err(|e| {
                format!("nothing applied, the running configuration is kept: {e:#}")
            })?));
        }
        Ok(randoms)
    }
}
