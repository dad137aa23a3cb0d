//! The connection's keys and handshake state ([`CryptoState`]): the current session's, the one a
//! rekey replaced (still open for what was in flight), the one a responder made and has not
//! used yet, and what our initiations and the peer's cookies need; installing the session a
//! handshake made, and drawing its index.

use std::sync::Arc;
use std::time::Duration;

use mpt_core::seal::{Cipher, MacKeys, ReplayWindow, SealKey, SessionKeys, Split, MAC_LEN};
use mpt_core::Time;

use crate::KeySettings;

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
