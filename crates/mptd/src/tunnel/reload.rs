//! Applying a changed configuration while running (SIGHUP, `mptctl reload`, the unit's
//! `ExecReload`), without taking the tunnel down: paths are added, removed or changed, and the
//! connection settings and hooks replaced. What only a restart can change (the TUN device,
//! the keys, the listen and control sockets, the reorder window, the peers) is compared first:
//! a configuration that changes any of it is refused whole, and the running one kept.
//!
//! A path is its position (its id, as both ends agree): one whose name is unchanged at its id
//! keeps its state in every endpoint; another name at an id is a new path there
//! (`mpt_tunnel::Endpoint::reconfigure`). Sockets are matched by local address and interface,
//! whatever the id: a kept path keeps its socket, one that moved to another id takes its
//! socket along, and only new addresses are bound.

use std::sync::{Arc, MutexGuard};

use mpt_core::PathId;
use tracing::info;

use super::{config_paths, listening_base, peer_endpoint_config, Outputs, SockIo, Tunnel};
use crate::config::{Config, Keys};

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
            .map_err(|e| format!("nothing applied, the running configuration is kept: {e}"))
            .and_then(|(c, k)| {
                let mtu = crate::net::check_path_mtus(&c);
                if mtu.is_empty() {
                    Ok((c, k))
                } else {
                    Err(format!(
                        "nothing applied, the running configuration is kept: {}: {}",
                        file.display(),
                        mtu.join("; ")
                    ))
                }
            });
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
            let mut restart = restart_only(&old, &new);
            if keys.private.public() != self.acceptor.private.public() {
                restart.push("security.private_key_file: another key".to_owned());
            }
            for (p, psk) in self.peers.iter().zip(&keys.psks) {
                if p.psk.as_ref().map(|k| k.encode()) != psk.as_ref().map(|k| k.encode()) {
                    restart.push(format!("peer {:?}: another preshared key", p.cfg.name));
                }
            }
            if !restart.is_empty() {
                return Err(format!(
                    "nothing applied, the running configuration is kept: only a restart \
                     applies {}",
                    restart.join("; ")
                ));
            }
            let changes = path_changes(&old, &new);
            let same = Config {
                source: old.source.clone(),
                ..new.clone()
            };
            if same == **old {
                self.config.store(Arc::new(new));
                return Ok("the configuration is unchanged".to_owned());
            }
            let socks = self.sockets_for(&old, &new)?;
            let now = self.clock.now();
            // the new sockets first: what is sent on an id from now on leaves by its socket
            let list: Vec<Arc<SockIo>> = socks.iter().map(|(s, _)| s.clone()).collect();
            for (k, (s, _)) in socks[self.listen_sockets..].iter().enumerate() {
                s.assign(PathId(k as u8), &new.paths[k].name);
            }
            self.sockets.store(Arc::new(list));
            let path_sockets: Vec<usize> = (self.listen_sockets..socks.len()).collect();
            let fresh: Vec<usize> = new
                .paths
                .iter()
                .enumerate()
                .filter(|(i, p)| old.paths.get(*i).is_none_or(|o| o.name != p.name))
                .map(|(i, _)| i)
                .collect();
            let base = {
                let mut base = self.acceptor.lock_base();
                let mut next = listening_base(&new, &self.acceptor.private, false, 0);
                if let (Some(next), Some(old)) = (next.as_mut(), base.as_ref()) {
                    next.keys = old.keys.clone();
                }
                *base = next.clone();
                next
            };
            for (i, peer) in self.peers.iter().enumerate() {
                let pc = &new.peers[i];
                let mut guard = peer.lock();
                if let Some(ep) = guard.as_mut() {
                    let mut ecfg = match (&base, peer.listening) {
                        (Some(b), true) => b.with_peer_paths(ep.path_count()),
                        _ => peer_endpoint_config(
                            &new,
                            pc,
                            &self.acceptor.private,
                            None,
                            config_paths(&new, pc),
                            peer.slot,
                            false,
                            0,
                        ),
                    };
                    // the keys, and the slot, stay the session's
                    ecfg.keys = ep.config().keys.clone();
                    ecfg.index_slot = ep.config().index_slot;
                    ep.reconfigure(now, ecfg);
                    if !peer.listening {
                        for (k, (s, _)) in socks[self.listen_sockets..].iter().enumerate() {
                            let down = s.lock_uplink().down;
                            if down.is_some() {
                                ep.set_uplink(now, PathId(k as u8), down);
                            }
                        }
                    }
                    Tunnel::gather(ep, now, i, &mut out);
                    peer.note_deadline(ep);
                }
                drop(guard);
                if !peer.listening {
                    peer.set_path_sockets(&path_sockets, &fresh);
                }
            }
            self.hooks.replace(&new.hooks);
            let bound = socks.iter().filter(|(_, new)| *new).count();
            let mut said = changes;
            if same.connection != old.connection {
                said.push("connection settings".to_owned());
            }
            if same.hooks != old.hooks {
                said.push("hooks".to_owned());
            }
            if bound > 0 {
                said.push(format!("{bound} socket(s) bound"));
            }
            self.config.store(Arc::new(new));
            said.join(", ")
        };
        // the receive task waits on the new sockets; their interfaces are looked at now
        self.reloaded.notify_waiters();
        crate::uplinks::check(self);
        self.act(&mut out);
        info!(changes = %said, "configuration reloaded");
        Ok(format!("reloaded: {said}"))
    }

    /// The sockets of `new`: the listen sockets, then for each `[[path]]` the socket of the
    /// old path with its local address and interface, or a new one (`true`). Fails, binding
    /// nothing more, when a new one cannot be bound.
    fn sockets_for(&self, old: &Config, new: &Config) -> Result<Vec<(Arc<SockIo>, bool)>, String> {
        let current = self.sockets();
        let mut out: Vec<(Arc<SockIo>, bool)> = current[..self.listen_sockets]
            .iter()
            .map(|s| (s.clone(), false))
            .collect();
        let mut taken = vec![false; old.paths.len()];
        for p in &new.paths {
            let same =
                old.paths.iter().enumerate().position(|(k, o)| {
                    !taken[k] && o.local == p.local && o.interface == p.interface
                });
            match same.and_then(|k| Some((k, current.get(self.listen_sockets + k)?))) {
                Some((k, s)) => {
                    taken[k] = true;
                    out.push((s.clone(), false));
                }
                None => {
                    let s = SockIo::for_path(p).map_err(|e| {
                        format!(
                            "nothing applied, the running configuration is kept: path {:?}: {e:#}",
                            p.name
                        )
                    })?;
                    out.push((Arc::new(s), true));
                }
            }
        }
        Ok(out)
    }
}

/// What `new` changes that only a restart applies, by key.
fn restart_only(old: &Config, new: &Config) -> Vec<String> {
    let mut r = Vec::new();
    let mut differs = |key: &str, changed: bool| {
        if changed {
            r.push(key.to_owned());
        }
    };
    let (o, n) = (&old.tunnel, &new.tunnel);
    differs("tunnel.name", o.name != n.name);
    differs("tunnel.address", o.addresses != n.addresses);
    differs("tunnel.mtu", o.mtu != n.mtu);
    differs("tunnel.queues", o.queues != n.queues);
    differs("tunnel.routes", o.routes != n.routes);
    differs(
        "connection.reorder_window",
        old.connection.reorder_window != new.connection.reorder_window,
    );
    differs("[[listen]]", old.listen != new.listen);
    differs("control.socket", old.control.socket != new.control.socket);
    differs(
        "control.metrics",
        old.control.metrics != new.control.metrics,
    );
    differs(
        "security.encryption",
        old.security.cipher != new.security.cipher,
    );
    differs(
        "security.rekey_after_s",
        old.security.rekey_after != new.security.rekey_after,
    );
    differs("[[peer]]", old.peers != new.peers);
    r
}

/// The paths `new` adds, removes and changes, in words.
fn path_changes(old: &Config, new: &Config) -> Vec<String> {
    let mut said = Vec::new();
    for (i, p) in new.paths.iter().enumerate() {
        match old.paths.get(i) {
            Some(o) if o == p => {}
            Some(o) if o.name == p.name => said.push(format!("path {:?} changed", p.name)),
            Some(o) => said.push(format!(
                "path {:?} removed, path {:?} added at id {i}",
                o.name, p.name
            )),
            None => said.push(format!("path {:?} added", p.name)),
        }
    }
    for o in old.paths.iter().skip(new.paths.len()) {
        said.push(format!("path {:?} removed", o.name));
    }
    said
}
