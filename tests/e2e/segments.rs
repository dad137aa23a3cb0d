//! TCP segments are sized per peer: a server that sends bulk TCP to two sites at once, one
//! whose uplinks carry 1500-byte datagrams and one whose uplinks carry 1280, cuts each site's
//! super-packets for that site's paths. Neither site's segments go in pieces for the other's
//! sizes, and the site with the larger paths does not get segments cut short to the smaller.

use mpt_lab::harness::sites::{Host, Sites};

use crate::need;

/// Site 1's uplinks (both ends of each veth).
const SMALL_MTU: u32 = 1280;

/// What a site's daemon received over a while: datagrams on its paths and their bytes, and
/// the inner packets it delivered (before they are coalesced for the TUN device).
#[derive(Debug, Clone, Copy, Default)]
struct Received {
    datagrams: u64,
    bytes: u64,
    packets: u64,
}

impl std::ops::Sub for Received {
    type Output = Received;
    fn sub(self, o: Received) -> Received {
        Received {
            datagrams: self.datagrams - o.datagrams,
            bytes: self.bytes - o.bytes,
            packets: self.packets - o.packets,
        }
    }
}

fn received(lab: &Sites, k: usize) -> Received {
    let st = lab.status(Host::Site(k)).expect("site status");
    let paths = &st.peers[0].paths;
    Received {
        datagrams: paths.iter().map(|p| p.rx_packets).sum(),
        bytes: paths.iter().map(|p| p.rx_bytes).sum(),
        packets: st.tunnel.delivered,
    }
}

/// The server's view of site `k`'s paths: each one's MTU, and whether its search is over.
fn path_mtus(lab: &Sites, k: usize) -> Vec<(usize, bool)> {
    let server = lab.status(Host::Server).expect("server status");
    let peer = server.peers.iter().find(|p| p.name == format!("site{k}"));
    peer.map(|p| p.paths.iter().map(|x| (x.mtu, x.mtu_found)).collect())
        .unwrap_or_default()
}

/// A site's path MTUs as the Summary says them: "1500/1500".
fn mtu_list(mtus: &[(usize, bool)]) -> String {
    mtus.iter()
        .map(|(m, _)| m.to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// iperf3 downloads (`-R`: the server sends) to each of the first `sites` sites at once, for
/// `secs`: Mbit/s each.
fn downloads(lab: &Sites, sites: usize, secs: u32) -> Vec<f64> {
    let all = [0, 1];
    crate::sites::transfers(lab, &all[..sites], 5301, secs, &["-R"])
        .iter()
        .map(|t| t.mbit)
        .collect()
}

#[test]
fn each_sites_tcp_segments_fit_its_own_paths() {
    need!("segments_per_peer", "iperf3", "nft");
    let mut lab = Sites::new(2, 0).expect("sites lab");
    let router = lab.ns_router();
    let site1 = lab.ns(Host::Site(1));
    lab.router_sh(&format!(
        "ip link set s1u0 mtu {SMALL_MTU}; ip link set s1u1 mtu {SMALL_MTU}; ip -n {site1} link set u0 mtu {SMALL_MTU}; ip -n {site1} link set u1 mtu {SMALL_MTU}"
    ))
    .unwrap_or_else(|e| panic!("setting site1's MTUs (router {router}): {e}"));
    let server = lab.server_config().expect("server config");
    lab.start_mptd(Host::Server, &server).expect("server");
    lab.start_sites(2).expect("sites reach the server");
    // a first transfer, not counted: path MTU discovery searches while data needs it
    downloads(&lab, 2, 3);
    let mtus: Vec<_> = (0..2).map(|k| path_mtus(&lab, k)).collect();
    // site 0 alone, then both at once
    let before = received(&lab, 0);
    let alone = downloads(&lab, 1, 3)[0];
    let alone_got = received(&lab, 0) - before;
    let before = [received(&lab, 0), received(&lab, 1)];
    let rates = downloads(&lab, 2, 4);
    let got = [received(&lab, 0) - before[0], received(&lab, 1) - before[1]];
    let avg = |r: &Received| r.bytes as f64 / r.datagrams.max(1) as f64;
    let per = |r: &Received| r.datagrams as f64 / r.packets.max(1) as f64;
    eprintln!(
        "RESULT segments: site0 alone: {alone:.1} Mbit/s, {} inner packets in datagrams of {:.0} bytes on average, {:.3} datagrams a packet",
        alone_got.packets,
        avg(&alone_got),
        per(&alone_got)
    );
    for k in 0..2 {
        eprintln!(
            "RESULT segments: site{k} beside the other (path MTUs at the server, found: {:?}): {:.1} Mbit/s, {} inner packets in datagrams of {:.0} bytes on average, {:.3} datagrams a packet",
            mtus[k],
            rates[k],
            got[k].packets,
            avg(&got[k]),
            per(&got[k])
        );
    }
    for k in 0..2 {
        assert!(rates[k] > 2.0, "site{k}'s download collapsed: {rates:?}");
        // a packet in pieces is two datagrams or more: nearly none are (control and the odd
        // packet longer than a path, such as a retransmission cut before the MTU was known)
        assert!(
            per(&got[k]) < 1.02,
            "site{k} got its packets in pieces: {:.3} datagrams a packet ({:?})",
            per(&got[k]),
            got[k]
        );
    }
    // site 0's segments are not cut to what site 1's paths carry: its datagrams are as long
    // beside site 1's transfer as alone
    assert!(
        avg(&got[0]) > avg(&alone_got) - 16.0,
        "site0's datagrams average {:.0} bytes beside site1's transfer, {:.0} alone: its segments were cut for site1's paths",
        avg(&got[0]),
        avg(&alone_got)
    );
    crate::headline(
        "segments",
        &format!(
            "a server sending bulk TCP to a site with paths of MTU {} and one with {} at once \
             (`tests/e2e/segments.rs`)",
            mtu_list(&mtus[0]),
            mtu_list(&mtus[1])
        ),
        &format!(
            "each site's segments fit its own paths: the first's datagrams **{:.0} bytes** on \
             average beside the other's transfer ({:.0} alone), {:.3} / {:.3} datagrams a packet",
            avg(&got[0]),
            avg(&alone_got),
            per(&got[0]),
            per(&got[1])
        ),
    );
}
