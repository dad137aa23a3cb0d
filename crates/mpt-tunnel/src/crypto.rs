//! The connection's keys and handshake state ([`CryptoState`]): the current session's, the one a
//! rekey replaced (still open for what was in flight), the one a responder made and has not
//! used yet, and what our initiations and the peer's cookies need; installing the session a
//! handshake made, and drawing its index.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mpt_core::seal::{
    Cipher, MacKeys, ReplayWindow, SealError, SealKey, SessionKeys, Split, MAC_LEN,
};
use mpt_core::wire::HEADER_LEN;
use mpt_core::{PathId, Time};

use crate::{Connection, Event, KeySettings};

/// The handshake and the session's keys.
pub(crate) struct CryptoState {
    /// Our [`mpt_core::wire::CipherFlags`].
    pub(crate) flags: u8,
    /// Our initiation in flight: its state and our index in it.
    pub(crate) initiating: Option<(mpt_core::seal::Initiator, u32)>,
    /// Initiations sent since the last session was made, and when the next is due.
    pub(crate) attempts: u32,
    pub(crate) next_initiation: Option<Time>,
    /// The last initiation we sent: its timestamp (ours only ever grow).
    pub(crate) sent_timestamp: u64,
    /// The latest initiation taken from the peer: its timestamp, and its first 32 bytes (the
    /// ephemeral key), so that its copies on other paths cost no key exchange.
    pub(crate) taken_timestamp: u64,
    pub(crate) taken_ephemeral: [u8; 32],
    /// Opens the peer's datagrams in this session (shared with [`crate::Opener`]s).
    pub(crate) open: Option<Arc<SealKey>>,
    /// Counts sessions: an [`crate::Opener`] of an earlier one is stale.
    pub(crate) epoch: u64,
    /// How this session seals data (`None` in the clear, or before the first session).
    pub(crate) cipher: Option<Cipher>,
    pub(crate) replay: ReplayWindow,
    /// Anything authentic last arrived, on any path.
    pub(crate) last_heard: Option<Time>,
    /// When the current session was made.
    pub(crate) made_at: Option<Time>,
    /// The session a rekey replaced: its datagrams still in flight are taken for a while.
    pub(crate) previous: Option<OldSession>,
    /// As the responder of a rekey: the session made, kept until the peer's first datagram
    /// in it shows that the peer has it too (until then we send in the current one).
    pub(crate) next: Option<NextSession>,
    /// Sessions that replaced one the peer still had (rekeys, handshakes after silence).
    pub(crate) rekeys: u64,
    /// The MAC keys of the peer's public key (for our initiations) and of ours (to check the
    /// peer's).
    pub(crate) peer_macs: MacKeys,
    pub(crate) own_macs: MacKeys,
    /// The last cookie the peer sent us, and when: our initiations prove with it that we
    /// receive at our address, while the peer is under load.
    pub(crate) cookie: Option<([u8; MAC_LEN], Time)>,
    /// The mac1 of our initiation in flight (a cookie reply is bound to it), and whether it
    /// carried a cookie.
    pub(crate) sent_mac1: [u8; MAC_LEN],
    pub(crate) sent_with_cookie: bool,
    /// Our number of paths changed since the session was made: a handshake that continues it
    /// tells the peer.
    /// A session in an older protocol version than ours was probed once for ours (a rekey
    /// that tries our version first): a peer that has upgraded answers it.
    pub(crate) upgrade_probed: bool,
    /// The version of the initiation in flight.
    pub(crate) initiation: crate::negotiate::Attempt,
    /// Sessions made after the first.
    pub(crate) peer_restarts: u64,
    pub(crate) announce_paths: bool,
}

/// How long the keys of a replaced session still open what arrives in it: the datagrams it
/// sealed that were in flight, or held in a queue, when the new one was made.
pub const PREVIOUS_SESSION_KEPT: Duration = Duration::from_secs(10);

/// A replaced session we still receive in (see [`CryptoState::previous`]).
pub(crate) struct OldSession {
    /// Our index in it.
    pub(crate) session: u32,
    pub(crate) open: Option<Arc<SealKey>>,
    pub(crate) epoch: u64,
    pub(crate) replay: ReplayWindow,
    /// Its datagrams are dropped from then on.
    pub(crate) until: Time,
}

/// A session's keys, as a handshake made them.
pub(crate) struct Keys {
    pub(crate) cipher: Option<Cipher>,
    pub(crate) seal: Option<Arc<SealKey>>,
    pub(crate) open: Option<Arc<SealKey>>,
}

/// A session the responder made in a rekey and has not used yet (see [`CryptoState::next`]).
pub(crate) struct NextSession {
    pub(crate) ours: u32,
    pub(crate) theirs: u32,
    pub(crate) keys: Keys,
}

impl CryptoState {
    /// No session yet; an initiator's first initiation due at `now`.
    pub(crate) fn new(k: &KeySettings, now: Time) -> CryptoState {
        CryptoState {
            flags: mpt_core::seal::cipher_flags(k.encryption, k.aes_in_hardware),
            initiating: None,
            attempts: 0,
            next_initiation: k.initiate.then_some(now),
            sent_timestamp: 0,
            taken_timestamp: 0,
            taken_ephemeral: [0; 32],
            open: None,
            epoch: 0,
            cipher: None,
            replay: ReplayWindow::default(),
            last_heard: None,
            made_at: None,
            previous: None,
            next: None,
            rekeys: 0,
            peer_macs: MacKeys::new(&k.peer),
            own_macs: MacKeys::new(&k.private.public()),
            cookie: None,
            sent_mac1: [0; MAC_LEN],
            sent_with_cookie: false,
            upgrade_probed: false,
            initiation: crate::negotiate::initiation(1),
            peer_restarts: 0,
            announce_paths: false,
        }
    }
}

impl Keys {
    /// The keys of a session sealed with `cipher` (none in the clear), from the handshake's
    /// transport keys.
    pub(crate) fn new(cipher: Option<Cipher>, split: &Split) -> Keys {
        let (seal, open) = match cipher {
            Some(cipher) => {
                let keys = SessionKeys::new(cipher, &split.tx, &split.rx);
                (Some(Arc::new(keys.tx)), Some(Arc::new(keys.rx)))
            }
            None => (None, None),
        };
        Keys { cipher, seal, open }
    }
}

/// Sessions the handshake made: installing their keys.
impl<P> Connection<P> {
    /// A handshake made a session (on `path` from `from`): its indices and keys.
    /// `continues`: the peer had the session this one replaces, and its sequence numbers go
    /// on (a rekey): the old session's keys still open what was in flight, and nothing is
    /// reset. Otherwise the peer is new, or new again.
    pub(crate) fn install(
        &mut self,
        now: Time,
        (path, from): (PathId, SocketAddr),
        session: NextSession,
        continues: bool,
    ) {
        let NextSession { ours, theirs, keys } = session;
        let c = &mut self.crypto;
        let old_open = std::mem::replace(&mut c.open, keys.open);
        self.session.key = keys.seal;
        let old_epoch = c.epoch;
        c.epoch += 1;
        c.cipher = keys.cipher;
        c.made_at = Some(now);
        let old_replay = std::mem::take(&mut c.replay);
        c.attempts = 0;
        c.next_initiation = None;
        c.announce_paths = false;
        c.next = None;
        self.session.counter = 0;
        let old = std::mem::replace(&mut self.session.ours, ours);
        c.previous = continues.then(|| OldSession {
            session: old,
            open: old_open,
            epoch: old_epoch,
            replay: old_replay,
            until: now + PREVIOUS_SESSION_KEPT,
        });
        let had = self.session.theirs.replace(theirs).is_some();
        let event = if continues {
            c.rekeys += 1;
            Event::Rekeyed {
                path,
                old,
                session: ours,
            }
        } else {
            // what the peer said of our paths was of the old session
            for p in &mut self.paths {
                p.peer_silent = false;
            }
            if had {
                self.release_equalised(now, true, None);
                self.rx.reseq.reset();
                // the peer's references are gone, and it has none of ours
                self.rx.released.reset();
                self.tx.hc.reset();
                self.crypto.peer_restarts += 1;
                Event::NewSession {
                    path,
                    old,
                    session: ours,
                    cipher: keys.cipher,
                }
            } else {
                for p in &mut self.paths {
                    p.live.session_made(now);
                }
                Event::PeerAuthenticated {
                    path,
                    session: ours,
                    cipher: keys.cipher,
                }
            }
        };
        self.events.push_back(event);
        self.update_repair_wait();
        self.learn_address(path, from);
        self.reopen_closed(now);
        if self.paths[path.index()].live.handshake_crossed() {
            self.tx.sched.on_path_state(now, path, true);
            self.events.push_back(Event::PathUp { path, again: true });
        }
        self.heard(now, path);
    }

    /// A random index for a new session, never 0 nor the current one (its low 16 bits the
    /// configured slot, if any).
    pub(crate) fn fresh_index(&mut self) -> u32 {
        loop {
            let mut i = u32::from_be_bytes(self.random());
            if let Some(slot) = self.cfg.index_slot {
                i = (i & 0xFFFF_0000) | u32::from(slot);
            }
            if i != 0 && i != self.session.ours {
                return i;
            }
        }
    }
}

/// Seals the packets of one numbered batch, outside any lock the driver holds around the
/// connection: the batch's key and first counter. Hand [`Sealer::used`] back to
/// [`Connection::batch_sent`] once the batch has left.
#[derive(Debug, Clone)]
pub struct Sealer {
    pub(crate) key: Option<Arc<SealKey>>,
    pub(crate) first_counter: u64,
    pub(crate) used: u64,
    /// The batch's packets pacing held, in order: they take no counter.
    pub(crate) held: Vec<usize>,
}

impl Sealer {
    /// Seal packet `k` of the batch in place (`buf` as numbered, the inner packet of `inner`
    /// bytes after the prefix); returns the datagram's length.
    pub fn seal(&self, k: usize, buf: &mut [u8], inner: usize) -> Result<usize, SealError> {
        match &self.key {
            Some(key) => {
                let k = k - self.held.partition_point(|&h| h < k);
                key.seal(self.first_counter + k as u64, buf, inner)
            }
            None => Ok(HEADER_LEN + inner),
        }
    }

    /// The paths the batch uses, one bit each.
    pub fn used(&self) -> u64 {
        self.used
    }
}

/// The session as the operator sees it: its indexes, keys, cipher, and how often it was
/// made again.
impl<P> Connection<P> {
    /// Our session id.
    pub fn session(&self) -> u32 {
        self.session.ours
    }

    pub fn peer_session(&self) -> Option<u32> {
        self.session.theirs
    }

    pub fn peer_restarts(&self) -> u64 {
        self.crypto.peer_restarts
    }

    /// Sessions that replaced one both ends had (rekeys, handshakes after silence): the peer
    /// did not restart, and nothing it sent was lost to the change.
    pub fn rekeys(&self) -> u64 {
        self.crypto.rekeys
    }

    /// Data is sealed (the configuration says so).
    pub fn sealing(&self) -> bool {
        self.cfg.keys.encryption.is_some()
    }

    /// A handshake has made a session with the peer.
    pub fn keys_agreed(&self) -> bool {
        self.session.theirs.is_some()
    }

    /// How the session seals data, once there is one (`None` in the clear).
    pub fn cipher(&self) -> Option<Cipher> {
        self.crypto.cipher
    }

    /// When the current session was made (the last handshake).
    pub fn session_made_at(&self) -> Option<Time> {
        self.crypto.made_at
    }
}
