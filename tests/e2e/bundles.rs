use mpt_lab::experiments::runs::{loss_pct, udp_sent, Arrivals};
use mpt_lab::harness::{tunnel_addr, Impair, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

/// 180 kbit/s of voice-sized (160-byte) datagrams over a 256 kbit/s serial line. One datagram
/// per packet, the tunnel's 82 bytes each would take ~300 kbit/s of the line and lose about
/// a sixth; bundled while the line is busy (all but each bundle's first without their
/// headers), they fit. Run with bundling on and off, in one lab; what arrives is counted at
/// B (the datagrams that reach its stack).
#[test]
fn small_packets_share_datagrams_while_their_line_is_busy() {
    need!("bundles", "iperf3");
    let serial = Impair {
        rate_bps: Some(256_000),
        ..Impair::default()
    };
    let mut lab = Lab::new(&[LinkSpec {
        rate_bps: None,
        ab: serial,
        ba: serial,
    }])
    .expect("lab");
    let mut port = 5700;
    let mut run = |lab: &mut Lab, bundle: bool| {
        let opts = TunnelOpts {
            bundle: Some(bundle),
            ..TunnelOpts::default()
        };
        lab.start_tunnel(&opts).expect("tunnel");
        port += 1;
        let arrivals = Arrivals::start(lab, port, port).expect("nft counter");
        let v = lab
            .iperf3(
                Side::A,
                &tunnel_addr(Side::B),
                port,
                &["-u", "-b", "180k", "-l", "160", "-t", "6"],
            )
            .expect("iperf3");
        let sent = udp_sent(&v);
        let received = arrivals.count(lab, 160).expect("nft count");
        let st = lab.status(Side::A).expect("status A");
        let drops = lab.status(Side::B).expect("status B").tunnel.drops;
        lab.stop_mptd(Side::A).expect("stop A");
        lab.stop_mptd(Side::B).expect("stop B");
        let loss = loss_pct(sent, received);
        eprintln!(
            "RESULT bundles {}: {sent} datagrams sent, {received} received ({loss:.2} % lost); A sent {} bundles carrying {} of {} packets, {} without their headers; B's malformed drops {}",
            if bundle { "on" } else { "off" },
            st.tunnel.bundles_sent,
            st.tunnel.bundled_packets,
            st.tunnel.tx_packets,
            st.tunnel.compressed_packets,
            drops.malformed()
        );
        assert!(sent > 500, "iperf3 sent only {sent} datagrams");
        assert_eq!(drops.malformed(), 0, "B refused datagrams as malformed");
        (
            loss,
            st.tunnel.bundles_sent,
            st.tunnel.bundled_packets,
            st.tunnel.tx_packets,
            st.tunnel.compressed_packets,
        )
    };
    let (loss_on, bundles, bundled, packets, compressed) = run(&mut lab, true);
    let (loss_off, bundles_off, _, _, _) = run(&mut lab, false);
    assert!(bundles > 0, "no bundle sent");
    assert!(
        bundled * 2 > packets,
        "only {bundled} of {packets} packets bundled"
    );
    // iperf3's datagrams are one flow: (nearly) all but each bundle's first go without
    // their headers (342 of 345 in a run of 2026-11-26)
    assert!(
        compressed * 10 >= (bundled - bundles) * 9,
        "only {compressed} of the {bundled} packets in {bundles} bundles compressed"
    );
    assert!(loss_on < 3.0, "{loss_on:.2} % lost with bundling");
    assert_eq!(bundles_off, 0, "bundles sent with bundling off");
    assert!(
        loss_off > loss_on,
        "bundling off lost {loss_off:.2} %, on {loss_on:.2} %"
    );
}
