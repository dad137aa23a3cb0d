//! A site that holds valid keys and misbehaves (issue 73, item 4), against the real daemon:
//! one server, two honest sites behind NAT each uploading with iperf3 (their uplinks shaped to
//! 10 Mbit/s each), and a third site, known to the server, that is the protocol engine driven
//! by a hostile driver (`mpt_lab::experiments::insider`): every datagram it sends is sealed in
//! its session and says what the wire permits at its worst, 2000 a second, with a new session
//! every 2 s. Rounds alternate without it and with it. With it, each honest site keeps at
//! least 95 % of its upload, the server's memory stays within its bound for one peer, and it
//! answers its control socket throughout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mpt_core::seal::{PrivateKey, PublicKey};
use mpt_lab::experiments::insider::{Abused, Insider};
use mpt_lab::experiments::peers::rss_kib;
use mpt_lab::harness::sites::{Host, Sites};
use mptd::config::PeerFile;

use crate::need;
use crate::sites::transfers;

/// What the server may hold for one peer at every bound at once (`docs/protocol.md`, "Limits
/// per peer": about 13 MiB), with room for the allocator's rounding.
const PEER_BOUND_KIB: u64 = 16 * 1024;

/// Seconds of each upload.
const SECS: u32 = 6;

/// What the monitor saw while the insider ran: the server's most RSS, and its control socket's
/// answers (failures, and the slowest).
#[derive(Debug, Default)]
struct Watched {
    rss_max: u64,
    answers: u32,
    failures: u32,
    slowest: Duration,
}

/// Sample the server (`pid`) until `stop`.
fn watch(lab: &Sites, pid: u32, stop: &AtomicBool) -> Watched {
    let mut w = Watched::default();
    while !stop.load(Ordering::Relaxed) {
        w.rss_max = w.rss_max.max(rss_kib(pid).unwrap_or(u64::MAX));
        let t0 = Instant::now();
        match lab.status(Host::Server) {
            Ok(_) => w.answers += 1,
            Err(_) => w.failures += 1,
        }
        w.slowest = w.slowest.max(t0.elapsed());
        std::thread::sleep(Duration::from_millis(250));
    }
    w
}

/// The honest sites' uploads at once (Mbit/s each), with the insider running or not.
fn round(
    lab: &Sites,
    pid: u32,
    insider: Option<&Insider>,
    port: u16,
) -> (Vec<f64>, Watched, Abused) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let hostile = insider.map(|i| {
            let stop = &stop;
            s.spawn(move || i.run(Duration::from_secs(60), stop))
        });
        let monitor = s.spawn(|| watch(lab, pid, &stop));
        if hostile.is_some() {
            // its handshake made, its abuse under way
            std::thread::sleep(Duration::from_secs(1));
        }
        let up: Vec<f64> = transfers(lab, &[0, 1], port, SECS, &[])
            .iter()
            .map(|u| u.mbit)
            .collect();
        stop.store(true, Ordering::Relaxed);
        let abused = hostile
            .map(|h| h.join().expect("insider thread").expect("insider"))
            .unwrap_or_default();
        (up, monitor.join().expect("monitor"), abused)
    })
}

fn once() {
    let mut lab = Sites::new(2, 0).expect("sites lab");
    let key = PrivateKey::generate().expect("key");
    let mut server = lab.server_config().expect("server config");
    server.peer.push(PeerFile {
        name: Some("insider".into()),
        public_key: Some(key.public().encode()),
        allowed: Some(vec!["198.19.0.99/32".into()]),
        ..PeerFile::default()
    });
    let pid = lab.start_mptd(Host::Server, &server).expect("server");
    lab.start_sites(2).expect("sites reach the server");
    for k in 0..2 {
        lab.sh(
            Host::Site(k),
            "for u in u0 u1; do tc qdisc add dev $u root tbf rate 10mbit burst 32kb latency 50ms; done",
        )
        .expect("tbf");
    }
    let insider = Insider {
        ns: lab.ns_router(),
        server: PublicKey::parse(&lab.public_key(Host::Server).expect("key")).expect("key"),
        key,
        per_ms: 4,
        new_session: Duration::from_secs(3),
    };
    let (mut without, mut with) = (vec![0.0; 2], vec![0.0; 2]);
    let (mut rss_without, mut worst, mut abused) = (0, Watched::default(), Abused::default());
    for r in 0..2u16 {
        let (up, w, _) = round(&lab, pid, None, 5201 + 4 * r);
        rss_without = rss_without.max(w.rss_max);
        let (up_with, w, a) = round(&lab, pid, Some(&insider), 5203 + 4 * r);
        eprintln!("RESULT insider round {r}: honest uploads {up:.1?} Mbit/s without it, {up_with:.1?} with it ({a:?}); the server {w:?}");
        for k in 0..2 {
            without[k] += up[k];
            with[k] += up_with[k];
        }
        worst.rss_max = worst.rss_max.max(w.rss_max);
        worst.answers += w.answers;
        worst.failures += w.failures;
        worst.slowest = worst.slowest.max(w.slowest);
        abused.crafted += a.crafted;
        abused.sessions += a.sessions;
        abused.heard += a.heard;
    }
    let st = lab
        .status(Host::Server)
        .expect("the server answers after it all");
    // what was refused is counted per peer: the insider's, and none of the honest sites'
    let refused = |name: &str| {
        let p = st.peers.iter().find(|p| p.name == name).expect("peer");
        mpt_tunnel::DropReason::ALL
            .iter()
            .map(|&r| p.drops.get(r))
            .sum::<u64>()
    };
    let (refused, honest_refused) = (refused("insider"), refused("site0") + refused("site1"));
    let ratio: Vec<f64> = with.iter().zip(&without).map(|(a, b)| a / b).collect();
    eprintln!(
        "RESULT insider: {} datagrams crafted in {} sessions, {} answers heard; the server dropped {refused} \
         of its datagrams ({honest_refused} of the honest sites'); honest sites kept {ratio:.3?} of their uploads ({with:.1?} against {without:.1?} Mbit/s over 2 rounds); \
         server RSS {} KiB at most without it, {} KiB with it (bound +{PEER_BOUND_KIB}); control socket answered {} times, \
         {} failures, slowest {:?}",
        abused.crafted, abused.sessions, abused.heard, rss_without, worst.rss_max, worst.answers, worst.failures,
        worst.slowest
    );
    let log = lab.mptd_log(Host::Server);
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    assert!(
        abused.sessions >= 4 && abused.crafted >= 10_000,
        "the insider never got going: {abused:?}"
    );
    assert!(
        refused >= abused.crafted / 4,
        "the server dropped {refused} of {} crafted",
        abused.crafted
    );
    assert!(
        worst.failures == 0 && worst.answers >= 2 * SECS && worst.slowest < Duration::from_secs(1),
        "the control socket: {worst:?}"
    );
    assert!(
        worst.rss_max <= rss_without + PEER_BOUND_KIB,
        "server RSS {} KiB with the insider, {rss_without} KiB without",
        worst.rss_max
    );
    for (k, r) in ratio.iter().enumerate() {
        assert!(*r >= 0.95, "site {k} kept {r:.3} of its upload");
    }
}

#[test]
fn a_site_with_valid_keys_that_misbehaves_leaves_the_others_their_uploads() {
    need!("insider", "nft", "iperf3", "ping", "tc");
    crate::measured_twice("insider", once);
}
