//! Reloading a changed configuration while traffic flows: a path added and another removed at
//! both ends (one by `mptctl reload`, the other by SIGHUP), nothing lost, the tunnel never
//! down; a bad file, and a change only a restart applies, refused with the running
//! configuration kept.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpt_lab::harness::sites::{tunnel_ip, Host, Sites};
use mpt_lab::harness::{sibling_bin, tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::need;

/// `mptctl -s SOCKET args...`: exit code and what it printed.
fn mptctl(socket: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(sibling_bin("mptctl").expect("mptctl built"))
        .arg("-s")
        .arg(socket)
        .args(args)
        .output()
        .expect("mptctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The names and states of the first peer's paths in `socket`'s status.
fn paths(socket: &std::path::Path) -> Vec<(String, String)> {
    mptd::control::status(socket)
        .map(|st| {
            st.peers[0]
                .paths
                .iter()
                .map(|p| (p.name.clone(), p.state.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_reload_adds_a_path_and_removes_another_under_iperf3_and_nothing_is_lost() {
    need!("reload_adds_and_removes_a_path", "iperf3");
    let mut lab = Lab::new(&std::array::from_fn::<_, 4, _>(|_| LinkSpec::unshaped())).expect("lab");
    // round robin: every path that is up carries its share, the new one too
    let opts = TunnelOpts {
        links: Some(vec![0, 1, 2]),
        scheduler: "rr".into(),
        ..TunnelOpts::default()
    };
    let pid_b = lab.start_mptd(Side::B, &opts).expect("mptd b");
    lab.start_mptd(Side::A, &opts).expect("mptd a");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    let (sock_a, sock_b) = (lab.control_socket(Side::A), lab.control_socket(Side::B));
    let t0 = Instant::now();
    while paths(&sock_a).iter().any(|(_, s)| s != "up") || paths(&sock_b).len() != 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{:?}",
            paths(&sock_a)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // p2 (on link 2) gives way to p3 (on link 3): the new files, written during the run
    let next = TunnelOpts {
        links: Some(vec![0, 1, 3]),
        ..opts.clone()
    };
    let files: Vec<(std::path::PathBuf, String)> = [Side::A, Side::B]
        .into_iter()
        .map(|side| {
            let path = lab.write_config(side, &opts).expect("config");
            let text =
                toml::to_string(&lab.config_file(side, &next).expect("config")).expect("toml");
            (path, text)
        })
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let reloads = {
        let stop = stop.clone();
        let sock_a = sock_a.clone();
        std::thread::spawn(move || {
            // every 50 ms: how many of A's paths are up, and whether p0 and p1 ever were not
            let mut fewest_up = usize::MAX;
            let mut kept_down = Vec::new();
            let mut reloaded = (String::new(), None::<Instant>);
            let start = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let st = paths(&sock_a);
                let up = st.iter().filter(|(_, s)| s == "up").count();
                fewest_up = fewest_up.min(up);
                for (name, state) in st.iter().filter(|(n, _)| n == "p0" || n == "p1") {
                    if state != "up" {
                        kept_down.push(format!("{name} {state} at {:?}", start.elapsed()));
                    }
                }
                if reloaded.1.is_none() && start.elapsed() >= Duration::from_secs(3) {
                    std::fs::write(&files[0].0, &files[0].1).expect("write a");
                    let (code, text) = mptctl(&sock_a, &["reload"]);
                    assert_eq!(code, 0, "mptctl reload: {text}");
                    reloaded = (text, Some(Instant::now()));
                    std::thread::sleep(Duration::from_millis(700));
                    std::fs::write(&files[1].0, &files[1].1).expect("write b");
                    // SAFETY: a signal to a daemon this test started, by its pid.
                    assert_eq!(unsafe { libc::kill(pid_b as i32, libc::SIGHUP) }, 0);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (fewest_up, kept_down, reloaded.0)
        })
    };
    let kernel_before = crate::kernel_udp_drops(&lab, Side::B);
    let udp = lab
        .iperf3(
            Side::A,
            &tunnel_addr(Side::B),
            5201,
            &["-u", "-b", "40M", "-l", "1200", "-t", "10"],
        )
        .expect("iperf3 udp through tun");
    stop.store(true, Ordering::Relaxed);
    let (fewest_up, kept_down, said) = reloads.join().expect("reload thread");
    let count = |field: &str| udp["end"]["sum"][field].as_u64().unwrap_or(0);
    let (lost, sent) = (count("lost_packets"), count("packets"));
    let (a, b) = (paths(&sock_a), paths(&sock_b));
    let st = mptd::control::status(&sock_a).expect("status a");
    let st_b = mptd::control::status(&sock_b).expect("status b");
    // buffers B's kernel dropped for want of socket buffer (at the daemon's path sockets, a
    // GRO batch of datagrams each, or at iperf3's): a stall of this shared VM, not the reload
    let kernel = crate::kernel_udp_drops(&lab, Side::B) - kernel_before;
    // every inner packet A took from tun0 B wrote to its own (kernel drops excepted)
    let tunnel_lost = st.tunnel.tx_packets.saturating_sub(st_b.tunnel.delivered);
    let p3 = &st.peers[0].paths[2];
    eprintln!(
        "RESULT reload: udp {lost}/{sent} lost; fewest paths up at A {fewest_up}; A {a:?}; B {b:?}; p3 sent {} B; restarts {}; mptctl said {said:?}",
        p3.tx_bytes, st.peers[0].restarts
    );
    // where a loss happened, if one did: what A sent and dropped, what B received, gave up
    // and delivered, and each of B's paths' sequence gaps
    eprintln!(
        "  A: tx {} drops {}\n  B: rx {} delivered {} skipped {} late {} drops {} lost per path {:?}; kernel UDP buffer drops at B {kernel}",
        st.tunnel.tx_packets,
        crate::nonzero_drops(&st.tunnel.drops),
        st_b.tunnel.rx_packets,
        st_b.tunnel.delivered,
        st_b.tunnel.reseq.skipped,
        st_b.tunnel.reseq.late,
        crate::nonzero_drops(&st_b.tunnel.drops),
        st_b.peers[0]
            .paths
            .iter()
            .map(|p| (p.name.clone(), p.lost))
            .collect::<Vec<_>>()
    );
    assert!(said.contains("reloaded"), "{said}");
    assert!(sent > 30_000, "iperf3 sent only {sent} datagrams");
    if kernel > 0 {
        eprintln!("NOTE: B's kernel dropped {kernel} datagrams for want of socket buffer (a stall of the machine); iperf3's loss may include them");
    }
    if let Err(e) = crate::stall_explains(kernel, tunnel_lost, lost) {
        panic!("{lost} of {sent} lost across the reloads: {e}");
    }
    assert!(fewest_up >= 2, "the tunnel went down: {fewest_up} paths up");
    assert!(kept_down.is_empty(), "kept paths went down: {kept_down:?}");
    let want: Vec<(String, String)> = ["p0", "p1", "p3"]
        .iter()
        .map(|n| ((*n).to_owned(), "up".to_owned()))
        .collect();
    assert_eq!(a, want, "A after the reloads");
    assert_eq!(b, want, "B after the reloads");
    assert!(
        p3.tx_bytes > 1_000_000,
        "the new path carried nothing: {p3:?}"
    );
    assert_eq!(st.peers[0].restarts, 0);
    assert!(lab.mptd_log(Side::B).contains("configuration reloaded"));
    // the removed path's address is free again: nothing listens there
    let showconf = mptctl(&sock_a, &["showconf"]).1;
    assert!(
        showconf.contains("p3") && !showconf.contains("\"p2\""),
        "{showconf}"
    );
}

#[test]
fn a_bad_or_restart_only_configuration_is_refused_and_the_running_one_kept() {
    need!("reload_refuses_a_bad_configuration", "ping");
    let mut lab = Lab::new(&[LinkSpec::unshaped(), LinkSpec::unshaped()]).expect("lab");
    let opts = TunnelOpts::default();
    lab.start_tunnel(&opts).expect("tunnel");
    let sock = lab.control_socket(Side::A);
    let file = lab.write_config(Side::A, &opts).expect("config");
    let good = std::fs::read_to_string(&file).expect("read");

    std::fs::write(
        &file,
        good.replace("keepalive_ms = 100", "keepalive_ms = \"often\""),
    )
    .expect("write");
    let (code, text) = mptctl(&sock, &["reload"]);
    assert_ne!(code, 0, "a bad file is refused: {text}");
    assert!(
        text.contains(&file.display().to_string()) && text.contains("keepalive_ms"),
        "the refusal names the file and the key: {text}"
    );
    std::fs::write(&file, good.replace("mtu = 1500", "mtu = 1300")).expect("write");
    let (code, text) = mptctl(&sock, &["reload"]);
    assert_ne!(code, 0, "an MTU change needs a restart: {text}");
    assert!(
        text.contains("tunnel.mtu") && text.contains("restart"),
        "{text}"
    );
    // the running configuration is the first one, and the tunnel still works
    let (_, conf) = mptctl(&sock, &["showconf"]);
    assert!(conf.contains("mtu = 1500"), "{conf}");
    lab.wait_for_tunnel(Duration::from_secs(2))
        .expect("the tunnel still works");
    assert!(lab.mptd_log(Side::A).contains("reload refused"));

    // a connection setting and a path's rate are applied at once
    std::fs::write(
        &file,
        good.replace("reorder_timeout_ms = 100", "reorder_timeout_ms = 150")
            .replacen("rate = 10000000000", "rate = 3000000", 1),
    )
    .expect("write");
    let (code, text) = mptctl(&sock, &["reload"]);
    assert_eq!(code, 0, "{text}");
    let st = lab.status(Side::A).expect("status");
    assert_eq!(st.tunnel.reseq.timeout_ms, 150, "{text}");
    assert_eq!(st.peers[0].paths[0].rate_bps, Some(3_000_000), "{text}");
    assert_eq!(st.peers[0].restarts, 0);
    assert_eq!(st.peers[0].paths[0].state, "up");
    // no daemon: exit 3, as `mptctl status` says it
    lab.stop_mptd(Side::B).expect("stop b");
    let (code, text) = mptctl(&lab.control_socket(Side::B), &["reload"]);
    assert_eq!(code, 3, "no daemon: {text}");
}

/// Write `config` as `h`'s file (where `Sites::start_mptd` wrote it) and reload it there.
fn reload_sites(lab: &Sites, h: Host, config: &mptd::config::ConfigFile) -> String {
    let file = lab.dir.join(format!("{}.toml", lab.ns(h)));
    std::fs::write(&file, toml::to_string(config).expect("toml")).expect("write");
    let (code, text) = mptctl(&lab.control_socket(h), &["reload"]);
    assert_eq!(code, 0, "mptctl reload: {text}");
    text
}

#[test]
fn a_reload_adds_removes_and_adds_again_sites_at_the_server_while_the_others_go_on() {
    need!("reload_adds_and_removes_sites", "nft", "ping");
    // the server knows site0; site1 is a stranger to it until a reload adds it
    let mut lab = Sites::new(1, 1).expect("sites lab");
    let server = lab.server_config().expect("server config");
    lab.start_mptd(Host::Server, &server).expect("server");
    for k in 0..2 {
        let c = lab.site_config(k).expect("site config");
        lab.start_mptd(Host::Site(k), &c).expect("site");
    }
    lab.ping_until(
        Host::Site(0),
        &tunnel_ip(Host::Server),
        Duration::from_secs(10),
    )
    .expect("site0 reaches the server");
    let st = lab.status(Host::Server).expect("status");
    assert_eq!(st.peers.len(), 1);
    let session0 = st.peers[0].session.clone();
    assert!(
        !lab.status(Host::Site(1))
            .expect("status")
            .tunnel
            .keys_agreed
    );

    // site1 added: it gets a session at its next initiation, site0's goes on
    lab.known = 2;
    let both = lab.server_config().expect("server config");
    let said = reload_sites(&lab, Host::Server, &both);
    assert!(said.contains("peer \"site1\" added"), "{said}");
    let took = lab
        .ping_until(
            Host::Site(1),
            &tunnel_ip(Host::Server),
            Duration::from_secs(10),
        )
        .expect("site1 reaches the server once added");
    assert!(
        lab.ping(Host::Site(1), &tunnel_ip(Host::Site(0))),
        "site1 cannot reach site0 through the server"
    );
    let st = lab.status(Host::Server).expect("status");
    assert_eq!(st.peers.len(), 2);
    assert_eq!(
        st.peers[0].session, session0,
        "site0's session was replaced"
    );
    assert_eq!(st.peers[0].restarts, 0);

    // site0 removed: it hears a goodbye and takes its paths down at once; site1 goes on
    let mut only1 = both.clone();
    only1.peer.retain(|p| p.name.as_deref() != Some("site0"));
    let t0 = Instant::now();
    let said = reload_sites(&lab, Host::Server, &only1);
    assert!(said.contains("peer \"site0\" removed"), "{said}");
    let down = loop {
        let st = lab.status(Host::Site(0)).expect("status");
        if st.peers[0].paths.iter().all(|p| p.state == "down") {
            break t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "{:?}",
            st.peers[0].paths
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let st = lab.status(Host::Server).expect("status");
    assert_eq!(st.peers.len(), 1);
    assert_eq!(st.peers[0].name, "site1");
    assert!(lab.ping(Host::Site(1), &tunnel_ip(Host::Server)));
    assert!(
        !lab.ping(Host::Server, &tunnel_ip(Host::Site(0))),
        "no route to site0"
    );

    // site0 added again: it takes the free slot and connects again
    let said = reload_sites(&lab, Host::Server, &both);
    assert!(said.contains("peer \"site0\" added"), "{said}");
    let again = lab
        .ping_until(
            Host::Site(0),
            &tunnel_ip(Host::Server),
            Duration::from_secs(10),
        )
        .expect("site0 reaches the server once added again");
    eprintln!(
        "RESULT reload sites: site1 added -> reached the server after {took:?}; site0 removed -> its paths down at the site after {down:?}; site0 added again -> reached the server after {again:?}"
    );
}
