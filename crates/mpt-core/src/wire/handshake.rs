//! The handshake's two datagrams: a header, then a Noise IKpsk2 message (`docs/protocol.md`,
//! "Handshake"). What the Noise messages carry encrypted is here too, so that its layout is
//! written down once.

use super::*;

/// Bytes of the Noise part of an initiation: the ephemeral key (32), the initiator's static
/// key encrypted (32 + 16), and the encrypted [`Initiation`] payload (+ 16).
pub const NOISE_INITIATION_LEN: usize = 32 + 48 + INITIATION_PAYLOAD_LEN + 16;
/// Bytes of the Noise part of a response: the ephemeral key and the encrypted [`Response`].
pub const NOISE_RESPONSE_LEN: usize = 32 + RESPONSE_PAYLOAD_LEN + 16;
/// Bytes of an initiation's two MACs after its Noise message (mac1 and mac2, 16 each:
/// `mpt_core::seal::MacKeys`).
pub const INITIATION_MACS: usize = 32;
/// An initiation datagram: header, Noise message, mac1 and mac2.
pub const INITIATION_LEN: usize = HEADER_LEN + NOISE_INITIATION_LEN + INITIATION_MACS;
/// A cookie reply: header, a 24-byte nonce and the 16-byte cookie encrypted (with its tag).
pub const COOKIE_REPLY_LEN: usize = HEADER_LEN + 24 + 32;

/// Whether a handshake datagram of `kind` may be `len` bytes long: an initiation or a response
/// as long as its fixed form, or longer by a capability list of at most
/// [`MAX_CAPABILITY_LIST`] bytes; a cookie reply exactly [`COOKIE_REPLY_LEN`].
pub fn handshake_len_ok(kind: Kind, len: usize) -> bool {
    match kind {
        Kind::Initiation => (INITIATION_LEN..=INITIATION_LEN + MAX_CAPABILITY_LIST).contains(&len),
        Kind::Response => (RESPONSE_LEN..=RESPONSE_LEN + MAX_CAPABILITY_LIST).contains(&len),
        Kind::CookieReply => len == COOKIE_REPLY_LEN,
        _ => false,
    }
}

/// The length of a handshake datagram of `kind` in its fixed form (without a capability
/// list); `None` for other kinds.
pub fn handshake_len(kind: Kind) -> Option<usize> {
    match kind {
        Kind::Initiation => Some(INITIATION_LEN),
        Kind::Response => Some(RESPONSE_LEN),
        Kind::CookieReply => Some(COOKIE_REPLY_LEN),
        _ => None,
    }
}
/// A response datagram: header and Noise message.
pub const RESPONSE_LEN: usize = HEADER_LEN + NOISE_RESPONSE_LEN;

/// Length of the [`Initiation`] payload.
pub const INITIATION_PAYLOAD_LEN: usize = 14;
/// Length of the [`Response`] payload.
pub const RESPONSE_PAYLOAD_LEN: usize = 5;

/// A payload `b` as its fixed part of `fixed` bytes and the capability list after it (`None`
/// when nothing follows; `None` overall when `b` is shorter, or the list malformed).
fn with_list(b: &[u8], fixed: usize) -> Option<(&[u8], Option<CapabilityList>)> {
    let (head, rest) = b.split_at_checked(fixed)?;
    let list = match rest.is_empty() {
        true => None,
        false => Some(CapabilityList::parse(rest)?),
    };
    Some((head, list))
}

/// What an initiation says inside its Noise message (encrypted and authenticated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Initiation {
    /// The initiator's index for the session: what the responder puts in the `session` field
    /// of every datagram it sends in it.
    pub index: u32,
    /// Nanoseconds since the Unix epoch, strictly increasing per initiator: a responder takes
    /// an initiation only if it is later than the last one it took from that peer, so a
    /// replayed initiation starts nothing.
    pub timestamp: u64,
    /// [`CipherFlags`] of the initiator.
    pub flags: u8,
    /// How many paths the initiator has.
    pub paths: u8,
}

impl Initiation {
    pub fn emit(&self) -> [u8; INITIATION_PAYLOAD_LEN] {
        let mut b = [0u8; INITIATION_PAYLOAD_LEN];
        b[0..4].copy_from_slice(&self.index.to_be_bytes());
        b[4..12].copy_from_slice(&self.timestamp.to_be_bytes());
        b[12] = self.flags;
        b[13] = self.paths;
        b
    }

    /// The payload with `list` after it, into `out`; returns its length.
    pub fn emit_with(&self, list: &CapabilityList, out: &mut [u8]) -> usize {
        out[..INITIATION_PAYLOAD_LEN].copy_from_slice(&self.emit());
        INITIATION_PAYLOAD_LEN + list.emit(&mut out[INITIATION_PAYLOAD_LEN..])
    }

    /// A payload and the capability list after it (`None` when there is nothing after the
    /// fixed part: a peer that sends no list). `None` overall if either is malformed.
    pub fn parse_with(b: &[u8]) -> Option<(Initiation, Option<CapabilityList>)> {
        let (fixed, list) = with_list(b, INITIATION_PAYLOAD_LEN)?;
        Some((Initiation::parse(fixed)?, list))
    }

    /// `None` unless `b` is exactly one payload.
    pub fn parse(b: &[u8]) -> Option<Initiation> {
        let b: &[u8; INITIATION_PAYLOAD_LEN] = b.try_into().ok()?;
        Some(Initiation {
            index: be32(&b[0..4]),
            timestamp: u64::from_be_bytes(b[4..12].try_into().ok()?),
            flags: b[12],
            paths: b[13],
        })
    }
}

/// What a response says inside its Noise message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// The responder's index for the session (see [`Initiation::index`]).
    pub index: u32,
    /// [`CipherFlags`] of the responder.
    pub flags: u8,
}

impl Response {
    pub fn emit(&self) -> [u8; RESPONSE_PAYLOAD_LEN] {
        let mut b = [0u8; RESPONSE_PAYLOAD_LEN];
        b[0..4].copy_from_slice(&self.index.to_be_bytes());
        b[4] = self.flags;
        b
    }

    /// The payload with `list` after it, into `out`; returns its length.
    pub fn emit_with(&self, list: &CapabilityList, out: &mut [u8]) -> usize {
        out[..RESPONSE_PAYLOAD_LEN].copy_from_slice(&self.emit());
        RESPONSE_PAYLOAD_LEN + list.emit(&mut out[RESPONSE_PAYLOAD_LEN..])
    }

    /// A payload and the capability list after it, as [`Initiation::parse_with`].
    pub fn parse_with(b: &[u8]) -> Option<(Response, Option<CapabilityList>)> {
        let (fixed, list) = with_list(b, RESPONSE_PAYLOAD_LEN)?;
        Some((Response::parse(fixed)?, list))
    }

    pub fn parse(b: &[u8]) -> Option<Response> {
        let b: &[u8; RESPONSE_PAYLOAD_LEN] = b.try_into().ok()?;
        Some(Response {
            index: be32(&b[0..4]),
            flags: b[4],
        })
    }
}

/// The bits of a handshake payload's `flags`: how the sender seals data datagrams, so that
/// both ends agree on it (`mpt_core::seal::negotiate`).
#[derive(Debug)]
pub struct CipherFlags;

impl CipherFlags {
    /// The sender would take AES-256-GCM (`auto` with AES in hardware), or insists on it
    /// (with [`CipherFlags::FIXED`]).
    pub const AES: u8 = 1;
    /// The sender's cipher is fixed by its config: AES-256-GCM if [`CipherFlags::AES`] is set,
    /// ChaCha20-Poly1305 otherwise.
    pub const FIXED: u8 = 2;
    /// The sender sends data in the clear (`encryption = "none"`).
    pub const PLAIN: u8 = 4;
    /// Not a cipher bit: the sender has a session with the receiver and its sequence numbers
    /// go on from it (a rekey, or a handshake after silence). A receiver that has a session
    /// too keeps its resequencer and statistics. Without it the sender starts afresh (it
    /// restarted), and the receiver starts its resequencer again.
    pub const CONTINUES: u8 = 8;
    /// Not a cipher bit: the sender takes bundles (type 8) and express data (type 9). Sent to a
    /// peer without it (an older mptd, which drops both as unknown), packets go one to a
    /// datagram, as data (type 0).
    pub const EXPRESS: u8 = 16;
    /// Not a cipher bit: the sender takes packets in pieces (a bundle's head piece and
    /// continuations, type 10) and answers path MTU probes (types 11 and 12). Sent to a
    /// peer without it, packets go whole, whatever their size.
    pub const PIECES: u8 = 32;
    /// Not a cipher bit: the sender asks for what a path lost (resend requests, type 13) and
    /// sends again what it is asked for (type 14). Both ends must say it.
    pub const RESEND: u8 = 64;
    /// Not a cipher bit: the sender sends parity on paths that lose packets and makes lost
    /// packets again from it (type 15). Both ends must say it, and [`CipherFlags::RESEND`].
    pub const PARITY: u8 = 128;
}
