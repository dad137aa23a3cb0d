//! Packets the tests compress and rebuild, and the two ends as the datapath drives them.

use super::super::*;

/// A TCP packet: IPv4 (identification `id`) or IPv6, with the timestamp option or none, and
/// `payload` bytes of data; checksums of the IPv4 header right, the TCP one arbitrary (the
/// compressor carries it as it is).
#[derive(Debug, Clone)]
pub(super) struct Tcp {
    pub(super) v6: bool,
    pub(super) ts: Option<(u32, u32)>,
    pub(super) id: u16,
    pub(super) seq: u32,
    pub(super) ack: u32,
    pub(super) flags: u8,
    pub(super) window: u16,
    pub(super) sum: u16,
    pub(super) port: u16,
    pub(super) payload: Vec<u8>,
}

impl Tcp {
    pub(super) fn bytes(&self) -> Vec<u8> {
        let tcp_len = if self.ts.is_some() { 32 } else { 20 };
        let mut t = vec![0u8; tcp_len];
        t[0..2].copy_from_slice(&self.port.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.to_be_bytes());
        t[8..12].copy_from_slice(&self.ack.to_be_bytes());
        t[12] = (tcp_len as u8 / 4) << 4;
        t[13] = self.flags;
        t[14..16].copy_from_slice(&self.window.to_be_bytes());
        t[16..18].copy_from_slice(&self.sum.to_be_bytes());
        if let Some((val, ecr)) = self.ts {
            t[20..24].copy_from_slice(&[1, 1, 8, 10]);
            t[24..28].copy_from_slice(&val.to_be_bytes());
            t[28..32].copy_from_slice(&ecr.to_be_bytes());
        }
        t.extend_from_slice(&self.payload);
        let mut p = if self.v6 {
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&(t.len() as u16).to_be_bytes());
            h[6] = 6;
            h[7] = 64;
            h[8..24].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            h[24..40]
                .copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            h
        } else {
            let mut h = vec![0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((20 + t.len()) as u16).to_be_bytes());
            h[4..6].copy_from_slice(&self.id.to_be_bytes());
            h[6] = 0x40;
            h[8] = 64;
            h[9] = 6;
            h[12..16].copy_from_slice(&[198, 18, 0, 1]);
            h[16..20].copy_from_slice(&[198, 19, 0, 1]);
            let sum = internet_checksum(0, &[&h]);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            h
        };
        p.extend_from_slice(&t);
        p
    }
}

pub(super) fn bulk(v6: bool, ts: bool) -> Tcp {
    Tcp {
        v6,
        ts: ts.then_some((1000, 77)),
        id: 100,
        seq: 0xffff_f000,
        ack: 5,
        flags: 0x10,
        window: 501,
        sum: 0xabcd,
        port: 40000,
        payload: vec![7; 1380],
    }
}

/// The bytes a body stands for, as the receiver writes them to its TUN device (a whole one
/// released in order becomes its flow's reference).
pub(super) fn unpacked(d: &mut Decompressor, gseq: u32, body: &[u8]) -> Result<Vec<u8>, Refused> {
    if is_compressed(body) {
        let (headers, skip) = d.rebuild(gseq, body)?;
        return Ok([&headers[..], &body[skip..]].concat());
    }
    if let Some(r) = Reference::of(gseq, body) {
        d.store(r);
    }
    Ok(body.to_vec())
}

/// The body `c` sends `p` as, global sequence `gseq`, in at most `room` bytes (whole when
/// that does not fit), in version 7's format.
pub(super) fn packed(c: &mut Compressor, gseq: u32, p: &[u8], room: usize) -> Vec<u8> {
    packed_in(c, gseq, p, room, Format::V7, 0)
}

/// As [`packed`], in `format`, the compressed header padded to `pad_to` bytes.
pub(super) fn packed_in(
    c: &mut Compressor,
    gseq: u32,
    p: &[u8],
    room: usize,
    format: Format,
    pad_to: usize,
) -> Vec<u8> {
    match c.compress(gseq, p, room, format, pad_to) {
        Some((header, replaces)) => [&header[..], &p[replaces..]].concat(),
        None => {
            c.sent_whole(gseq, p);
            p.to_vec()
        }
    }
}

/// The global sequence number of the reference a compressed `body` of `gseq` names.
pub(super) fn named(gseq: u32, body: &[u8]) -> u32 {
    let (_, _, distance, _) = head(body).expect("a compressed body");
    gseq.wrapping_sub(distance)
}
