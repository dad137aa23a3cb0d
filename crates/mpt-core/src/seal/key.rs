//! Keys and their key-file text: a host's X25519 key pair ([`PrivateKey`], [`PublicKey`]), the
//! optional pre-shared key of a peer ([`Psk`]), and the session keys the handshake yields
//! ([`SessionKeys`]).

use std::fmt;

use base64::Engine as _;
use ring::aead::{LessSafeKey, UnboundKey};
use snow::resolvers::{CryptoResolver, DefaultResolver};

use super::{Cipher, SealKey, KEY_LEN};

/// Why a key's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not base64: {0}")]
    NotBase64(String),
    #[error("the key is {0} bytes, expected {KEY_LEN}")]
    Length(usize),
}

/// 32 bytes from their base64 text, surrounding whitespace ignored.
fn decode(text: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| KeyError::NotBase64(e.to_string()))?;
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| KeyError::Length(bytes.len()))
}

fn encode(b: &[u8; KEY_LEN]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A pre-shared key mixed into the handshake with one peer (as WireGuard's). Its `Debug` does
/// not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Psk([u8; KEY_LEN]);

impl Psk {
    pub fn from_bytes(b: [u8; KEY_LEN]) -> Psk {
        Psk(b)
    }

    /// Parse a key file's text: base64 of 32 bytes, surrounding whitespace ignored.
    pub fn parse(text: &str) -> Result<Psk, KeyError> {
        decode(text).map(Psk)
    }

    /// The key file's text for this key (base64, no newline).
    pub fn encode(&self) -> String {
        encode(&self.0)
    }

    pub(crate) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for Psk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Psk(..)")
    }
}

/// A host's X25519 private key. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey([u8; KEY_LEN]);

impl PrivateKey {
    /// A new key from 32 random bytes (X25519 clamps them when used).
    pub fn from_bytes(b: [u8; KEY_LEN]) -> PrivateKey {
        PrivateKey(b)
    }

    /// A new key from the operating system's random source.
    pub fn generate() -> Result<PrivateKey, KeyError> {
        let mut b = [0u8; KEY_LEN];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b)
            .map_err(|_| KeyError::NotBase64("no random source".into()))?;
        Ok(PrivateKey(b))
    }

    /// Parse a key file's text: base64 of 32 bytes.
    pub fn parse(text: &str) -> Result<PrivateKey, KeyError> {
        decode(text).map(PrivateKey)
    }

    pub fn encode(&self) -> String {
        encode(&self.0)
    }

    /// The public key that goes with this one.
    pub fn public(&self) -> PublicKey {
        let mut dh = DefaultResolver
            .resolve_dh(&snow::params::DHChoice::Curve25519)
            .expect("the default resolver has X25519");
        dh.set(&self.0);
        let mut p = [0u8; KEY_LEN];
        p.copy_from_slice(&dh.pubkey()[..KEY_LEN]);
        PublicKey(p)
    }

    pub(crate) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKey(..)")
    }
}

/// A host's X25519 public key: how its peers name it in their configs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey([u8; KEY_LEN]);

impl PublicKey {
    pub fn from_bytes(b: [u8; KEY_LEN]) -> PublicKey {
        PublicKey(b)
    }

    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        decode(text).map(PublicKey)
    }

    pub fn encode(&self) -> String {
        encode(&self.0)
    }

    pub fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.encode())
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

/// The keys of one session: `tx` seals what this side sends, `rx` opens what the peer sends.
#[derive(Debug)]
pub struct SessionKeys {
    pub tx: SealKey,
    pub rx: SealKey,
}

impl SessionKeys {
    /// The session keys from the handshake's two transport keys ([`super::Split`]), used with
    /// `cipher` (both take 32-byte keys).
    pub fn new(cipher: Cipher, tx: &[u8; KEY_LEN], rx: &[u8; KEY_LEN]) -> SessionKeys {
        let key = |k: &[u8; KEY_LEN]| {
            // Both algorithms take 32-byte keys: cannot fail.
            let unbound = UnboundKey::new(cipher.algorithm(), k).expect("a 32-byte key");
            SealKey::new(LessSafeKey::new(unbound))
        };
        SessionKeys {
            tx: key(tx),
            rx: key(rx),
        }
    }
}
