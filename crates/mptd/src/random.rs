//! Randomness for the endpoint without a system call per use: it asks for random bytes while
//! the daemon holds its lock (hellos, challenges), and the lock rule allows no system call
//! there. So the kernel's random source keys a ChaCha20 keystream once, and each request
//! takes fresh keystream under a new nonce. The key never leaves this struct.

use anyhow::{anyhow, Result};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};

/// A ChaCha20 keystream keyed from the kernel's random source.
pub struct KeyStream {
    key: LessSafeKey,
    /// Nonce of the next request: never repeats under the key.
    next: u64,
}

impl std::fmt::Debug for KeyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStream").finish_non_exhaustive()
    }
}

impl KeyStream {
    /// A keystream under a key from the kernel's random source.
    pub fn from_kernel() -> Result<KeyStream> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| anyhow!("no randomness from the kernel: {e}"))?;
        let key = UnboundKey::new(&CHACHA20_POLY1305, &key)
            .map_err(|_| anyhow!("cannot key the random stream"))?;
        Ok(KeyStream {
            key: LessSafeKey::new(key),
            next: 0,
        })
    }

    /// Fill `out` with fresh keystream.
    pub fn fill(&mut self, out: &mut [u8]) {
        let mut n = [0u8; NONCE_LEN];
        n[4..].copy_from_slice(&self.next.to_be_bytes());
        self.next += 1;
        out.fill(0);
        // encrypting zeros yields the keystream; the tag is not needed
        let sealed =
            self.key
                .seal_in_place_separate_tag(Nonce::assume_unique_for_key(n), Aad::empty(), out);
        debug_assert!(sealed.is_ok(), "ChaCha20 takes any length up to 256 GiB");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_gets_fresh_bytes() {
        let mut k = KeyStream::from_kernel().expect("random source");
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        k.fill(&mut a);
        k.fill(&mut b);
        assert_ne!(a, [0u8; 32]);
        assert_ne!(a, b);
        let mut other = KeyStream::from_kernel().expect("random source");
        let mut c = [0u8; 32];
        other.fill(&mut c);
        assert_ne!(a, c, "another key, another stream");
    }
}
