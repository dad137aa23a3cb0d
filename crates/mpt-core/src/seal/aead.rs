//! Sealing and opening one datagram in place: `header | counter | body | tag`, the header and
//! counter as associated data, the counter as the nonce.

use std::fmt;

use ring::aead::{self, Aad, LessSafeKey, Nonce};

use super::{COUNTER_LEN, SEALED_HEADER_LEN, SEAL_OVERHEAD, TAG_LEN};
use crate::wire::{Header, HEADER_LEN};

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
    pub(crate) fn new(key: LessSafeKey) -> SealKey {
        SealKey { key }
    }

    /// Seal in place. `buf` holds the plain header in its first [`HEADER_LEN`] bytes and the
    /// body at `buf[SEALED_HEADER_LEN..][..body_len]`, with [`TAG_LEN`] bytes of room after
    /// it. Sets the sealed flag, writes the counter and the tag; returns the datagram length.
    /// Every counter must be used once only with a key.
    pub fn seal(&self, counter: u64, buf: &mut [u8], body_len: usize) -> Result<usize, SealError> {
        let total = SEALED_HEADER_LEN + body_len + TAG_LEN;
        if buf.len() < total {
            return Err(SealError::NoRoom);
        }
        let mut h = Header::new_unchecked(&mut *buf);
        h.set_sealed(true);
        h.set_counter(counter).map_err(|_| SealError::NoRoom)?;
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

    /// Verify and decrypt a sealed datagram in place whose full counter is `counter` (its low
    /// bits are the datagram's: [`expand_counter`] gives the rest); returns the body length
    /// (the body is at `buf[SEALED_HEADER_LEN..]`). Nothing is trusted before this returns
    /// `Ok`: a counter expanded wrongly fails as a forgery does.
    pub fn open(&self, buf: &mut [u8], counter: u64) -> Result<usize, SealError> {
        if buf.len() < SEALED_HEADER_LEN + TAG_LEN {
            return Err(SealError::Truncated(buf.len()));
        }
        let (aad, rest) = buf.split_at_mut(SEALED_HEADER_LEN);
        let plain = self
            .key
            .open_in_place(nonce(counter), Aad::from(&*aad), rest)
            .map_err(|_| SealError::BadTag)?;
        Ok(plain.len())
    }
}

/// The counter's low 32 bits in a sealed datagram (not yet authenticated).
pub fn counter_of(buf: &[u8]) -> Option<u32> {
    Header::new_unchecked(buf).counter()
}

/// The full counter whose low 32 bits are `low`: of the values with those bits, the nearest to
/// `highest`, the highest counter of the session seen so far (`None`: none yet, and the counter
/// is below 2^32). As QUIC's packet numbers: a datagram more than 2^31 away from the highest
/// would be expanded wrongly, and then fails to open; the replay window takes only the last
/// few thousand anyway.
pub fn expand_counter(highest: Option<u64>, low: u32) -> u64 {
    const SPAN: u64 = 1 << 32;
    let Some(h) = highest else {
        return u64::from(low);
    };
    let c = (h & !(SPAN - 1)) | u64::from(low);
    if c > h && c - h > SPAN / 2 && c >= SPAN {
        c - SPAN
    } else if c < h && h - c > SPAN / 2 {
        c.checked_add(SPAN).unwrap_or(c)
    } else {
        c
    }
}

/// Turn an opened datagram into its plain form for [`crate::wire::Datagram::parse`]: the
/// header moves up over the counter and loses the sealed flag. The plain datagram is
/// `buf[COUNTER_LEN..SEALED_HEADER_LEN + body_len]`.
pub fn unseal_in_place(buf: &mut [u8]) {
    buf.copy_within(..HEADER_LEN, COUNTER_LEN);
    Header::new_unchecked(&mut buf[COUNTER_LEN..]).set_sealed(false);
}
