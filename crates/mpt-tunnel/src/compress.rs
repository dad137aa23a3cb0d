//! The send side of inner header compression (`docs/protocol.md`, "Compressed headers"):
//! whether data goes compressed, what a driver counts for compressed headers, which flows
//! have a reference, and a packet compressed in place as it is numbered (rebuilding is
//! `hc.rs`'s).

use crate::Connection;

/// What [`Connection::compressed_headers`] counts for a compressed header in a session of
/// protocol version 7. A bulk flow's are 7 to 11 bytes (marker, distance, mask, the segments
/// since its reference, the timestamps' deltas, flags when they change, checksum), 13 where
/// its identification goes in its field and the distance takes two bytes: with 12, one TCP
/// flow over four shaped paths sent 11 of 44 000 segments whole, in pieces.
pub const COMPRESSED_HEADERS: usize = 13;
/// What it counts in a session of version 6, whose headers are 12 to 16 bytes.
pub const COMPRESSED_HEADERS_V6: usize = 20;

impl<P> Connection<P> {
    /// Whether data goes with compressed headers: configured, with resending (a reference
    /// lost is sent again), in a session of version 6 (a peer of version 5 makes references of
    /// packets in pieces too).
    pub(crate) fn compressing(&self) -> bool {
        self.cfg.compress && self.resending() && self.wire_version >= 6
    }

    /// What a bulk TCP packet's IP and TCP headers take in a datagram while data goes with
    /// compressed headers: a driver that cuts TCP segments to fit a datagram
    /// ([`Connection::largest_whole_packet`]) counts this for headers that compress
    /// ([`COMPRESSED_HEADERS`], or [`COMPRESSED_HEADERS_V6`] in a session of version 6). One
    /// longer than that does not fit, and goes whole, in pieces.
    pub fn compressed_headers(&self) -> Option<usize> {
        self.compressing().then(|| self.pad_to())
    }

    /// The session's compressed header format, and the size every compressed header is padded
    /// to.
    fn hc_format(&self) -> mpt_core::hc::Format {
        mpt_core::hc::Format::of_version(self.wire_version)
    }

    fn pad_to(&self) -> usize {
        match self.hc_format() {
            mpt_core::hc::Format::V6 => COMPRESSED_HEADERS_V6,
            mpt_core::hc::Format::V7 => COMPRESSED_HEADERS,
        }
    }

    /// Per context, the flow ([`mpt_core::hc::flow_hash`]) whose next packets may be
    /// compressed against a reference ([`mpt_core::hc::Compressor::ready`]; all 0 while data
    /// goes whole). A driver that cuts TCP segments for [`Connection::compressed_headers`]
    /// cuts the first of a burst of any other flow to fit a datagram whole, as it would
    /// without compression: it goes whole, and becomes its flow's reference.
    pub fn compress_ready(&self, out: &mut [u32; mpt_core::hc::CONTEXTS]) {
        if self.compressing() {
            self.hc_tx.ready(self.seq, out);
        } else {
            out.fill(0);
        }
    }

    /// Compress the inner packet of `*size` bytes in `buf` (at [`Connection::prefix`]) in
    /// place, as the next global sequence number's, if it is TCP whose flow has a reference
    /// ([`mpt_core::hc::Compressor::compress`]) and the result is at most `cap` bytes: a
    /// compressed header in the session's format, padded to what
    /// [`Connection::compressed_headers`] counts (a flow's full segments then make datagrams
    /// of one size, a run for UDP GSO), in place of its IP and TCP headers. `*size` becomes
    /// the body's; returns whether it changed.
    pub(crate) fn pack(&mut self, size: &mut usize, buf: &mut [u8], cap: usize) -> bool {
        let (at, inner) = (self.prefix(), *size);
        let (format, pad_to) = (self.hc_format(), self.pad_to());
        let packet = &buf[at..at + inner];
        let mut header = mpt_core::hc::Headers::new();
        let Some(replaces) =
            self.hc_tx
                .compress_into(self.seq, packet, cap, format, pad_to, &mut header)
        else {
            return false;
        };
        let h = header.len();
        buf.copy_within(at + replaces..at + inner, at + h);
        buf[at..at + h].copy_from_slice(&header);
        *size = inner - replaces + h;
        true
    }
}
