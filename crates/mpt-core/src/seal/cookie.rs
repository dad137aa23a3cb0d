//! MACs on initiations and cookie replies, as WireGuard has them (its paper, section 5.4.4 and
//! 5.4.7): what lets a responder refuse a flood of initiations without doing the key exchange
//! each would cost, while hosts that can receive at their address still get through.
//!
//! * **mac1**: a keyed BLAKE2s-128 of the Noise message under a key made from the responder's
//!   public key. Only a host that knows that key can write it, and checking it costs a hash:
//!   anything else is refused before any X25519 work.
//! * **mac2**: the same MAC of the message and its mac1 under a **cookie**: a MAC of the
//!   initiator's address and port under a secret the responder changes every two minutes. A
//!   responder under load answers an initiation without a valid mac2 with a cookie reply (the
//!   cookie, encrypted with XChaCha20-Poly1305 under a key made from the responder's public key,
//!   bound to the initiation by its mac1), and reads only initiations whose mac2 proves that
//!   their sender received at the address they came from. Spoofed sources never see a cookie.

use std::net::SocketAddr;
use std::time::Duration;

use blake2::digest::consts::U16;
use blake2::digest::{FixedOutput, KeyInit, Mac};
use blake2::{Blake2s256, Blake2sMac, Digest};
use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::PublicKey;
use crate::Time;

/// Bytes of a MAC, and of a cookie.
pub const MAC_LEN: usize = 16;
/// Bytes of a cookie reply's nonce.
pub const COOKIE_NONCE_LEN: usize = 24;
/// Bytes of an encrypted cookie (cookie and tag).
pub const SEALED_COOKIE_LEN: usize = MAC_LEN + 16;
/// The responder's cookie secret changes this often; an initiator uses a cookie at most this
/// long after it came.
pub const COOKIE_LIFETIME: Duration = Duration::from_secs(120);

const LABEL_MAC1: &[u8] = b"mac1----";
const LABEL_COOKIE: &[u8] = b"cookie--";

/// Keyed BLAKE2s-128 of `parts`, one after the other.
fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    // keys of up to 32 bytes: every caller's
    let mut m =
        <Blake2sMac<U16> as KeyInit>::new_from_slice(key).expect("a key of 32 bytes at most");
    for p in parts {
        Mac::update(&mut m, p);
    }
    m.finalize_fixed().into()
}

fn hash(label: &[u8], key: &PublicKey) -> [u8; 32] {
    let mut h = Blake2s256::new();
    Digest::update(&mut h, label);
    Digest::update(&mut h, key.bytes());
    h.finalize().into()
}

/// The keys both ends derive from the responder's public key: the initiator from its peer's,
/// the responder from its own.
#[derive(Clone)]
pub struct MacKeys {
    mac1: [u8; 32],
    cookie: [u8; 32],
}

impl std::fmt::Debug for MacKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MacKeys(..)")
    }
}

impl MacKeys {
    pub fn new(responder: &PublicKey) -> MacKeys {
        MacKeys {
            mac1: hash(LABEL_MAC1, responder),
            cookie: hash(LABEL_COOKIE, responder),
        }
    }

    /// The mac1 of an initiation's Noise message.
    pub fn mac1(&self, message: &[u8]) -> [u8; MAC_LEN] {
        mac(&self.mac1, &[message])
    }

    /// Whether `mac1` is the mac1 of `message` (constant time).
    pub fn mac1_valid(&self, message: &[u8], mac1: &[u8]) -> bool {
        eq(&self.mac1(message), mac1)
    }

    /// A cookie reply's body for the initiation whose mac1 is `mac1`: `nonce` (random, fresh)
    /// and the cookie encrypted under it.
    pub fn seal_cookie(
        &self,
        mac1: &[u8; MAC_LEN],
        cookie: &[u8; MAC_LEN],
        nonce: &[u8; COOKIE_NONCE_LEN],
    ) -> [u8; SEALED_COOKIE_LEN] {
        let aead = XChaCha20Poly1305::new((&self.cookie).into());
        let mut body = *cookie;
        let tag = aead
            .encrypt_in_place_detached(XNonce::from_slice(nonce), mac1, &mut body)
            .expect("16 bytes always encrypt");
        let mut out = [0u8; SEALED_COOKIE_LEN];
        out[..MAC_LEN].copy_from_slice(&body);
        out[MAC_LEN..].copy_from_slice(&tag);
        out
    }

    /// The cookie in a reply to the initiation whose mac1 is `mac1`, if the reply is the
    /// responder's answer to it.
    pub fn open_cookie(
        &self,
        mac1: &[u8; MAC_LEN],
        nonce: &[u8],
        sealed: &[u8],
    ) -> Option<[u8; MAC_LEN]> {
        if nonce.len() != COOKIE_NONCE_LEN || sealed.len() != SEALED_COOKIE_LEN {
            return None;
        }
        let aead = XChaCha20Poly1305::new((&self.cookie).into());
        let mut body = [0u8; MAC_LEN];
        body.copy_from_slice(&sealed[..MAC_LEN]);
        aead.decrypt_in_place_detached(
            XNonce::from_slice(nonce),
            mac1,
            &mut body,
            sealed[MAC_LEN..].into(),
        )
        .ok()?;
        Some(body)
    }
}

/// The mac2 of an initiation's Noise message and mac1 under `cookie`.
pub fn mac2(cookie: &[u8; MAC_LEN], message: &[u8], mac1: &[u8]) -> [u8; MAC_LEN] {
    mac(cookie, &[message, mac1])
}

/// The responder's cookies: a MAC of the sender's address under a secret that changes every
/// [`COOKIE_LIFETIME`].
#[derive(Clone, Default)]
pub struct Cookies {
    secret: [u8; 32],
    made: Option<Time>,
}

impl std::fmt::Debug for Cookies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cookies")
            .field("made", &self.made)
            .finish_non_exhaustive()
    }
}

impl Cookies {
    /// The cookie of `from` at `now`; `fill` gives random bytes when the secret is due to
    /// change.
    pub fn cookie(
        &mut self,
        now: Time,
        from: SocketAddr,
        fill: impl FnOnce(&mut [u8]),
    ) -> [u8; MAC_LEN] {
        if self
            .made
            .is_none_or(|t| now.saturating_since(t) >= COOKIE_LIFETIME)
        {
            fill(&mut self.secret);
            self.made = Some(now);
        }
        self.of(from)
    }

    /// Whether `mac2` on `message` and `mac1` is made with the current cookie of `from`.
    pub fn mac2_valid(
        &self,
        now: Time,
        from: SocketAddr,
        message: &[u8],
        mac1: &[u8],
        mac2: &[u8],
    ) -> bool {
        match self.made {
            Some(t) if now.saturating_since(t) < COOKIE_LIFETIME => {
                eq(&self::mac2(&self.of(from), message, mac1), mac2)
            }
            _ => false,
        }
    }

    fn of(&self, from: SocketAddr) -> [u8; MAC_LEN] {
        let (ip, port) = match from {
            SocketAddr::V4(a) => (a.ip().octets().to_vec(), a.port()),
            SocketAddr::V6(a) => (a.ip().octets().to_vec(), a.port()),
        };
        mac(&self.secret, &[&ip, &port.to_be_bytes()])
    }
}

/// Constant-time equality of two MACs.
fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::PrivateKey;

    fn keys() -> (MacKeys, MacKeys) {
        let server = PrivateKey::from_bytes([7; 32]).public();
        let other = PrivateKey::from_bytes([8; 32]).public();
        (MacKeys::new(&server), MacKeys::new(&other))
    }

    #[test]
    fn mac1_binds_the_message_to_the_responder_key() {
        let (k, other) = keys();
        let m = [3u8; 110];
        let mac1 = k.mac1(&m);
        assert!(k.mac1_valid(&m, &mac1));
        assert!(!other.mac1_valid(&m, &mac1), "another responder's key");
        let mut changed = m;
        changed[5] ^= 1;
        assert!(!k.mac1_valid(&changed, &mac1));
        assert!(!k.mac1_valid(&m, &mac1[..15]));
    }

    #[test]
    fn a_cookie_opens_only_for_its_initiation_and_the_responder_key() {
        let (k, other) = keys();
        let mac1 = k.mac1(&[1u8; 110]);
        let cookie = [9u8; MAC_LEN];
        let nonce = [4u8; COOKIE_NONCE_LEN];
        let sealed = k.seal_cookie(&mac1, &cookie, &nonce);
        assert_eq!(k.open_cookie(&mac1, &nonce, &sealed), Some(cookie));
        let other_mac1 = k.mac1(&[2u8; 110]);
        assert_eq!(k.open_cookie(&other_mac1, &nonce, &sealed), None);
        assert_eq!(other.open_cookie(&mac1, &nonce, &sealed), None);
        let mut forged = sealed;
        forged[0] ^= 1;
        assert_eq!(k.open_cookie(&mac1, &nonce, &forged), None);
        assert_eq!(k.open_cookie(&mac1, &nonce[1..], &sealed), None);
    }

    #[test]
    fn mac2_proves_the_address_until_the_secret_changes() {
        let mut c = Cookies::default();
        let a: SocketAddr = "198.18.0.1:4000".parse().expect("addr");
        let b: SocketAddr = "198.18.0.1:4001".parse().expect("addr");
        let t0 = Time::from_secs(1);
        let mut n = 0u8;
        let mut fill = |s: &mut [u8]| {
            n += 1;
            s.fill(n);
        };
        let cookie = c.cookie(t0, a, &mut fill);
        let (m, mac1) = ([5u8; 110], [6u8; MAC_LEN]);
        let good = mac2(&cookie, &m, &mac1);
        assert!(c.mac2_valid(t0, a, &m, &mac1, &good));
        assert!(!c.mac2_valid(t0, b, &m, &mac1, &good), "another port");
        assert!(!c.mac2_valid(t0, a, &m, &mac1, &[0; MAC_LEN]));
        // the same cookie within its lifetime; a new secret after it
        let later = t0 + (COOKIE_LIFETIME - Duration::from_secs(1));
        assert_eq!(c.cookie(later, a, &mut fill), cookie);
        let expired = t0 + COOKIE_LIFETIME;
        assert!(!c.mac2_valid(expired, a, &m, &mac1, &good));
        assert_ne!(c.cookie(expired, a, &mut fill), cookie);
        assert!(!c.mac2_valid(expired, a, &m, &mac1, &good));
        assert!(
            !Cookies::default().mac2_valid(t0, a, &m, &mac1, &good),
            "no secret yet"
        );
    }
}
