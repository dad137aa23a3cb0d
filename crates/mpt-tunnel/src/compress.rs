//! The send side of inner header compression (`docs/protocol.md`, "Compressed headers"):
//! whether data goes compressed, what a driver counts for compressed headers, which flows
//! have a reference, and a packet compressed in place as it is numbered (rebuilding is
//! `hc.rs`'s).

/// What [`crate::Connection::compressed_headers`] counts for a compressed header in a session of
/// protocol version 7. A bulk flow's are 7 to 11 bytes (marker, distance, mask, the segments
/// since its reference, the timestamps' deltas, flags when they change, checksum), 13 where
/// its identification goes in its field and the distance takes two bytes: with 12, one TCP
/// flow over four shaped paths sent 11 of 44 000 segments whole, in pieces.
pub const COMPRESSED_HEADERS: usize = 13;
/// What it counts in a session of version 6, whose headers are 12 to 16 bytes.
pub const COMPRESSED_HEADERS_V6: usize = 20;

/// The compressed header format of a session of protocol `version`, and the size every
/// compressed header is padded to.
#[inline]
pub(crate) fn format(version: u8) -> (mpt_core::hc::Format, usize) {
    let format = mpt_core::hc::Format::of_version(version);
    match format {
        mpt_core::hc::Format::V6 => (format, COMPRESSED_HEADERS_V6),
        mpt_core::hc::Format::V7 => (format, COMPRESSED_HEADERS),
    }
}

/// Compress the inner packet of `*size` bytes at `at` in `buf` in place, as global sequence
/// number `seq`'s of a session of protocol `version`, if it is TCP whose flow has a reference
/// in `tx` ([`mpt_core::hc::Compressor::compress`]) and the result is at most `cap` bytes: a
/// compressed header in the session's format, padded to what
/// [`crate::Connection::compressed_headers`] counts (a flow's full segments then make
/// datagrams of one size, a run for UDP GSO), in place of its IP and TCP headers. `*size`
/// becomes the body's; returns whether it changed.
#[inline]
pub(crate) fn pack(
    tx: &mut mpt_core::hc::Compressor,
    (seq, version): (u32, u8),
    (at, size): (usize, &mut usize),
    buf: &mut [u8],
    cap: usize,
) -> bool {
    let inner = *size;
    let (format, pad_to) = format(version);
    let packet = &buf[at..at + inner];
    let mut header = mpt_core::hc::Headers::new();
    let Some(replaces) = tx.compress_into(seq, packet, cap, format, pad_to, &mut header) else {
        return false;
    };
    let h = header.len();
    buf.copy_within(at + replaces..at + inner, at + h);
    buf[at..at + h].copy_from_slice(&header);
    *size = inner - replaces + h;
    true
}
