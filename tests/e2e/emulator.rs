use mpt_lab::harness::{Impair, Lab, LinkSpec, Side};

use crate::need;

/// The userspace link emulator does what it is told: delay within ±1 ms (ping), rate within
/// ±3 % (iperf3), loss within ±0.5 points.
#[test]
fn link_emulator_is_accurate() {
    need!("link_emulator", "iperf3", "ping");
    crate::measured_twice("link_emulator_is_accurate", link_emulator_is_accurate_once);
}

fn link_emulator_is_accurate_once() {
    let delay = Impair {
        delay_ms: 20.0,
        ..Impair::default()
    };
    let lossy = Impair {
        loss_pct: 5.0,
        ..Impair::default()
    };
    let serial = Impair {
        rate_bps: Some(64_000),
        ..Impair::default()
    };
    let paths = vec![
        LinkSpec {
            rate_bps: None,
            ab: delay,
            ba: delay,
        },
        LinkSpec {
            rate_bps: Some(20_000_000),
            ab: Impair {
                delay_ms: 10.0,
                ..Impair::default()
            },
            ba: Impair::default(),
        },
        LinkSpec {
            rate_bps: None,
            ab: lossy,
            ba: Impair::default(),
        },
        LinkSpec {
            rate_bps: None,
            ab: serial,
            ba: serial,
        },
    ];
    let mut lab = Lab::new(&paths).expect("lab");

    // Delay: ping RTT = 2 × 20 ms plus the forwarding cost.
    let avg = lab
        .ping_avg_ms(
            Side::A,
            &lab.path_addr(Side::B, 0),
            &["-c", "20", "-i", "0.05"],
        )
        .expect("ping");
    let one_way = avg / 2.0;

    // Rate: UDP offered above the shaped rate; 1400-byte datagrams are 1442-byte frames.
    let v = lab
        .iperf3(
            Side::A,
            &lab.path_addr(Side::B, 1),
            5401,
            &["-u", "-b", "30M", "-l", "1400", "-t", "6"],
        )
        .expect("iperf3 rate");
    let got = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| v["end"]["sum"]["bits_per_second"].as_f64())
        .expect("bits_per_second");
    let wire = got * 1442.0 / 1400.0;
    let rate_err = (wire - 20e6) / 20e6;

    // Loss: 20 000 datagrams.
    let v = lab
        .iperf3(
            Side::A,
            &lab.path_addr(Side::B, 2),
            5402,
            &["-u", "-b", "8M", "-l", "500", "-t", "10"],
        )
        .expect("iperf3 loss");
    let lost = v["end"]["sum"]["lost_percent"]
        .as_f64()
        .expect("lost_percent");

    // Serial link: a lone 1000-byte ping (1028-byte IP packet + 14 framing) takes
    // 130.5 ms to serialise at 64 kbit/s, each way.
    let serial_rtt = lab
        .ping_avg_ms(
            Side::A,
            &lab.path_addr(Side::B, 3),
            &["-c", "3", "-i", "0.5", "-s", "1000"],
        )
        .expect("ping");
    let serial_expected = 2.0 * (1028.0 + 14.0) * 8.0 / 64.0;

    eprintln!(
        "RESULT emulator: serial 64 kbit/s link: 1000-byte ping RTT {serial_rtt:.1} ms (expected {serial_expected:.1} ms); \
         delay set 20 ms, measured {one_way:.2} ms one way (ping avg {avg:.2} ms RTT); rate set 20 Mbit/s, measured {:.2} Mbit/s on the wire ({:+.2} %); loss set 5 %, measured {lost:.2} %",
        wire / 1e6,
        rate_err * 100.0
    );
    assert!((one_way - 20.0).abs() <= 1.0, "delay {one_way} ms");
    assert!(rate_err.abs() <= 0.03, "rate {:.2} Mbit/s", wire / 1e6);
    assert!((lost - 5.0).abs() <= 0.5, "loss {lost} %");
    assert!(
        (serial_rtt - serial_expected).abs() <= 2.0,
        "serial RTT {serial_rtt} ms, expected {serial_expected} ms"
    );
}
