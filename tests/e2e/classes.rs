//! Traffic classes through real daemons: light traffic that goes the fastest way and is
//! delivered at once while bulk is spread over a near and a far path, and a `duplicate` class
//! that a path's blackout costs nothing.

use std::net::UdpSocket;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mpt_lab::harness::{tunnel_addr, Impair, Lab, LinkSpec, Side, TunnelOpts};
use mptd::config::{ClassFile, PortFile};

use crate::need;

/// A path `ms` milliseconds away each way, unshaped.
fn away(ms: f64) -> LinkSpec {
    let i = Impair {
        delay_ms: ms,
        ..Impair::default()
    };
    LinkSpec {
        rate_bps: None,
        ab: i,
        ba: i,
    }
}

/// What a voice stream's receiver saw: per datagram number, its one-way delay.
struct Received {
    delays: Vec<(u32, Duration)>,
}

impl Received {
    /// The `k` packets that waited longest, longest first: their numbers and delays in ms.
    fn worst(&self, k: usize) -> Vec<(u32, f64)> {
        let mut d = self.delays.clone();
        d.sort_unstable_by_key(|&(_, d)| std::cmp::Reverse(d));
        d.iter()
            .take(k)
            .map(|&(n, d)| (n, (d.as_secs_f64() * 1e4).round() / 10.0))
            .collect()
    }

    /// The delay below which `q` of the datagrams arrived.
    fn quantile(&self, q: f64) -> Duration {
        let mut d: Vec<Duration> = self.delays.iter().map(|&(_, d)| d).collect();
        d.sort_unstable();
        d.get(((d.len() as f64 * q) as usize).min(d.len().saturating_sub(1)))
            .copied()
            .unwrap_or(Duration::MAX)
    }
}

/// A voice-like stream from A to B's tunnel address, port `port`: 50 datagrams a second of 200
/// bytes for `secs`, with DSCP `tos >> 2`. Each carries its number and when it left (this
/// process's clock, which both namespaces share), so the receiver measures one-way delay.
/// Returns the number sent and what arrived (waiting 1 s after the last).
fn voice(lab: &Lab, port: u16, tos: u32, secs: u64, epoch: Instant) -> (u32, Received) {
    let (ns_b, listen) = (lab.ns(Side::B), format!("{}:{port}", tunnel_addr(Side::B)));
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = std::thread::spawn(move || {
        mpt_lab::harness::in_netns(&ns_b, move || {
            let s = UdpSocket::bind(&listen).expect("bind");
            s.set_read_timeout(Some(Duration::from_secs(1)))
                .expect("timeout");
            // room for 100 ms of a 100 Mbit/s stream: this thread, not the tunnel, must not be
            // what a stall of the machine makes lose datagrams
            mptd::net::set_int_option(&s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20)
                .expect("SO_RCVBUFFORCE");
            ready_tx.send(()).expect("ready");
            let mut delays = Vec::new();
            let mut buf = [0u8; 512];
            while let Ok(n) = s.recv(&mut buf) {
                if n < 12 {
                    continue;
                }
                let number = u32::from_be_bytes(buf[..4].try_into().expect("4"));
                let sent =
                    Duration::from_nanos(u64::from_be_bytes(buf[4..12].try_into().expect("8")));
                delays.push((number, epoch.elapsed().saturating_sub(sent)));
            }
            Received { delays }
        })
        .expect("namespace")
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("receiver bound");
    let target = format!("{}:{port}", tunnel_addr(Side::B));
    let sent = lab
        .in_ns(Side::A, move || {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)
                .expect("socket");
            s.set_tos_v4(tos).expect("tos");
            let s: UdpSocket = s.into();
            s.connect(&target).expect("connect");
            let start = Instant::now();
            let mut n = 0u32;
            while start.elapsed() < Duration::from_secs(secs) {
                let mut d = [0u8; 200];
                d[..4].copy_from_slice(&n.to_be_bytes());
                d[4..12].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_be_bytes());
                s.send(&d).expect("send");
                n += 1;
                // every 20 ms on a fixed grid
                let next = Duration::from_millis(20) * n;
                if let Some(wait) = next.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            n
        })
        .expect("namespace");
    (sent, receiver.join().expect("receiver"))
}

/// Bulk UDP from A to B's tunnel address, port `port`: `bps` in 1200-byte datagrams for
/// `secs`. Returns the datagrams sent and received.
pub(crate) fn bulk_udp(lab: &Lab, port: u16, bps: u64, secs: u64) -> (u64, u64) {
    counted_udp(lab, port, bps, secs, 1200)
}

/// [`bulk_udp`] with datagrams of `len` bytes. The receiver counts until a second passes
/// without one, so unlike iperf3 it also counts what arrives after the sender has finished.
pub(crate) fn counted_udp(lab: &Lab, port: u16, bps: u64, secs: u64, len: usize) -> (u64, u64) {
    let (sent, got, _) = numbered_udp(lab, port, bps, secs, len);
    (sent, got)
}

/// What the kernel dropped at the UDP socket bound to `port` in this thread's namespace, for a
/// full buffer (the last column of `/proc/net/udp`).
fn socket_drops(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/thread-self/net/udp").unwrap_or_default();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.ends_with(&local))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

/// As [`counted_udp`], with each datagram numbered: (sent, arrived, arrived out of order: after
/// one numbered later, as iperf3 counts them).
pub(crate) fn numbered_udp(
    lab: &Lab,
    port: u16,
    bps: u64,
    secs: u64,
    len: usize,
) -> (u64, u64, u64) {
    let (sent, got, out_of_order, _) = numbered_udp_timed(lab, port, bps, secs, len);
    (sent, got, out_of_order)
}

/// As [`numbered_udp`], and the most the sender fell behind its schedule: a stall of the
/// machine that held the sending thread, after which it sent what it owed at once (a burst
/// the paths' queues may not hold).
pub(crate) fn numbered_udp_timed(
    lab: &Lab,
    port: u16,
    bps: u64,
    secs: u64,
    len: usize,
) -> (u64, u64, u64, Duration) {
    let (ns_b, listen) = (lab.ns(Side::B), format!("{}:{port}", tunnel_addr(Side::B)));
    let (ready_tx, ready_rx) = mpsc::channel();
    let sink = std::thread::spawn(move || {
        mpt_lab::harness::in_netns(&ns_b, move || {
            let s = UdpSocket::bind(&listen).expect("bind");
            s.set_read_timeout(Some(Duration::from_secs(1)))
                .expect("timeout");
            // room for 100 ms of a 100 Mbit/s stream: this thread, not the tunnel, must not be
            // what a stall of the machine makes lose datagrams
            mptd::net::set_int_option(&s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20)
                .expect("SO_RCVBUFFORCE");
            ready_tx.send(()).expect("ready");
            let mut buf = [0u8; 2048];
            let (mut got, mut out_of_order, mut highest) = (0u64, 0u64, None);
            while let Ok(n) = s.recv(&mut buf) {
                got += 1;
                let number = buf[..n.min(8)]
                    .try_into()
                    .map(u64::from_be_bytes)
                    .unwrap_or(0);
                if highest.is_some_and(|h| number < h) {
                    out_of_order += 1;
                } else {
                    highest = Some(number);
                }
            }
            eprintln!(
                "numbered_udp: the receiving socket dropped {}",
                socket_drops(port)
            );
            (got, out_of_order)
        })
        .expect("namespace")
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("sink bound");
    let target = format!("{}:{port}", tunnel_addr(Side::B));
    let (sent, behind) = lab
        .in_ns(Side::A, move || {
            let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
            s.connect(&target).expect("connect");
            let per_ms = (bps / 8 / len as u64 / 1000).max(1);
            let mut datagram = vec![0u8; len.max(8)];
            let start = Instant::now();
            let mut sent = 0u64;
            let mut ms = 0u32;
            let mut behind = Duration::ZERO;
            while start.elapsed() < Duration::from_secs(secs) {
                behind = behind.max(
                    start
                        .elapsed()
                        .saturating_sub(Duration::from_millis(ms.into())),
                );
                for _ in 0..per_ms {
                    datagram[..8].copy_from_slice(&sent.to_be_bytes());
                    if s.send(&datagram).is_ok() {
                        sent += 1;
                    }
                }
                ms += 1;
                if let Some(wait) = Duration::from_millis(1)
                    .checked_mul(ms)
                    .and_then(|t| t.checked_sub(start.elapsed()))
                {
                    std::thread::sleep(wait);
                }
            }
            (sent, behind)
        })
        .expect("namespace");
    let (got, out_of_order) = sink.join().expect("sink");
    (sent, got, out_of_order, behind)
}

/// Bulk UDP spread round-robin over a 10 ms and a 60 ms path: what the resequencer holds back
/// waits for the far path. Voice marked EF (a built-in `fastest` class) goes the near way and
/// is delivered at once; the same stream unmarked is bonded and waits with the bulk.
#[test]
fn light_traffic_goes_the_fastest_way_and_is_not_held_behind_bulk() {
    need!("light_traffic_fastest");
    crate::measured_twice("light_traffic_fastest", light_traffic_fastest_once);
}

fn light_traffic_fastest_once() {
    let mut lab = Lab::new(&[away(10.0), away(60.0)]).expect("lab");
    let opts = TunnelOpts {
        scheduler: "rr".into(),
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    // the bulk: 20 Mbit/s of UDP for 7 s, from threads of its own
    let bulk = {
        let lab = &lab;
        std::thread::scope(|s| {
            let bulk = s.spawn(move || bulk_udp(lab, 5301, 20_000_000, 7));
            std::thread::sleep(Duration::from_secs(1));
            let epoch = Instant::now();
            let plain = s.spawn(move || voice(lab, 5400, 0, 4, epoch));
            let ef = voice(lab, 5402, 0xb8, 4, epoch);
            (
                ef,
                plain.join().expect("plain voice"),
                bulk.join().expect("bulk"),
            )
        })
    };
    let ((sent_ef, ef), (sent_plain, plain), (bulk_sent, bulk_got)) = bulk;
    let st = lab.status(Side::A).expect("status a");
    let ef_class = st
        .tunnel
        .classes
        .iter()
        .find(|c| c.name == "ef")
        .cloned()
        .unwrap_or_default();
    eprintln!(
        "RESULT fastest: EF voice {}/{sent_ef} arrived, one-way p50 {:?} p99 {:?}; unmarked {}/{sent_plain}, p50 {:?} p99 {:?}; class ef sent per path {:?}; bulk {bulk_got}/{bulk_sent} datagrams",
        ef.delays.len(),
        ef.quantile(0.5),
        ef.quantile(0.99),
        plain.delays.len(),
        plain.quantile(0.5),
        plain.quantile(0.99),
        ef_class.sent_per_path,
    );
    assert!(
        bulk_got > bulk_sent / 2,
        "the bulk did not flow: {bulk_got}/{bulk_sent}"
    );
    assert!(sent_ef >= 190, "sent only {sent_ef}");
    assert_eq!(ef.delays.len() as u32, sent_ef, "EF voice lost packets");
    // the near path's 10 ms, plus at most 20 ms
    assert!(
        ef.quantile(0.99) < Duration::from_millis(30),
        "EF voice p99 {:?}",
        ef.quantile(0.99)
    );
    assert!(ef_class.sent >= u64::from(sent_ef));
    // every voice packet went on the near path; in the paths' first minute (they have not
    // shown whether they lose) each also went as a copy on the far path, which the receiver
    // dropped as a duplicate: the p99 above is the near path's
    let per_path = &ef_class.sent_per_path;
    assert!(
        per_path.first().copied().unwrap_or(0) >= u64::from(sent_ef),
        "EF voice took the far path: {per_path:?}"
    );
    assert!(
        per_path.get(1).copied().unwrap_or(0) <= per_path[0],
        "more EF voice on the far path than on the near: {per_path:?}"
    );
    // bonded, the same stream waits for the far path half the time at least
    assert!(
        plain.quantile(0.5) > Duration::from_millis(50),
        "unmarked voice p50 {:?}: bulk never held it?",
        plain.quantile(0.5)
    );
}

/// A `duplicate` class goes on both paths; the near one blacks out for a second mid-stream
/// and the class loses nothing, while an unmarked stream next to it loses what was on the
/// dead path until the path is known to be down.
#[test]
fn a_duplicate_class_loses_nothing_when_a_path_blacks_out() {
    need!("duplicate_class_blackout");
    let mut lab = Lab::new(&[away(10.0), away(30.0)]).expect("lab");
    let opts = TunnelOpts {
        scheduler: "rr".into(),
        classes: vec![ClassFile {
            name: Some("voice".into()),
            protocol: Some(mptd::config::ProtocolFile::Name("udp".into())),
            port: Some(PortFile::Number(5500)),
            mode: Some("duplicate".into()),
            ..ClassFile::default()
        }],
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    std::thread::sleep(Duration::from_millis(500));
    let epoch = Instant::now();
    let ((sent_dup, dup), (sent_plain, plain)) = {
        let lab = &lab;
        std::thread::scope(|s| {
            let plain = s.spawn(move || voice(lab, 5502, 0, 4, epoch));
            let outage = s.spawn(move || {
                std::thread::sleep(Duration::from_millis(1500));
                lab.set_outage(0, true).expect("outage on");
                std::thread::sleep(Duration::from_secs(1));
                lab.set_outage(0, false).expect("outage off");
            });
            let dup = voice(lab, 5500, 0, 4, epoch);
            outage.join().expect("outage");
            (dup, plain.join().expect("plain voice"))
        })
    };
    let (a, b) = (
        lab.status(Side::A).expect("status a"),
        lab.status(Side::B).expect("status b"),
    );
    let mut numbers: Vec<u32> = dup.delays.iter().map(|&(n, _)| n).collect();
    numbers.sort_unstable();
    numbers.dedup();
    eprintln!(
        "RESULT duplicate: voice {}/{sent_dup} arrived ({} distinct), p99 {:?}; unmarked {}/{sent_plain}; copies sent {}; B dropped {} duplicates; classes {:?}",
        dup.delays.len(),
        numbers.len(),
        dup.quantile(0.99),
        plain.delays.len(),
        a.tunnel.copies_sent,
        b.tunnel.drops.duplicate,
        a.tunnel.classes
    );
    assert!(sent_dup >= 190, "sent only {sent_dup}");
    assert_eq!(
        dup.delays.len(),
        numbers.len(),
        "a packet was delivered twice"
    );
    assert_eq!(
        dup.delays.len() as u32,
        sent_dup,
        "the duplicated stream lost packets"
    );
    assert!(a.tunnel.copies_sent >= u64::from(sent_dup) / 2);
    assert!(b.tunnel.drops.duplicate > 0);
    // the blackout is real: the unmarked stream lost what went the dead way before it was
    // known to be down
    assert!(
        plain.delays.len() < sent_plain as usize,
        "the unmarked stream lost nothing: was there a blackout?"
    );
}

/// Issue 19's case: a TCP bulk transfer fills a 20 Mbit/s path 10 ms away and one 60 ms away
/// (`adaptive`, nothing configured per path), and a voice stream marked EF runs next to it.
/// The voice must see the near path's idle delay plus at most 20 ms, and lose nothing; the bulk
/// must still get `bulk_mbit`.
fn voice_next_to_tcp_bulk(cc: &'static str, bulk_mbit: f64) {
    let shaped = |ms: f64| LinkSpec {
        rate_bps: Some(20_000_000),
        ..away(ms)
    };
    let mut lab = Lab::new(&[shaped(10.0), shaped(60.0)]).expect("lab");
    let opts = TunnelOpts {
        scheduler: "adaptive".into(),
        configure_rates: false,
        ..TunnelOpts::default()
    };
    lab.start_tunnel(&opts).expect("tunnel");
    std::thread::sleep(Duration::from_millis(500));
    let target: std::net::SocketAddr = format!("{}:5600", tunnel_addr(Side::B))
        .parse()
        .expect("addr");
    let epoch = Instant::now();
    let ((sent, ef), bulk) = {
        let lab = &lab;
        std::thread::scope(|s| {
            let bulk =
                s.spawn(move || mpt_lab::experiments::tcp::transfer(lab, &[target], false, cc, 9));
            std::thread::sleep(Duration::from_secs(3));
            let ef = voice(lab, 5602, 0xb8, 5, epoch);
            (ef, bulk.join().expect("bulk"))
        })
    };
    let mbit = bulk.expect("bulk transfer")[0];
    let st = lab.status(Side::A).expect("status a");
    let rx = lab.status(Side::B).expect("status b").tunnel.reseq;
    let ef_class = st
        .tunnel
        .classes
        .iter()
        .find(|c| c.name == "ef")
        .cloned()
        .unwrap_or_default();
    eprintln!(
        "RESULT voice next to {cc} bulk: voice {}/{sent} arrived, one-way p50 {:?} p99 {:?} max {:?}, worst (number, ms) {:?}; sent per path {:?}; bulk {mbit:.1} Mbit/s, data per path {:?}; B: late {}, skipped {}, hold p99 {} us",
        ef.delays.len(),
        ef.quantile(0.5),
        ef.quantile(0.99),
        ef.quantile(1.0),
        ef.worst(6),
        ef_class.sent_per_path,
        st.paths.iter().map(|p| p.tx_packets).collect::<Vec<_>>(),
        rx.late,
        rx.skipped,
        rx.hold_p99_us,
    );
    assert!(sent >= 240, "sent only {sent}");
    assert_eq!(ef.delays.len() as u32, sent, "the voice lost packets");
    assert!(
        ef.quantile(0.99) < Duration::from_millis(30),
        "voice p99 {:?}: it waited behind the bulk",
        ef.quantile(0.99)
    );
    assert!(mbit > bulk_mbit, "the bulk got {mbit:.1} Mbit/s");
    crate::headline(
        &format!("voice-{cc}"),
        &format!(
            "voice (DSCP EF, 50 packets/s) next to {cc} bulk over a 10 ms and a 60 ms path \
             (`classes::voice_waits_for_no_{cc}_bulk_on_unequal_paths`; goal: within 20 ms of \
             the near path's idle 10 ms)"
        ),
        &format!(
            "one-way p99 **{:.1} ms**, {}/{sent} arrived; the bulk {mbit:.1} Mbit/s",
            ef.quantile(0.99).as_secs_f64() * 1e3,
            ef.delays.len()
        ),
    );
}

#[test]
fn voice_waits_for_no_cubic_bulk_on_unequal_paths() {
    need!("voice_next_to_cubic");
    crate::measured_twice("voice_next_to_cubic", || {
        // half the near path at least: what TCP gets of both paths is issue 19's goal 1
        voice_next_to_tcp_bulk("cubic", 10.0)
    });
}

#[test]
fn voice_waits_for_no_bbr_bulk_on_unequal_paths() {
    need!("voice_next_to_bbr");
    crate::measured_twice("voice_next_to_bbr", || {
        // half the near path at least: what TCP gets of both paths is issue 19's goal 1
        voice_next_to_tcp_bulk("bbr", 10.0)
    });
}
