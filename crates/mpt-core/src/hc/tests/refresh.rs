//! When a flow gets a new reference: its compressed headers outgrew the size its segments
//! were cut for, or have no room left to grow.

use super::*;

/// A bulk flow's compressor after its first packet went whole as its reference (global
/// sequence 0), the flow's next packet, its hash and context, and the room its segments are
/// cut for: 13 bytes of compressed headers.
fn flow_with_reference() -> (Compressor, Tcp, u32, usize, usize) {
    let mut c = Compressor::new();
    let p = bulk(false, true);
    let full = p.bytes();
    let flow = flow_hash(&full).expect("TCP");
    assert!(c.sent_whole(0, &full));
    let cut_for = full.len() - 52 + 13;
    (c, p, flow, flow as usize % CONTEXTS, cut_for)
}

#[test]
fn a_flow_whose_compressed_headers_stopped_fitting_is_not_ready_until_a_new_reference() {
    // The segments were cut for 13 bytes of compressed headers; the fields that changed since
    // the reference take more (a window, flags, timestamps far on): the packet goes whole, in
    // pieces, which is no reference. Were the flow still ready, the driver would cut no
    // segment to go whole, and every packet after it would go in pieces too.
    let (mut c, mut p, flow, ctx, cut_for) = flow_with_reference();
    p.seq = p.seq.wrapping_add(1380);
    assert!(c.compress(1, &p.bytes(), cut_for, Format::V7, 13).is_some());
    // a path too small for it says nothing of the reference: the flow stays ready
    p.seq = p.seq.wrapping_add(1380);
    assert_eq!(c.compress(2, &p.bytes(), 1000, Format::V7, 13), None);
    let mut ready = [0; CONTEXTS];
    c.ready(3, &mut ready);
    assert_eq!(ready[ctx], flow);
    p.seq = p.seq.wrapping_add(1_000_000);
    p.id = p.id.wrapping_add(3000);
    p.window = 9999;
    p.flags = 0x18;
    p.ts = Some((90_000, 80_000));
    assert_eq!(c.compress(3, &p.bytes(), cut_for, Format::V7, 13), None);
    assert_eq!(c.counts().too_long, 2);
    c.ready(3, &mut ready);
    assert_eq!(ready[ctx], 0, "a new reference is due");
    // the driver cuts the next one to go whole: it becomes the reference
    let whole = p.bytes();
    assert_eq!(c.compress(4, &whole, whole.len(), Format::V7, 13), None);
    assert!(c.sent_whole(4, &whole));
    c.ready(5, &mut ready);
    assert_eq!(ready[ctx], flow);
}

#[test]
fn a_flow_whose_compressed_header_has_no_room_left_to_grow_gets_a_new_reference_while_it_fits() {
    // Segments are cut for 13 bytes of compressed headers. Once what changed since the
    // reference takes all 13 of its own, the next change would not fit, and that packet
    // would go whole, in pieces: the flow gets a new reference before then.
    let (mut c, mut p, flow, ctx, cut_for) = flow_with_reference();
    let mut ready = [0; CONTEXTS];
    // a burst's segments one after another: short headers, padded; the flow stays ready
    for gseq in 1..10 {
        p.seq = p.seq.wrapping_add(1380);
        p.id = p.id.wrapping_add(1);
        let (h, _) = c
            .compress(gseq, &p.bytes(), cut_for, Format::V7, 13)
            .expect("compressed");
        assert_eq!(h.len(), 13);
    }
    c.ready(10, &mut ready);
    assert_eq!(ready[ctx], flow);
    // the acknowledgement far on (4 bytes), a new window (2) and flags (1): with the marker,
    // distance, mask, sequence (1 each) and checksum (2), 13 bytes of its own
    p.seq = p.seq.wrapping_add(1380);
    p.id = p.id.wrapping_add(1);
    p.ack = p.ack.wrapping_add(3_000_000);
    p.window = 9999;
    p.flags = 0x18;
    let (h, _) = c
        .compress(10, &p.bytes(), cut_for, Format::V7, 13)
        .expect("it still fits");
    assert_eq!(h.len(), 13);
    assert_eq!(c.counts().too_long, 0);
    c.ready(11, &mut ready);
    assert_eq!(ready[ctx], 0, "a new reference is due");
}
