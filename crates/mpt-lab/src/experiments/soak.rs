//! `mpt-lab bench soak --count N --minutes M`: a soak with churn (not a CI test). One real
//! mptd server in its namespace and N emulated sites ([`super::peers`]'s engines, each with
//! its own key and UDP socket, driven from one thread in the router's namespace), for M
//! minutes. Every site pings the server's tunnel address through its session every
//! 100-500 ms, renews its keys every 60-120 s, and churns at random ([`churn`]): its uplink
//! flaps for 2-20 s, or it restarts (a fresh engine, the same key, a new source port). Every
//! 10 s the server's RSS and the sessions are sampled. Reported: the churn, the reconnect
//! times (p50, p99, max), the panics (the server's log and the sites' engines: must be 0),
//! and the server's RSS over time (must be flat).

mod churn;

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use mpt_core::seal::PrivateKey;

use crate::experiments::peers::{rss_kib, start_server, status_kib};
use crate::harness::in_netns;
use crate::harness::sites::{Host, Sites};
use churn::{site_ip, Plan, Shared, Tally};

/// Seconds between samples.
const SAMPLE: u64 = 10;

/// One sample: seconds from the start, the server's RSS and its anonymous part (KiB: the
/// rest is the binary's and the libraries' pages, which fill in as code first runs), the
/// sites whose session answered in the last 2 s, and the peers with a session on the server.
struct Sample {
    t: u64,
    rss: u64,
    anon: u64,
    sites: usize,
    server: Option<usize>,
}

/// What the sampler saw of the server.
struct Watch {
    samples: Vec<Sample>,
    /// The server was gone at a sample.
    died: bool,
    end: Option<mptd::status::Status>,
}

/// The server's peers with a session.
fn server_sessions(st: &mptd::status::Status) -> usize {
    st.peers.iter().filter(|p| p.keys_agreed).count()
}

/// Sample the server every [`SAMPLE`] s for `total`, then take its status (before the sites
/// stop) and stop them.
fn watch(lab: &Sites, pid: u32, total: Duration, shared: &Shared) -> Watch {
    let start = Instant::now();
    let mut w = Watch {
        samples: Vec::new(),
        died: false,
        end: None,
    };
    let mut next = Duration::from_secs(SAMPLE);
    while next <= total && !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(next.saturating_sub(start.elapsed()));
        let Ok(rss) = rss_kib(pid) else {
            w.died = true;
            break;
        };
        let s = Sample {
            t: start.elapsed().as_secs(),
            rss,
            anon: status_kib(pid, "RssAnon").unwrap_or(0),
            sites: shared.sessions.load(Ordering::Relaxed),
            server: lab.status(Host::Server).ok().as_ref().map(server_sessions),
        };
        eprintln!(
            "soak: {:>5} s  server RSS {} KiB (anonymous {})  sessions {} (server {:?})",
            s.t, s.rss, s.anon, s.sites, s.server
        );
        w.samples.push(s);
        next += Duration::from_secs(SAMPLE);
    }
    w.end = lab.status(Host::Server).ok();
    shared.stop.store(true, Ordering::Relaxed);
    w
}

/// The `q` quantile of `v` (sorted here), or `None` when empty.
fn quantile(v: &mut [Duration], q: f64) -> Option<Duration> {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).copied()
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".into(),
        |d| format!("{:.0} ms", d.as_secs_f64() * 1e3),
    )
}

/// The mean of `of` (an RSS) over the first and the last `window` s, and the slope between
/// them (KiB/h).
fn rss_slope(samples: &[Sample], window: u64, of: fn(&Sample) -> u64) -> Option<(f64, f64, f64)> {
    let end = samples.last()?.t;
    let mean = |pick: &dyn Fn(u64) -> bool| {
        let v: Vec<&Sample> = samples.iter().filter(|s| pick(s.t)).collect();
        let n = v.len().max(1) as f64;
        let rss = v.iter().map(|s| of(s) as f64).sum::<f64>() / n;
        let t = v.iter().map(|s| s.t as f64).sum::<f64>() / n;
        (rss, t)
    };
    let (a, ta) = mean(&|t| t <= window);
    let (b, tb) = mean(&|t| t + window > end);
    Some((a, b, (b - a) / ((tb - ta).max(1.0) / 3600.0)))
}

/// The report's table, and what failed.
fn report(count: usize, minutes: u64, w: &Watch, tally: &mut Tally, log_panics: usize) -> String {
    let st = w.end.as_ref();
    let sum = |f: fn(&mptd::status::PeerStatus) -> u64| {
        st.map_or(0, |s| s.peers.iter().map(f).sum::<u64>())
    };
    let rss: Vec<u64> = w.samples.iter().map(|s| s.rss).collect();
    let (first, last) = (rss.first().copied(), rss.last().copied());
    let (min, max) = (rss.iter().min().copied(), rss.iter().max().copied());
    let kib = |v: Option<u64>| v.map_or_else(|| "-".into(), |v| v.to_string());
    let window = (minutes * 60 / 3).min(600);
    let slope = |of: fn(&Sample) -> u64| {
        rss_slope(&w.samples, window, of).map_or_else(
            || "-".into(),
            |(a, b, s)| format!("{a:.0} → {b:.0} KiB, {s:+.0} KiB/h"),
        )
    };
    let (slope, anon_slope) = (slope(|s| s.rss), slope(|s| s.anon));
    let panics = tally.panics as usize + log_panics;
    let mut md = format!(
        "| sites | minutes | flaps | restarts | rekeys (server / sites) | restarts seen by the server | \
         reconnects | session back p50 / p99 / max | echo back p50 / p99 / max | not reconnected (before the next churn / at the end) | \
         echoes answered | panics (server log / sites) | server alive | sessions at the end (server) | \
         server RSS first / min / max / last | RSS first → last {window} s | anonymous RSS first → last {window} s |\n\
         |{}\n",
        "---|".repeat(17),
    );
    let _ = writeln!(
        md,
        "| {count} | {minutes} | {} | {} | {} / {} | {} | {} | {} / {} / {} | {} / {} / {} | {} / {} | {} / {} | {} ({log_panics} / {}) | {} | {} of {count} | {} / {} / {} / {} KiB | {slope} | {anon_slope} |",
        tally.flaps,
        tally.restarts,
        sum(|p| p.rekeys),
        tally.rekeys,
        sum(|p| p.restarts),
        tally.data.len(),
        ms(quantile(&mut tally.session, 0.5)),
        ms(quantile(&mut tally.session, 0.99)),
        ms(quantile(&mut tally.session, 1.0)),
        ms(quantile(&mut tally.data, 0.5)),
        ms(quantile(&mut tally.data, 0.99)),
        ms(quantile(&mut tally.data, 1.0)),
        tally.unfinished,
        tally.at_end,
        tally.answers,
        tally.echoes,
        panics,
        tally.panics,
        if w.died { "no" } else { "yes" },
        st.map_or_else(|| "-".into(), |s| server_sessions(s).to_string()),
        kib(first),
        kib(min),
        kib(max),
        kib(last),
    );
    md
}

/// The samples as CSV.
fn csv(samples: &[Sample]) -> String {
    let mut s =
        String::from("seconds,server_rss_kib,server_rss_anon_kib,site_sessions,server_sessions\n");
    for x in samples {
        let server = x.server.map_or_else(String::new, |n| n.to_string());
        let _ = writeln!(s, "{},{},{},{},{server}", x.t, x.rss, x.anon, x.sites);
    }
    s
}

/// `count` sites against one server for `minutes`: see the module documentation.
pub fn run(out: &Path, count: usize, minutes: u64) -> Result<String> {
    if count == 0 || count > 5000 {
        bail!("--count must be 1 to 5000");
    }
    if minutes == 0 {
        bail!("--minutes must be at least 1");
    }
    let mut lab = Sites::new(0, 0)?;
    let keys: Vec<PrivateKey> = (0..count)
        .map(|_| PrivateKey::generate())
        .collect::<Result<_, _>>()?;
    let server = start_server(&mut lab, &keys, |cfg| {
        if let Some(t) = cfg.tunnel.as_mut() {
            t.address = Some("198.19.0.1/16".into());
        }
        for (k, p) in cfg.peer.iter_mut().enumerate() {
            p.allowed = Some(vec![format!("{}/32", Ipv4Addr::from(site_ip(k)))]);
        }
    })?;
    let total = Duration::from_secs(minutes * 60);
    let plan = Plan {
        keys,
        server: server.key,
        to: server.to,
        unix: server.unix,
        seed: server.unix,
        churn_from: Duration::from_secs(10),
        // the last flaps (20 s at most) end 40 s before the end
        churn_until: total.saturating_sub(Duration::from_secs(60)),
    };
    let shared = Shared::default();
    let router = lab.ns_router();
    let (w, tally) = std::thread::scope(|s| {
        let sites = s.spawn(|| in_netns(&router, || churn::soak(&plan, &shared)));
        let w = watch(&lab, server.pid, total, &shared);
        let tally = sites
            .join()
            .map_err(|_| anyhow::anyhow!("the sites' thread panicked"));
        (w, tally)
    });
    let mut tally = tally???;
    let log_panics = lab.mptd_log(Host::Server).matches("panicked").count();
    let md = report(count, minutes, &w, &mut tally, log_panics);
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("soak-{count}.md")), &md)?;
    std::fs::write(out.join(format!("soak-{count}.csv")), csv(&w.samples))?;
    let ended = w.end.as_ref().map_or(0, server_sessions);
    if w.died || log_panics > 0 || tally.panics > 0 {
        bail!("the server died or something panicked\n{md}");
    }
    if ended < count || tally.unfinished + tally.at_end > 0 {
        bail!("not every site had reconnected at the end\n{md}");
    }
    Ok(md)
}
