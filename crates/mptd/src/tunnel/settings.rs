//! The settings of the peers' endpoints, from the configuration and the keys.

use std::net::SocketAddr;

use anyhow::Result;
use mpt_core::seal::PrivateKey;
use mpt_tunnel::{ConnectionConfig, KeySettings, Overhead, PathSettings};
use tracing::warn;

use crate::config::{Config, PeerConfig};
use crate::random::KeyStream;

/// The settings of `peer`'s endpoint, over `paths`. `slot` goes into its indices.
#[allow(clippy::too_many_arguments)]
pub(super) fn peer_endpoint_config(
    cfg: &Config,
    peer: &PeerConfig,
    private: &PrivateKey,
    psk: Option<mpt_core::seal::Psk>,
    paths: Vec<PathSettings>,
    slot: u16,
    aes_in_hardware: bool,
    unix_nanos_at_zero: u64,
) -> ConnectionConfig {
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
            private: private.clone(),
            peer: peer.public_key,
            psk,
            encryption: cfg.security.cipher,
            aes_in_hardware,
            initiate: peer.endpoint.is_some(),
            unix_nanos_at_zero,
            rekey_after: cfg.security.rekey_after,
        },
        index_slot: Some(slot),
        follow_peer_paths: false,
        bundle: cfg.connection.bundle,
        resend: cfg.connection.resend,
        parity: cfg.connection.parity,
        equalise: cfg.connection.equalise,
        classes: cfg.connection.classes.clone(),
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
            (None, Some(_)) => pick_family(&resolved, p.local.is_ipv6()),
            (None, None) => None,
        };
        paths.push(PathSettings {
            name: p.name.clone(),
            remote,
            weight: p.weight,
            rate_bps: p.rate_bps,
            backup: p.backup,
            priority: p.priority,
            overhead: Overhead::new(cfg.security.cipher.is_some(), p.local.is_ipv6()).outer_link(),
            mtu: p.mtu,
        });
    }
    paths
}

/// The first of `addrs` of the family a path's socket has.
pub fn pick_family(addrs: &[SocketAddr], ipv6: bool) -> Option<SocketAddr> {
    addrs.iter().find(|a| a.is_ipv6() == ipv6).copied()
}

pub(super) fn random_source() -> Result<mpt_tunnel::Random> {
    let mut k = KeyStream::from_kernel()?;
    Ok(Box::new(move |b| k.fill(b)))
}
