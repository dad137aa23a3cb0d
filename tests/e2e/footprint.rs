//! What one mptd holds and how it batches, on a router's terms: the resident memory of one
//! daemon with one peer and four paths, idle and at full rate (the goal for a router with
//! 128 MB of RAM: at most 16 MB), and the packets each system call carries at each end at
//! 100 Mbit/s (status `calls`). Measured for the host's build (glibc) and for the static musl
//! build the routers run (`--profile dist --target x86_64-unknown-linux-musl`, built here),
//! whose allocator keeps no per-thread arenas.
//!
//! `MPT_FOOTPRINT_SMAPS=1` prints each idle daemon's largest mappings too; `MPTD_BIN` and
//! `MPT_FOOTPRINT_MUSL` name other builds to measure (to compare them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mpt_lab::harness::{tunnel_addr, Lab, LinkSpec, Side, TunnelOpts};

use crate::{need, rss_kib};

/// The most a router's daemon (the static musl build) with one peer and four paths may hold
/// resident, KiB.
const RSS_BOUND_KIB: u64 = 16 * 1024;
/// The same for the server's glibc build, which maps glibc and libm beside its own code.
const GLIBC_BOUND_KIB: u64 = 20 * 1024;

/// The musl target the routers' x86_64 build is for.
const MUSL: &str = "x86_64-unknown-linux-musl";

/// A `kB` field of a `/proc` file such as `status` or `smaps_rollup`.
fn proc_kib(pid: u32, file: &str, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/{file}")).expect("proc file");
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/{file}"))
}

/// Peak resident memory (VmHWM) of `pid`, KiB.
fn hwm_kib(pid: u32) -> u64 {
    proc_kib(pid, "status", "VmHWM:")
}

/// What an idle daemon holds: resident KiB, of it anonymous (heap, stacks) KiB, and threads.
struct Held {
    rss: u64,
    anon: u64,
    threads: usize,
}

fn held(pid: u32) -> Held {
    if std::env::var_os("MPT_FOOTPRINT_SMAPS").is_some() {
        print_smaps(pid);
    }
    Held {
        rss: rss_kib(pid),
        anon: proc_kib(pid, "smaps_rollup", "Anonymous:"),
        threads: std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| d.count())
            .unwrap_or(0),
    }
}

/// The mappings of `pid` holding 64 KiB or more, largest first.
fn print_smaps(pid: u32) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
    let mut maps: Vec<(u64, u64, String)> = Vec::new();
    for l in s.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            let name = l.split_whitespace().skip(5).collect::<Vec<_>>().join(" ");
            maps.push((0, 0, format!("{first} {name}")));
        } else if let (Some(m), Some(v)) = (maps.last_mut(), l.strip_prefix("Rss:")) {
            m.0 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
        } else if let (Some(m), Some(v)) = (maps.last_mut(), l.strip_prefix("Size:")) {
            m.1 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
        }
    }
    maps.sort_by_key(|m| std::cmp::Reverse(m.0));
    for (rss, size, name) in maps.iter().filter(|m| m.0 >= 64) {
        eprintln!("  {pid}: {rss:>7} KiB resident of {size:>8} KiB  {name}");
    }
}

/// Sample both daemons' RSS every 100 ms for `secs`; the largest seen.
fn sample_rss(pids: [u32; 2], secs: u64) -> [u64; 2] {
    let mut most = [0, 0];
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        for (m, p) in most.iter_mut().zip(pids) {
            *m = (*m).max(rss_kib(p));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    most
}

/// The static musl build the routers run (`scripts/release.sh x86_64` builds the same), built
/// now; `None` when this host cannot build it.
fn musl_build() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("MPT_FOOTPRINT_MUSL") {
        return Some(bin.into());
    }
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let st = Command::new("cargo")
        .current_dir(&tree)
        .args([
            "build",
            "--profile",
            "dist",
            "--target",
            MUSL,
            "-p",
            "mptd",
            "--bins",
        ])
        .status()
        .expect("cargo");
    let bin = tree.join(format!("target/{MUSL}/dist/mptd"));
    if st.success() && bin.is_file() {
        return Some(bin);
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "the {MUSL} build failed (scripts/cross-deps.sh installs its toolchain)"
    );
    eprintln!("footprint: no {MUSL} build ({st}); measuring the host's build only");
    None
}

/// One build's figures.
struct Footprint {
    idle: [Held; 2],
    busy: [u64; 2],
    peak: [u64; 2],
    tcp_gbps: f64,
    /// The batching at 100 Mbit/s of UDP, as the RESULT line says it.
    batching: String,
    sent: u64,
    delivered: u64,
}

/// Two daemons of `mptd` (`None`: the host's build) over four unshaped links: idle, then
/// 100 Mbit/s of UDP, then TCP at full rate.
fn measure(mptd: Option<PathBuf>) -> Footprint {
    let mut lab = Lab::new(&[
        LinkSpec::unshaped(),
        LinkSpec::unshaped(),
        LinkSpec::unshaped(),
        LinkSpec::unshaped(),
    ])
    .expect("lab");
    // the default scheduler for paths without a configured rate: adaptive
    let opts = TunnelOpts {
        scheduler: "adaptive".into(),
        configure_rates: false,
        mptd,
        ..TunnelOpts::default()
    };
    let b = lab.start_mptd(Side::B, &opts).expect("mptd B");
    let a = lab.start_mptd(Side::A, &opts).expect("mptd A");
    lab.wait_for_tunnel(Duration::from_secs(10))
        .expect("tunnel");
    std::thread::sleep(Duration::from_secs(2));
    let idle = [held(a), held(b)];

    // 100 Mbit/s of UDP, 1400-byte datagrams: packets per system call at each end
    let before = [
        lab.status(Side::A).expect("A"),
        lab.status(Side::B).expect("B"),
    ];
    let v = lab
        .iperf3(
            Side::A,
            &tunnel_addr(Side::B),
            5231,
            &["-u", "-b", "100M", "-l", "1400", "-t", "4"],
        )
        .expect("iperf3 UDP");
    let after = [
        lab.status(Side::A).expect("A"),
        lab.status(Side::B).expect("B"),
    ];
    let d = |f: fn(&mptd::status::Status) -> u64, s: usize| f(&after[s]) - f(&before[s]);
    let sent = d(|s| s.tunnel.tx_packets, 0);
    let per_send = sent as f64 / d(|s| s.tunnel.calls.udp_sends, 0).max(1) as f64;
    let per_tun_read = sent as f64 / d(|s| s.tunnel.calls.tun_reads, 0).max(1) as f64;
    let delivered = d(|s| s.tunnel.delivered, 1);
    let per_recv =
        d(|s| s.tunnel.rx_packets, 1) as f64 / d(|s| s.tunnel.calls.udp_recvs, 1).max(1) as f64;
    let per_tun_write = delivered as f64 / d(|s| s.tunnel.calls.tun_write_batches, 1).max(1) as f64;
    let udp_mbps = mpt_lab::harness::iperf3_bps(&v) / 1e6;
    let batching = format!(
        "UDP at {udp_mbps:.0} Mbit/s: sender {per_tun_read:.1} packets per TUN read, \
         {per_send:.1} per UDP send; receiver {per_recv:.1} per UDP receive, \
         {per_tun_write:.1} per TUN write"
    );

    // full rate: TCP as fast as the unshaped paths and the two cores carry it
    let (server, client) = lab.tcp_transfer_in_background(5232, 6).expect("iperf3 TCP");
    let busy = sample_rss([a, b], 5);
    let out = client.wait_with_output().expect("iperf3 client");
    lab.reap(server);
    let tcp: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    if std::env::var_os("MPT_FOOTPRINT_SMAPS").is_some() {
        eprintln!("footprint: after the TCP run");
        print_smaps(a);
        print_smaps(b);
    }
    Footprint {
        idle,
        busy,
        peak: [hwm_kib(a), hwm_kib(b)],
        tcp_gbps: mpt_lab::harness::iperf3_bps(&tcp) / 1e9,
        batching,
        sent,
        delivered,
    }
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b] = &self.idle;
        write!(
            f,
            "RSS idle A {} KiB ({} anonymous, {} threads) / B {} KiB ({} anonymous); \
             at full rate (TCP {:.2} Gbit/s) at most A {} / B {} KiB, peak (VmHWM) A {} / B {} KiB",
            a.rss,
            a.anon,
            a.threads,
            b.rss,
            b.anon,
            self.tcp_gbps,
            self.busy[0],
            self.busy[1],
            self.peak[0],
            self.peak[1]
        )
    }
}

#[test]
fn one_peer_four_paths_stays_within_a_routers_memory_and_batches_its_calls() {
    need!("footprint", "iperf3");
    let musl = musl_build();
    let host = measure(None);
    let router = musl.map(|bin| measure(Some(bin)));
    eprintln!(
        "RESULT footprint: one peer, four paths (bound {RSS_BOUND_KIB} KiB musl, {GLIBC_BOUND_KIB} glibc): glibc build: {host}; \
         musl build: {}; {}",
        router
            .as_ref()
            .map_or_else(|| "not built".to_owned(), |r| r.to_string()),
        host.batching
    );
    let mb = |kib: u64| kib as f64 / 1024.0;
    let brief = |f: &Footprint| {
        format!(
            "{:.1} MB idle, {:.1} MB at most at full rate (TCP {:.1} Gbit/s)",
            mb(f.idle[0].rss.max(f.idle[1].rss)),
            mb(f.busy[0].max(f.busy[1])),
            f.tcp_gbps
        )
    };
    crate::headline(
        "footprint",
        "one mptd, one peer, four unshaped paths: resident memory (`tests/e2e/footprint.rs`)",
        &format!(
            "the routers' static musl build: **{}**; the server's glibc build {}. {}",
            router
                .as_ref()
                .map_or_else(|| "not built".to_owned(), brief),
            brief(&host),
            host.batching
        ),
    );
    // the router's goal binds the build routers run; the server's glibc build maps glibc's
    // own code beside it (about 1.5 MB) and is held to a bound of its own
    for (build, f, bound) in std::iter::once(("glibc", &host, GLIBC_BOUND_KIB))
        .chain(router.iter().map(|r| ("musl", r, RSS_BOUND_KIB)))
    {
        for (side, kib) in [("A", f.peak[0]), ("B", f.peak[1])] {
            assert!(
                kib <= bound,
                "{build} {side} held {kib} KiB at its peak, over its bound of {bound} KiB"
            );
        }
        assert!(
            f.sent > 10_000 && f.delivered > 10_000,
            "{build}: the UDP run carried too little: {} sent, {} delivered",
            f.sent,
            f.delivered
        );
    }
}
