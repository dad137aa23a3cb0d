//! Authenticated encryption of datagrams (specified in `docs/protocol.md`, "Sealed
//! datagrams").
//!
//! * [`Psk`]: the pre-shared key, 32 bytes, written as base64 in the key file.
//! * [`SealKey`]: one direction's AEAD key (ring's ChaCha20-Poly1305 or AES-256-GCM). A sealed
//!   datagram is `header (16) | counter (8) | encrypted body | tag (16)`; header and counter are
//!   the associated data, the counter is the nonce.
//! * [`handshake_key`] and [`session_keys`]: HKDF-SHA256 over the PSK; the session keys also
//!   over both sides' randoms, so every pair of daemon starts gets fresh keys, one per
//!   direction.
//! * [`ReplayWindow`]: a sliding bitmap over the counters of one session.
//! * [`Handshake`]: the hello exchange that agrees on the randoms (sans-IO; randomness comes
//!   from the caller).
//! * [`CipherChoice`]: a fixed cipher, or `auto`: AES-256-GCM where both ends have it in
//!   hardware, agreed through a hello flag.
//!
//! No cryptography is written here: ring does the AEAD and the HKDF.

use std::fmt;

use base64::Engine as _;
use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

use crate::wire::{HelloRepr, HEADER_LEN, SEALED_FLAG};

/// Length of the counter that follows the header of a sealed datagram.
pub const COUNTER_LEN: usize = 8;
/// Length of the authentication tag at the end of a sealed datagram.
pub const TAG_LEN: usize = 16;
/// Header and counter: the associated data, before the encrypted body.
pub const SEALED_HEADER_LEN: usize = HEADER_LEN + COUNTER_LEN;
/// Bytes a sealed datagram has beyond its plain form.
pub const SEAL_OVERHEAD: usize = COUNTER_LEN + TAG_LEN;
/// Length of the pre-shared key and of every derived key.
pub const KEY_LEN: usize = 32;
/// Counters accepted behind the highest one seen (a multiple of 64, one word below the bitmap).
pub const REPLAY_WINDOW: u64 = (REPLAY_WORDS as u64 - 1) * 64;
const REPLAY_WORDS: usize = 1024;

/// The AEAD that seals datagrams. Both ends must use the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    /// ChaCha20-Poly1305 (RFC 8439): fast everywhere, constant time without AES hardware.
    ChaCha20Poly1305,
    /// AES-256-GCM: fastest on CPUs with AES-NI and carry-less multiply.
    Aes256Gcm,
}

impl Cipher {
    fn algorithm(self) -> &'static aead::Algorithm {
        match self {
            Cipher::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
        }
    }

    /// The name used in the config (`encryption = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            Cipher::ChaCha20Poly1305 => "chacha20-poly1305",
            Cipher::Aes256Gcm => "aes-256-gcm",
        }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the config's `encryption` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherChoice {
    /// AES-256-GCM when both ends have AES in hardware ([`aes_in_hardware`]), ChaCha20-Poly1305
    /// otherwise: each side says in its hellos whether it would take AES ([`offers_aes`](
    /// Self::offers_aes)), and both pick the same from the two answers ([`agree`](Self::agree)).
    /// The default. Meets a peer configured with `auto` or with ChaCha20-Poly1305.
    Auto,
    /// This cipher whatever the hardware; the peer must say the same (or, for
    /// ChaCha20-Poly1305, `auto`).
    Only(Cipher),
}

impl CipherChoice {
    /// The name used in the config.
    pub fn name(self) -> &'static str {
        match self {
            CipherChoice::Auto => "auto",
            CipherChoice::Only(c) => c.name(),
        }
    }

    /// The cipher of the hello key. ChaCha20-Poly1305 for `auto`, so that `auto` and an end
    /// configured with ChaCha20-Poly1305 open each other's hellos.
    pub fn hello_cipher(self) -> Cipher {
        match self {
            CipherChoice::Auto => Cipher::ChaCha20Poly1305,
            CipherChoice::Only(c) => c,
        }
    }

    /// Whether this end's hellos offer AES-256-GCM ([`HelloRepr::FLAG_AES`]), given whether
    /// this CPU has AES in hardware.
    pub fn offers_aes(self, aes_in_hardware: bool) -> bool {
        self == CipherChoice::Auto && aes_in_hardware
    }

    /// The session's cipher, from whether our hellos and the peer's offered AES-256-GCM.
    /// Both ends reach the same answer: a fixed cipher never offers AES, and `auto` takes AES
    /// only when both offered it.
    pub fn agree(self, we_offer: bool, peer_offers: bool) -> Cipher {
        match self {
            CipherChoice::Only(c) => c,
            CipherChoice::Auto if we_offer && peer_offers => Cipher::Aes256Gcm,
            CipherChoice::Auto => Cipher::ChaCha20Poly1305,
        }
    }
}

impl fmt::Display for CipherChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether this CPU runs AES-GCM in hardware (AES and carry-less multiply instructions), where
/// it is faster than ChaCha20-Poly1305; without them AES is slow in constant time.
pub fn aes_in_hardware() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Why a key file's contents were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not base64: {0}")]
    NotBase64(String),
    #[error("the key is {0} bytes, expected {KEY_LEN}")]
    Length(usize),
}

/// The pre-shared key. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Psk([u8; KEY_LEN]);

impl Psk {
    pub fn from_bytes(b: [u8; KEY_LEN]) -> Psk {
        Psk(b)
    }

    /// Parse the key file's text: base64 of 32 bytes, surrounding whitespace ignored.
    pub fn parse(text: &str) -> Result<Psk, KeyError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| KeyError::NotBase64(e.to_string()))?;
        let b: [u8; KEY_LEN] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| KeyError::Length(bytes.len()))?;
        Ok(Psk(b))
    }

    /// The key file's text for this key (base64, no newline).
    pub fn encode(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }
}

impl fmt::Debug for Psk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Psk(..)")
    }
}

/// Why a sealed datagram could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("sealed datagram too short: {0} bytes")]
    Truncated(usize),
    #[error("authentication failed")]
    BadTag,
    #[error("buffer too small to seal into")]
    NoRoom,
}

/// One direction's key.
pub struct SealKey {
    key: LessSafeKey,
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKey({:?})", self.key.algorithm())
    }
}

fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; aead::NONCE_LEN];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

impl SealKey {
    /// Seal in place. `buf` holds the plain header in its first [`HEADER_LEN`] bytes and the
    /// body at `buf[SEALED_HEADER_LEN..][..body_len]`, with [`TAG_LEN`] bytes of room after
    /// it. Sets the sealed flag, writes the counter and the tag; returns the datagram length.
    /// Every counter must be used once only with a key.
    pub fn seal(&self, counter: u64, buf: &mut [u8], body_len: usize) -> Result<usize, SealError> {
        let total = SEALED_HEADER_LEN + body_len + TAG_LEN;
        if buf.len() < total {
            return Err(SealError::NoRoom);
        }
        buf[0] |= SEALED_FLAG;
        buf[HEADER_LEN..SEALED_HEADER_LEN].copy_from_slice(&counter.to_be_bytes());
        let (aad, rest) = buf.split_at_mut(SEALED_HEADER_LEN);
        let (body, tail) = rest.split_at_mut(body_len);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(counter), Aad::from(&*aad), body)
            .map_err(|_| SealError::NoRoom)?;
        tail[..TAG_LEN].copy_from_slice(tag.as_ref());
        Ok(total)
    }

    /// Seal a datagram built in its plain form (`buf[..plain_len]`: header then body): the body
    /// moves up by [`COUNTER_LEN`]. `buf` needs [`SEAL_OVERHEAD`] bytes of room beyond it.
    pub fn seal_plain(
        &self,
        counter: u64,
        buf: &mut [u8],
        plain_len: usize,
    ) -> Result<usize, SealError> {
        if plain_len < HEADER_LEN || buf.len() < plain_len + SEAL_OVERHEAD {
            return Err(SealError::NoRoom);
        }
        buf.copy_within(HEADER_LEN..plain_len, SEALED_HEADER_LEN);
        self.seal(counter, buf, plain_len - HEADER_LEN)
    }

    /// Verify and decrypt a sealed datagram in place; returns the body length (the body is at
    /// `buf[SEALED_HEADER_LEN..]`). Nothing is trusted before this returns `Ok`.
    pub fn open(&self, buf: &mut [u8]) -> Result<usize, SealError> {
        if buf.len() < SEALED_HEADER_LEN + TAG_LEN {
            return Err(SealError::Truncated(buf.len()));
        }
        let counter = counter_of(buf).ok_or(SealError::Truncated(buf.len()))?;
        let (aad, rest) = buf.split_at_mut(SEALED_HEADER_LEN);
        let plain = self
            .key
            .open_in_place(nonce(counter), Aad::from(&*aad), rest)
            .map_err(|_| SealError::BadTag)?;
        Ok(plain.len())
    }
}

/// The counter of a sealed datagram (not yet authenticated).
pub fn counter_of(buf: &[u8]) -> Option<u64> {
    let b: [u8; COUNTER_LEN] = buf.get(HEADER_LEN..SEALED_HEADER_LEN)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}

/// Turn an opened datagram into its plain form for [`crate::wire::Datagram::parse`]: the
/// header moves up over the counter and loses the sealed flag. The plain datagram is
/// `buf[COUNTER_LEN..SEALED_HEADER_LEN + body_len]`.
pub fn unseal_in_place(buf: &mut [u8]) {
    buf.copy_within(..HEADER_LEN, COUNTER_LEN);
    buf[COUNTER_LEN] &= !SEALED_FLAG;
}

fn derive(prk: &hkdf::Prk, info: &[&[u8]], cipher: Cipher) -> SealKey {
    let alg = cipher.algorithm();
    // Both algorithms take 32-byte keys and HKDF-SHA256 yields up to 8160 bytes: cannot fail.
    let okm = prk
        .expand(info, alg)
        .expect("HKDF output length within bounds");
    SealKey {
        key: LessSafeKey::new(UnboundKey::from(okm)),
    }
}

const HANDSHAKE_SALT: &[u8] = b"mptd v1 handshake";
const DATA_INFO: &[u8] = b"mptd v1 data";

/// The key that seals hellos: from the PSK alone.
pub fn handshake_key(psk: &Psk, cipher: Cipher) -> SealKey {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, HANDSHAKE_SALT).extract(&psk.0);
    derive(&prk, &[b"hello"], cipher)
}

/// The keys of one session: `tx` seals what this side sends, `rx` opens what the peer sends.
#[derive(Debug)]
pub struct SessionKeys {
    pub tx: SealKey,
    pub rx: SealKey,
}

/// HKDF-Extract with both randoms (in a fixed order) as salt and the PSK as input key
/// material, then one key per direction, expanded with the sending side's random.
pub fn session_keys(psk: &Psk, cipher: Cipher, mine: &[u8; 32], theirs: &[u8; 32]) -> SessionKeys {
    let (lo, hi) = if mine <= theirs {
        (mine, theirs)
    } else {
        (theirs, mine)
    };
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(lo);
    salt[32..].copy_from_slice(hi);
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &salt).extract(&psk.0);
    SessionKeys {
        tx: derive(&prk, &[DATA_INFO, mine], cipher),
        rx: derive(&prk, &[DATA_INFO, theirs], cipher),
    }
}

/// Why a counter was refused by the replay window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Seen before.
    Duplicate,
    /// More than [`REPLAY_WINDOW`] behind the highest counter seen.
    TooOld,
}

/// Sliding bitmap of the counters seen in one session (RFC 6479's layout: one spare word, so
/// the window moves by clearing whole words). [`check`](Self::check) before opening,
/// [`mark`](Self::mark) only after the datagram authenticated: forged counters move nothing.
#[derive(Clone)]
pub struct ReplayWindow {
    highest: Option<u64>,
    bits: Box<[u64]>,
}

impl fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("highest", &self.highest)
            .finish_non_exhaustive()
    }
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            highest: None,
            bits: vec![0; REPLAY_WORDS].into_boxed_slice(),
        }
    }
}

impl ReplayWindow {
    fn slot(c: u64) -> (usize, u64) {
        (((c / 64) % REPLAY_WORDS as u64) as usize, 1u64 << (c % 64))
    }

    /// Whether `counter` may still be accepted.
    pub fn check(&self, counter: u64) -> Result<(), Replay> {
        let Some(h) = self.highest else {
            return Ok(());
        };
        if counter > h {
            return Ok(());
        }
        if h - counter >= REPLAY_WINDOW {
            return Err(Replay::TooOld);
        }
        let (w, bit) = Self::slot(counter);
        if self.bits[w] & bit != 0 {
            Err(Replay::Duplicate)
        } else {
            Ok(())
        }
    }

    /// Record an authenticated `counter` (which passed [`check`](Self::check)).
    pub fn mark(&mut self, counter: u64) {
        match self.highest {
            Some(h) if counter <= h => {}
            Some(h) => {
                // the words the window moves into start empty
                let (from, to) = (h / 64 + 1, counter / 64);
                if to.saturating_sub(from) + 1 >= REPLAY_WORDS as u64 {
                    self.bits.fill(0);
                } else {
                    for w in from..=to {
                        self.bits[(w % REPLAY_WORDS as u64) as usize] = 0;
                    }
                }
                self.highest = Some(counter);
            }
            None => self.highest = Some(counter),
        }
        let (w, bit) = Self::slot(counter);
        self.bits[w] |= bit;
    }

    /// The highest authenticated counter so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }
}

/// The peer a [`Handshake`] agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub random: [u8; 32],
    /// The session id in the peer's headers.
    pub session: u32,
}

/// What to do with a hello that opened with the handshake key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloOutcome {
    /// It carries our own random: a reflection. Dropped.
    Reflected,
    Accepted {
        /// A new peer was agreed on: derive and install its session keys (the old ones, if
        /// any, belong to a peer that restarted).
        install: bool,
        /// The peer asked for an answer: send this hello back (rate-limited by the caller).
        reply: Option<HelloRepr>,
    },
}

/// The hello exchange (`docs/protocol.md`, "Handshake").
///
/// Each side has a random for its lifetime and a challenge it renews at each agreement. A
/// hello whose echo is our current challenge was written after the peer saw that challenge,
/// so it is fresh, not a replay: only such a hello can change the agreed peer. A side without
/// keys for its peer's random sets the request flag, and the other side answers.
#[derive(Debug, Clone)]
pub struct Handshake {
    random: [u8; 32],
    challenge: [u8; 16],
    peer_challenge: [u8; 16],
    peer: Option<Peer>,
}

impl Handshake {
    pub fn new(random: [u8; 32], challenge: [u8; 16]) -> Handshake {
        Handshake {
            random,
            challenge,
            peer_challenge: [0; 16],
            peer: None,
        }
    }

    pub fn random(&self) -> &[u8; 32] {
        &self.random
    }

    /// The agreed peer, once there is one.
    pub fn peer(&self) -> Option<Peer> {
        self.peer
    }

    /// Our hello; `request` asks the peer to answer.
    pub fn hello(&self, request: bool) -> HelloRepr {
        HelloRepr {
            random: self.random,
            challenge: self.challenge,
            echo: self.peer_challenge,
            flags: if request { HelloRepr::FLAG_REQUEST } else { 0 },
        }
    }

    /// A hello arrived (already authenticated) from a peer whose headers carry `session`.
    /// `next_challenge` replaces our challenge if a new peer is agreed on.
    pub fn on_hello(
        &mut self,
        session: u32,
        h: &HelloRepr,
        next_challenge: [u8; 16],
    ) -> HelloOutcome {
        if h.random == self.random {
            return HelloOutcome::Reflected;
        }
        self.peer_challenge = h.challenge;
        let fresh = h.echo == self.challenge;
        let known = self.peer.is_some_and(|p| p.random == h.random);
        let install = fresh && !known;
        if install {
            self.peer = Some(Peer {
                random: h.random,
                session,
            });
            self.challenge = next_challenge;
        }
        let reply = h.request().then(|| {
            let have_keys = self.peer.is_some_and(|p| p.random == h.random);
            self.hello(!have_keys)
        });
        HelloOutcome::Accepted { install, reply }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Datagram, HeaderRepr, Kind};
    use crate::PathId;
    use proptest::prelude::*;

    fn psk(b: u8) -> Psk {
        Psk::from_bytes([b; KEY_LEN])
    }

    fn header(kind: Kind, seq: u32) -> HeaderRepr {
        HeaderRepr {
            kind,
            path: PathId(1),
            path_seq: 7,
            session: 0xCAFE,
            seq,
            timestamp: 99,
        }
    }

    /// A sealed data datagram carrying an IPv4 packet of `len` bytes.
    fn sealed_data(key: &SealKey, counter: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; SEALED_HEADER_LEN + len + TAG_LEN];
        header(Kind::Data, 5).emit(&mut buf);
        let p = &mut buf[SEALED_HEADER_LEN..][..len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[20..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        let n = key.seal(counter, &mut buf, len).expect("room");
        assert_eq!(n, buf.len());
        buf
    }

    #[test]
    fn psk_text_round_trips_and_refuses_bad_input() {
        let k = psk(7);
        assert_eq!(Psk::parse(&format!("  {}\n", k.encode())), Ok(k.clone()));
        assert!(matches!(
            Psk::parse("not base64!"),
            Err(KeyError::NotBase64(_))
        ));
        assert_eq!(Psk::parse("AAAA"), Err(KeyError::Length(3)));
        assert_eq!(format!("{k:?}"), "Psk(..)");
    }

    #[test]
    fn ends_that_can_meet_agree_on_one_cipher() {
        use Cipher::*;
        let choices = [
            CipherChoice::Auto,
            CipherChoice::Only(ChaCha20Poly1305),
            CipherChoice::Only(Aes256Gcm),
        ];
        for a in choices {
            for b in choices {
                // ends with different hello keys never get as far as agreeing
                if a.hello_cipher() != b.hello_cipher() {
                    continue;
                }
                for (hw_a, hw_b) in [(false, false), (false, true), (true, false), (true, true)] {
                    let (offer_a, offer_b) = (a.offers_aes(hw_a), b.offers_aes(hw_b));
                    let at_a = a.agree(offer_a, offer_b);
                    let at_b = b.agree(offer_b, offer_a);
                    assert_eq!(at_a, at_b, "{a} (AES hw {hw_a}) with {b} (AES hw {hw_b})");
                    let both_auto_hw = a == CipherChoice::Auto && b == a && hw_a && hw_b;
                    if a == CipherChoice::Auto || b == CipherChoice::Auto {
                        let want = if both_auto_hw {
                            Aes256Gcm
                        } else {
                            ChaCha20Poly1305
                        };
                        assert_eq!(at_a, want, "{a} (AES hw {hw_a}) with {b} (AES hw {hw_b})");
                    }
                }
            }
        }
        // auto meets a fixed ChaCha20-Poly1305 end, not a fixed AES one
        assert_eq!(CipherChoice::Auto.hello_cipher(), ChaCha20Poly1305);
        assert_eq!(CipherChoice::Only(Aes256Gcm).hello_cipher(), Aes256Gcm);
    }

    #[test]
    fn seal_open_round_trip_for_both_ciphers() {
        for cipher in [Cipher::ChaCha20Poly1305, Cipher::Aes256Gcm] {
            let keys = session_keys(&psk(1), cipher, &[1; 32], &[2; 32]);
            let peer = session_keys(&psk(1), cipher, &[2; 32], &[1; 32]);
            let mut d = sealed_data(&keys.tx, 42, 100);
            assert_eq!(counter_of(&d), Some(42));
            // only the peer's rx key opens it; our own rx key does not (no reflection)
            assert_eq!(keys.rx.open(&mut d.clone()), Err(SealError::BadTag));
            let n = peer.rx.open(&mut d).expect("opens");
            assert_eq!(n, 100);
            unseal_in_place(&mut d);
            let plain = &d[COUNTER_LEN..SEALED_HEADER_LEN + n];
            let Ok(Datagram::Data { header: h, packet }) = Datagram::parse(plain) else {
                panic!("opened datagram does not parse");
            };
            assert_eq!(h, header(Kind::Data, 5));
            assert_eq!(packet.len(), 100);
        }
    }

    #[test]
    fn any_change_to_a_sealed_datagram_is_refused() {
        let keys = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]);
        let peer = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]);
        let d = sealed_data(&keys.tx, 3, 64);
        for i in 0..d.len() {
            let mut bad = d.clone();
            bad[i] ^= 0x01;
            assert_eq!(peer.rx.open(&mut bad), Err(SealError::BadTag), "byte {i}");
        }
        let mut short = d[..d.len() - 1].to_vec();
        assert_eq!(peer.rx.open(&mut short), Err(SealError::BadTag));
        let mut tiny = d[..SEALED_HEADER_LEN + TAG_LEN - 1].to_vec();
        assert!(matches!(
            peer.rx.open(&mut tiny),
            Err(SealError::Truncated(_))
        ));
        // another PSK, another cipher, another pair of randoms: nothing opens
        let other = session_keys(&psk(9), Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]);
        assert_eq!(other.rx.open(&mut d.clone()), Err(SealError::BadTag));
        let other = session_keys(&psk(1), Cipher::Aes256Gcm, &[2; 32], &[1; 32]);
        assert_eq!(other.rx.open(&mut d.clone()), Err(SealError::BadTag));
        let other = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[2; 32], &[3; 32]);
        assert_eq!(other.rx.open(&mut d.clone()), Err(SealError::BadTag));
    }

    #[test]
    fn seal_plain_moves_the_body() {
        let hk = handshake_key(&psk(4), Cipher::ChaCha20Poly1305);
        let mut buf = vec![0u8; 200];
        let hello = HelloRepr {
            random: [5; 32],
            challenge: [6; 16],
            echo: [7; 16],
            flags: 1,
        };
        let plain = hello.emit(&header(Kind::Hello, 0), &mut buf);
        let n = hk.seal_plain(77, &mut buf, plain).expect("room");
        assert_eq!(n, plain + SEAL_OVERHEAD);
        assert!(
            hk.seal_plain(1, &mut buf[..n], n).is_err(),
            "no room must be refused"
        );
        let body = hk.open(&mut buf[..n]).expect("opens");
        unseal_in_place(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[COUNTER_LEN..SEALED_HEADER_LEN + body]),
            Ok(Datagram::Hello {
                header: header(Kind::Hello, 0),
                hello
            })
        );
    }

    #[test]
    fn replay_window() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.check(0), Ok(()));
        w.mark(0);
        assert_eq!(w.check(0), Err(Replay::Duplicate));
        w.mark(5);
        assert_eq!(w.check(3), Ok(()));
        w.mark(3);
        assert_eq!(w.check(3), Err(Replay::Duplicate));
        assert_eq!(w.check(4), Ok(()));
        // a big step: the old ones fall out of the window
        w.mark(5 + REPLAY_WINDOW);
        assert_eq!(w.check(4), Err(Replay::TooOld));
        assert_eq!(w.check(5), Err(Replay::TooOld));
        assert_eq!(w.check(6), Ok(()));
        assert_eq!(w.check(5 + REPLAY_WINDOW), Err(Replay::Duplicate));
        // a huge step clears everything
        w.mark(u64::MAX - 1);
        assert_eq!(w.check(u64::MAX - 2), Ok(()));
        assert_eq!(w.check(u64::MAX), Ok(()));
        assert_eq!(w.highest(), Some(u64::MAX - 1));
    }

    /// A and B run the exchange over a lossless channel.
    fn exchange(a: &mut Handshake, b: &mut Handshake) -> (u32, u32) {
        let (mut installs_a, mut installs_b) = (0, 0);
        let mut to_b = Some(a.hello(true));
        let mut to_a = None;
        for round in 0..10u8 {
            if let Some(h) = to_b.take() {
                if let HelloOutcome::Accepted { install, reply } = b.on_hello(1, &h, [round; 16]) {
                    installs_b += u32::from(install);
                    to_a = reply;
                }
            }
            if let Some(h) = to_a.take() {
                if let HelloOutcome::Accepted { install, reply } =
                    a.on_hello(2, &h, [100 + round; 16])
                {
                    installs_a += u32::from(install);
                    to_b = reply;
                }
            }
        }
        (installs_a, installs_b)
    }

    #[test]
    fn handshake_agrees_in_three_hellos_and_replays_change_nothing() {
        let mut a = Handshake::new([1; 32], [11; 16]);
        let mut b = Handshake::new([2; 32], [22; 16]);
        assert_eq!(exchange(&mut a, &mut b), (1, 1));
        assert_eq!(a.peer().map(|p| p.random), Some([2; 32]));
        assert_eq!(b.peer().map(|p| p.random), Some([1; 32]));
        assert_eq!(a.peer().map(|p| p.session), Some(2));

        // B restarts; its old hellos are replayed to A afterwards
        let old_b = b.hello(true);
        let mut b2 = Handshake::new([3; 32], [33; 16]);
        assert_eq!(exchange(&mut b2, &mut a), (1, 1));
        assert_eq!(a.peer().map(|p| p.random), Some([3; 32]));
        let HelloOutcome::Accepted { install, .. } = a.on_hello(2, &old_b, [0; 16]) else {
            panic!("replay refused as a reflection")
        };
        assert!(!install, "a replayed hello changed the peer");
        assert_eq!(a.peer().map(|p| p.random), Some([3; 32]));
        // our own hello reflected back
        assert_eq!(
            a.on_hello(1, &a.hello(true), [0; 16]),
            HelloOutcome::Reflected
        );
    }

    #[test]
    fn a_fresh_hello_from_an_older_session_of_the_peer_is_not_fresh_after_an_agreement() {
        // B's hello that echoed A's challenge, captured, replayed after B restarted and A
        // agreed with the new B: A renewed its challenge, so the echo is stale.
        let mut a = Handshake::new([1; 32], [11; 16]);
        let mut b = Handshake::new([2; 32], [22; 16]);
        let _ = b.on_hello(1, &a.hello(true), [23; 16]);
        let captured = b.hello(true); // echoes A's challenge 11
        let mut b2 = Handshake::new([3; 32], [33; 16]);
        assert_eq!(exchange(&mut b2, &mut a), (1, 1));
        let HelloOutcome::Accepted { install, .. } = a.on_hello(2, &captured, [0; 16]) else {
            panic!()
        };
        assert!(!install);
        assert_eq!(a.peer().map(|p| p.random), Some([3; 32]));
    }

    proptest! {
        /// The cargo-fuzz target's driver on random inputs.
        #[test]
        fn fuzz_driver_on_random_inputs(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            fuzz::datagram(&data);
        }

        #[test]
        fn arbitrary_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..300), c: u64) {
            let keys = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]);
            let mut b = bytes.clone();
            prop_assert!(keys.rx.open(&mut b).is_err());
            let w = ReplayWindow::default();
            prop_assert_eq!(w.check(c), Ok(()));
        }

        #[test]
        fn mutated_sealed_datagrams_never_open(counter: u64, len in 20usize..200, pos: usize, flip in 1u8..=255, cut in 0usize..8) {
            let keys = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]);
            let peer = session_keys(&psk(1), Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]);
            let mut d = sealed_data(&keys.tx, counter, len);
            let pos = pos % d.len();
            d[pos] ^= flip;
            d.truncate(d.len() - cut);
            prop_assert!(peer.rx.open(&mut d).is_err());
        }

        #[test]
        fn replay_window_accepts_each_counter_once(ops in proptest::collection::vec(0u64..200_000, 1..400)) {
            let mut w = ReplayWindow::default();
            let mut seen = std::collections::HashSet::new();
            let mut highest: Option<u64> = None;
            for c in ops {
                let expect = if seen.contains(&c) {
                    Err(Replay::Duplicate)
                } else if highest.is_some_and(|h| c < h && h - c >= REPLAY_WINDOW) {
                    Err(Replay::TooOld)
                } else {
                    Ok(())
                };
                let got = w.check(c);
                // a duplicate that is also too old may be reported either way
                if !(expect == Err(Replay::Duplicate) && got == Err(Replay::TooOld)) {
                    prop_assert_eq!(got, expect, "counter {}", c);
                }
                if got.is_ok() {
                    w.mark(c);
                    seen.insert(c);
                    highest = Some(highest.map_or(c, |h| h.max(c)));
                }
            }
        }
    }
}

/// Drivers for the cargo-fuzz targets (`fuzz/`), also run by the property tests.
#[doc(hidden)]
pub mod fuzz {
    use std::sync::OnceLock;

    use super::*;
    use crate::wire::{Datagram, HeaderRepr, Kind};

    struct Keys {
        ours: SessionKeys,
        theirs: SessionKeys,
        hello: SealKey,
    }

    fn keys() -> &'static Keys {
        static K: OnceLock<Keys> = OnceLock::new();
        K.get_or_init(|| {
            let psk = Psk::from_bytes([7; KEY_LEN]);
            Keys {
                ours: session_keys(&psk, Cipher::ChaCha20Poly1305, &[1; 32], &[2; 32]),
                theirs: session_keys(&psk, Cipher::ChaCha20Poly1305, &[2; 32], &[1; 32]),
                hello: handshake_key(&psk, Cipher::ChaCha20Poly1305),
            }
        })
    }

    /// Byte 0 even: `data[1..]` is a received datagram, handled as the daemon does (parse,
    /// replay check, open, unseal, parse); it must never authenticate. Byte 0 odd: a datagram
    /// is sealed from the input's fields, then one byte is flipped as the input says; it must
    /// open (to exactly what was sealed) if and only if nothing was flipped.
    pub fn datagram(data: &[u8]) {
        let Some((&mode, rest)) = data.split_first() else {
            return;
        };
        if mode % 2 == 0 {
            received(rest);
        } else {
            sealed_then_mutated(rest);
        }
    }

    fn received(data: &[u8]) {
        if let Ok(Datagram::Report { report, .. }) = Datagram::parse(data) {
            assert_eq!(report.entries().count(), report.len());
        }
        let mut buf = data.to_vec();
        let Ok((h, true)) = HeaderRepr::parse_outer(&buf) else {
            return;
        };
        let window = ReplayWindow::default();
        if let Some(c) = counter_of(&buf) {
            assert!(window.check(c).is_ok());
        }
        let k = keys();
        let key = if h.kind == Kind::Hello {
            &k.hello
        } else {
            &k.theirs.rx
        };
        assert!(
            key.open(&mut buf).is_err(),
            "a forged datagram authenticated"
        );
    }

    fn sealed_then_mutated(data: &[u8]) {
        if data.len() < 24 {
            return;
        }
        let (fields, body) = data.split_at(24);
        let mut buf = vec![0u8; SEALED_HEADER_LEN + body.len() + TAG_LEN];
        let b32 =
            |i: usize| u32::from_be_bytes([fields[i], fields[i + 1], fields[i + 2], fields[i + 3]]);
        HeaderRepr {
            kind: Kind::Data,
            path: crate::PathId(fields[0]),
            path_seq: u16::from_be_bytes([fields[1], fields[2]]),
            session: b32(3),
            seq: b32(7),
            timestamp: b32(11),
        }
        .emit(&mut buf);
        buf[SEALED_HEADER_LEN..][..body.len()].copy_from_slice(body);
        let counter = u64::from_be_bytes(fields[15..23].try_into().unwrap_or([0; 8]));
        let k = keys();
        let n = k.ours.tx.seal(counter, &mut buf, body.len()).expect("room");
        let original = buf.clone();
        // the flip: position from the first body bytes, value from the last field byte
        let flip = fields[23];
        let pos = usize::from(u16::from_be_bytes([fields[1], fields[0]])) % n;
        buf[pos] ^= flip;
        match k.theirs.rx.open(&mut buf) {
            Ok(len) => {
                assert_eq!(flip, 0, "a flipped byte at {pos} went unnoticed");
                assert_eq!(len, body.len());
                assert_eq!(&buf[SEALED_HEADER_LEN..][..len], body);
                assert_eq!(&buf[..SEALED_HEADER_LEN], &original[..SEALED_HEADER_LEN]);
            }
            Err(e) => assert!(flip != 0, "a genuine datagram was refused: {e}"),
        }
        // our own receive key never opens what we sent (no reflection)
        assert!(k.ours.rx.open(&mut original.clone()).is_err());
    }
}
