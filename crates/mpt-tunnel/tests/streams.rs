//! Stream paths (`Transport::Stream`: the driver carries the path's datagrams on TCP or TLS),
//! driven through a simulated pair of connections (`sim`): light traffic keeps off a stream
//! path while a datagram path is up and takes it when it is alone; nothing is kept, asked for
//! or sent again on it, so what its transport lost in a reconnect is given up at once; and its
//! MTU is its ceiling, with no search.

#[allow(dead_code)]
mod sim;

use mpt_core::PathId;
use mpt_tunnel::Transport;
use sim::helpers::{ms, udp};
use sim::{packet, tcp_packet, Pair, Side, LEN};

/// Two paths, path 0 with 10 ms one way, path 1 with 60 ms; `stream` of them carried on a
/// stream at both ends; resending on; keys agreed and both paths' round-trip times measured.
fn pair(seed: u64, stream: usize) -> Pair {
    let cfg = |side| {
        let mut c = sim::config(side, 2, true);
        c.classes = mpt_tunnel::default_classes();
        c.resend = true;
        c
    };
    let mut p = Pair::with(sim::seed(seed), cfg(Side::A), cfg(Side::B));
    for side in [Side::A, Side::B] {
        p.link(side, 0).delay = ms(10);
        p.link(side, 1).delay = ms(60);
        let now = p.now;
        p.ep(side)
            .set_path_transport(now, PathId(stream as u8), Transport::Stream);
    }
    p.run_until(ms(500), Pair::agreed)
        .expect("keys agreed within 500 ms");
    p.run(ms(1000));
    p
}

#[test]
fn light_traffic_keeps_off_a_stream_path_while_a_datagram_path_is_up() {
    // the stream is the nearer path: light traffic still takes the datagram path
    let mut p = pair(71, 0);
    for k in 0..20u32 {
        p.send(Side::A, &packet(1_000_000 + k, 1000))
            .expect("bulk sent");
        let voice = udp(k, 4000, 200, mpt_tunnel::DSCP_EF);
        assert_eq!(
            p.send(Side::A, &voice).expect("voice sent"),
            Some(PathId(1)),
            "voice on the datagram path"
        );
        let dns = udp(k, 53, 80, 0);
        assert_eq!(p.send(Side::A, &dns).expect("dns sent"), Some(PathId(1)));
        p.run(ms(20));
    }
    // the datagram path dies: the stream carries light traffic too
    p.set_up(1, false);
    p.run(ms(1500));
    let voice = udp(99, 4000, 200, mpt_tunnel::DSCP_EF);
    assert_eq!(
        p.send(Side::A, &voice).expect("voice sent"),
        Some(PathId(0)),
        "the stream is the only path up"
    );
    p.run(ms(100));
    assert!(sim::Pair::delivered_numbers(&p, Side::B).contains(&sim::number(&voice)));
}

#[test]
fn nothing_lost_on_a_stream_path_is_asked_for_or_kept_and_the_rest_goes_on_at_once() {
    let mut p = pair(5, 1);
    // a reconnect of the stream loses what was in flight: here two datagrams on path 1
    for round in 0..2u32 {
        p.drop_next(Side::A, 1, 1);
        let start = p.now;
        for k in round * 10..round * 10 + 10 {
            p.send(Side::A, &tcp_packet(k, LEN)).expect("sent");
        }
        p.run(ms(300));
        let delivered = p.delivered_numbers(Side::B);
        eprintln!("round {round}: delivered {delivered:?}");
        assert_eq!(delivered.len() as u32, (round + 1) * 9, "one lost a round");
        let last = p.node(Side::B).delivered.last().expect("delivered").0;
        assert!(
            last.saturating_since(start) < ms(200),
            "nothing waits for the lost one beyond the far path's delay: {:?}",
            last.saturating_since(start)
        );
    }
    let c = p.ep(Side::A).resend_counts(PathId(1));
    assert_eq!(
        (c.requested, c.resent),
        (0, 0),
        "no request for a stream path's loss, nothing kept to send again"
    );
}

#[test]
fn a_stream_path_carries_its_ceiling_at_once_and_searches_again_as_datagrams() {
    let mut p = pair(3, 1);
    let info = p.ep(Side::A).path_info(PathId(1));
    let datagram = p.ep(Side::A).path_info(PathId(0));
    assert!(info.pmtu_found, "no search on a stream");
    assert_eq!(info.pmtu_probes, 0, "no probe on a stream");
    assert!(datagram.pmtu_probes > 0, "the datagram path searched");
    assert_eq!(
        info.datagram_max, datagram.datagram_max,
        "the stream is at the ceiling the datagram path found"
    );
    let now = p.now;
    p.ep(Side::A)
        .set_path_transport(now, PathId(1), Transport::Datagram);
    assert_eq!(p.ep(Side::A).path_transport(PathId(1)), Transport::Datagram);
    let info = p.ep(Side::A).path_info(PathId(1));
    assert!(
        !info.pmtu_found && info.datagram_max < datagram.datagram_max,
        "back on datagrams, the search starts again from the base size: {}",
        info.datagram_max
    );
}
