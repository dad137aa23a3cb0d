//! The peers and their routes ([`Peers`]): the list by slot, which peer an inner packet goes
//! to, and the many-peer side of the protocol that knows them by key. A reload replaces the
//! list, a peer carrying a shared prefix now the routes ([`crate::standby`]).

use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;

use crate::config::PeerConfig;
use crate::peer::Peer;
use crate::routes::Routes;
use crate::standby::Shared;

/// The peers and the routes to them at one moment: both in one load (the tx task looks up the
/// peer of every TUN read with them).
#[derive(Debug, Default)]
pub struct PeerTable {
    /// By slot (a peer's slot is its position here, plus one). A reload replaces the list;
    /// kept peers stay where they are, removed ones leave a retired peer ([`Peer::retired`]).
    pub peers: Arc<Vec<Arc<Peer>>>,
    /// Which peer an inner packet goes to, and from which sources a peer may send, by slot
    /// position: a route only names a slot the list has.
    pub routes: Arc<Routes>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Peers {
    /// The list and the routes ([`Peers::table`]); each is replaced on its own.
    table: ArcSwap<PeerTable>,
    /// The many-peer side of the protocol: the peers by key, and taking their initiations
    /// (`accept.rs`). Lock order: this, then a peer's.
    endpoint: Mutex<mpt_tunnel::Endpoint>,
}

impl Peers {
    /// The peers `list` (none retired), known to `endpoint` by their keys, routed to with the
    /// prefixes they share carried as `shared` says.
    pub(super) fn new(
        list: Vec<Arc<Peer>>,
        mut endpoint: mpt_tunnel::Endpoint,
        shared: &[Shared],
    ) -> Peers {
        endpoint.set_peers(peer_entries(&list));
        let routes = routes_to(&list, shared);
        Peers {
            table: ArcSwap::from_pointee(PeerTable {
                peers: Arc::new(list),
                routes: Arc::new(routes),
            }),
            endpoint: Mutex::new(endpoint),
        }
    }

    /// The peers and the routes to them now, in one load.
    pub fn table(&self) -> arc_swap::Guard<Arc<PeerTable>> {
        self.table.load()
    }

    /// The peers now, by slot position (retired ones among them: [`Peer::retired`]).
    pub fn list(&self) -> Arc<Vec<Arc<Peer>>> {
        self.table.load().peers.clone()
    }

    /// The peer at slot position `i` now.
    pub fn get(&self, i: usize) -> Option<Arc<Peer>> {
        self.table.load().peers.get(i).cloned()
    }

    /// The many-peer side of the protocol (taken before any peer's lock, never after).
    pub(crate) fn lock_endpoint(&self) -> MutexGuard<'_, mpt_tunnel::Endpoint> {
        self.endpoint.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What a listening peer's connection is made from, from now on (a reload's `next`), the
    /// keys of the one before kept; returns it.
    pub(super) fn set_listening(
        &self,
        mut next: Option<mpt_tunnel::ConnectionConfig>,
    ) -> Option<mpt_tunnel::ConnectionConfig> {
        let mut endpoint = self.lock_endpoint();
        if let (Some(next), Some(old)) = (next.as_mut(), endpoint.listening()) {
            next.keys = old.keys.clone();
        }
        endpoint.set_listening(next.clone());
        next
    }

    /// The peers from now on (a reload's). The list and the endpoint's table change under one
    /// hold of the endpoint's lock, so that an initiation is taken with the old of both or the
    /// new of both. The routes stay until [`Peers::route`] (the list only grows: they name
    /// slots it has).
    pub(super) fn replace(&self, list: Vec<Arc<Peer>>) {
        let mut endpoint = self.lock_endpoint();
        endpoint.set_peers(peer_entries(&list));
        let list = Arc::new(list);
        self.table.rcu(|t| PeerTable {
            peers: list.clone(),
            routes: t.routes.clone(),
        });
    }

    /// Route to the peers now, the prefixes they share carried as `shared` says: packets
    /// follow at once.
    pub(super) fn route(&self, shared: &[Shared]) {
        self.table.rcu(|t| PeerTable {
            peers: t.peers.clone(),
            routes: Arc::new(routes_to(&t.peers, shared)),
        });
    }
}

/// The routes to the peers of `list` that a reload has not retired.
fn routes_to(list: &[Arc<Peer>], shared: &[Shared]) -> Routes {
    let live = live_configs(list);
    Routes::new(live.iter().map(|(i, c)| (*i, &**c)), shared)
}

/// The configs of `peers` that a reload has not retired, each with its slot position.
pub(super) fn live_configs(peers: &[Arc<Peer>]) -> Vec<(usize, Arc<PeerConfig>)> {
    peers
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.retired)
        .map(|(i, p)| (i, arc_swap::Guard::into_inner(p.cfg())))
        .collect()
}

/// The peers as the endpoint knows them, by slot position (a retired slot is free).
fn peer_entries(peers: &[Arc<Peer>]) -> Vec<Option<mpt_tunnel::PeerEntry>> {
    peers
        .iter()
        .map(|p| {
            (!p.retired).then(|| mpt_tunnel::PeerEntry {
                key: p.cfg().public_key,
                psk: p.psk.clone(),
                listening: p.listening,
            })
        })
        .collect()
}
