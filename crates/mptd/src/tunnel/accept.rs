//! Taking initiations at our sockets: finding the peer by the key in them, within bounds on
//! the key exchanges they cost, and handing them to the peer's endpoint (made then for a peer
//! that comes to our `[[listen]]` sockets).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use mpt_core::seal::{PrivateKey, PublicKey};
use mpt_core::Time;
use mpt_tunnel::{DropReason, Endpoint, EndpointConfig};
use tracing::warn;

use super::{random_source, Outputs, Tunnel};
use crate::config::PeerConfig;

/// What taking initiations needs: our key, the peers by theirs, what a listening peer's
/// endpoint is made from, and the state that bounds the work.
#[derive(Debug)]
pub(super) struct Acceptor {
    by_key: HashMap<PublicKey, usize>,
    private: PrivateKey,
    /// What a listening peer's endpoint is made from (its paths added by its initiation).
    listening_base: Option<EndpointConfig>,
    /// The ephemeral keys of the last initiations taken: their copies on other paths cost
    /// no key exchange.
    recent: Mutex<Recent>,
    limits: Mutex<HandshakeLimits>,
}

impl Acceptor {
    pub(super) fn new(
        peers: &[PeerConfig],
        private: PrivateKey,
        listening_base: Option<EndpointConfig>,
    ) -> Acceptor {
        Acceptor {
            by_key: peers
                .iter()
                .enumerate()
                .map(|(i, p)| (p.public_key, i))
                .collect(),
            private,
            listening_base,
            recent: Mutex::new(Recent::default()),
            limits: Mutex::new(HandshakeLimits {
                total: Bucket::full(HANDSHAKE_BURST, Time::ZERO),
                per_source: HashMap::new(),
            }),
        }
    }

    fn lock_recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Bounds on the work initiations cost (two X25519 operations to read one, two more to
/// answer): in total, and from one address. A flood of forged initiations, from many
/// addresses or one, costs at most this much key exchange; established sessions do not
/// need handshakes and carry on. Sites refused by a bound retry (after 1, 2, 4, then every
/// 5 s).
#[derive(Debug)]
struct HandshakeLimits {
    total: Bucket,
    per_source: HashMap<std::net::IpAddr, Bucket>,
}

/// Initiations read per second in all, and at once.
const HANDSHAKES_PER_SECOND: f64 = 1000.0;
const HANDSHAKE_BURST: f64 = 1000.0;
/// Initiations read per second from one address (sites behind one carrier NAT share one),
/// and at once.
const HANDSHAKES_PER_SOURCE: f64 = 50.0;
const HANDSHAKE_SOURCE_BURST: f64 = 100.0;
/// Addresses remembered before the per-address buckets start again.
const SOURCES_REMEMBERED: usize = 4096;

/// A token bucket on the daemon's clock.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Time,
}

impl Bucket {
    fn full(burst: f64, now: Time) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Take one token at `now`, if there is one.
    fn take(&mut self, now: Time, rate: f64, burst: f64) -> bool {
        let dt = now.saturating_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl HandshakeLimits {
    /// Whether an initiation from `from` may be read at `now`.
    fn allow(&mut self, now: Time, from: std::net::IpAddr) -> bool {
        if self.per_source.len() >= SOURCES_REMEMBERED && !self.per_source.contains_key(&from) {
            self.per_source.clear();
        }
        let source = self
            .per_source
            .entry(from)
            .or_insert_with(|| Bucket::full(HANDSHAKE_SOURCE_BURST, now));
        source.take(now, HANDSHAKES_PER_SOURCE, HANDSHAKE_SOURCE_BURST)
            && self.total.take(now, HANDSHAKES_PER_SECOND, HANDSHAKE_BURST)
    }
}

/// The last initiations' ephemeral keys (a small ring).
#[derive(Debug, Default)]
struct Recent {
    keys: Vec<[u8; 32]>,
    next: usize,
}

const RECENT: usize = 256;

impl Recent {
    fn seen(&self, e: &[u8]) -> bool {
        self.keys.iter().any(|k| k[..] == *e)
    }

    fn add(&mut self, e: &[u8]) {
        let mut k = [0u8; 32];
        k.copy_from_slice(&e[..32]);
        if self.keys.len() < RECENT {
            self.keys.push(k);
        } else {
            self.keys[self.next] = k;
            self.next = (self.next + 1) % RECENT;
        }
    }
}

impl Tunnel {
    /// An initiation arrived at socket `s` from `from`, sent to our address `to` (the
    /// datagram `d`): find the peer by
    /// the key in it, make a listening peer's endpoint if it has none (or its paths changed),
    /// and hand it over. Returns the peer it was for, or why it was dropped.
    pub fn take_initiation(
        &self,
        now: Time,
        s: usize,
        from: SocketAddr,
        to: Option<std::net::IpAddr>,
        d: &[u8],
        out: &mut Outputs,
    ) -> Result<usize, DropReason> {
        use mpt_core::wire::{Datagram, Initiation, INITIATION_PAYLOAD_LEN};
        let (header, message) = match Datagram::parse(d) {
            Ok(Datagram::Handshake { header, message }) => (header, message),
            Ok(_) => return Err(DropReason::Unexpected),
            Err(e) => return Err(DropReason::malformed(&e)),
        };
        if self.acceptor.lock_recent().seen(&message[..32]) {
            return Err(DropReason::StaleHandshake);
        }
        let allowed = self
            .acceptor
            .limits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(now, from.ip());
        if !allowed {
            if let Some(n) = self.drop_logs[DropReason::HandshakeLimited as usize].hit() {
                warn!(%from, refused = n,
                    "more initiations than the handshake bounds allow (a flood?): refused unread");
            }
            return Err(DropReason::HandshakeLimited);
        }
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN + 16];
        let (responder, n) =
            mpt_core::seal::Responder::read(&self.acceptor.private, message, &mut payload)
                .map_err(|_| DropReason::BadHandshake)?;
        let Some(&i) = self.acceptor.by_key.get(responder.peer()) else {
            if let Some(n) = self.drop_logs[DropReason::UnknownKey as usize].hit() {
                warn!(key = %responder.peer(), %from, refused = n,
                    "a handshake from a key no [[peer]] has: refused");
            }
            return Err(DropReason::UnknownKey);
        };
        let init = Initiation::parse(&payload[..n]).ok_or(DropReason::BadHandshake)?;
        let peer = &self.peers[i];
        let path = self.sockets[s].path.unwrap_or(header.path);
        let mut guard = peer.lock();
        if peer.listening {
            let paths = usize::from(init.paths);
            if !(1..=mpt_core::MAX_PATHS).contains(&paths) || path.index() >= paths {
                return Err(DropReason::PathMismatch);
            }
            if guard.as_ref().is_none_or(|ep| ep.path_count() != paths) {
                let Some(base) = &self.acceptor.listening_base else {
                    return Err(DropReason::Unexpected);
                };
                let mut ecfg = crate::peer::listening_endpoint_config(base, paths);
                ecfg.keys.peer = peer.cfg.public_key;
                ecfg.keys.psk = peer.psk.clone();
                ecfg.index_slot = Some(peer.slot);
                let random = random_source().map_err(|_| DropReason::Unexpected)?;
                *guard = Some(Endpoint::new(ecfg, now, random));
            }
        }
        let Some(ep) = guard.as_mut() else {
            return Err(DropReason::UnknownSession);
        };
        let outcome = ep.accept_initiation(now, path, from, responder, &payload[..n], message);
        Tunnel::gather(ep, now, i, out);
        peer.note_deadline(ep);
        drop(guard);
        match outcome {
            mpt_tunnel::Outcome::Dropped(r) => Err(r),
            _ => {
                peer.arrived(path, s, to);
                self.acceptor.lock_recent().add(message);
                Ok(i)
            }
        }
    }
}
