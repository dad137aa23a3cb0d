//! The Internet checksum, which both the wire format (the rebuilt IPv4 header of a compressed
//! bundle entry, [`crate::wire`]) and header compression ([`crate::hc`]) need: here, depending
//! on nothing, so that neither of the two depends on the other for it.

/// The Internet checksum (RFC 1071) of the bytes of `parts` (each of even length but the
/// last), added to the partial sum `initial` (a pseudo-header's, or 0).
pub fn internet_checksum(initial: u32, parts: &[&[u8]]) -> u16 {
    let mut sum = u64::from(initial);
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
