use super::*;

mod packets;
mod properties;
mod refresh;
mod version7;

use packets::*;

#[test]
fn a_bulk_flow_goes_in_eleven_bytes_of_headers_or_fewer_after_its_reference_eight_in_version_7() {
    for (format, v6, ts, want) in [
        (Format::V6, false, true, 11),
        (Format::V6, true, true, 10),
        (Format::V6, false, false, 10),
        (Format::V7, false, true, 8),
        (Format::V7, true, true, 7),
        (Format::V7, false, false, 7),
    ] {
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let mut p = bulk(v6, ts);
        for gseq in 0..40u32 {
            let bytes = p.bytes();
            let body = packed_in(&mut c, gseq, &bytes, usize::MAX, format, 0);
            let k = gseq % REFRESH_EVERY.saturating_add(1);
            if k == 0 {
                assert_eq!(body, bytes, "{gseq}: whole");
            } else {
                assert!(is_compressed(&body), "{gseq}");
                let headers = body.len() - p.payload.len();
                assert!(
                    headers <= want,
                    "{format:?} v6 {v6} ts {ts}: {headers} bytes of headers"
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
        assert_eq!(c.counts().references, 1);
        assert_eq!(c.counts().compressed, 39);
    }
}

#[test]
fn a_packet_that_does_not_fit_compressed_goes_whole_and_a_late_reference_replaces_nothing() {
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut p = bulk(false, true);
    let full = p.bytes().len();
    let mut bodies = Vec::new();
    for gseq in 0..10u32 {
        // at 5 the room is short even for the compressed packet: whole, the new reference
        let room = if gseq == 5 { 100 } else { full - 30 };
        let bytes = p.bytes();
        let body = packed(&mut c, gseq, &bytes, room);
        let whole = gseq == 0 || gseq == 5;
        assert_eq!(body == bytes, whole, "{gseq}");
        assert!(whole || body.len() <= room, "{gseq}");
        assert_eq!(unpacked(&mut d, gseq, &body), Ok(bytes), "{gseq}");
        bodies.push(body);
        p.seq = p.seq.wrapping_add(1380);
    }
    assert_eq!(c.counts().references, 2);
    assert_eq!(c.counts().too_long, 1);
    // the first reference again, late: the second stays
    unpacked(&mut d, 0, &bodies[0]).expect("whole");
    let bytes = p.bytes();
    let body = packed(&mut c, 10, &bytes, full);
    assert_eq!(unpacked(&mut d, 10, &body), Ok(bytes));
}

#[test]
fn a_header_padded_to_a_size_makes_datagrams_of_one_size_and_rebuilds_the_same() {
    for (format, pad_to) in [(Format::V6, 20), (Format::V7, 13)] {
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let mut p = bulk(false, true);
        let mut sizes = Vec::new();
        for gseq in 0..30u32 {
            let bytes = p.bytes();
            let body = packed_in(&mut c, gseq, &bytes, usize::MAX, format, pad_to);
            assert_eq!(unpacked(&mut d, gseq, &body), Ok(bytes), "{gseq}");
            sizes.push(body.len());
            p.seq = p.seq.wrapping_add(1380);
            p.ack = p.ack.wrapping_add(gseq * 1000);
            p.id = p.id.wrapping_add(1);
        }
        assert!(
            sizes[1..].iter().all(|&s| s == pad_to + 1380),
            "{format:?}: {sizes:?}"
        );
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
        c.sent_whole(i as u32, p);
        assert_eq!(
            c.compress(i as u32 + 1, p, usize::MAX, Format::V7, 0),
            None,
            "{i}"
        );
    }
    c.sent_whole(9, &udp);
    c.sent_whole(10, &[0x45]);
    assert_eq!(c.counts().uncompressible, 4);
}

#[test]
fn a_packet_whose_reference_was_lost_or_replaced_is_refused_not_rebuilt() {
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut p = bulk(false, true);
    let mut bodies = Vec::new();
    let second = REFRESH_EVERY as usize + 1;
    for gseq in 0..second as u32 + 10 {
        bodies.push(packed(&mut c, gseq, &p.bytes(), usize::MAX));
        p.seq = p.seq.wrapping_add(1380);
    }
    // the first reference is lost: its packets are refused; the second's are whole again
    for (gseq, body) in bodies.iter().enumerate().skip(1) {
        let got = unpacked(&mut d, gseq as u32, body);
        if gseq < second {
            assert_eq!(got, Err(Refused::NoReference), "{gseq}");
        } else {
            assert!(got.is_ok(), "{gseq}");
        }
    }
    // one delivered after its context's next reference: still rebuilt (the last
    // KEPT_REFERENCES are kept)
    let mut late = Decompressor::new();
    unpacked(&mut late, 0, &bodies[0]).expect("first reference");
    unpacked(&mut late, second as u32, &bodies[second]).expect("second reference");
    assert!(unpacked(&mut late, 5, &bodies[5]).is_ok());
    // past KEPT_REFERENCES later ones: refused
    let mut whole = p.clone();
    for k in 1..=KEPT_REFERENCES as u32 {
        whole.seq = whole.seq.wrapping_add(1);
        let r = Reference::of(second as u32 + k, &whole.bytes()).expect("tcp");
        late.store(r);
    }
    assert_eq!(
        unpacked(&mut late, 5, &bodies[5]).map(|_| ()),
        Err(Refused::NoReference)
    );
    // a reference not come yet is awaited; a new session: nothing stored
    let next = second + 1;
    let mut fresh = Decompressor::new();
    unpacked(&mut fresh, 0, &bodies[0]).expect("first reference");
    assert_eq!(
        fresh.awaits(next as u32, &bodies[next]),
        Some(second as u32)
    );
    assert_eq!(fresh.awaits(5, &bodies[5]), None, "kept");
    unpacked(&mut fresh, second as u32, &bodies[second]).expect("second reference");
    assert!(unpacked(&mut fresh, next as u32, &bodies[next]).is_ok());
    fresh.reset();
    assert_eq!(
        unpacked(&mut fresh, next as u32 + 1, &bodies[next + 1]).map(|_| ()),
        Err(Refused::NoReference)
    );
    // the first reference lost, the second come: a packet of the first still waits for it
    // (it may be resent), until KEPT_REFERENCES later ones put it out of reach
    let mut gap = Decompressor::new();
    unpacked(&mut gap, second as u32, &bodies[second]).expect("second reference");
    assert_eq!(gap.awaits(5, &bodies[5]), Some(0));
    for k in 1..KEPT_REFERENCES as u32 {
        let mut whole = p.clone();
        whole.seq = whole.seq.wrapping_add(k);
        gap.store(Reference::of(second as u32 + k, &whole.bytes()).expect("tcp"));
    }
    assert_eq!(gap.awaits(5, &bodies[5]), None, "older than all kept");
}

#[test]
fn a_flow_that_falls_in_a_busy_context_takes_it_over() {
    let flow = |port: u16| Tcp {
        port,
        ..bulk(false, false)
    };
    let context = |port: u16| {
        let b = flow(port).bytes();
        Reference::of(0, &b).expect("tcp").context()
    };
    // two flows in one context, and one in another
    let a = 40000;
    let b = (a + 1..)
        .find(|&p| context(p) == context(a))
        .expect("a collision");
    let other = (a + 1..)
        .find(|&p| context(p) != context(a))
        .expect("another");
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut gseq = 0u32;
    let mut send = |port: u16| {
        let mut p = flow(port);
        p.seq = gseq;
        let bytes = p.bytes();
        let body = packed(&mut c, gseq, &bytes, usize::MAX);
        assert_eq!(unpacked(&mut d, gseq, &body), Ok(bytes));
        gseq += 1;
        is_compressed(&body)
    };
    let sent: Vec<bool> = [a, a, other, b, a, other, b, b].map(&mut send).to_vec();
    assert_eq!(
        sent,
        [false, true, false, false, false, true, false, true],
        "whole: first of each flow, and each time one takes the context from the other"
    );
}

#[test]
fn malformed_bodies_are_refused_without_panicking() {
    let mut d = Decompressor::new();
    let mut c = Compressor::new();
    let p = bulk(false, true);
    let r = packed(&mut c, 0, &p.bytes(), usize::MAX);
    unpacked(&mut d, 0, &r).expect("reference");
    for format in [Format::V6, Format::V7] {
        let body = packed_in(&mut c, 1, &p.bytes(), usize::MAX, format, 0);
        for cut in 0..body.len().min(20) {
            let _ = d.rebuild(1, &body[..cut]);
        }
    }
    let body = packed_in(&mut c, 1, &p.bytes(), usize::MAX, Format::V6, 0);
    let ctx = body[1];
    let compact = COMPACT_TCP | ctx;
    // version 7: segments without a sequence number's field, or with no payload to count
    assert_eq!(
        d.rebuild(1, &[compact, 1, M_SEGS, 0, 0, 7]),
        Err(Refused::Malformed)
    );
    assert_eq!(
        d.rebuild(1, &[compact, 1, M_SEGS | M_SEQ, 2, 0, 0]),
        Err(Refused::Malformed)
    );
    assert!(d
        .rebuild(1, &[compact, 1, M_SEGS | M_SEQ, 2, 0, 0, 7])
        .is_ok());
    assert_eq!(d.rebuild(1, &[0x45]), Err(Refused::Malformed));
    assert_eq!(
        d.rebuild(1, &[COMPRESSED_TCP, 200, 1, 0, 0, 0]),
        Err(Refused::Malformed)
    );
    assert_eq!(
        d.rebuild(1, &[COMPRESSED_TCP, ctx, 1, 0x80, 0, 0]),
        Err(Refused::Malformed)
    );
    assert_eq!(
        d.rebuild(
            1,
            &[COMPRESSED_TCP, ctx, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        ),
        Err(Refused::Malformed)
    );
    assert_eq!(
        d.rebuild(
            1,
            &[COMPRESSED_TCP, ctx, 1, 0x01, 0xff, 0xff, 0xff, 0x0f, 0, 0]
        ),
        Err(Refused::Malformed),
        "an identification delta past 16 bits"
    );
}

#[test]
fn a_packet_shorter_than_compress_from_is_neither_compressed_nor_a_reference() {
    let mut c = Compressor::new();
    let mut short = bulk(false, true);
    short.payload.truncate(COMPRESS_FROM - 52 - 1);
    let mut long = bulk(false, true);
    long.payload.truncate(COMPRESS_FROM - 52);
    assert!(!c.sent_whole(0, &short.bytes()));
    assert_eq!(
        c.compress(1, &long.bytes(), usize::MAX, Format::V7, 0),
        None,
        "no reference"
    );
    assert!(c.sent_whole(1, &long.bytes()));
    short.seq = short.seq.wrapping_add(1);
    assert_eq!(
        c.compress(2, &short.bytes(), usize::MAX, Format::V7, 0),
        None
    );
    long.seq = long.seq.wrapping_add(1);
    assert!(c
        .compress(3, &long.bytes(), usize::MAX, Format::V7, 0)
        .is_some());
    assert_eq!(c.counts().references, 1);
    assert_eq!(c.counts().uncompressible, 0);
}

#[test]
fn a_flow_is_ready_while_its_reference_may_be_compressed_against() {
    for v6 in [false, true] {
        let mut c = Compressor::new();
        let mut p = bulk(v6, true);
        let bytes = p.bytes();
        let flow = flow_hash(&bytes).expect("TCP");
        let ctx = flow as usize % CONTEXTS;
        // a super-packet's headers (length and checksum not its segments') hash the same
        let mut superpacket = bytes.clone();
        superpacket[2..6].fill(0xff);
        assert_eq!(flow_hash(&superpacket), Some(flow));
        let mut ready = [7; CONTEXTS];
        c.ready(0, &mut ready);
        assert_eq!(ready, [0; CONTEXTS], "no reference yet");
        // room for it whole, so that it goes whole once its reference is due
        let room = bytes.len();
        assert!(c.sent_whole(0, &bytes));
        for gseq in 1..=REFRESH_EVERY {
            c.ready(gseq, &mut ready);
            assert_eq!(ready[ctx], flow, "{gseq}");
            assert_eq!(ready.iter().filter(|&&f| f != 0).count(), 1);
            p.seq = p.seq.wrapping_add(1380);
            assert!(
                c.compress(gseq, &p.bytes(), room, Format::V7, 0).is_some(),
                "{gseq}"
            );
        }
        c.ready(REFRESH_EVERY + 1, &mut ready);
        assert_eq!(ready[ctx], 0, "due again");
        // a reference far behind is no longer ready either
        let mut far = Compressor::new();
        far.sent_whole(0, &bytes);
        far.ready(MAX_DISTANCE / 2, &mut ready);
        assert_eq!(ready[ctx], flow);
        far.ready(MAX_DISTANCE / 2 + 1, &mut ready);
        assert_eq!(ready[ctx], 0);
    }
    assert_eq!(flow_hash(&[0x45; 40]), None, "not TCP");
    assert_eq!(flow_hash(&[0x46; 60]), None, "IPv4 options");
}

#[test]
fn the_quick_look_takes_a_new_identification_with_its_checksum_and_refuses_a_wrong_checksum() {
    let mut c = Compressor::new();
    let reference = bulk(false, true).bytes();
    assert!(c.sent_whole(0, &reference));
    let l = layout(&reference).expect("compresses");
    c.last = Some((flow_bytes(&reference, l), context_of(&reference, l)));
    let mut p = reference.clone();
    p[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    p[10..12].fill(0);
    let sum = ipv4_header_checksum(&p);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    assert_eq!(c.of_last_reference(&p).map(|(l, _)| l), Some(l));
    p[11] ^= 1;
    assert_eq!(c.of_last_reference(&p), None);
    assert_eq!(layout(&p), None);
}
