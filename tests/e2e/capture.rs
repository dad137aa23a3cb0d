//! What a packet capture (tcpdump's pcap file, Ethernet, IPv4) shows of TLS: the ServerHellos
//! in the TCP streams from a port, with the version each selects in its `supported_versions`
//! extension (TLS 1.3 is selected only there: the hello's own version field says 1.2).

use std::collections::HashMap;

/// A ServerHello seen in a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHello {
    /// The client's port of its connection.
    pub client_port: u16,
    /// `legacy_version` (0x0303 in TLS 1.3).
    pub legacy_version: u16,
    pub cipher_suite: u16,
    /// What its `supported_versions` extension (0x002b) selects, if it has one.
    pub selected_version: Option<u16>,
}

/// The ServerHellos at the start of each TCP stream sent from port `server_port` in `pcap`.
pub fn server_hellos(pcap: &[u8], server_port: u16) -> Result<Vec<ServerHello>, String> {
    let mut streams: HashMap<u16, (u32, Vec<u8>)> = HashMap::new();
    let mut order = Vec::new();
    for frame in frames(pcap)? {
        let Some((sport, dport, seq, payload)) = tcp_of_ethernet(frame) else {
            continue;
        };
        if sport != server_port || payload.is_empty() {
            continue;
        }
        // the stream in order: a segment that starts where the bytes so far end (the first
        // one seen starts it); retransmissions and anything out of order are left out
        let (next, bytes) = streams.entry(dport).or_insert_with(|| {
            order.push(dport);
            (seq, Vec::new())
        });
        if seq == *next && bytes.len() < 64 * 1024 {
            bytes.extend_from_slice(payload);
            *next = seq.wrapping_add(payload.len() as u32);
        }
    }
    Ok(order
        .iter()
        .filter_map(|port| server_hello(*port, &streams[port].1))
        .collect())
}

/// The frames of a pcap file of link type Ethernet.
fn frames(pcap: &[u8]) -> Result<Vec<&[u8]>, String> {
    let head = pcap.get(..24).ok_or("no pcap header")?;
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let little = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => return Err(format!("not a pcap file (magic {m:#x})")),
    };
    let u32_at = |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if little {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    let link = u32_at(head, 20);
    if link != 1 {
        return Err(format!("link type {link}, expected 1 (Ethernet)"));
    }
    let mut out = Vec::new();
    let mut at = 24;
    while let Some(rec) = pcap.get(at..at + 16) {
        let len = u32_at(rec, 8) as usize;
        let Some(frame) = pcap.get(at + 16..at + 16 + len) else {
            break; // cut short: the capture was stopped in a write
        };
        out.push(frame);
        at += 16 + len;
    }
    Ok(out)
}

/// An Ethernet frame's TCP segment over IPv4: ports, sequence number and payload.
fn tcp_of_ethernet(f: &[u8]) -> Option<(u16, u16, u32, &[u8])> {
    let be16 = |b: &[u8], at: usize| Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]));
    if be16(f, 12)? != 0x0800 {
        return None;
    }
    let ip = f.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if *ip.get(9)? != 6 {
        return None;
    }
    let total = usize::from(be16(ip, 2)?).min(ip.len());
    let tcp = ip.get(ihl..total)?;
    let off = usize::from(tcp.get(12)? >> 4) * 4;
    let seq = u32::from_be_bytes(tcp.get(4..8)?.try_into().ok()?);
    Some((be16(tcp, 0)?, be16(tcp, 2)?, seq, tcp.get(off..)?))
}

/// The ServerHello that starts `stream` (the server's bytes), if it does.
fn server_hello(client_port: u16, stream: &[u8]) -> Option<ServerHello> {
    let be16 = |b: &[u8], at: usize| Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]));
    // a handshake record (content type 22) holding a ServerHello (handshake type 2)
    if *stream.first()? != 0x16 {
        return None;
    }
    let record = stream.get(5..5 + usize::from(be16(stream, 3)?))?;
    if *record.first()? != 2 {
        return None;
    }
    let len = usize::from(*record.get(1)?) << 16 | usize::from(be16(record, 2)?);
    let hello = record.get(4..4 + len)?;
    let legacy_version = be16(hello, 0)?;
    let mut at = 2 + 32; // the version, the random
    at += 1 + usize::from(*hello.get(at)?); // the session id
    let cipher_suite = be16(hello, at)?;
    at += 2 + 1; // the suite, the compression method
    let end = at + 2 + usize::from(be16(hello, at)?);
    at += 2;
    let mut selected_version = None;
    while at + 4 <= end {
        let (kind, len) = (be16(hello, at)?, usize::from(be16(hello, at + 2)?));
        if kind == 0x002b && len == 2 {
            selected_version = be16(hello, at + 4);
        }
        at += 4 + len;
    }
    Some(ServerHello {
        client_port,
        legacy_version,
        cipher_suite,
        selected_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcap file of one Ethernet frame: IPv4, TCP from port 443 to 40000 at `seq`, carrying
    /// `payload`.
    fn one_frame(seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&443u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&40000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp.extend_from_slice(payload);
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
        ip[9] = 6;
        ip.extend_from_slice(&tcp);
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&0x0800u16.to_be_bytes());
        eth.extend_from_slice(&ip);
        let mut pcap = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
        pcap.extend_from_slice(&[2, 0, 4, 0]); // version 2.4
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&65535u32.to_le_bytes());
        pcap.extend_from_slice(&1u32.to_le_bytes());
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&(eth.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(eth.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&eth);
        pcap
    }

    /// A ServerHello record selecting `version` in supported_versions, after a key share.
    fn hello_record(version: u16) -> Vec<u8> {
        let mut exts = vec![0x00, 0x33, 0x00, 0x02, 0xAA, 0xBB]; // a key share, cut short
        exts.extend_from_slice(&[0x00, 0x2b, 0x00, 0x02]);
        exts.extend_from_slice(&version.to_be_bytes());
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&[1, 9]); // a one-byte session id
        body.extend_from_slice(&[0x13, 0x01, 0x00]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut hs = vec![2, 0];
        hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
        hs.extend_from_slice(&body);
        let mut rec = vec![0x16, 0x03, 0x03];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn a_server_hello_and_its_selected_version_are_found() {
        let pcap = one_frame(1000, &hello_record(0x0304));
        let got = server_hellos(&pcap, 443).expect("parsed");
        assert_eq!(
            got,
            vec![ServerHello {
                client_port: 40000,
                legacy_version: 0x0303,
                cipher_suite: 0x1301,
                selected_version: Some(0x0304),
            }]
        );
        assert!(server_hellos(&pcap, 4754).expect("parsed").is_empty());
        let plain = one_frame(1000, &[0x00, 0x94, 0xE0, 1, 2, 3]);
        assert!(server_hellos(&plain, 443).expect("parsed").is_empty());
        assert!(server_hellos(&[0; 10], 443).is_err());
    }
}
