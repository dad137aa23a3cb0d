//! The soak's sites: [`super::super::peers`]'s emulated sites, each pinging the server's tunnel
//! address through its session, and churning at random: an uplink that flaps (2-20 s of
//! datagrams dropped both ways), or a restart (a fresh engine with the same key, on a new
//! source port, as a router that rebooted behind NAT). After each, how long until the site's
//! session answered again, and until an echo came back through it.

use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use mpt_core::rng::Rng;
use mpt_core::seal::{PrivateKey, PublicKey, TAG_LEN};
use mpt_core::Time;
use mpt_tunnel::BatchOut;

use crate::experiments::peers::{new_site, site_config, turn, wait, Scratch, Site};

/// An echo request: IPv4 header, ICMP header, payload.
const ECHO_LEN: usize = 20 + 8 + 16;

/// The server's tunnel address, where the sites' echo requests go.
const SERVER_TUNNEL: [u8; 4] = [198, 19, 0, 1];

/// Site `k`'s tunnel address (in the server's /16).
pub(crate) fn site_ip(k: usize) -> [u8; 4] {
    [198, 19, 1 + (k / 250) as u8, 2 + (k % 250) as u8]
}

/// What the sites share with the sampler on the main thread.
#[derive(Default)]
pub(crate) struct Shared {
    /// Set when the sites are to stop.
    pub(crate) stop: AtomicBool,
    /// Sites whose session answered in the last 2 s.
    pub(crate) sessions: AtomicUsize,
}

/// How the sites are made and churned.
pub(crate) struct Plan {
    pub(crate) keys: Vec<PrivateKey>,
    pub(crate) server: PublicKey,
    pub(crate) to: SocketAddr,
    pub(crate) unix: u64,
    pub(crate) seed: u64,
    /// No churn starts before this, nor after `churn_until`.
    pub(crate) churn_from: Duration,
    pub(crate) churn_until: Duration,
}

/// What the sites saw.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) flaps: u64,
    pub(crate) restarts: u64,
    /// From the end of a flap or a restart until the session answered (a datagram of the
    /// server's authenticated after it) and until an echo sent after it came back.
    pub(crate) session: Vec<Duration>,
    pub(crate) data: Vec<Duration>,
    /// Churns after which the site had not reconnected when its next one came, and sites
    /// still reconnecting at the end.
    pub(crate) unfinished: u64,
    pub(crate) at_end: u64,
    /// Panics caught in the sites' engines.
    pub(crate) panics: u64,
    /// Sessions the sites' engines renewed (rekeys, handshakes after silence).
    pub(crate) rekeys: u64,
    pub(crate) echoes: u64,
    pub(crate) answers: u64,
}

/// A reconnect awaited: since when, the first echo sent since, and when the session answered.
struct Awaited {
    since: Time,
    first_seq: u16,
    session: Option<Duration>,
}

/// One site's churn and pings.
struct State {
    key: PrivateKey,
    rekey_after: Duration,
    /// Its uplink is down until then.
    down_until: Option<Time>,
    next_churn: Time,
    next_echo: Time,
    seq: u16,
    awaited: Option<Awaited>,
}

fn at(d: Duration) -> Time {
    Time::from_nanos(d.as_nanos() as u64)
}

/// A site with a fresh engine and socket, its clock at `now`.
fn fresh(plan: &Plan, s: &State, now: Time, rng: &mut Rng) -> Result<Site> {
    let mut cfg = site_config(s.key.clone(), plan.server, plan.to, plan.unix);
    cfg.keys.rekey_after = s.rekey_after;
    new_site(cfg, now, rng)
}

/// An ICMP echo request from `src` into `p` (at least [`ECHO_LEN`] bytes); its length.
fn echo(p: &mut [u8], src: [u8; 4], id: u16, seq: u16) -> usize {
    p[..ECHO_LEN].fill(0);
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(ECHO_LEN as u16).to_be_bytes());
    p[6] = 0x40; // don't fragment
    p[8] = 64;
    p[9] = 1;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&SERVER_TUNNEL);
    let sum = mpt_tunnel::internet_checksum(0, &[&p[..20]]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p[20] = 8;
    p[24..26].copy_from_slice(&id.to_be_bytes());
    p[26..28].copy_from_slice(&seq.to_be_bytes());
    let sum = mpt_tunnel::internet_checksum(0, &[&p[20..ECHO_LEN]]);
    p[22..24].copy_from_slice(&sum.to_be_bytes());
    ECHO_LEN
}

/// The sequence number of `p` if it is an echo reply to site `id`.
fn reply_seq(p: &[u8], id: u16) -> Option<u16> {
    let ours = p.len() >= 28 && p[0] >> 4 == 4 && p[9] == 1 && p[20] == 0;
    (ours && p[24..26] == id.to_be_bytes()).then(|| u16::from_be_bytes([p[26], p[27]]))
}

/// Send site `k`'s next echo request through its engine (dropped, as a TUN packet would be,
/// while it has no session or no path).
fn send_echo(site: &mut Site, k: usize, s: &mut State, t: Time, out: &mut BatchOut) -> bool {
    let prefix = site.ep.prefix();
    let mut buf = vec![0u8; prefix + ECHO_LEN + TAG_LEN];
    let n = echo(&mut buf[prefix..], site_ip(k), k as u16, s.seq);
    s.seq = s.seq.wrapping_add(1);
    let sent = site.ep.send_one(t, &mut buf, n, out);
    for d in out.before.drain(..) {
        let _ = site.sock.send_to(&d.contents, d.destination);
    }
    if let Ok(Some((_, to, len))) = sent {
        let _ = site.sock.send_to(&buf[..len], to);
    }
    for d in out.after.drain(..) {
        let _ = site.sock.send_to(&d.contents, d.destination);
    }
    sent.is_ok()
}

/// The sites, their states and what they saw.
struct Soak<'a> {
    plan: &'a Plan,
    sites: Vec<Site>,
    states: Vec<State>,
    rng: Rng,
    tally: Tally,
    x: Scratch,
    out: BatchOut,
}

impl Soak<'_> {
    /// Site `k`'s turn at `t` (`elapsed` since the start): its churn, its datagrams and
    /// timers, its echo requests and replies, and whether it reconnected.
    fn step(&mut self, k: usize, t: Time, elapsed: Duration, readable: bool) -> Result<()> {
        let s = &mut self.states[k];
        if s.down_until.is_some_and(|u| t >= u) {
            s.down_until = None;
            self.await_reconnect(k, t);
        }
        let s = &mut self.states[k];
        let up = s.down_until.is_none();
        let site = &mut self.sites[k];
        let (x, out) = (&mut self.x, &mut self.out);
        let turned = catch_unwind(AssertUnwindSafe(|| {
            turn(site, t, readable, up, x);
            if up && t >= s.next_echo {
                send_echo(site, k, s, t, out)
            } else {
                false
            }
        }));
        match turned {
            Ok(sent) => self.tally.echoes += u64::from(sent),
            Err(_) => {
                self.tally.panics += 1;
                self.x.delivered.clear();
                self.restart(k, t)?;
            }
        }
        let s = &mut self.states[k];
        if t >= s.next_echo {
            // every 100-500 ms; every 100 ms while a reconnect is awaited
            let gap = match s.awaited {
                Some(_) => 100,
                None => 100 + self.rng.below(400),
            };
            s.next_echo = t + Duration::from_millis(gap);
        }
        self.replies(k, t);
        self.churn(k, t, elapsed)
    }

    /// Site `k`'s echo replies, and whether its awaited reconnect is complete.
    fn replies(&mut self, k: usize, t: Time) {
        let s = &mut self.states[k];
        let mut answered = false;
        for p in self.x.delivered.drain(..) {
            let Some(seq) = reply_seq(&p, k as u16) else {
                continue;
            };
            self.tally.answers += 1;
            answered |= s
                .awaited
                .as_ref()
                .is_some_and(|a| seq.wrapping_sub(a.first_seq) < 0x8000);
        }
        let ep = &self.sites[k].ep;
        let Some(a) = s.awaited.as_mut() else {
            return;
        };
        if a.session.is_none() && ep.keys_agreed() && ep.last_heard().is_some_and(|h| h >= a.since)
        {
            a.session = Some(t.saturating_since(a.since));
        }
        if answered {
            let data = t.saturating_since(a.since);
            self.tally.session.push(a.session.unwrap_or(data));
            self.tally.data.push(data);
            s.awaited = None;
        }
    }

    /// From `t`, site `k` is to reconnect.
    fn await_reconnect(&mut self, k: usize, t: Time) {
        let s = &mut self.states[k];
        if s.awaited.is_some() {
            self.tally.unfinished += 1;
        }
        s.awaited = Some(Awaited {
            since: t,
            first_seq: s.seq,
            session: None,
        });
        s.next_echo = t;
    }

    /// Site `k` restarts at `t`: a fresh engine with its key, on a new port.
    fn restart(&mut self, k: usize, t: Time) -> Result<()> {
        let site = fresh(self.plan, &self.states[k], t, &mut self.rng)?;
        let old = std::mem::replace(&mut self.sites[k], site);
        self.tally.rekeys += old.ep.rekeys();
        self.await_reconnect(k, t);
        Ok(())
    }

    /// Site `k`'s next churn, if it is due: a flap (two in three) or a restart.
    fn churn(&mut self, k: usize, t: Time, elapsed: Duration) -> Result<()> {
        let s = &mut self.states[k];
        if t < s.next_churn || s.down_until.is_some() {
            return Ok(());
        }
        let mut next = Duration::from_millis(30_000 + self.rng.below(120_000));
        if elapsed >= self.plan.churn_until {
            s.next_churn = t + Duration::from_secs(3600 * 24);
            return Ok(());
        }
        if self.rng.below(3) < 2 {
            let down = Duration::from_millis(2_000 + self.rng.below(18_000));
            s.down_until = Some(t + down);
            next += down;
            self.tally.flaps += 1;
        } else {
            self.tally.restarts += 1;
            self.restart(k, t)?;
        }
        self.states[k].next_churn = t + next;
        Ok(())
    }

    /// Sites whose session answered in the last 2 s.
    fn sessions(&self, t: Time) -> usize {
        let recent = |h: Time| t.saturating_since(h) < Duration::from_secs(2);
        let working = |s: &Site| s.ep.keys_agreed() && s.ep.last_heard().is_some_and(recent);
        self.sites.iter().filter(|s| working(s)).count()
    }
}

/// Run the sites until `shared.stop`.
pub(crate) fn soak(plan: &Plan, shared: &Shared) -> Result<Tally> {
    let mut rng = Rng::new(plan.seed);
    let mut soak = Soak {
        plan,
        sites: Vec::with_capacity(plan.keys.len()),
        states: Vec::with_capacity(plan.keys.len()),
        rng: Rng::new(rng.next_u64()),
        tally: Tally::default(),
        x: Scratch::new(),
        out: BatchOut::default(),
    };
    for key in &plan.keys {
        let first = plan.churn_from.as_millis() as u64;
        let s = State {
            key: key.clone(),
            rekey_after: Duration::from_secs(60 + rng.below(61)),
            down_until: None,
            next_churn: at(Duration::from_millis(first + rng.below(90_000))),
            next_echo: Time::ZERO,
            seq: 0,
            awaited: None,
        };
        soak.sites.push(fresh(plan, &s, Time::ZERO, &mut rng)?);
        soak.states.push(s);
    }
    let start = Instant::now();
    let mut fds = Vec::with_capacity(plan.keys.len());
    let mut counted = Duration::ZERO;
    while !shared.stop.load(Ordering::Relaxed) {
        wait(&soak.sites, &mut fds, at(start.elapsed()));
        let elapsed = start.elapsed();
        let t = at(elapsed);
        for (k, fd) in fds.iter().enumerate() {
            soak.step(k, t, elapsed, fd.revents != 0)?;
        }
        if elapsed >= counted + Duration::from_secs(1) {
            shared.sessions.store(soak.sessions(t), Ordering::Relaxed);
            counted = elapsed;
        }
    }
    let mut tally = soak.tally;
    tally.rekeys += soak.sites.iter().map(|s| s.ep.rekeys()).sum::<u64>();
    tally.at_end = soak.states.iter().filter(|s| s.awaited.is_some()).count() as u64;
    Ok(tally)
}
