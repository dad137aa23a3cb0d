//! The handshake: Noise IKpsk2 over X25519, ChaCha20-Poly1305 and BLAKE2s (as WireGuard), run
//! by the `snow` crate. The initiator knows the responder's public key; the responder learns
//! the initiator's from the first message and finds the peer by it. The psk slot takes the
//! peer's pre-shared key, or zeros without one.
//!
//! No cryptography is written here: snow runs the Noise state machine, and its final split
//! gives the two transport keys, which [`super::SessionKeys`] hands to ring for the data.

use snow::{Builder, HandshakeState};

use super::{PrivateKey, Psk, PublicKey, KEY_LEN};

/// The Noise protocol name.
pub const NOISE_PATTERN: &str = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
/// Bound into every handshake: a handshake of another protocol (or version) never completes.
const PROLOGUE: &[u8] = b"mptd v2";
/// The psk slot of IKpsk2.
const PSK_SLOT: u8 = 2;

/// Why a handshake message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// It does not decrypt: not for our key, from a key we do not take, or forged.
    #[error("the handshake message does not decrypt")]
    Decrypt,
    /// It decrypted, but its payload is not what the message should carry.
    #[error("the handshake payload is malformed")]
    Payload,
}

/// The transport keys the handshake gave this side: `tx` for what it sends, `rx` for what it
/// receives.
pub struct Split {
    pub tx: [u8; KEY_LEN],
    pub rx: [u8; KEY_LEN],
}

impl std::fmt::Debug for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Split(..)")
    }
}

fn builder<'a>() -> Builder<'a> {
    let params = NOISE_PATTERN.parse().expect("a valid Noise protocol name");
    Builder::new(params)
        .prologue(PROLOGUE)
        .expect("one prologue")
}

const ZERO_PSK: [u8; KEY_LEN] = [0; KEY_LEN];

fn psk_bytes(psk: Option<&Psk>) -> &[u8; KEY_LEN] {
    psk.map_or(&ZERO_PSK, Psk::bytes)
}

/// An initiation sent, waiting for its response.
pub struct Initiator {
    hs: HandshakeState,
}

impl std::fmt::Debug for Initiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Initiator(..)")
    }
}

impl Initiator {
    /// Write an initiation to `theirs` carrying `payload` into `out`; returns the state that
    /// takes the response and the message's length.
    pub fn start(
        ours: &PrivateKey,
        theirs: &PublicKey,
        psk: Option<&Psk>,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<(Initiator, usize), HandshakeError> {
        let mut hs = builder()
            .local_private_key(ours.bytes())
            .and_then(|b| b.remote_public_key(theirs.bytes()))
            .and_then(|b| b.psk(PSK_SLOT, psk_bytes(psk)))
            .and_then(Builder::build_initiator)
            .map_err(|_| HandshakeError::Decrypt)?;
        let n = hs
            .write_message(payload, out)
            .map_err(|_| HandshakeError::Payload)?;
        Ok((Initiator { hs }, n))
    }

    /// Take the response `msg`: its payload goes to `payload`. Returns the payload's length
    /// and this side's transport keys.
    pub fn finish(
        mut self,
        msg: &[u8],
        payload: &mut [u8],
    ) -> Result<(usize, Split), HandshakeError> {
        let n = self
            .hs
            .read_message(msg, payload)
            .map_err(|_| HandshakeError::Decrypt)?;
        let (i2r, r2i) = self.hs.dangerously_get_raw_split();
        Ok((n, Split { tx: i2r, rx: r2i }))
    }
}

/// An initiation read, before the answer: who sent it, and the state that writes the response.
pub struct Responder {
    hs: HandshakeState,
    peer: PublicKey,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl Responder {
    /// Read an initiation `msg` sent to `ours`; its payload goes to `payload`. Returns the
    /// state with the initiator's public key, and the payload's length. The caller decides
    /// from the key whether to answer.
    pub fn read(
        ours: &PrivateKey,
        msg: &[u8],
        payload: &mut [u8],
    ) -> Result<(Responder, usize), HandshakeError> {
        let mut hs = builder()
            .local_private_key(ours.bytes())
            .and_then(Builder::build_responder)
            .map_err(|_| HandshakeError::Decrypt)?;
        let n = hs
            .read_message(msg, payload)
            .map_err(|_| HandshakeError::Decrypt)?;
        let peer: [u8; KEY_LEN] = hs
            .get_remote_static()
            .and_then(|k| k.try_into().ok())
            .ok_or(HandshakeError::Decrypt)?;
        Ok((
            Responder {
                hs,
                peer: PublicKey::from_bytes(peer),
            },
            n,
        ))
    }

    /// The initiator's public key.
    pub fn peer(&self) -> &PublicKey {
        &self.peer
    }

    /// Write the response carrying `payload` into `out`, mixing in the peer's pre-shared key.
    /// Returns its length and this side's transport keys.
    pub fn respond(
        mut self,
        psk: Option<&Psk>,
        payload: &[u8],
        out: &mut [u8],
    ) -> Result<(usize, Split), HandshakeError> {
        self.hs
            .set_psk(usize::from(PSK_SLOT), psk_bytes(psk))
            .map_err(|_| HandshakeError::Payload)?;
        let n = self
            .hs
            .write_message(payload, out)
            .map_err(|_| HandshakeError::Payload)?;
        let (i2r, r2i) = self.hs.dangerously_get_raw_split();
        Ok((n, Split { tx: r2i, rx: i2r }))
    }
}
