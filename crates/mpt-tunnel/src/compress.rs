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

/// The size every compressed header of `format` is padded to.
#[inline]
pub(crate) fn padded_to(format: mpt_core::hc::Format) -> usize {
    match format {
        mpt_core::hc::Format::V6 => COMPRESSED_HEADERS_V6,
        mpt_core::hc::Format::V7 => COMPRESSED_HEADERS,
    }
}

/// How a packet is compressed as it is numbered: as global sequence number `seq`'s, in the
/// session's `format`, the packet at `at` in its buffer, the result at most `cap` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Packing {
    pub(crate) seq: u32,
    pub(crate) format: mpt_core::hc::Format,
    pub(crate) at: usize,
    pub(crate) cap: usize,
}

/// Compress the inner packet of `*size` bytes at `how.at` in `buf` in place, if it is TCP
/// whose flow has a reference in `tx` ([`mpt_core::hc::Compressor::compress`]) and the result
/// fits `how.cap`: a compressed header in the session's format, padded to what
/// [`crate::Connection::compressed_headers`] counts (a flow's full segments then make
/// datagrams of one size, a run for UDP GSO), in place of its IP and TCP headers. `*size`
/// becomes the body's; returns whether it changed.
#[inline]
pub(crate) fn pack(
    tx: &mut mpt_core::hc::Compressor,
    how: Packing,
    size: &mut usize,
    buf: &mut [u8],
) -> bool {
    let Packing {
        seq,
        format,
        at,
        cap,
    } = how;
    let inner = *size;
    let pad_to = padded_to(format);
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
