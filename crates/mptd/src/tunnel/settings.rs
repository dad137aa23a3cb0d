//! The settings of the peers' connections, from the configuration and the keys, and making a
//! peer (at start and on reload alike).

use std::net::SocketAddr;

use anyhow::Result;
use mpt_core::seal::PrivateKey;

use mpt_core::{PathId, Time};
use mpt_tunnel::{Connection, ConnectionConfig, KeySettings, Overhead, PathSettings};
use tracing::warn;

use super::Sockets;
use crate::config::{Config, PeerConfig};
use crate::peer::Peer;
use crate::random::KeyStream;

/// Where a peer goes: its slot position, and its `[[peer]]`'s position in the configuration
/// (the two differ once a reload has removed or added peers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Placement {
    /// Its position in the list of peers (its slot is this plus one).
    pub position: usize,
    /// Its position in the configuration's `[[peer]]`s.
    pub entry: usize,
}

/// What every peer's connection settings are made from: the configuration, our key, this
/// CPU, and the clock's epoch.
#[derive(Clone, Copy)]
pub(super) struct Settings<'a> {
    pub cfg: &'a Config,
    pub private: &'a PrivateKey,
    pub aes_in_hardware: bool,
    pub unix_nanos_at_zero: u64,
}

impl Settings<'_> {
    /// The settings of `peer`'s connection, over `paths`. `slot` goes into its indices.
    pub fn connection(
        &self,
        peer: &PeerConfig,
        psk: Option<mpt_core::seal::Psk>,
        paths: Vec<PathSettings>,
        slot: u16,
    ) -> ConnectionConfig {
        let cfg = self.cfg;
        ConnectionConfig {
            paths,
            scheduler: cfg.connection.scheduler,
            reorder_window: cfg.connection.reorder_window,
            reorder_timeout: cfg.connection.reorder_timeout,
            keepalive: cfg.connection.keepalive,
            idle_keepalive: cfg.connection.idle_keepalive,
            dead: cfg.connection.dead,
            mtu: cfg.tunnel.mtu,
            keys: KeySettings {
                private: self.private.clone(),
                peer: peer.public_key,
                psk,
                encryption: cfg.security.cipher,
                aes_in_hardware: self.aes_in_hardware,
                initiate: peer.endpoint.is_some(),
                unix_nanos_at_zero: self.unix_nanos_at_zero,
                rekey_after: cfg.security.rekey_after,
            },
            index_slot: Some(slot),
            follow_peer_paths: false,
            bundle: cfg.connection.bundle,
            resend: cfg.connection.resend,
            parity: cfg.connection.parity,
            equalise: cfg.connection.equalise,
            compress: cfg.connection.compress,
            pace: cfg.connection.pace,
            classes: cfg.connection.classes.clone(),
        }
    }

    /// What a listening peer's connection is made from (its paths, keys and slot are set by
    /// its first initiation); `None` without `[[listen]]` sockets.
    pub fn listening(&self) -> Option<ConnectionConfig> {
        if self.cfg.listen.is_empty() {
            return None;
        }
        let mut base = self.connection(&self.cfg.peers[0], None, Vec::new(), 1);
        // no rates are known for a peer's own paths: they are learned
        if base.scheduler == mpt_sched::SchedulerKind::Rate {
            base.scheduler = mpt_sched::SchedulerKind::Adaptive;
        }
        base.follow_peer_paths = true;
        Some(base)
    }

    /// The peer `cfg.peers[at.entry]` (its pre-shared key `psk`) in slot position
    /// `at.position`, at `now`; its connection made now with `random`, which only a peer that
    /// is not listening ([`Config::listening`]) needs (without, it has none until its first
    /// initiation), with the uplinks of its paths' sockets (`socks`, the listen sockets first).
    pub fn build_peer(
        &self,
        at: Placement,
        psk: Option<mpt_core::seal::Psk>,
        random: Option<mpt_tunnel::Random>,
        socks: &Sockets,
        now: Time,
    ) -> Peer {
        let pc = &self.cfg.peers[at.entry];
        let slot = (at.position + 1) as u16;
        let listening = self.cfg.listening(pc);
        let sockets = socks.all();
        let path_socks = sockets.get(socks.listen..).unwrap_or_default();
        let c = random.filter(|_| !listening).map(|random| {
            let ccfg = self.connection(pc, psk.clone(), config_paths(self.cfg, pc), slot);
            let mut c = Connection::new(ccfg, now, random);
            for (k, s) in path_socks.iter().enumerate() {
                let down = s.lock_uplink().down;
                if down.is_some() {
                    c.set_uplink(now, PathId(k as u8), down);
                }
            }
            c
        });
        let path_sockets: Vec<usize> = (socks.listen..sockets.len()).collect();
        Peer::new(pc.clone(), slot, psk, listening, c, &path_sockets)
    }
}

/// `peer`'s paths over our `[[path]]`s: each to its `remote`, or to the peer's endpoint
/// (resolved now), or unknown until the peer is heard on it.
pub(super) fn config_paths(cfg: &Config, peer: &PeerConfig) -> Vec<PathSettings> {
    // A host name that does not resolve now is not fatal: its paths wait, and the uplink
    // watcher resolves it again (`crate::uplinks`).
    let resolved = match &peer.endpoint {
        Some(e) => e.resolve().unwrap_or_else(|err| {
            warn!(peer = %peer.name, endpoint = %e, error = %err,
                "cannot resolve the peer's endpoint now: trying again every few seconds");
            Vec::new()
        }),
        None => Vec::new(),
    };
    let mut paths = Vec::with_capacity(cfg.paths.len());
    for p in &cfg.paths {
        let remote = match (p.remote, &peer.endpoint) {
            (Some(r), _) => Some(r),
            (None, Some(_)) => first_candidate(&resolved, p),
            (None, None) => None,
        };
        // a dual-stack path's overhead is its first address's family's (as a path of that
        // family's); one with none yet counts IPv6's, the larger
        let v6 = remote.map_or(p.local.is_ipv6(), |r| r.is_ipv6());
        paths.push(PathSettings {
            name: p.name.clone(),
            remote,
            weight: p.weight,
            rate_bps: p.rate_bps,
            backup: p.backup,
            priority: p.priority,
            overhead: Overhead::new(cfg.security.cipher.is_some(), v6).outer_link(),
            mtu: p.mtu,
        });
    }
    paths
}

/// Where path `p` first sends among `addrs` (its peer's endpoint resolved): an address of its
/// socket's family, or of a dual-stack path's interface's, IPv6 first ([`crate::families`]).
fn first_candidate(addrs: &[SocketAddr], p: &crate::config::PathConfig) -> Option<SocketAddr> {
    use crate::families::{candidates, of_interface, Families};
    let families = match (&p.interface, p.dual) {
        (Some(ifname), true) => of_interface(ifname),
        _ => Families::of_local(p.local),
    };
    candidates(addrs, families, None).first().copied()
}

pub(super) fn random_source() -> Result<mpt_tunnel::Random> {
    let mut k = KeyStream::from_kernel()?;
    Ok(Box::new(move |b| k.fill(b)))
}
