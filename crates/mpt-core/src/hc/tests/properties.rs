//! Property tests: generated streams of TCP packets, compressed and rebuilt in global order
//! with losses and in any order, and arbitrary bodies.

use proptest::prelude::*;

use super::*;

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
    /// Bytes short of room for the packet as a reference (0: room for anything).
    short: usize,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0usize..4,
        // mostly a bulk flow's full segments, of one size, and some of any size
        prop_oneof![3 => Just(1200usize), 1 => 0usize..1400],
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![4 => Just(None), 1 => any::<u16>().prop_map(Some)],
        prop_oneof![4 => Just(0x10u8), 1 => Just(0x18), 1 => any::<u8>().prop_map(|f| f & !0x20)],
        prop_oneof![3 => 0u32..3, 1 => any::<u32>()],
        prop_oneof![3 => Just(0u32), 1 => any::<u32>()],
        prop_oneof![3 => 0u16..2, 1 => any::<u16>()],
        any::<u16>(),
        prop::bool::weighted(0.05),
        prop_oneof![4 => Just(0usize), 1 => 1usize..80],
    )
        .prop_map(
            |(flow, len, ack, window, flags, tsval, tsecr, id, sum, sack, short)| Step {
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
                short,
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
        v7 in any::<bool>(),
    ) {
        let format = if v7 { Format::V7 } else { Format::V6 };
        let packets = stream(&steps);
        let mut c = Compressor::new();
        let bodies: Vec<Vec<u8>> = packets
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let room = match steps[i].short {
                    0 => usize::MAX,
                    short => (p.len() + 2).saturating_sub(short),
                };
                let pad_to = steps[i].len % 24;
                let body = packed_in(&mut c, start.wrapping_add(i as u32), p, room, format, pad_to);
                // whole when neither form fits
                assert!(body.len() <= room || body == *p);
                body
            })
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
                    let r = named(gseq, body).wrapping_sub(start) as usize;
                    prop_assert!(lost[r], "{} refused, its reference {} arrived", i, r);
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
        v7 in any::<bool>(),
    ) {
        let format = if v7 { Format::V7 } else { Format::V6 };
        let packets = stream(&steps);
        let mut c = Compressor::new();
        let bodies: Vec<Vec<u8>> = packets
            .iter()
            .enumerate()
            .map(|(i, p)| packed_in(&mut c, i as u32, p, usize::MAX, format, 0))
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
        let reference = packed(&mut c, 0, &bulk(false, true).bytes(), usize::MAX);
        unpacked(&mut d, 0, &reference).expect("whole");
        for (i, b) in bodies.iter().enumerate() {
            let mut b = b.clone();
            if let Some(first) = b.first_mut() {
                *first = [COMPRESSED_TCP, seed[i % 60], COMPACT_TCP | (seed[i % 60] & 0x3f)][i % 3];
            }
            let _ = unpacked(&mut d, i as u32 + 1, &b);
        }
    }

    /// A packet the compressor takes as of its last reference's flow without looking at it
    /// afresh is one whose layout, fields and context are the reference's: changed in any
    /// of its first 64 bytes (or its length), the quick look and the full one agree.
    #[test]
    fn the_quick_look_at_a_packet_of_the_last_flow_agrees_with_the_full_one(
        v6 in any::<bool>(),
        ts in any::<bool>(),
        changes in prop::collection::vec((0usize..64, any::<u8>()), 0..3),
        cut in prop_oneof![4 => Just(0usize), 1 => 1usize..8],
        fix_sum in any::<bool>(),
    ) {
        let mut c = Compressor::new();
        let f = bulk(v6, ts);
        let reference = f.bytes();
        prop_assert!(c.sent_whole(0, &reference));
        let l = layout(&reference).expect("compresses");
        let ctx = context_of(&reference, l);
        c.last = Some((flow_bytes(&reference, l), ctx));
        let mut p = reference.clone();
        for (at, v) in &changes {
            p[*at] = *v;
        }
        p.truncate(p.len() - cut);
        if !v6 && fix_sum {
            // a header changed with its checksum made right again
            p[10..12].fill(0);
            let sum = ipv4_header_checksum(&p);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        let r = c.contexts.0[usize::from(ctx)].as_ref().expect("kept");
        let full = layout(&p)
            .filter(|&pl| pl == l && context_of(&p, pl) == ctx && same_static(&p, &r.headers, l));
        let quick = c.of_last_reference(&p);
        prop_assert_eq!(quick.map(|(ql, _)| ql), full);
        if let Some((_, qctx)) = quick {
            prop_assert_eq!(qctx, ctx);
        }
    }
}
