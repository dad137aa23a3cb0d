//! One server, many sites behind NAT (`mpt_lab::harness::sites`): a server that listens on
//! one address, two sites with two uplinks each behind a router that masquerades them with
//! random source ports, and a third site whose key the server does not know.

use std::time::{Duration, Instant};

use mpt_lab::harness::iperf3_bps;
use mpt_lab::harness::sites::{tunnel_ip, Host, Sites};

use crate::need;

/// Two known sites (and one stranger) with their tunnels up.
fn sites_up() -> Sites {
    let mut lab = Sites::new(2, 1).expect("sites lab");
    let server = lab.server_config().expect("server config");
    lab.start_mptd(Host::Server, &server).expect("server");
    for k in 0..3 {
        let c = lab.site_config(k).expect("site config");
        lab.start_mptd(Host::Site(k), &c).expect("site");
    }
    for k in 0..2 {
        let took = lab
            .ping_until(
                Host::Site(k),
                &tunnel_ip(Host::Server),
                Duration::from_secs(10),
            )
            .expect("site reaches the server");
        eprintln!("RESULT sites: site{k} reached the server through the NAT {took:?} after start");
    }
    lab
}

#[test]
fn sites_behind_nat_reach_one_server_and_each_other_and_a_stranger_gets_nothing() {
    need!("sites_behind_nat", "nft", "iperf3", "ping");
    let mut lab = sites_up();
    let st = lab.status(Host::Server).expect("server status");
    assert_eq!(st.peers.len(), 2);
    for p in &st.peers {
        assert!(p.keys_agreed, "{}: no session: {p:?}", p.name);
        // both uplinks of each site are up at the server, each from the router's address
        let up: Vec<_> = p.paths.iter().filter(|x| x.state == "up").collect();
        assert_eq!(up.len(), 2, "{}: {:?}", p.name, p.paths);
        for x in &p.paths {
            assert!(
                x.remote.starts_with("198.18.100.254:"),
                "{}: {} seen from {}",
                p.name,
                x.name,
                x.remote
            );
        }
    }
    // site to site, through the server
    assert!(
        lab.ping(Host::Site(0), &tunnel_ip(Host::Site(1))),
        "site0 cannot reach site1 through the server"
    );
    // the server reaches site 0's LAN: its `allowed` routed there
    assert!(
        lab.ping(Host::Server, "198.18.200.1"),
        "the server cannot reach site0's LAN"
    );
    // the stranger got no session, and the server counted its handshakes
    let stranger = lab.status(Host::Site(2)).expect("stranger status");
    assert!(!stranger.tunnel.keys_agreed);
    let d = lab.status(Host::Server).expect("status").tunnel.drops;
    assert!(d.unknown_key >= 1, "unknown keys not counted: {d:?}");
    eprintln!(
        "RESULT sites: the stranger's handshakes refused and counted: unknown_key {}",
        d.unknown_key
    );

    // both sites send bulk TCP to the server at once
    let srv = tunnel_ip(Host::Server);
    let mut servers = Vec::new();
    for port in [5201, 5202] {
        let mut c = lab.cmd(Host::Server, "iperf3");
        c.args(["-s", "-1", "-B", &srv, "-p", &port.to_string()]);
        servers.push(
            lab.spawn(Host::Server, &format!("iperf3-{port}"), &mut c)
                .expect("iperf3 -s"),
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let clients: Vec<_> = [(0, 5201), (1, 5202)]
        .iter()
        .map(|&(k, port)| {
            lab.cmd(Host::Site(k), "iperf3")
                .args(["-c", &srv, "-p", &port.to_string(), "-t", "3", "-J"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("iperf3 -c")
        })
        .collect();
    let rates: Vec<f64> = clients
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("iperf3");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            iperf3_bps(&serde_json::from_slice(&out.stdout).expect("iperf3 json"))
        })
        .collect();
    for pid in servers {
        lab.reap(pid);
    }
    let total: f64 = rates.iter().sum();
    eprintln!(
        "RESULT sites: two sites at once: {:.0} and {:.0} Mbit/s (shares {:.0} % / {:.0} %)",
        rates[0] / 1e6,
        rates[1] / 1e6,
        100.0 * rates[0] / total,
        100.0 * rates[1] / total
    );
    for r in &rates {
        assert!(*r > 5e6, "a site's transfer collapsed: {rates:?}");
    }
}

#[test]
fn a_server_restart_and_a_flushed_nat_heal_within_three_seconds() {
    need!("sites_heal", "nft", "conntrack", "ping");
    let mut lab = sites_up();
    let srv = tunnel_ip(Host::Server);
    // the server restarts: its sessions are gone; each site hears nothing and starts again
    assert_eq!(lab.stop_mptd(Host::Server).expect("stop"), Some(0));
    let server = lab.server_config().expect("config");
    let t0 = Instant::now();
    lab.start_mptd(Host::Server, &server).expect("server again");
    for k in 0..2 {
        lab.ping_until(Host::Site(k), &srv, Duration::from_secs(10))
            .expect("healed");
        let took = t0.elapsed();
        eprintln!(
            "RESULT sites: server restart: site{k} through again {took:?} after the server started"
        );
        assert!(took <= Duration::from_secs(3), "site{k} took {took:?}");
    }
    // the router forgets every NAT mapping: the sites' datagrams leave from new ports, and the
    // server follows them from the first authenticated one
    let before = lab.status(Host::Server).expect("status").peers[0].paths[0]
        .remote
        .clone();
    lab.router_sh("conntrack -F 2>/dev/null || conntrack -F conntrack")
        .expect("conntrack -F");
    let t0 = Instant::now();
    let site0 = tunnel_ip(Host::Site(0));
    // the server's side: it must answer to the new mapping
    lab.ping_until(Host::Server, &site0, Duration::from_secs(10))
        .expect("the server reaches site0 again");
    let took = t0.elapsed();
    let after = lab.status(Host::Server).expect("status").peers[0].paths[0]
        .remote
        .clone();
    eprintln!("RESULT sites: NAT table flushed: the server reached site0 again {took:?} later (path 0 seen from {before}, now {after})");
    assert!(took <= Duration::from_secs(3), "took {took:?}");
}
