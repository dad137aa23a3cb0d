//! The common header: a view over a buffer ([`Header`]) and its fields ([`HeaderRepr`]).

use super::*;
use crate::PathId;

/// The fields of the common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRepr {
    pub kind: Kind,
    pub path: PathId,
    /// Data: this datagram's sequence number on its path. Control: the next one the sender
    /// will use on this path (so the receiver can count loss at the tail of a burst).
    pub path_seq: u16,
    /// Random per daemon start; a new value tells the peer to reset its receive state.
    pub session: u32,
    /// Data: the global sequence number. Control: the next global sequence number the sender
    /// will assign — every data datagram sent on this path before it has a lower one.
    pub seq: u32,
    /// Send time, microseconds on the sender's clock (wrapping).
    pub timestamp: u32,
}

/// A view of a datagram's common header (and, when sealed, the counter after it) in a buffer,
/// in the manner of smoltcp's packet types: [`Header::new_checked`] validates once (length,
/// version, kind), after which no accessor can panic. Setters need a mutable buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// A view without checks: for building a header in a buffer of at least [`HEADER_LEN`]
    /// bytes (accessors panic on a shorter one).
    pub const fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    /// A view of a received datagram: at least [`HEADER_LEN`] bytes, our version, a known
    /// kind. (A sealed datagram's header is authenticated only once it is opened.)
    pub fn new_checked(buffer: T) -> Result<Header<T>, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                need: HEADER_LEN,
                got: b.len(),
            });
        }
        let vt = b[field::VER_TYPE];
        if !(super::MIN_VERSION..=VERSION).contains(&(vt >> 5)) {
            return Err(WireError::BadVersion(vt >> 5));
        }
        Kind::from_u8(vt & 0x0f).ok_or(WireError::UnknownKind(vt & 0x0f))?;
        Ok(Header { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn kind(&self) -> Kind {
        // checked in new_checked; an unchecked view built by emit holds a valid kind too
        Kind::from_u8(self.b()[field::VER_TYPE] & 0x0f).unwrap_or(Kind::Data)
    }

    /// The sealed flag: a counter follows the header and the body is encrypted.
    pub fn sealed(&self) -> bool {
        self.b()[field::VER_TYPE] & SEALED_FLAG != 0
    }

    pub fn path(&self) -> PathId {
        PathId(self.b()[field::PATH])
    }

    pub fn path_seq(&self) -> u16 {
        be16(&self.b()[field::PATH_SEQ])
    }

    pub fn session(&self) -> u32 {
        be32(&self.b()[field::SESSION])
    }

    pub fn seq(&self) -> u32 {
        be32(&self.b()[field::SEQ])
    }

    pub fn timestamp(&self) -> u32 {
        be32(&self.b()[field::TIMESTAMP])
    }

    /// The counter's low 32 bits after the header of a sealed datagram; `None` when the
    /// buffer is too short to hold them (not yet authenticated either way).
    pub fn counter(&self) -> Option<u32> {
        let c: [u8; COUNTER_LEN] = self.b().get(field::COUNTER)?.try_into().ok()?;
        Some(u32::from_be_bytes(c))
    }

    /// The header's fields.
    pub fn repr(&self) -> HeaderRepr {
        HeaderRepr {
            kind: self.kind(),
            path: self.path(),
            path_seq: self.path_seq(),
            session: self.session(),
            seq: self.seq(),
            timestamp: self.timestamp(),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Our version and `kind`, the sealed flag cleared.
    pub fn set_kind(&mut self, kind: Kind) {
        self.b_mut()[field::VER_TYPE] = (VERSION << 5) | (kind as u8);
    }

    pub fn set_sealed(&mut self, sealed: bool) {
        let b = &mut self.b_mut()[field::VER_TYPE];
        if sealed {
            *b |= SEALED_FLAG;
        } else {
            *b &= !SEALED_FLAG;
        }
    }

    pub fn set_path(&mut self, path: PathId) {
        self.b_mut()[field::PATH] = path.0;
    }

    pub fn set_path_seq(&mut self, v: u16) {
        self.b_mut()[field::PATH_SEQ].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_session(&mut self, v: u32) {
        self.b_mut()[field::SESSION].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_seq(&mut self, v: u32) {
        self.b_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_timestamp(&mut self, v: u32) {
        self.b_mut()[field::TIMESTAMP].copy_from_slice(&v.to_be_bytes());
    }

    /// Write the counter of a sealed datagram (its low 32 bits: the wire carries no more);
    /// refused when the buffer cannot hold them.
    pub fn set_counter(&mut self, counter: u64) -> Result<(), WireError> {
        let got = self.b_mut().len();
        let c = self
            .b_mut()
            .get_mut(field::COUNTER)
            .ok_or(WireError::Truncated {
                need: SEALED_HEADER_LEN,
                got,
            })?;
        c.copy_from_slice(&(counter as u32).to_be_bytes());
        Ok(())
    }
}

impl HeaderRepr {
    /// The header of a handshake datagram sent at `now`: its kind, the path, and an index:
    /// the receiver's in a response, the sender's in an initiation (the responder has none
    /// yet; a cookie reply carries it back).
    pub fn handshake(kind: Kind, path: PathId, index: u32, now: crate::Time) -> HeaderRepr {
        HeaderRepr {
            kind,
            path,
            path_seq: 0,
            session: index,
            seq: 0,
            timestamp: now.wire_micros(),
        }
    }

    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the first [`HEADER_LEN`] bytes of `buf`; returns [`HEADER_LEN`].
    ///
    /// # Panics
    /// If `buf` is shorter than [`HEADER_LEN`]; buffers are the caller's, sized once.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let mut h = Header::new_unchecked(&mut buf[..HEADER_LEN]);
        h.set_kind(self.kind);
        h.set_path(self.path);
        h.set_path_seq(self.path_seq);
        h.set_session(self.session);
        h.set_seq(self.seq);
        h.set_timestamp(self.timestamp);
        HEADER_LEN
    }

    pub(crate) fn parse(b: &[u8]) -> Result<HeaderRepr, WireError> {
        match HeaderRepr::parse_outer(b)? {
            (_, true) => Err(WireError::Sealed),
            (h, false) => Ok(h),
        }
    }

    /// Validate the header of a datagram that may be sealed; returns it and the sealed flag.
    /// The header of a sealed datagram is authenticated only once the datagram is opened.
    pub fn parse_outer(b: &[u8]) -> Result<(HeaderRepr, bool), WireError> {
        let h = Header::new_checked(b)?;
        Ok((h.repr(), h.sealed()))
    }
}
