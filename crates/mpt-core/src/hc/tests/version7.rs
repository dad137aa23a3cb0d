//! Version 7's format: the sequence number in segments, and padding with longer numbers.

use super::*;

#[test]
fn version_7_counts_a_sequence_number_that_moved_by_whole_segments_in_segments() {
    let (mut c, mut d) = (Compressor::new(), Decompressor::new());
    let mut p = bulk(false, false);
    let reference = packed(&mut c, 0, &p.bytes(), usize::MAX);
    unpacked(&mut d, 0, &reference).expect("whole");
    // 60 segments on, 59 after the end of the reference's (2 × 59 + 1): 82 800 bytes take 3
    // bytes as a delta, 1 in segments; an identification 60 on (one a segment) goes without
    // its field
    p.seq = p.seq.wrapping_add(60 * 1380);
    p.id = p.id.wrapping_add(60);
    let bytes = p.bytes();
    let body = packed(&mut c, 1, &bytes, usize::MAX);
    assert_eq!(body[2], M_SEQ | M_SEGS, "{:?}", &body[..8]);
    assert_eq!(body[3], 119);
    assert_eq!(
        body.len() - p.payload.len(),
        6,
        "marker, distance, mask, segments, checksum"
    );
    assert_eq!(unpacked(&mut d, 1, &body), Ok(bytes));
    // a shorter segment 10 on: 10 × 1380 after the reference's start is 15 of 920 (2 × 15)
    let mut short = p.clone();
    short.seq = short.seq.wrapping_sub(50 * 1380);
    short.id = short.id.wrapping_sub(45);
    short.payload.truncate(920);
    let bytes = short.bytes();
    let body = packed(&mut c, 2, &bytes, usize::MAX);
    assert_eq!(&body[2..4], &[M_SEQ | M_SEGS, 30]);
    assert_eq!(unpacked(&mut d, 2, &body), Ok(bytes));
    // a retransmission of the segment before the reference: behind it, a delta in bytes
    p.seq = p.seq.wrapping_sub(61 * 1380);
    let bytes = p.bytes();
    let body = packed(&mut c, 3, &bytes, usize::MAX);
    assert_eq!(body[2], M_ID | M_SEQ);
    assert_eq!(unpacked(&mut d, 3, &body), Ok(bytes));
    // the segment right after the reference, its identification the reference's: 2 × 0 + 1,
    // and an identification delta of 0 in its field
    p.seq = p.seq.wrapping_add(2 * 1380);
    p.id = p.id.wrapping_sub(60);
    let bytes = p.bytes();
    let body = packed(&mut c, 4, &bytes, usize::MAX);
    assert_eq!(&body[2..5], &[M_ID | M_SEQ | M_SEGS, 0, 1]);
    assert_eq!(unpacked(&mut d, 4, &body), Ok(bytes));
    // not a whole number of this packet's segments: bytes
    p.seq = p.seq.wrapping_add(3 * 1380 + 700);
    let bytes = p.bytes();
    let body = packed(&mut c, 5, &bytes, usize::MAX);
    assert_eq!(body[2], M_SEQ);
    assert_eq!(unpacked(&mut d, 5, &body), Ok(bytes));
}

#[test]
fn version_7_pads_with_longer_numbers_to_any_size_from_its_own_to_nineteen() {
    // nineteen: IPv6 without timestamps has three numbers, the distance, sequence and
    // acknowledgement (1 + 5 + 1 + 5 + 5 + 2)
    for (v6, ts) in [(false, true), (true, true), (false, false), (true, false)] {
        let mut p = bulk(v6, ts);
        let r = p.clone();
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        unpacked(&mut d, 0, &packed(&mut c, 0, &r.bytes(), usize::MAX)).expect("whole");
        for (gseq, change) in (1..).zip(0..4) {
            p.seq = p.seq.wrapping_add(1380);
            match change {
                1 => p.window = p.window.wrapping_add(9),
                2 => p.ack = p.ack.wrapping_add(70_000),
                3 => p.flags = 0x18,
                _ => {}
            }
            let bytes = p.bytes();
            let own = packed(&mut c.clone(), gseq, &bytes, usize::MAX).len() - p.payload.len();
            for pad_to in 0..=19 {
                // each against the one reference (not used up)
                let mut c = c.clone();
                let body = packed_in(&mut c, gseq, &bytes, usize::MAX, Format::V7, pad_to);
                let headers = body.len() - p.payload.len();
                assert_eq!(headers, own.max(pad_to), "v6 {v6} ts {ts} change {change}");
                assert_eq!(unpacked(&mut d, gseq, &body), Ok(bytes.clone()));
            }
        }
    }
}
