//! Keys renewed under traffic: nothing sent in the old session is lost, nothing is reset.

use mpt_lab::harness::{tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

#[test]
fn keys_are_renewed_every_ten_seconds_under_iperf3_and_nothing_is_lost() {
    need!("keys_are_renewed_under_iperf3", "iperf3");
    let mut lab =
        Lab::new(&[LinkSpec::shaped(20_000_000), LinkSpec::shaped(20_000_000)]).expect("lab");
    let opts = TunnelOpts {
        rekey_after_s: Some(10),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    let before = [
        lab.status(Side::A).expect("status a"),
        lab.status(Side::B).expect("status b"),
    ];
    let kernel_before = [
        crate::kernel_udp_drops(&lab, Side::A),
        crate::kernel_udp_drops(&lab, Side::B),
    ];
    // 25 s of UDP at 16 Mbit/s each way (two rekeys at least)
    let udp = lab
        .iperf3(
            Side::A,
            &tunnel_addr(Side::B),
            5201,
            &["-u", "-b", "16M", "-l", "1200", "-t", "25", "--bidir"],
        )
        .expect("iperf3 udp through tun");
    let count = |key: &str, field: &str| udp["end"][key][field].as_u64().unwrap_or(0);
    let lost = count("sum", "lost_packets") + count("sum_bidir_reverse", "lost_packets");
    let sent = count("sum", "packets") + count("sum_bidir_reverse", "packets");
    let (a, b) = (
        lab.status(Side::A).expect("status a"),
        lab.status(Side::B).expect("status b"),
    );
    let (pa, pb) = (&a.peers[0], &b.peers[0]);
    // datagrams either kernel dropped for want of socket buffer (at the daemons' path sockets
    // or at iperf3's): a stall of this shared VM, not the rekeys
    let kernel = crate::kernel_udp_drops(&lab, Side::A) - kernel_before[0]
        + crate::kernel_udp_drops(&lab, Side::B)
        - kernel_before[1];
    eprintln!(
        "RESULT rekey: udp {lost}/{sent} lost; kernel UDP buffer drops {kernel}; rekeys a {} b {}, restarts a {} b {}; drops a {}; drops b {}",
        pa.rekeys,
        pb.rekeys,
        pa.restarts,
        pb.restarts,
        crate::nonzero_drops(&a.tunnel.drops),
        crate::nonzero_drops(&b.tunnel.drops)
    );
    if kernel > 0 {
        eprintln!("NOTE: the kernels dropped {kernel} datagrams for want of socket buffer (a stall of the machine); iperf3's loss may include them");
    }
    assert!(
        count("sum_bidir_reverse", "packets") > 15_000,
        "no traffic from b: {}",
        udp["end"]
    );
    assert!(sent > 60_000, "iperf3 sent only {sent} datagrams");
    assert!(
        pa.rekeys >= 2 && pb.rekeys >= 2,
        "rekeys a {} b {}",
        pa.rekeys,
        pb.rekeys
    );
    assert_eq!((pa.restarts, pb.restarts), (0, 0));
    for (side, was, st) in [("a", &before[0], &a), ("b", &before[1], &b)] {
        assert_ne!(
            was.peers[0].session, st.peers[0].session,
            "{side}: the session was not renewed"
        );
        let (d0, d) = (&was.tunnel.drops, &st.tunnel.drops);
        assert_eq!(
            (
                d.unknown_session - d0.unknown_session,
                d.replayed - d0.replayed,
                d.bad_tag - d0.bad_tag,
                d.no_session - d0.no_session
            ),
            (0, 0, 0, 0),
            "{side}: datagrams lost to the rekeys: {d:?}"
        );
    }
    // at 16 of 40 Mbit/s each way nothing should be lost at all, but what the kernels dropped
    assert!(
        lost.saturating_sub(kernel) * 1000 <= sent,
        "{lost} of {sent} lost ({kernel} dropped by the kernels)"
    );
}
