//! Taking initiations at our sockets: finding the peer by the key in them, within bounds on
//! the key exchanges they cost, and handing them to the peer's endpoint (made then for a peer
//! that comes to our `[[listen]]` sockets).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use mpt_core::seal::{Cookies, MacKeys, PrivateKey, PublicKey, COOKIE_NONCE_LEN, MAC_LEN};
use mpt_core::Time;
use mpt_tunnel::{DropReason, Connection, ConnectionConfig};
use tracing::warn;

use super::{random_source, Outputs, Tunnel};
use crate::config::PeerConfig;

/// What taking initiations needs: our key, the peers by theirs, what a listening peer's
/// endpoint is made from, and the state that bounds the work.
pub(super) struct Acceptor {
    /// The peers' slot positions by their keys (a reload replaces it).
    pub(super) by_key: arc_swap::ArcSwap<HashMap<PublicKey, usize>>,
    pub(super) private: PrivateKey,
    /// What a listening peer's endpoint is made from (its paths added by its initiation).
    pub(super) listening_base: Mutex<Option<ConnectionConfig>>,
    /// The ephemeral keys of the last initiations taken: their copies on other paths cost
    /// no key exchange.
    recent: Mutex<Recent>,
    limits: Mutex<HandshakeLimits>,
    /// Our public key's MAC keys: an initiation's mac1 must be made with them.
    macs: MacKeys,
    /// The cookies we send while under load, and the random bytes their secret and nonces
    /// take.
    cookies: Mutex<(Cookies, mpt_tunnel::Random)>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor")
            .field("peers", &self.by_key.load().len())
            .finish_non_exhaustive()
    }
}

impl Acceptor {
    pub(super) fn new(
        peers: &[PeerConfig],
        private: PrivateKey,
        listening_base: Option<ConnectionConfig>,
        random: mpt_tunnel::Random,
    ) -> Acceptor {
        Acceptor {
            macs: MacKeys::new(&private.public()),
            cookies: Mutex::new((Cookies::default(), random)),
            by_key: arc_swap::ArcSwap::from_pointee(
                peers
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.public_key, i))
                    .collect(),
            ),
            private,
            listening_base: Mutex::new(listening_base),
            recent: Mutex::new(Recent::default()),
            limits: Mutex::new(HandshakeLimits {
                total: Bucket::full(HANDSHAKE_BURST, Time::ZERO),
                per_source: HashMap::new(),
                arrivals: Bucket::full(LOAD_BURST, Time::ZERO),
                load_until: Time::ZERO,
            }),
        }
    }

    pub(super) fn lock_base(&self) -> std::sync::MutexGuard<'_, Option<ConnectionConfig>> {
        self.listening_base
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn lock_recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_cookies(&self) -> std::sync::MutexGuard<'_, (Cookies, mpt_tunnel::Random)> {
        self.cookies.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Bounds on the work initiations cost (two X25519 operations to read one, two more to
/// answer): in total, and from one address. A flood of forged initiations, from many
/// addresses or one, costs at most this much key exchange; established sessions do not
/// need handshakes and carry on.
///
/// Under load (initiations arriving faster than [`LOAD_PER_SECOND`], and for a second after),
/// an initiation is read only if its mac2 proves that its sender receives at its address;
/// the others get a cookie reply (a hash and a small encryption, no key exchange), with
/// which a real initiator proves it at once. Forged sources never see their cookie: a flood
/// from them costs no key exchange at all, and real sites still get through.
#[derive(Debug)]
struct HandshakeLimits {
    total: Bucket,
    per_source: HashMap<std::net::IpAddr, Bucket>,
    /// Every initiation with a valid mac1 takes a token: when they run out, we are under load.
    arrivals: Bucket,
    load_until: Time,
}

/// What to do with an initiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    Read,
    /// Under load, without proof of its address: answer with a cookie, unread.
    Cookie,
    /// Over a bound: refuse it unread (its sender retries).
    Refuse,
}

/// Initiations per second (and at once) above which we are under load.
const LOAD_PER_SECOND: f64 = 200.0;
const LOAD_BURST: f64 = 400.0;
/// How long load lasts after the arrivals last ran over.
const LOAD_HOLD: std::time::Duration = std::time::Duration::from_secs(1);

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
    /// Whether an initiation from `from` may be read at `now`; `proven`: its mac2 is valid.
    fn admit(&mut self, now: Time, from: std::net::IpAddr, proven: impl FnOnce() -> bool) -> Admit {
        if !self.arrivals.take(now, LOAD_PER_SECOND, LOAD_BURST) {
            self.load_until = now + LOAD_HOLD;
        }
        if now < self.load_until {
            // Only initiators that proved their address and port are read, within the total:
            // sites behind one carrier NAT share an address but not a port.
            if !proven() {
                return Admit::Cookie;
            }
            return match self.total.take(now, HANDSHAKES_PER_SECOND, HANDSHAKE_BURST) {
                true => Admit::Read,
                false => Admit::Refuse,
            };
        }
        if self.per_source.len() >= SOURCES_REMEMBERED && !self.per_source.contains_key(&from) {
            self.per_source.clear();
        }
        let source = self
            .per_source
            .entry(from)
            .or_insert_with(|| Bucket::full(HANDSHAKE_SOURCE_BURST, now));
        if source.take(now, HANDSHAKES_PER_SOURCE, HANDSHAKE_SOURCE_BURST)
            && self.total.take(now, HANDSHAKES_PER_SECOND, HANDSHAKE_BURST)
        {
            Admit::Read
        } else {
            Admit::Refuse
        }
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
        use mpt_core::wire::{Datagram, Initiation, INITIATION_PAYLOAD_LEN, NOISE_INITIATION_LEN};
        let (header, message) = match Datagram::parse(d) {
            Ok(Datagram::Handshake { header, message }) => (header, message),
            Ok(_) => return Err(DropReason::Unexpected),
            Err(e) => return Err(DropReason::malformed(&e)),
        };
        let (message, macs) = message.split_at(NOISE_INITIATION_LEN);
        let (mac1, mac2) = macs.split_at(MAC_LEN);
        // for our key, or refused at the cost of a hash
        if !self.acceptor.macs.mac1_valid(message, mac1) {
            return Err(DropReason::BadHandshake);
        }
        if self.acceptor.lock_recent().seen(&message[..32]) {
            return Err(DropReason::StaleHandshake);
        }
        let admit = self
            .acceptor
            .limits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(now, from.ip(), || {
                let cookies = self.acceptor.lock_cookies();
                cookies.0.mac2_valid(now, from, message, mac1, mac2)
            });
        match admit {
            Admit::Read => {}
            Admit::Cookie => {
                let version = mpt_core::wire::version_of(d).unwrap_or(mpt_core::wire::VERSION);
                self.send_cookie(now, s, from, to, (header.session, version), mac1);
                return Err(DropReason::HandshakeLimited);
            }
            Admit::Refuse => {
                if let Some(n) = self.drop_logs[DropReason::HandshakeLimited as usize].hit() {
                    warn!(%from, refused = n,
                        "more initiations than the handshake bounds allow (a flood?): refused unread");
                }
                return Err(DropReason::HandshakeLimited);
            }
        }
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN + 16];
        let (responder, n) =
            mpt_core::seal::Responder::read(&self.acceptor.private, message, &mut payload)
                .map_err(|_| DropReason::BadHandshake)?;
        let found = self.acceptor.by_key.load().get(responder.peer()).copied();
        let Some((i, peer)) = found.and_then(|i| Some((i, self.peer(i)?))) else {
            if let Some(n) = self.drop_logs[DropReason::UnknownKey as usize].hit() {
                warn!(key = %responder.peer(), %from, refused = n,
                    "a handshake from a key no [[peer]] has: refused");
            }
            return Err(DropReason::UnknownKey);
        };
        let init = Initiation::parse(&payload[..n]).ok_or(DropReason::BadHandshake)?;
        let path = self
            .socket(s)
            .and_then(|sock| sock.path())
            .unwrap_or(header.path);
        let mut guard = peer.lock();
        if peer.listening {
            let paths = usize::from(init.paths);
            if !(1..=mpt_core::MAX_PATHS).contains(&paths) || path.index() >= paths {
                return Err(DropReason::PathMismatch);
            }
            // made by its first initiation; a later one with another number of paths changes
            // the endpoint's paths (`Connection::reconfigure`), once it is known to be fresh
            if guard.is_none() {
                let base = self.acceptor.lock_base();
                let Some(base) = base.as_ref() else {
                    return Err(DropReason::Unexpected);
                };
                let mut ecfg = base.with_peer_paths(paths);
                ecfg.keys.peer = peer.cfg().public_key;
                ecfg.keys.psk = peer.psk.clone();
                ecfg.index_slot = Some(peer.slot);
                let random = random_source().map_err(|_| DropReason::Unexpected)?;
                *guard = Some(Connection::new(ecfg, now, random));
            }
        }
        let Some(ep) = guard.as_mut() else {
            return Err(DropReason::UnknownSession);
        };
        let version = mpt_core::wire::version_of(d).unwrap_or(mpt_core::wire::VERSION);
        let outcome =
            ep.accept_initiation(now, path, from, responder, &payload[..n], message, version);
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

impl Tunnel {
    /// Answer the initiation from `from` at socket `s` (to our address `to`) whose header
    /// carried the initiator's index `index` and whose mac1 is `mac1` with a cookie reply: no
    /// key exchange, and smaller than the initiation (nothing to amplify).
    fn send_cookie(
        &self,
        now: Time,
        s: usize,
        from: SocketAddr,
        to: Option<std::net::IpAddr>,
        (index, version): (u32, u8),
        mac1: &[u8],
    ) {
        use mpt_core::wire::{HeaderRepr, Kind, COOKIE_REPLY_LEN, HEADER_LEN};
        let Ok(mac1) = <[u8; MAC_LEN]>::try_from(mac1) else {
            return;
        };
        let mut d = [0u8; COOKIE_REPLY_LEN];
        {
            let mut guard = self.acceptor.lock_cookies();
            let (cookies, random) = &mut *guard;
            let cookie = cookies.cookie(now, from, |b| random(b));
            let mut nonce = [0u8; COOKIE_NONCE_LEN];
            random(&mut nonce);
            let sealed = self.acceptor.macs.seal_cookie(&mac1, &cookie, &nonce);
            d[HEADER_LEN..HEADER_LEN + COOKIE_NONCE_LEN].copy_from_slice(&nonce);
            d[HEADER_LEN + COOKIE_NONCE_LEN..].copy_from_slice(&sealed);
        }
        HeaderRepr::handshake(Kind::CookieReply, mpt_core::PathId(0), index, now).emit(&mut d);
        // in the initiation's version: an initiator of the version before ours reads it
        mpt_core::wire::set_version(&mut d, version);
        let Some(sock) = self.socket(s) else { return };
        if sock.io.try_send(&d, from, to).is_ok() {
            self.calls
                .cookie_replies
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HandshakeLimits {
        HandshakeLimits {
            total: Bucket::full(HANDSHAKE_BURST, Time::ZERO),
            per_source: HashMap::new(),
            arrivals: Bucket::full(LOAD_BURST, Time::ZERO),
            load_until: Time::ZERO,
        }
    }

    fn ip(n: u32) -> std::net::IpAddr {
        std::net::Ipv4Addr::from(0xc612_0000 + n).into()
    }

    #[test]
    fn one_address_is_bounded_before_load_and_a_flood_gets_cookies_while_proven_sites_are_read() {
        let mut l = limits();
        let t = Time::from_secs(10);
        // a burst from one address: its own bound
        let read = (0..150)
            .filter(|_| l.admit(t, ip(1), || false) == Admit::Read)
            .count();
        assert_eq!(read, HANDSHAKE_SOURCE_BURST as usize);
        // a flood from many addresses: once more than the load burst has arrived, every
        // unproven initiation gets a cookie, and a proven one is read
        let answers: Vec<Admit> = (0..2000)
            .map(|k| l.admit(t, ip(100 + k), || false))
            .collect();
        assert!(answers[..100].iter().all(|a| *a == Admit::Read));
        assert!(answers[300..].iter().all(|a| *a == Admit::Cookie));
        assert_eq!(
            l.admit(t, ip(1), || true),
            Admit::Read,
            "proven, though its address is over its bound"
        );
        // load lasts while the flood does, and a second after it stops
        let later = t + std::time::Duration::from_millis(900);
        assert_eq!(l.admit(later, ip(5000), || false), Admit::Cookie);
        let calm = later + LOAD_HOLD + std::time::Duration::from_secs(2);
        assert_eq!(l.admit(calm, ip(5001), || false), Admit::Read);
    }

    #[test]
    fn proven_initiations_under_load_are_bounded_in_total() {
        let mut l = limits();
        let t = Time::from_secs(10);
        for k in 0..500 {
            l.admit(t, ip(k), || false);
        }
        let read = (0..3000)
            .filter(|_| l.admit(t, ip(7), || true) == Admit::Read)
            .count();
        assert!(read <= HANDSHAKE_BURST as usize, "{read} read");
        assert!(read > 0);
    }
}
