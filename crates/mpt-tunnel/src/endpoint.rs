//! The [`Endpoint`]: the many-peer side of the protocol, as quinn-proto's is. It knows the
//! peers by their keys, tells which connection a datagram is for ([`Endpoint::route`]), and
//! takes initiations ([`Endpoint::handle_initiation`], [`Endpoint::accept`]): mac1, cookie
//! replies under load, the bounds on the key exchanges initiations cost, the responder's half
//! of the Noise handshake, and a listening peer's connection, made by its first initiation.
//!
//! It does no I/O and never reads the clock: `now` is an argument, and a cookie reply is
//! returned for the driver to send. The connections themselves are the driver's (each behind
//! its own lock in the daemon); the endpoint is handed the one an initiation is for.

use std::collections::HashMap;
use std::net::SocketAddr;

use mpt_core::seal::{
    Cookies, MacKeys, PrivateKey, Psk, PublicKey, Responder, COOKIE_NONCE_LEN, MAC_LEN,
};
use mpt_core::wire::{
    Datagram, Header, HeaderRepr, Initiation, Kind, COOKIE_REPLY_LEN, HEADER_LEN, INITIATION_MACS,
    INITIATION_PAYLOAD_LEN,
};
use mpt_core::{PathId, Time};

use crate::limits::{Admit, HandshakeLimits};
use crate::{Connection, ConnectionConfig, DropReason, Outcome, Random};

/// One peer as the endpoint knows it.
#[derive(Debug, Clone)]
pub struct PeerEntry {
    /// Its public key: the one its initiations must carry.
    pub key: PublicKey,
    /// Its pre-shared key.
    pub psk: Option<Psk>,
    /// It comes to our listening sockets with paths of its own, and its connection is made by
    /// its first initiation ([`Endpoint::set_listening`]).
    pub listening: bool,
}

/// Where a datagram goes ([`Endpoint::route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// An initiation: for [`Endpoint::handle_initiation`].
    Initiation,
    /// For the connection of this peer (its position in [`Endpoint::set_peers`]' list).
    Connection(usize),
}

/// An initiation read: whose, and what it carried. Hand it to [`Endpoint::accept`] with that
/// peer's connection.
#[derive(Debug)]
pub struct Accepted {
    pub(crate) peer: usize,
    pub(crate) responder: Responder,
    pub(crate) init: Initiation,
    /// The capability list after the initiation's payload, if it had one.
    pub(crate) list: Option<mpt_core::wire::CapabilityList>,
    /// The initiator's ephemeral key: the same initiation on other paths carries it too.
    pub(crate) ephemeral: [u8; 32],
    /// Its header's protocol version: the answer, and the session, speak it.
    pub(crate) version: u8,
}

impl Accepted {
    /// The peer it is from (its position in [`Endpoint::set_peers`]' list).
    pub fn peer(&self) -> usize {
        self.peer
    }

    /// Read by a connection that checked the mac and the key itself (two hosts, no endpoint).
    pub(crate) fn read(
        private: &PrivateKey,
        message: &[u8],
        version: u8,
    ) -> Result<Accepted, DropReason> {
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN + mpt_core::wire::MAX_CAPABILITY_LIST + 16];
        let (responder, n) = Responder::read(private, message, &mut payload)
            .map_err(|_| DropReason::BadHandshake)?;
        let (init, list) = Initiation::parse_with(&payload[..n]).ok_or(DropReason::BadHandshake)?;
        let mut ephemeral = [0u8; 32];
        ephemeral.copy_from_slice(&message[..32]);
        Ok(Accepted {
            peer: 0,
            responder,
            init,
            list,
            ephemeral,
            version,
        })
    }
}

/// What became of an initiation ([`Endpoint::handle_initiation`]).
#[derive(Debug)]
pub enum Admission {
    /// Read: give it to its peer's connection ([`Endpoint::accept`]).
    Read(Box<Accepted>),
    /// Under load, from a sender that did not prove its address: not read. Send this cookie
    /// reply back where it came from (no key exchange, and smaller than the initiation); the
    /// initiation counts as dropped ([`DropReason::HandshakeLimited`]).
    Cookie([u8; COOKIE_REPLY_LEN]),
    /// From a key no peer has (read, at the cost of the key exchange).
    UnknownKey(PublicKey),
    /// Dropped unread: not for our key, a copy of one taken, malformed, or over the bounds
    /// ([`DropReason::HandshakeLimited`]: its sender retries).
    Dropped(DropReason),
}

/// The many-peer side: see the module documentation.
pub struct Endpoint {
    private: PrivateKey,
    /// Our public key's MAC keys: an initiation's mac1 must be made with them.
    macs: MacKeys,
    /// The peers by position; `None`: a slot no peer holds (one a reload removed).
    peers: Vec<Option<PeerEntry>>,
    by_key: HashMap<PublicKey, usize>,
    /// What a listening peer's connection is made from (its paths set by its initiation).
    listening: Option<ConnectionConfig>,
    /// The ephemeral keys of the last initiations taken: their copies on other paths cost
    /// no key exchange.
    recent: Recent,
    pub(crate) limits: HandshakeLimits,
    /// The cookies we send while under load.
    cookies: Cookies,
    /// For the cookies' secret and nonces.
    random: Random,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("peers", &self.by_key.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint of our key `private`, with no peers yet ([`Endpoint::set_peers`]).
    pub fn new(private: PrivateKey, random: Random) -> Endpoint {
        Endpoint {
            macs: MacKeys::new(&private.public()),
            private,
            peers: Vec::new(),
            by_key: HashMap::new(),
            listening: None,
            recent: Recent::default(),
            limits: HandshakeLimits::new(Time::ZERO),
            cookies: Cookies::default(),
            random,
        }
    }

    /// Our private key.
    pub fn private_key(&self) -> &PrivateKey {
        &self.private
    }

    /// The peers, by position (the position is the peer's handle everywhere: [`Route`],
    /// [`Accepted::peer`]); `None` leaves a position free. A reload calls it with the new
    /// table: initiations from a key no longer in it are refused from then on.
    pub fn set_peers(&mut self, peers: Vec<Option<PeerEntry>>) {
        self.by_key = peers
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((p.as_ref()?.key, i)))
            .collect();
        self.peers = peers;
    }

    /// The position of the peer of key `key`.
    pub fn peer_of_key(&self, key: &PublicKey) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    /// What a listening peer's connection is made from (its paths follow its initiation, its
    /// keys and slot are the peer's); `None`: we take no listening peers.
    pub fn set_listening(&mut self, base: Option<ConnectionConfig>) {
        self.listening = base;
    }

    /// What a listening peer's connection is made from.
    pub fn listening(&self) -> Option<&ConnectionConfig> {
        self.listening.as_ref()
    }

    /// Which connection the datagram `d` is for, from its header alone (checked here, once):
    /// an initiation, or the peer whose slot the `session` index carries
    /// ([`crate::index_slot`]) among `slots` positions. No state: a driver calls it without
    /// any lock. Returns the header's path too.
    pub fn route(d: &[u8], slots: usize) -> Result<(Route, PathId), DropReason> {
        let h = Header::new_checked(d).map_err(|e| DropReason::malformed(&e))?;
        if h.kind() == Kind::Initiation && !h.sealed() {
            return Ok((Route::Initiation, h.path()));
        }
        let slot = usize::from(crate::index_slot(h.session()));
        if (1..=slots).contains(&slot) {
            Ok((Route::Connection(slot - 1), h.path()))
        } else {
            Err(DropReason::UnknownSession)
        }
    }

    /// An initiation `d` that arrived at `now` from `from`: refused at the cost of a hash
    /// unless it is for our key; under load, answered with a cookie unless its mac2 proves
    /// that its sender receives at `from`; within the bounds on key exchanges (in total, and
    /// per address), read; then found a peer by its key.
    pub fn handle_initiation(&mut self, now: Time, from: SocketAddr, d: &[u8]) -> Admission {
        let (header, message) = match Datagram::parse(d) {
            Ok(Datagram::Handshake { header, message }) if header.kind == Kind::Initiation => {
                (header, message)
            }
            Ok(_) => return Admission::Dropped(DropReason::Unexpected),
            Err(e) => return Admission::Dropped(DropReason::malformed(&e)),
        };
        let (message, macs) = message.split_at(message.len() - INITIATION_MACS);
        let (mac1, mac2) = macs.split_at(MAC_LEN);
        if !self.macs.mac1_valid(message, mac1) {
            return Admission::Dropped(DropReason::BadHandshake);
        }
        if self.recent.seen(&message[..32]) {
            return Admission::Dropped(DropReason::StaleHandshake);
        }
        let version = mpt_core::wire::version_of(d).unwrap_or(mpt_core::wire::VERSION);
        let cookies = &self.cookies;
        match self.limits.admit(now, from, || {
            cookies.mac2_valid(now, from, message, mac1, mac2)
        }) {
            Admit::Read => {}
            Admit::Cookie => {
                return Admission::Cookie(self.cookie_reply(
                    now,
                    from,
                    header.session,
                    version,
                    mac1,
                ))
            }
            Admit::Refuse => return Admission::Dropped(DropReason::HandshakeLimited),
        }
        let mut accepted = match Accepted::read(&self.private, message, version) {
            Ok(a) => a,
            Err(r) => return Admission::Dropped(r),
        };
        match self.by_key.get(accepted.responder.peer()) {
            Some(&i) => {
                accepted.peer = i;
                Admission::Read(Box::new(accepted))
            }
            None => Admission::UnknownKey(*accepted.responder.peer()),
        }
    }

    /// Give the initiation `accepted`, which arrived at `now` on `path` from `from`, to its
    /// peer's connection `conn`. A listening peer's is made now if it has none, from
    /// [`Endpoint::set_listening`]'s settings with `random`; a later initiation with another
    /// number of paths changes its paths once it is known to be fresh. The connection answers
    /// it (its response is in its [`Connection::poll_transmit`]), or says why not.
    pub fn accept<P>(
        &mut self,
        now: Time,
        via: crate::Via,
        conn: &mut Option<Connection<P>>,
        accepted: Box<Accepted>,
        random: impl FnOnce() -> Option<Random>,
    ) -> Outcome {
        let crate::Via { path, from } = via;
        let Some(Some(entry)) = self.peers.get(accepted.peer) else {
            return Outcome::Dropped(DropReason::UnknownKey);
        };
        if entry.listening {
            let paths = usize::from(accepted.init.paths);
            if !(1..=mpt_core::MAX_PATHS).contains(&paths) || path.index() >= paths {
                return Outcome::Dropped(DropReason::PathMismatch);
            }
            if conn.is_none() {
                let Some(base) = self.listening.as_ref() else {
                    return Outcome::Dropped(DropReason::Unexpected);
                };
                let Some(random) = random() else {
                    return Outcome::Dropped(DropReason::Unexpected);
                };
                let mut cfg = base.with_peer_paths(paths);
                cfg.keys.peer = entry.key;
                cfg.keys.psk = entry.psk.clone();
                cfg.index_slot = u16::try_from(accepted.peer + 1).ok();
                *conn = Some(Connection::new(cfg, now, random));
            }
        }
        let Some(c) = conn.as_mut() else {
            return Outcome::Dropped(DropReason::UnknownSession);
        };
        let ephemeral = accepted.ephemeral;
        let outcome = c.accept_initiation(now, path, from, *accepted);
        if !matches!(outcome, Outcome::Dropped(_)) {
            self.recent.add(&ephemeral);
        }
        outcome
    }

    /// A cookie reply to the initiation from `from` whose header carried the initiator's
    /// index `index` in `version`, and whose mac1 is `mac1`: in the initiation's version, so
    /// that an initiator of the version before ours reads it.
    fn cookie_reply(
        &mut self,
        now: Time,
        from: SocketAddr,
        index: u32,
        version: u8,
        mac1: &[u8],
    ) -> [u8; COOKIE_REPLY_LEN] {
        let mut d = [0u8; COOKIE_REPLY_LEN];
        let mut m = [0u8; MAC_LEN];
        m.copy_from_slice(mac1);
        let random = &mut self.random;
        let cookie = self.cookies.cookie(now, from, |b| random(b));
        let mut nonce = [0u8; COOKIE_NONCE_LEN];
        random(&mut nonce);
        let sealed = self.macs.seal_cookie(&m, &cookie, &nonce);
        d[HEADER_LEN..HEADER_LEN + COOKIE_NONCE_LEN].copy_from_slice(&nonce);
        d[HEADER_LEN + COOKIE_NONCE_LEN..].copy_from_slice(&sealed);
        HeaderRepr::handshake(Kind::CookieReply, PathId(0), index, now).emit(&mut d);
        mpt_core::wire::set_version(&mut d, version);
        d
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

    fn add(&mut self, e: &[u8; 32]) {
        if self.keys.len() < RECENT {
            self.keys.push(*e);
        } else {
            self.keys[self.next] = *e;
            self.next = (self.next + 1) % RECENT;
        }
    }
}
