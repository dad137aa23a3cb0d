use proptest::prelude::*;

use super::*;

/// A TCP packet: IPv4 (identification `id`) or IPv6, with the timestamp option or none, and
/// `payload` bytes of data; checksums of the IPv4 header right, the TCP one arbitrary (the
/// compressor carries it as it is).
#[derive(Debug, Clone)]
struct Tcp {
    v6: bool,
    ts: Option<(u32, u32)>,
    id: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    sum: u16,
    port: u16,
    payload: Vec<u8>,
}

impl Tcp {
    fn bytes(&self) -> Vec<u8> {
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

fn bulk(v6: bool, ts: bool) -> Tcp {
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

/// The bytes a body stands for, as the receiver writes them to its TUN device.
fn unpacked(d: &mut Decompressor, gseq: u32, body: &[u8]) -> Result<Vec<u8>, Refused> {
    Ok(match d.unpack(gseq, body)? {
        Unpacked::Plain => body.to_vec(),
        Unpacked::Reference => body[2..].to_vec(),
        Unpacked::Rebuilt { headers, skip } => [&headers[..], &body[skip..]].concat(),
    })
}

/// The body `c` sends `p` as, global sequence `gseq`.
fn packed(c: &mut Compressor, gseq: u32, p: &[u8]) -> Vec<u8> {
    match c.pack(gseq, p) {
        Packed::Plain => p.to_vec(),
        Packed::Reference { context } => [&[REFERENCE, context][..], p].concat(),
        Packed::Compressed { header, replaces } => [&header[..], &p[replaces..]].concat(),
    }
}

#[test]
fn a_bulk_flow_goes_in_eleven_bytes_of_headers_or_fewer_after_its_reference() {
    for (v6, ts, want) in [(false, true, 11), (true, true, 10), (false, false, 10)] {
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let mut p = bulk(v6, ts);
        for gseq in 0..40u32 {
            let bytes = p.bytes();
            let body = packed(&mut c, gseq, &bytes);
            let k = gseq % REFRESH_EVERY.saturating_add(1);
            if k == 0 {
                assert_eq!(body[0], REFERENCE, "{gseq}");
            } else {
                assert_eq!(body[0], COMPRESSED_TCP, "{gseq}");
                let headers = body.len() - p.payload.len();
                assert!(
                    headers <= want,
                    "v6 {v6} ts {ts}: {headers} bytes of headers"
                );
            }
            assert_eq!(unpacked(&mut d, gseq, &body), Ok(bytes), "{gseq}");
            p.seq = p.seq.wrapping_add(1380);
            p.id = p.id.wrapping_add(1);
            p.sum = p.sum.wrapping_mul(31).wrapping_add(7);
            if let Some((val, _)) = p.ts.as_mut() {
                *val += u32::from(gseq % 3 == 0);
            }
        }
        assert_eq!(c.counts().references, 2);
        assert_eq!(c.counts().compressed, 38);
    }
}

#[test]
fn what_the_scheme_does_not_cover_goes_whole_and_tcp_of_it_is_counted() {
    let mut c = Compressor::new();
    let mut sack = bulk(false, true).bytes();
    sack[20 + 20..20 + 24].copy_from_slice(&[1, 1, 5, 10]); // a SACK block, not timestamps
    let mut fragment = bulk(false, false).bytes();
    fragment[6] = 0x20; // more fragments
    fragment[10..12].fill(0);
    let sum = internet_checksum(0, &[&fragment[..20]]);
    fragment[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut urgent = bulk(true, false).bytes();
    urgent[40 + 13] |= 0x20;
    let mut bad_sum = bulk(false, false).bytes();
    bad_sum[10] ^= 1;
    let mut udp = bulk(false, false).bytes();
    udp[9] = 17;
    for (i, p) in [sack, fragment, urgent, bad_sum].iter().enumerate() {
        assert_eq!(c.pack(i as u32, p), Packed::Plain, "{i}");
    }
    assert_eq!(c.pack(9, &udp), Packed::Plain);
    assert_eq!(c.pack(10, &[0x45]), Packed::Plain);
    assert_eq!(c.counts().uncompressible, 4);
}

#[test]
fn a_packet_whose_reference_was_lost_or_replaced_is_refused_not_rebuilt() {
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut p = bulk(false, true);
    let mut bodies = Vec::new();
    for gseq in 0..70u32 {
        bodies.push(packed(&mut c, gseq, &p.bytes()));
        p.seq = p.seq.wrapping_add(1380);
    }
    // the first reference is lost: its packets are refused; the second's are whole again
    for (gseq, body) in bodies.iter().enumerate().skip(1) {
        let got = unpacked(&mut d, gseq as u32, body);
        if gseq <= REFRESH_EVERY as usize {
            assert_eq!(got, Err(Refused::NoReference), "{gseq}");
        } else {
            assert!(got.is_ok(), "{gseq}");
        }
    }
    // one delivered after its context's next reference: refused
    let mut late = Decompressor::new();
    unpacked(&mut late, 0, &bodies[0]).expect("first reference");
    unpacked(&mut late, 33, &bodies[33]).expect("second reference");
    assert_eq!(
        unpacked(&mut late, 5, &bodies[5]),
        Err(Refused::NoReference)
    );
    // a new session: nothing stored
    assert!(unpacked(&mut late, 40, &bodies[40]).is_ok());
    late.reset();
    assert_eq!(
        unpacked(&mut late, 41, &bodies[41]),
        Err(Refused::NoReference)
    );
}

#[test]
fn a_flow_past_the_contexts_evicts_the_least_recently_used() {
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut gseq = 0u32;
    let mut send = |c: &mut Compressor, d: &mut Decompressor, port: u16| {
        let mut p = bulk(false, false);
        p.port = port;
        p.seq = gseq;
        let bytes = p.bytes();
        let body = packed(c, gseq, &bytes);
        assert_eq!(unpacked(d, gseq, &body), Ok(bytes));
        gseq += 1;
        body[0]
    };
    for port in 0..CONTEXTS as u16 {
        assert_eq!(send(&mut c, &mut d, port), REFERENCE);
    }
    assert_eq!(send(&mut c, &mut d, 1), COMPRESSED_TCP);
    // a new flow takes port 0's context (the least recently used), port 1 keeps its own
    assert_eq!(send(&mut c, &mut d, 999), REFERENCE);
    assert_eq!(send(&mut c, &mut d, 1), COMPRESSED_TCP);
    assert_eq!(send(&mut c, &mut d, 0), REFERENCE);
}

#[test]
fn malformed_bodies_are_refused_without_panicking() {
    let mut d = Decompressor::new();
    let mut c = Compressor::new();
    let p = bulk(false, true);
    let r = packed(&mut c, 0, &p.bytes());
    unpacked(&mut d, 0, &r).expect("reference");
    let body = packed(&mut c, 1, &p.bytes());
    for cut in 0..body.len().min(20) {
        let _ = d.unpack(1, &body[..cut]);
    }
    assert_eq!(d.unpack(1, &[REFERENCE]), Err(Refused::Malformed));
    assert_eq!(
        d.unpack(1, &[REFERENCE, 200, 0x45]),
        Err(Refused::Malformed)
    );
    assert_eq!(
        d.unpack(1, &[COMPRESSED_TCP, 0, 1, 0x80, 0, 0]),
        Err(Refused::Malformed)
    );
    assert_eq!(
        d.unpack(1, &[COMPRESSED_TCP, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        Err(Refused::Malformed)
    );
}

/// One step of a generated stream: which flow sends, and how its fields move.
#[derive(Debug, Clone)]
struct Step {
    flow: usize,
    len: usize,
    ack: u32,
    window: Option<u16>,
    flags: u8,
    tsval: u32,
    tsecr: u32,
    id: u16,
    sum: u16,
    sack: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0usize..4,
        0usize..120,
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![4 => Just(None), 1 => any::<u16>().prop_map(Some)],
        prop_oneof![4 => Just(0x10u8), 1 => Just(0x18), 1 => any::<u8>().prop_map(|f| f & !0x20)],
        prop_oneof![3 => 0u32..3, 1 => any::<u32>()],
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![3 => 0u16..2, 1 => any::<u16>()],
        any::<u16>(),
        prop::bool::weighted(0.05),
    )
        .prop_map(
            |(flow, len, ack, window, flags, tsval, tsecr, id, sum, sack)| Step {
                flow,
                len,
                ack,
                window,
                flags,
                tsval,
                tsecr,
                id,
                sum,
                sack,
            },
        )
}

/// The packets of a generated stream over four flows (IPv4 and IPv6, with timestamps and
/// without), some of them with a SACK option the scheme does not compress.
fn stream(steps: &[Step]) -> Vec<Vec<u8>> {
    let mut flows: Vec<Tcp> = (0..4)
        .map(|i| Tcp {
            port: 1000 + i as u16,
            ..bulk(i % 2 == 1, i < 2)
        })
        .collect();
    steps
        .iter()
        .map(|s| {
            let f = &mut flows[s.flow];
            f.seq = f.seq.wrapping_add(f.payload.len() as u32);
            f.ack = f.ack.wrapping_add(s.ack);
            f.window = s.window.unwrap_or(f.window);
            f.flags = s.flags;
            if let Some((val, ecr)) = f.ts.as_mut() {
                *val = val.wrapping_add(s.tsval);
                *ecr = ecr.wrapping_add(s.tsecr);
            }
            f.id = f.id.wrapping_add(s.id);
            f.sum = s.sum;
            f.payload = vec![s.len as u8; s.len];
            let mut p = f.bytes();
            if s.sack && f.ts.is_some() {
                let at = if f.v6 { 40 } else { 20 };
                p[at + 22] = 5;
            }
            p
        })
        .collect()
}

proptest! {
    /// Delivered in global order with any of them lost (the resequencer gives up gaps), every
    /// packet comes out as it went in, or is refused because its reference was lost.
    #[test]
    fn in_global_order_with_losses_every_packet_is_itself_or_refused_for_a_lost_reference(
        steps in prop::collection::vec(step(), 1..300),
        lost in prop::collection::vec(prop::bool::weighted(0.1), 300),
        start in any::<u32>(),
    ) {
        let packets = stream(&steps);
        let mut c = Compressor::new();
        let bodies: Vec<Vec<u8>> = packets
            .iter()
            .enumerate()
            .map(|(i, p)| packed(&mut c, start.wrapping_add(i as u32), p))
            .collect();
        let mut d = Decompressor::new();
        for (i, (p, body)) in packets.iter().zip(&bodies).enumerate() {
            if lost[i] {
                continue;
            }
            let gseq = start.wrapping_add(i as u32);
            match unpacked(&mut d, gseq, body) {
                Ok(got) => prop_assert_eq!(&got, p),
                Err(e) => {
                    prop_assert_eq!(e, Refused::NoReference);
                    let mut at = 2;
                    let distance = get_varint(body, &mut at).expect("distance") as usize;
                    prop_assert!(lost[i - distance], "{} refused, its reference {} arrived", i, i - distance);
                }
            }
        }
    }

    /// Delivered in any order (as a receiver without a resequencer would), no packet is ever
    /// rebuilt wrong: it is itself, or refused.
    #[test]
    fn in_any_order_no_packet_is_rebuilt_wrong(
        steps in prop::collection::vec(step(), 1..200),
        order in prop::collection::vec(any::<prop::sample::Index>(), 200),
    ) {
        let packets = stream(&steps);
        let mut c = Compressor::new();
        let bodies: Vec<Vec<u8>> = packets
            .iter()
            .enumerate()
            .map(|(i, p)| packed(&mut c, i as u32, p))
            .collect();
        let mut d = Decompressor::new();
        for ix in order.iter().take(packets.len()) {
            let i = ix.index(packets.len());
            if let Ok(got) = unpacked(&mut d, i as u32, &bodies[i]) {
                prop_assert_eq!(&got, &packets[i]);
            }
        }
    }

    /// The fuzz target's driver on arbitrary input.
    #[test]
    fn the_fuzz_driver_holds_on_arbitrary_input(data in prop::collection::vec(any::<u8>(), 0..400)) {
        fuzz::hc(&data);
    }

    /// Arbitrary bytes never panic the decompressor.
    #[test]
    fn arbitrary_bodies_never_panic(
        bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..100), 1..50),
        seed in prop::collection::vec(any::<u8>(), 60..61),
    ) {
        let mut d = Decompressor::new();
        let mut c = Compressor::new();
        let reference = packed(&mut c, 0, &bulk(false, true).bytes());
        let _ = d.unpack(0, &reference);
        for (i, b) in bodies.iter().enumerate() {
            let mut b = b.clone();
            if let Some(first) = b.first_mut() {
                *first = [COMPRESSED_TCP, REFERENCE, seed[i % 60]][i % 3];
            }
            let _ = d.unpack(i as u32 + 1, &b);
        }
    }
}
