use std::time::Duration;

use mpt_core::{PathId, Time};

use super::{MaxAge, ResendBuffer, RESEND_BYTES, RESEND_KEPT};

const AGE: MaxAge = MaxAge {
    packet: Duration::from_secs(1),
    reference: Duration::from_secs(1),
};

fn fill(buf: &mut ResendBuffer, from: u32, count: u32, len: usize) {
    let packet = vec![0xab; len];
    for s in from..from + count {
        buf.keep(PathId(0), s as u16, s, Time::ZERO, &packet, false);
    }
}

#[test]
fn full_size_packets_are_kept_within_the_byte_bound_newest_first() {
    let mut buf = ResendBuffer::default();
    fill(&mut buf, 0, 10_000, 1500);
    assert!(buf.bytes() <= RESEND_BYTES, "{} bytes", buf.bytes());
    let kept = buf.kept();
    assert_eq!(
        kept,
        RESEND_BYTES / 1536,
        "slots of 1536 bytes fill the bound"
    );
    // the newest are there, the oldest are not
    assert!(buf.take(PathId(0), 9_999, Time::ZERO, AGE).is_some());
    let oldest_kept = 10_000 - kept as u32;
    assert!(buf
        .take(PathId(0), oldest_kept as u16, Time::ZERO, AGE)
        .is_some());
    assert!(buf
        .take(PathId(0), (oldest_kept - 1) as u16, Time::ZERO, AGE)
        .is_none());
}

#[test]
fn small_packets_fill_every_slot() {
    let mut buf = ResendBuffer::default();
    fill(&mut buf, 0, 5000, 100);
    assert_eq!(buf.kept(), RESEND_KEPT);
    assert_eq!(buf.bytes(), RESEND_KEPT * 512);
}

#[test]
fn a_ring_of_small_packets_shrinks_when_large_ones_come_and_allocates_nothing_then() {
    let mut buf = ResendBuffer::default();
    fill(&mut buf, 0, 5000, 100);
    fill(&mut buf, 5000, 20_000, 1500);
    assert!(buf.bytes() <= RESEND_BYTES, "{} bytes", buf.bytes());
    assert_eq!(buf.kept(), RESEND_BYTES / 1536);
    let bytes = buf.bytes();
    // a steady stream goes round the ring it has
    fill(&mut buf, 25_000, 20_000, 1500);
    assert_eq!(buf.bytes(), bytes);
    assert!(buf
        .take(PathId(0), 44_999u32 as u16, Time::ZERO, AGE)
        .is_some());
    assert_eq!(
        buf.reference_sent(1),
        None,
        "a search of a ring that shrank stays within it"
    );
}
