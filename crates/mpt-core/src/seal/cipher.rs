//! Which AEAD seals datagrams: the two ciphers, the config's choice, and the hardware test
//! behind `encryption = "auto"`.

use std::fmt;

use ring::aead;

/// The AEAD that seals datagrams. Both ends must use the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    /// ChaCha20-Poly1305 (RFC 8439): fast everywhere, constant time without AES hardware.
    ChaCha20Poly1305,
    /// AES-256-GCM: fastest on CPUs with AES-NI and carry-less multiply.
    Aes256Gcm,
}

impl Cipher {
    pub(crate) fn algorithm(self) -> &'static aead::Algorithm {
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
