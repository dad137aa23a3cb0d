//! A site that holds valid keys and misbehaves, against a real mptd server (issue 73's hostile
//! site; `tests/e2e/insider.rs`). It is the protocol engine mptd runs (`mpt_tunnel::Connection`),
//! driven from the router's namespace of a [`crate::harness::sites::Sites`] lab with its own
//! UDP socket: it makes real handshakes, and then its driver rewrites each numbered datagram
//! before sealing it (`mpt_tunnel::fuzz::hostile`, the simulator's abuses, all mixed): bundles
//! and pieces whose entries lie, compressed packets against references never sent, absurd
//! reports, resend requests for everything, stray parity, path ids out of range, sequence
//! numbers that jump by 2^31, random bodies of every kind. Every so often it starts a new
//! session (a fresh handshake, as a rebooted site would).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::Result;
use mpt_core::seal::{PrivateKey, PublicKey};
use mpt_core::{PathId, Time};
use mpt_tunnel::fuzz::hostile::{Abuse, Crafter};
use mpt_tunnel::{Connection, Copies, Via};

use crate::experiments::peers::site_config;
use crate::harness::in_netns;
use crate::harness::sites::{PORT, SERVER};

/// The hostile site: see the module documentation.
#[derive(Debug, Clone)]
pub struct Insider {
    /// The router's namespace ([`crate::harness::sites::Sites::ns_router`]).
    pub ns: String,
    /// The server's public key, and the site's private key (one of the server's peers).
    pub server: PublicKey,
    pub key: PrivateKey,
    /// Datagrams a millisecond, each rewritten.
    pub per_ms: usize,
    /// A new session this often.
    pub new_session: Duration,
}

/// What the hostile site did.
#[derive(Debug, Clone, Default)]
pub struct Abused {
    /// Rewritten datagrams sent, and all datagrams sent.
    pub crafted: u64,
    pub sent: u64,
    /// Sessions the server made with it.
    pub sessions: u64,
    /// Datagrams the server sent it.
    pub heard: u64,
}

impl Insider {
    /// Run for `limit`, or until `stop` says so; blocks (it runs in a thread of its own in the
    /// router's namespace).
    pub fn run(&self, limit: Duration, stop: &std::sync::atomic::AtomicBool) -> Result<Abused> {
        let me = self.clone();
        in_netns(&self.ns, move || me.drive(limit, stop))?
    }

    fn connection(&self, now: Time, unix: u64, seed: u64) -> Result<Connection<Vec<u8>>> {
        let to: SocketAddr = format!("{SERVER}:{PORT}").parse()?;
        let mut rng = mpt_core::rng::Rng::new(seed);
        Ok(Connection::new(
            site_config(self.key.clone(), self.server, to, unix),
            now,
            Box::new(move |b: &mut [u8]| rng.fill(b)),
        ))
    }

    fn drive(&self, limit: Duration, stop: &std::sync::atomic::AtomicBool) -> Result<Abused> {
        let sock = UdpSocket::bind("198.18.100.254:0")?;
        sock.set_read_timeout(Some(Duration::from_micros(500)))?;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as u64;
        let start = Instant::now();
        let clock = || Time::from_nanos(start.elapsed().as_nanos() as u64);
        let mut crafter = Crafter::new(unix);
        let mut c = self.connection(clock(), unix, crafter.rng.next_u64())?;
        let mut born = Instant::now();
        let mut done = Abused::default();
        let mut agreed = false;
        let mut buf = vec![0u8; 2048];
        let mut next_batch = Instant::now();
        while start.elapsed() < limit && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                done.heard += 1;
                crafter.heard(&buf[..n]);
                let via = Via {
                    path: PathId(0),
                    from,
                };
                let now = clock();
                c.handle_datagram(now, via, &mut buf[..n], None, &mut Copies, &mut Vec::new());
            }
            let now = clock();
            if c.poll_timeout() <= now {
                c.handle_timeout(now);
            }
            if !agreed && c.keys_agreed() {
                agreed = true;
                done.sessions += 1;
            }
            let mut out = Vec::new();
            while let Some(d) = c.poll_datagram(now) {
                out.push(d);
            }
            if agreed && Instant::now() >= next_batch {
                next_batch += Duration::from_millis(1);
                let crafted = crafter.batch(&mut c, now, self.per_ms, Some(Abuse::Mixed));
                done.crafted += crafted.len() as u64;
                out.extend(crafted);
            }
            for d in out {
                done.sent += u64::from(sock.send_to(&d.contents, d.destination).is_ok());
            }
            while c.poll_event().is_some() {}
            if born.elapsed() >= self.new_session {
                c = self.connection(clock(), unix, crafter.rng.next_u64())?;
                (born, agreed) = (Instant::now(), false);
                next_batch = Instant::now();
            }
        }
        Ok(done)
    }
}
