//! Which AEAD seals datagrams: the two ciphers, the config's choice, and the hardware test
//! behind `encryption = "auto"`.

use std::fmt;

use ring::aead;

use crate::wire::CipherFlags;

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
    /// otherwise: each side says in its handshake message whether it would take AES
    /// ([`cipher_flags`]), and both pick the same ([`negotiate`]). The default. Meets any
    /// peer that seals.
    Auto,
    /// This cipher whatever the hardware; the peer must say the same, or `auto`.
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
}

/// The [`CipherFlags`] our handshake messages carry for `encryption` (`None`: data in the
/// clear), given whether this CPU has AES in hardware.
pub fn cipher_flags(encryption: Option<CipherChoice>, aes_in_hardware: bool) -> u8 {
    match encryption {
        None => CipherFlags::PLAIN,
        Some(CipherChoice::Auto) if aes_in_hardware => CipherFlags::AES,
        Some(CipherChoice::Auto) => 0,
        Some(CipherChoice::Only(Cipher::Aes256Gcm)) => CipherFlags::FIXED | CipherFlags::AES,
        Some(CipherChoice::Only(Cipher::ChaCha20Poly1305)) => CipherFlags::FIXED,
    }
}

/// Two ends whose settings cannot meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the ends' encryption settings differ: {ours} here, {theirs} at the peer")]
pub struct CipherMismatch {
    pub ours: &'static str,
    pub theirs: &'static str,
}

fn describe(flags: u8) -> &'static str {
    if flags & CipherFlags::PLAIN != 0 {
        "none"
    } else if flags & CipherFlags::FIXED == 0 {
        "auto"
    } else if flags & CipherFlags::AES != 0 {
        "aes-256-gcm"
    } else {
        "chacha20-poly1305"
    }
}

/// How the session seals data, from both ends' [`CipherFlags`]: the same answer at both ends
/// (the rule is symmetric). `Ok(None)`: both send in the clear. A fixed cipher wins over
/// `auto`; two `auto` ends take AES-256-GCM only when both have it in hardware. Two different
/// fixed ciphers, or one end in the clear, cannot meet.
pub fn negotiate(ours: u8, theirs: u8) -> Result<Option<Cipher>, CipherMismatch> {
    let mismatch = CipherMismatch {
        ours: describe(ours),
        theirs: describe(theirs),
    };
    let plain = |f: u8| f & CipherFlags::PLAIN != 0;
    let fixed = |f: u8| (f & CipherFlags::FIXED != 0).then_some(f & CipherFlags::AES != 0);
    let cipher = |aes: bool| {
        if aes {
            Cipher::Aes256Gcm
        } else {
            Cipher::ChaCha20Poly1305
        }
    };
    match (plain(ours), plain(theirs)) {
        (true, true) => return Ok(None),
        (false, false) => {}
        _ => return Err(mismatch),
    }
    match (fixed(ours), fixed(theirs)) {
        (Some(a), Some(b)) if a != b => Err(mismatch),
        (Some(a), _) | (None, Some(a)) => Ok(Some(cipher(a))),
        (None, None) => Ok(Some(cipher(ours & theirs & CipherFlags::AES != 0))),
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
