//! The connection's keys and handshake state ([`CryptoState`]): the current session's, the one a
//! rekey replaced (still open for what was in flight), the one a responder made and has not
//! used yet, and what our initiations and the peer's cookies need; installing the session a
//! handshake made, and drawing its index.

use std::sync::Arc;
use std::time::Duration;

use mpt_core::seal::{
    self, Cipher, Initiator, MacKeys, Psk, ReplayWindow, SealError, SealKey, SessionKeys, Split,
    COOKIE_LIFETIME, COOKIE_NONCE_LEN, MAC_LEN,
};
use mpt_core::wire::{
    CapabilityList, Initiation, Response, HEADER_LEN, INITIATION_MACS, INITIATION_PAYLOAD_LEN,
    MAX_CAPABILITY_LIST, NOISE_INITIATION_LEN, RESPONSE_LEN, RESPONSE_PAYLOAD_LEN,
};
use mpt_core::Time;

use crate::{DropReason, KeySettings};

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

/// Our initiations and the peer's answers.
impl CryptoState {
    /// Our initiation `init` at `now`, with our capability list if `listed`, under the keys
    /// `k`: its datagram, the header still to write (the Noise message, mac1 under the peer's
    /// public key, mac2 under its cookie while we have a fresh one). The handshake waits for
    /// the answer under our index `init.index`.
    pub(crate) fn initiation_message(
        &mut self,
        k: &KeySettings,
        now: Time,
        init: &Initiation,
        listed: bool,
    ) -> Option<Vec<u8>> {
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN + MAX_CAPABILITY_LIST];
        let payload_len = match listed {
            true => init.emit_with(&CapabilityList::ours(), &mut payload),
            false => {
                payload[..INITIATION_PAYLOAD_LEN].copy_from_slice(&init.emit());
                INITIATION_PAYLOAD_LEN
            }
        };
        let noise_len = NOISE_INITIATION_LEN + payload_len - INITIATION_PAYLOAD_LEN;
        let mut msg = vec![0u8; HEADER_LEN + noise_len + INITIATION_MACS];
        let noise_end = HEADER_LEN + noise_len;
        let Ok((state, n)) = Initiator::start(
            &k.private,
            &k.peer,
            k.psk.as_ref(),
            &payload[..payload_len],
            &mut msg[HEADER_LEN..noise_end],
        ) else {
            return None;
        };
        debug_assert_eq!(HEADER_LEN + n, noise_end);
        // mac1 under the peer's public key; mac2 under its cookie, while we have a fresh one
        let c = self;
        let (noise, macs) = msg[HEADER_LEN..].split_at_mut(noise_len);
        let mac1 = c.peer_macs.mac1(noise);
        macs[..MAC_LEN].copy_from_slice(&mac1);
        let cookie = c
            .cookie
            .filter(|(_, at)| now.saturating_since(*at) < COOKIE_LIFETIME);
        if let Some((cookie, _)) = cookie {
            macs[MAC_LEN..].copy_from_slice(&seal::mac2(&cookie, noise, &mac1));
        }
        c.sent_mac1 = mac1;
        c.sent_with_cookie = cookie.is_some();
        c.initiating = Some((state, init.index));
        Some(msg)
    }

    /// The peer, under load, sent a cookie at `now` for our initiation in flight (`ours`, its
    /// index): kept. Returns whether the initiation goes again at once with it (the one in
    /// flight had none).
    pub(crate) fn take_cookie(
        &mut self,
        now: Time,
        ours: u32,
        message: &[u8],
    ) -> Result<bool, DropReason> {
        if self.initiating.as_ref().is_none_or(|(_, i)| *i != ours) {
            return Err(DropReason::StaleHandshake);
        }
        let (nonce, sealed) = message.split_at(COOKIE_NONCE_LEN);
        let Some(cookie) = self.peer_macs.open_cookie(&self.sent_mac1, nonce, sealed) else {
            return Err(DropReason::BadHandshake);
        };
        self.cookie = Some((cookie, now));
        Ok(!self.sent_with_cookie)
    }

    /// The peer's response `message` to our initiation in flight (`ours`, its index): what it
    /// answered, and the session's transport keys. The initiation is spent either way (the
    /// retry timer sends another).
    pub(crate) fn take_response(
        &mut self,
        ours: u32,
        message: &[u8],
    ) -> Result<Answered, DropReason> {
        if self.initiating.as_ref().is_none_or(|(_, i)| *i != ours) {
            return Err(DropReason::StaleHandshake);
        }
        let Some((state, index)) = self.initiating.take() else {
            return Err(DropReason::StaleHandshake);
        };
        let mut payload = [0u8; RESPONSE_PAYLOAD_LEN + MAX_CAPABILITY_LIST + 16];
        let (n, split) = state
            .finish(message, &mut payload)
            .map_err(|_| DropReason::BadHandshake)?;
        let (response, list) =
            Response::parse_with(&payload[..n]).ok_or(DropReason::BadHandshake)?;
        Ok(Answered {
            index,
            response,
            list,
            split,
        })
    }
}

/// The peer's answer to our initiation: our index in the session it makes, its response and
/// capability list, and the session's transport keys.
pub(crate) struct Answered {
    pub(crate) index: u32,
    pub(crate) response: Response,
    pub(crate) list: Option<CapabilityList>,
    pub(crate) split: Split,
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

/// Seals the packets of one numbered batch, outside any lock the driver holds around the
/// connection: the batch's key and first counter. Hand [`Sealer::used`] back to
/// [`crate::Connection::batch_sent`] once the batch has left.
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

/// The response datagram that carries `reply` (its header still to write), with our
/// capability list when the initiation had one (`listed`), and the session's keys (under
/// the pre-shared key `psk`, if any).
pub(crate) fn response(
    psk: Option<&Psk>,
    responder: mpt_core::seal::Responder,
    reply: Response,
    listed: bool,
) -> Option<(Vec<u8>, mpt_core::seal::Split)> {
    let mut payload = [0u8; RESPONSE_PAYLOAD_LEN + MAX_CAPABILITY_LIST];
    let payload_len = match listed {
        true => reply.emit_with(&CapabilityList::ours(), &mut payload),
        false => {
            payload[..RESPONSE_PAYLOAD_LEN].copy_from_slice(&reply.emit());
            RESPONSE_PAYLOAD_LEN
        }
    };
    let mut d = vec![0u8; RESPONSE_LEN + payload_len - RESPONSE_PAYLOAD_LEN];
    let (len, split) = responder
        .respond(psk, &payload[..payload_len], &mut d[HEADER_LEN..])
        .ok()?;
    debug_assert_eq!(HEADER_LEN + len, d.len());
    Some((d, split))
}
