//! Keys: the pre-shared key and its key-file text, and the keys derived from it with
//! HKDF-SHA256 (the hello key; the session keys, one per direction).

use std::fmt;

use base64::Engine as _;
use ring::aead::{LessSafeKey, UnboundKey};
use ring::hkdf;

use super::{Cipher, SealKey, KEY_LEN};

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

fn derive(prk: &hkdf::Prk, info: &[&[u8]], cipher: Cipher) -> SealKey {
    let alg = cipher.algorithm();
    // Both algorithms take 32-byte keys and HKDF-SHA256 yields up to 8160 bytes: cannot fail.
    let okm = prk
        .expand(info, alg)
        .expect("HKDF output length within bounds");
    SealKey::new(LessSafeKey::new(UnboundKey::from(okm)))
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
