//! Streams that do not back off (video calls, games, a tunnel inside the tunnel) over paths
//! whose rates mptd learns: what they lose, and whether they arrive in order.

use std::time::Duration;

use mpt_lab::harness::{Lab, Side, TunnelOpts};

use crate::{four_paths, need};

/// A stream that does not back off (a video call, a game, a tunnel inside the tunnel) on the
/// daemon's defaults, nothing configured per path: 40 Mbit/s of 1200-byte UDP datagrams over
/// 20/20/10/10 Mbit/s, and halfway through path 0 halves to 10 Mbit/s, so that the stream is
/// two thirds of the paths' capacity and then 80 % of it. At most 0.1 % may be lost (beside
/// what B's kernel drops for a full socket buffer: the machine's, counted apart), and none
/// may arrive out of order (counted by the receiver, from numbers the datagrams carry): the
/// learned rates trust a 10 Mbit/s path with up to a quarter more than it carried, so the
/// paths of 10 Mbit/s run near full and now and then lose a datagram, which resending brings
/// back late, and the datagrams behind it wait for it.
///
/// A stall here: the sender fell 50 ms or more behind its schedule, then sent what it owed at
/// once, a burst the paths' queues need not hold ([`crate::measured_telling_stalls`]).
#[test]
fn a_udp_stream_at_80_percent_of_the_paths_on_defaults_loses_nothing_when_a_path_halves() {
    need!("udp_on_defaults", "tc");
    crate::measured_telling_stalls("udp_on_defaults", udp_at_80_percent_once);
}

/// How far behind its schedule the sender may fall before its catching up counts as a burst
/// of the machine's making: as much of the stream as the paths' `tbf` queues hold (50 ms at
/// their rates). Passing runs fall 10-20 ms behind.
const SENDER_STALL: Duration = Duration::from_millis(50);

/// The measurement's verdict: the bound missed, and whether the sender stalled.
fn udp_at_80_percent_once() -> Result<(), (String, bool)> {
    let mut lab = Lab::new(&four_paths()).expect("lab");
    // the daemon's defaults: `adaptive`, no path's rate configured (the lab's are `rate` with
    // each path's rate written)
    let opts = TunnelOpts {
        scheduler: "adaptive".into(),
        configure_rates: false,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let kernel_before = crate::kernel_udp_drops(&lab, Side::B);
    let before = lab.status(Side::B).expect("status");
    const SECS: u64 = 20;
    let (sent, got, out_of_order, behind) = std::thread::scope(|s| {
        let lab = &lab;
        s.spawn(move || {
            std::thread::sleep(Duration::from_secs(SECS / 2));
            lab.reshape(0, 10_000_000, 20_000_000)
                .expect("halve path 0");
        });
        crate::classes::numbered_udp_timed(lab, 5901, 40_000_000, SECS, 1200)
    });
    let kernel = crate::kernel_udp_drops(&lab, Side::B) - kernel_before;
    let (a, b) = (
        lab.status(Side::A).expect("status"),
        lab.status(Side::B).expect("status"),
    );
    let r = (&b.tunnel.reseq, &before.tunnel.reseq);
    let lost = sent.saturating_sub(got);
    let late = r.0.late - r.1.late;
    let waited = r.0.waited_in_order - r.1.waited_in_order;
    eprintln!(
        "RESULT udp on defaults: {got}/{sent} 1200-byte datagrams at 40 Mbit/s over 20/20/10/10 (path 0 halved at {} s) arrived, {lost} lost ({:.3} %), {out_of_order} out of order at the receiver; {late} came late to B's resequencer, {waited} waited for them; paths lost {:?}, rates learned {:?} Mbit/s; kernel drops at B {kernel}; the sender at most {behind:?} behind; A's drops: {}",
        SECS / 2,
        lost as f64 * 100.0 / sent.max(1) as f64,
        b.paths.iter().map(|p| p.lost).collect::<Vec<_>>(),
        a.paths
            .iter()
            .map(|p| p.rate_bps.unwrap_or(0) as f64 / 1e6)
            .collect::<Vec<_>>(),
        crate::nonzero_drops(&a.tunnel.drops),
    );
    // what B's kernel dropped for a full socket buffer is the machine's (a stall of this
    // shared VM starves the daemon), counted apart; the tunnel's losses are the rest
    let tunnel_lost = lost.saturating_sub(kernel);
    let stalled = behind >= SENDER_STALL;
    if tunnel_lost * 1000 > sent {
        return Err((
            format!(
                "{lost} of {sent} lost, {tunnel_lost} of them not dropped by B's kernel: more \
                 than 0.1 %"
            ),
            stalled,
        ));
    }
    if out_of_order > 0 {
        return Err((
            format!(
                "{out_of_order} of {sent} arrived out of order ({late} came late to the \
                 resequencer, {waited} waited for them)"
            ),
            stalled,
        ));
    }
    crate::headline(
        "streams",
        "a UDP stream that does not back off, on defaults (`adaptive`, no rates): 40 Mbit/s of \
         1200-byte datagrams over 20/20/10/10 Mbit/s, one path halved mid-stream \
         (`tests/e2e/streams.rs`; the receiver counts by the datagrams' numbers)",
        &format!(
            "**{lost} lost, {out_of_order} out of order** of {sent} in {SECS} s ({kernel} dropped \
             by the receiving kernel for a full socket buffer)"
        ),
    );
    Ok(())
}

/// Pacing (`connection.pace = true`, nothing configured per path): a UDP stream at 1.5 times
/// what two 20 Mbit/s paths carry. Once mptd has seen each path full, the excess waits in
/// mptd and is dropped there (counted as `drops.paced`, before it is numbered) instead of in
/// the links' queues: over the last 10 of 14 s the links' `tbf` drops at most 0.1 % of what
/// the stream sent, and the paths stay full.
#[test]
fn paced_the_excess_of_a_stream_faster_than_the_paths_is_dropped_in_mptd_not_in_the_links() {
    need!("paced_excess", "tc");
    crate::measured_twice(
        "paced_the_excess_of_a_stream_faster_than_the_paths_is_dropped_in_mptd_not_in_the_links",
        paced_excess_once,
    );
}

fn paced_excess_once() {
    let paths = [20_000_000, 20_000_000].map(mpt_lab::harness::LinkSpec::shaped);
    let mut lab = Lab::new(&paths).expect("lab");
    let opts = TunnelOpts {
        scheduler: "adaptive".into(),
        configure_rates: false,
        pace: Some(true),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let counts = |lab: &Lab| {
        let tbf: u64 = (0..2).map(|i| lab.tbf(Side::A, i).expect("tbf").1).sum();
        let paced = lab.status(Side::A).expect("status").tunnel.drops.paced;
        (tbf, paced)
    };
    const SECS: u64 = 14;
    const LEARN: u64 = 4;
    let (rate, len) = (60_000_000, 1200);
    let ((sent, got, _), learned) = std::thread::scope(|s| {
        let lab = &lab;
        let learned = s.spawn(move || {
            std::thread::sleep(Duration::from_secs(LEARN));
            counts(lab)
        });
        let r = crate::classes::numbered_udp(lab, 5902, rate, SECS, len);
        (r, learned.join().expect("counts"))
    });
    let (tbf, paced) = counts(&lab);
    let (tbf, paced) = (tbf - learned.0, paced - learned.1);
    let sent_since = sent * (SECS - LEARN) / SECS;
    let mbit = got as f64 * len as f64 * 8.0 / SECS as f64 / 1e6;
    eprintln!(
        "RESULT paced excess: {got}/{sent} datagrams of {len} bytes at {} Mbit/s over 20+20 Mbit/s arrived ({mbit:.1} Mbit/s); over the last {} s the links dropped {tbf} and mptd {paced}; A's drops: {}",
        rate / 1_000_000,
        SECS - LEARN,
        crate::nonzero_drops(&lab.status(Side::A).expect("status").tunnel.drops),
    );
    assert!(
        tbf * 1000 <= sent_since,
        "the links dropped {tbf} of about {sent_since} datagrams once the paths were learned"
    );
    assert!(paced > 0, "mptd dropped none of the excess");
    assert!(mbit > 30.0, "paced below the paths: {mbit:.1} Mbit/s");
}
