//! Drivers for the fuzz target `hc` (and its property test).

use super::*;

/// An IPv4 TCP packet with timestamps and 300 bytes of data, its IPv4 checksum right.
fn seed() -> Vec<u8> {
    let mut p = vec![0u8; 20 + 32 + 300];
    p[..20].copy_from_slice(&[
        0x45, 0, 1, 96, 0, 1, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1,
    ]);
    let sum = internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p[20 + 12] = 0x80;
    p[20 + 13] = 0x10;
    p[40..44].copy_from_slice(&[1, 1, 8, 10]);
    p
}

/// Byte 0 even: the rest, cut at every 0xff, are compressed bodies given to a
/// decompressor holding a reference; it must never panic, and what it rebuilds is as long
/// as its IP header says. Byte 0 odd: each 8 bytes of the rest change a packet of one flow
/// (the first 4 are added to the field the fifth picks); the stream, compressed and
/// decompressed in order, must come out as it went in. Bit 1 of byte 0 picks the format
/// (version 6's or 7's).
pub fn hc(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let format = if mode & 2 == 0 {
        Format::V6
    } else {
        Format::V7
    };
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut p = seed();
    c.sent_whole(0, &p);
    let r = Reference::of(0, &p).expect("a reference");
    let ctx = r.context() as u8;
    d.store(r);
    if mode % 2 == 0 {
        for (i, body) in rest.split(|&b| b == 0xff).enumerate() {
            let mut body = body.to_vec();
            if let Some(first) = body.first_mut() {
                // version 7: the reference's context, or the one the byte gives
                let context = if *first & 0x40 == 0 {
                    ctx
                } else {
                    *first & 0x3f
                };
                *first = match format {
                    Format::V6 => COMPRESSED_TCP,
                    Format::V7 => COMPACT_TCP | context,
                };
            }
            if let Ok((headers, skip)) = d.rebuild(i as u32 + 1, &body) {
                let len = headers.len() + body.len() - skip;
                assert_eq!(
                    usize::from(u16::from_be_bytes([headers[2], headers[3]])),
                    len
                );
            }
        }
        return;
    }
    for (i, change) in rest.chunks_exact(8).enumerate() {
        // seq, ack, window, flags, tsval, tsecr, IP identification, TCP checksum
        let at = [24, 28, 34, 33, 44, 48, 4, 36][usize::from(change[4] % 8)];
        let width = match at {
            33 => 1,
            34 | 4 | 36 => 2,
            _ => 4,
        };
        for k in 0..width {
            p[at + k] = p[at + k].wrapping_add(change[k]);
        }
        p[33] &= !0x20; // no urgent data
        p[10..12].fill(0);
        let sum = internet_checksum(0, &[&p[..20]]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        let gseq = i as u32 + 1;
        let got = match c.compress(gseq, &p, usize::MAX, format, usize::from(change[5] % 24)) {
            Some((header, replaces)) => {
                let body = [&header[..], &p[replaces..]].concat();
                let (headers, skip) = d
                    .rebuild(gseq, &body)
                    .unwrap_or_else(|e| panic!("packet {gseq} refused: {e:?}"));
                [&headers[..], &body[skip..]].concat()
            }
            None => {
                c.sent_whole(gseq, &p);
                d.store(Reference::of(gseq, &p).expect("a reference"));
                p.clone()
            }
        };
        assert_eq!(got, p, "packet {gseq}");
    }
}
