//! A driver that turns arbitrary bytes into a sequence of resequencer operations and checks
//! the invariants after each one. Run by the cargo-fuzz target `reseq_ops` (`fuzz/`) and by a
//! property test in the normal suite.

use std::time::Duration;

use mpt_core::{PathId, Time};

use crate::{Config, PacketMeta, Resequencer};

/// The delivery callback for every call but a push: what comes out was held, so it must have
/// been kept.
fn held_out(out: &mut Vec<u32>) -> impl FnMut((u32, bool)) + '_ {
    move |(s, kept)| {
        assert!(kept, "seq {s} was held without being kept");
        out.push(s)
    }
}

/// What holds after every operation.
fn continue_checks<P>(r: &Resequencer<P>, window: usize) {
    assert!(
        r.held() <= window.max(1),
        "held {} > window {window}",
        r.held()
    );
}

/// Interpret `data` as a configuration and a sequence of operations; panics when an invariant
/// breaks: more held than the window, a packet delivered twice, or out of order within a
/// session without being counted late, a deadline in the past left pending, counters that do
/// not add up, a packet held without being [kept](Resequencer::push_keeping) (each payload is
/// its seq and whether it was kept: a borrowed one may only come out of its own push).
pub fn run_ops(data: &[u8]) {
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let (Some(w), Some(p), Some(t)) = (next(), next(), next()) else {
        return;
    };
    let window = usize::from(w) * 4;
    let paths = usize::from(p % 8) + 1;
    let timeout = Duration::from_micros(u64::from(t) * 100 + 1);
    let mut r: Resequencer<(u32, bool)> = Resequencer::new(Config {
        window,
        timeout,
        paths,
    });
    if p & 0x80 != 0 {
        // resending on: lost gaps wait for their packets to come again, or (as the tunnel
        // sets it) not at all
        let wait = if p & 0x40 != 0 {
            Duration::ZERO
        } else {
            timeout / 2
        };
        r.set_repair(Some(wait));
    }
    let mut resent = 0u64;
    let mut gaps = Vec::new();
    let mut now = Time::ZERO;
    let mut seq: u32 = 0;
    let mut path_seq = [0u16; 8];
    let mut out: Vec<u32> = Vec::new();
    let mut last: Option<u32> = None;
    let mut pushed = 0u64;
    let mut invalid = 0u64;
    let mut jumped = false;
    while let Some(op) = next() {
        let arg = next().unwrap_or(0);
        let out_of_order = r.stats().total.delivered_out_of_order;
        let path = usize::from(arg % 9); // one past the last path: an invalid id
        match op % 8 {
            // a packet: the sequence moves by a small signed step, sometimes a huge one
            0..=3 => {
                let step = i64::from(arg as i8);
                let jump = if op & 0x80 != 0 { 1u32 << 31 } else { 0 };
                jumped |= jump != 0;
                seq = seq.wrapping_add(step as u32).wrapping_add(jump);
                let ps = path_seq.get(path).copied().unwrap_or(0);
                if let Some(s) = path_seq.get_mut(path) {
                    *s = s.wrapping_add(1);
                }
                let meta = PacketMeta {
                    path: PathId(path as u8),
                    seq,
                    path_seq: ps,
                    sent_us: now.wire_micros(),
                    len: 100,
                };
                if op & 0x60 == 0x20 {
                    // sent again because it was asked for: fills its gap, is not measured
                    let started = r.next_seq().is_some();
                    r.push_resent(
                        now,
                        meta,
                        (seq, false),
                        |(s, _)| (s, true),
                        &mut |(s, _)| out.push(s),
                    );
                    resent += u64::from(path < paths && started);
                    r.take_gaps(&mut gaps);
                    assert!(gaps.len() <= crate::MAX_GAPS);
                    gaps.clear();
                } else if op & 0x40 != 0 {
                    // express: delivered at once, ahead of order (left out of the order
                    // check), never held; what it releases after it comes in order
                    let mut own = false;
                    r.push_express(now, meta, (seq, false), &mut |(s, kept)| {
                        if !kept {
                            assert_eq!(s, seq, "a borrowed payload came out of another push");
                            assert!(!own, "an express packet delivered twice");
                            own = true;
                        } else {
                            out.push(s)
                        }
                    });
                } else {
                    let mut borrowed_out = 0;
                    r.push_keeping(
                        now,
                        PacketMeta {
                            path: PathId(path as u8),
                            seq,
                            path_seq: ps,
                            sent_us: now.wire_micros(),
                            len: 100,
                        },
                        (seq, false),
                        |(s, _)| (s, true),
                        &mut |(s, kept)| {
                            if !kept {
                                assert_eq!(s, seq, "a borrowed payload came out of another push");
                                borrowed_out += 1;
                            }
                            out.push(s)
                        },
                    );
                    assert!(borrowed_out <= 1, "one borrowed payload delivered twice");
                }
                if op & 0x60 != 0x20 {
                    pushed += 1;
                    invalid += u64::from(path >= paths);
                }
            }
            4 => {
                let ps = path_seq.get(path).copied().unwrap_or(0);
                r.fence(
                    now,
                    PathId(path as u8),
                    seq.wrapping_add(u32::from(arg >> 4)),
                    ps,
                    &mut held_out(&mut out),
                );
            }
            5 => r.path_down(now, PathId(path as u8), &mut held_out(&mut out)),
            6 => {
                now = now + Duration::from_micros(u64::from(arg) * 37);
                if let Some(d) = r.poll_timeout() {
                    if d <= now {
                        r.handle_timeout(now, &mut held_out(&mut out));
                        assert!(
                            r.poll_timeout().is_none_or(|d| d > now),
                            "a deadline not after now is still pending"
                        );
                    }
                }
            }
            _ => {
                if arg == 0 {
                    r.reset();
                    last = None;
                    jumped = false;
                    out.clear();
                }
                now = now + Duration::from_micros(u64::from(arg));
            }
        }
        continue_checks(&r, window);
        // After the last one, in serial arithmetic, or counted as delivered out of order (a
        // late packet). Jumps of half the sequence space make the comparison meaningless (the
        // resequencer orders on its own extended numbers).
        let mut behind = 0;
        for &s in &out {
            if let (Some(l), true, false) = (last, window > 0, jumped) {
                if (s.wrapping_sub(l) as i32) <= 0 {
                    behind += 1;
                    continue;
                }
            }
            last = Some(s);
        }
        let counted = r.stats().total.delivered_out_of_order - out_of_order;
        assert!(
            behind <= counted,
            "{behind} delivered out of order, {counted} counted"
        );
        out.clear();
    }
    // every packet pushed is accounted for exactly once
    let t = &r.stats().total;
    let held = r.held() as u64;
    assert_eq!(t.packets + invalid, pushed, "packets counted");
    assert_eq!(
        t.delivered + t.duplicates + t.too_old + t.dropped_on_reset + held,
        t.packets + resent,
        "delivered {} duplicates {} too old {} dropped on reset {} held {held} of {} packets",
        t.delivered,
        t.duplicates,
        t.too_old,
        t.dropped_on_reset,
        t.packets
    );
}
