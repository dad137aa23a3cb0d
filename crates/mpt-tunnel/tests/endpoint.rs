//! The many-peer [`Endpoint`] on the simulated clock: hundreds of sites come to one server's
//! listening socket and each gets its connection; a flood of forged initiations costs no key
//! exchange once it is load, while real sites still get in with their cookies; a reload of
//! the peer table refuses a removed key and takes an added one.

#[allow(dead_code)]
mod sim;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use mpt_core::seal::{MacKeys, PrivateKey, PublicKey, MAC_LEN};
use mpt_core::wire::{HEADER_LEN, INITIATION_MACS};
use mpt_core::{PathId, Time};
use mpt_tunnel::{
    Admission, Connection, Copies, Datagram, DropReason, Endpoint, Outcome, PeerEntry, Random,
    Route, Via,
};
use sim::{Rng, Side};

const SERVER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 4754);

fn key(n: u32) -> PrivateKey {
    let mut b = [7u8; 32];
    b[..4].copy_from_slice(&n.to_be_bytes());
    PrivateKey::from_bytes(b)
}

fn random(seed: u64) -> Random {
    let mut rng = Rng::new(seed);
    Box::new(move |b: &mut [u8]| rng.fill(b))
}

/// Site `n`'s address (behind carrier NATs: 50 share one address, each with its own port).
fn site_addr(n: u32) -> SocketAddr {
    SocketAddr::new(
        Ipv4Addr::new(198, 19, (n / 50) as u8, 1).into(),
        10_000 + (n % 50) as u16,
    )
}

/// The first initiation `c` sends, at `now`.
fn initiation(c: &mut Connection<Vec<u8>>, now: Time) -> Vec<u8> {
    c.handle_timeout(now);
    drain(c, now)
        .into_iter()
        .next()
        .expect("an initiation")
        .contents
}

/// One server: its endpoint, and the connection of each peer position (made by the endpoint
/// for listening peers).
struct Server {
    endpoint: Endpoint,
    conns: Vec<Option<Connection<Vec<u8>>>>,
    seeds: Rng,
    /// Cookie replies sent, and initiations the endpoint read (at a key exchange's cost).
    cookies: usize,
    read: usize,
}

impl Server {
    /// A server whose peers are the sites `1..=n`, all listening.
    fn new(n: u32, seed: u64) -> Server {
        let mut seeds = Rng::new(seed);
        let mut endpoint = Endpoint::new(key(0), random(seeds.next_u64()));
        endpoint.set_peers((1..=n).map(|k| Some(entry(k))).collect());
        let mut base = sim::config(Side::B, 1, true);
        base.keys.private = key(0);
        base.keys.initiate = false;
        base.follow_peer_paths = true;
        endpoint.set_listening(Some(base));
        Server {
            endpoint,
            conns: (0..n).map(|_| None).collect(),
            seeds,
            cookies: 0,
            read: 0,
        }
    }

    /// The datagram `d` arrives from `from` at `now`: what the server sends back.
    fn receive(
        &mut self,
        now: Time,
        from: SocketAddr,
        d: &[u8],
    ) -> Result<Vec<Vec<u8>>, DropReason> {
        let (route, path) = Endpoint::route(d, self.conns.len())?;
        let i = match route {
            Route::Initiation => match self.endpoint.handle_initiation(now, from, d) {
                Admission::Read(a) => {
                    self.read += 1;
                    let i = a.peer();
                    let seed = self.seeds.next_u64();
                    match self.endpoint.accept(
                        now,
                        Via { path, from },
                        &mut self.conns[i],
                        a,
                        || Some(random(seed)),
                    ) {
                        Outcome::Dropped(r) => return Err(r),
                        _ => i,
                    }
                }
                Admission::Cookie(reply) => {
                    self.cookies += 1;
                    return Ok(vec![reply.to_vec()]);
                }
                Admission::UnknownKey(_) => {
                    self.read += 1;
                    return Err(DropReason::UnknownKey);
                }
                Admission::Dropped(r) => return Err(r),
            },
            Route::Connection(i) => {
                let c = self.conns[i].as_mut().ok_or(DropReason::UnknownSession)?;
                let mut buf = d.to_vec();
                if let Outcome::Dropped(r) = c.handle_datagram(
                    now,
                    Via { path, from },
                    &mut buf,
                    None,
                    &mut Copies,
                    &mut Vec::new(),
                ) {
                    return Err(r);
                }
                i
            }
        };
        let c = self.conns[i].as_mut().expect("made");
        Ok(drain(c, now).into_iter().map(|t| t.contents).collect())
    }
}

fn entry(n: u32) -> PeerEntry {
    PeerEntry {
        key: key(n).public(),
        psk: None,
        listening: true,
    }
}

fn server_key() -> PublicKey {
    key(0).public()
}

/// Site `n`: one path to the server; it starts the handshake.
fn site(n: u32, seed: u64) -> Connection<Vec<u8>> {
    let mut cfg = sim::config(Side::A, 1, true);
    cfg.keys.private = key(n);
    cfg.keys.peer = server_key();
    cfg.paths[0].remote = Some(SERVER);
    Connection::new(cfg, Time::ZERO, random(seed))
}

fn drain(c: &mut Connection<Vec<u8>>, now: Time) -> Vec<Datagram> {
    let mut out = Vec::new();
    while let Some(t) = c.poll_datagram(now) {
        out.push(t);
    }
    while c.poll_event().is_some() {}
    out
}

/// Sites and server exchange what they have until nothing is left, at `now`.
fn exchange(server: &mut Server, sites: &mut [(u32, Connection<Vec<u8>>)], now: Time) {
    for (n, c) in sites.iter_mut() {
        c.handle_timeout(now);
        let mut to_server = drain(c, now);
        while !to_server.is_empty() {
            let mut back = Vec::new();
            for t in to_server.drain(..) {
                if let Ok(replies) = server.receive(now, site_addr(*n), &t.contents) {
                    back.extend(replies);
                }
            }
            for mut d in back {
                c.handle_datagram(
                    now,
                    Via {
                        path: PathId(0),
                        from: SERVER,
                    },
                    &mut d,
                    None,
                    &mut Copies,
                    &mut Vec::new(),
                );
            }
            to_server = drain(c, now);
        }
    }
}

#[test]
fn three_hundred_sites_each_get_their_connection_from_the_listening_socket() {
    let seed = sim::seed(40);
    let mut server = Server::new(300, seed);
    let mut rng = Rng::new(seed);
    let mut sites: Vec<(u32, Connection<Vec<u8>>)> =
        (1..=300).map(|n| (n, site(n, rng.next_u64()))).collect();
    // 300 initiations at once are within the bounds (a burst of 100 per address, 1000 in
    // all, and under the load burst): all are read, none gets a cookie
    exchange(&mut server, &mut sites, Time::from_millis(10));
    for (n, c) in &sites {
        assert!(c.keys_agreed(), "site {n} has no session");
        let sc = server.conns[*n as usize - 1]
            .as_ref()
            .expect("made by its initiation");
        assert!(sc.keys_agreed(), "the server's connection of site {n}");
        assert_eq!(sc.peer_session(), Some(c.session()), "site {n}'s indices");
        assert_eq!(
            usize::from(mpt_tunnel::index_slot(sc.session())),
            *n as usize,
            "the server's index names the peer's slot"
        );
    }
    assert_eq!((server.read, server.cookies), (300, 0));
}

/// A forged initiation: a real one's bytes with another ephemeral key, and a valid mac1 (anyone
/// who knows the server's public key can make one), no valid mac2.
fn forged(real: &[u8], k: u32) -> Vec<u8> {
    let mut d = real.to_vec();
    d[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&k.to_be_bytes());
    let message = HEADER_LEN..d.len() - INITIATION_MACS;
    let mac1 = MacKeys::new(&server_key()).mac1(&d[message.clone()]);
    d[message.end..message.end + MAC_LEN].copy_from_slice(&mac1);
    d[message.end + MAC_LEN..message.end + 2 * MAC_LEN].fill(0);
    d
}

#[test]
fn a_flood_of_forged_initiations_gets_cookies_and_real_sites_get_in_with_theirs() {
    let seed = sim::seed(41);
    let mut server = Server::new(50, seed);
    let mut rng = Rng::new(seed);
    let mut probe = site(1, rng.next_u64());
    let real = initiation(&mut probe, Time::ZERO);
    // 5000 forged initiations from as many addresses within a second
    let t0 = Time::from_secs(1);
    let mut outcomes = (0usize, 0usize, 0usize);
    for k in 0..5000u32 {
        let now = t0 + Duration::from_micros(u64::from(k) * 200);
        let from = SocketAddr::new(Ipv4Addr::from(0xc613_0000 + k).into(), 5000);
        match server.receive(now, from, &forged(&real, k)) {
            Ok(replies) => {
                assert_eq!(replies.len(), 1, "a cookie reply");
                assert!(
                    replies[0].len() < real.len(),
                    "a reply smaller than the initiation"
                );
                outcomes.0 += 1;
            }
            Err(DropReason::BadHandshake) => outcomes.1 += 1,
            Err(other) => {
                assert_eq!(other, DropReason::HandshakeLimited);
                outcomes.2 += 1;
            }
        }
    }
    // read (a key exchange each, and found forged) only until the arrivals made it load
    // (the load burst, and what its rate adds in the meantime): the rest got cookies
    assert!(outcomes.1 <= 450, "{outcomes:?}: forged initiations read");
    assert_eq!(server.read, 0, "none was taken");
    assert!(outcomes.0 >= 4500, "cookies {outcomes:?}");
    // the flood goes on; real sites come now: a cookie first, then their initiation again
    // with a mac2 that proves their address, read at once
    let now = t0 + Duration::from_millis(999);
    let mut sites: Vec<(u32, Connection<Vec<u8>>)> =
        (1..=50).map(|n| (n, site(n, rng.next_u64()))).collect();
    let read_before = server.read;
    let cookies_before = server.cookies;
    exchange(&mut server, &mut sites, now);
    for (n, c) in &sites {
        assert!(c.keys_agreed(), "site {n} got in during the flood");
    }
    assert_eq!(server.cookies - cookies_before, 50, "one cookie each");
    assert_eq!(server.read - read_before, 50, "one key exchange each");
}

#[test]
fn a_reload_of_the_peer_table_refuses_a_removed_key_and_takes_an_added_one() {
    let seed = sim::seed(42);
    let mut server = Server::new(20, seed);
    let mut rng = Rng::new(seed);
    let mut sites: Vec<(u32, Connection<Vec<u8>>)> =
        (1..=20).map(|n| (n, site(n, rng.next_u64()))).collect();
    exchange(&mut server, &mut sites, Time::from_millis(10));
    assert!(sites.iter().all(|(_, c)| c.keys_agreed()));
    // site 5 leaves the table; site 21 takes its free position, site 22 a new one
    let mut table: Vec<Option<PeerEntry>> = (1..=20).map(|k| Some(entry(k))).collect();
    table[4] = None;
    server.endpoint.set_peers(table.clone());
    server.conns[4] = None;
    let now = Time::from_secs(5);
    let mut gone = site(5, rng.next_u64());
    let d = initiation(&mut gone, now);
    assert_eq!(
        server.receive(now, site_addr(5), &d),
        Err(DropReason::UnknownKey)
    );
    table[4] = Some(entry(21));
    table.push(Some(entry(22)));
    server.endpoint.set_peers(table);
    server.conns.push(None);
    let mut added = vec![
        (21, site(21, rng.next_u64())),
        (22, site(22, rng.next_u64())),
    ];
    exchange(&mut server, &mut added, now);
    assert!(
        added.iter().all(|(_, c)| c.keys_agreed()),
        "the added sites got in"
    );
    for (position, n) in [(4usize, 21u32), (20, 22)] {
        assert_eq!(
            server.endpoint.peer_of_key(&key(n).public()),
            Some(position)
        );
        let c = server.conns[position]
            .as_ref()
            .expect("made by its initiation");
        assert_eq!(
            usize::from(mpt_tunnel::index_slot(c.session())),
            position + 1,
            "site {n}'s connection draws its indices in its position's slot"
        );
    }
    assert_eq!(server.endpoint.peer_of_key(&key(5).public()), None);
    // the sites kept are where they were, and their connections answer them in their
    // sessions
    assert_eq!(server.endpoint.peer_of_key(&key(1).public()), Some(0));
    let (_, s1) = &mut sites[0];
    let later = Time::from_secs(6);
    s1.handle_timeout(later);
    let mut replies = 0;
    for t in drain(s1, later) {
        let got = server.receive(later, site_addr(1), &t.contents);
        assert!(got.is_ok(), "site 1's datagram: {got:?}");
        replies += 1;
    }
    assert!(replies > 0, "site 1 sent nothing in a second");
}

#[test]
fn an_initiation_for_another_key_costs_a_hash_and_copies_on_other_paths_cost_nothing() {
    let seed = sim::seed(43);
    let mut server = Server::new(3, seed);
    let mut rng = Rng::new(seed);
    // for another server's key: refused on mac1, unread
    let mut cfg = sim::config(Side::A, 1, true);
    cfg.keys.private = key(1);
    cfg.keys.peer = key(99).public();
    cfg.paths[0].remote = Some(SERVER);
    let mut stray = Connection::<Vec<u8>>::new(cfg, Time::ZERO, random(rng.next_u64()));
    let d = initiation(&mut stray, Time::ZERO);
    let now = Time::from_millis(1);
    assert_eq!(
        server.receive(now, site_addr(1), &d),
        Err(DropReason::BadHandshake)
    );
    assert_eq!(server.read, 0);
    // a real initiation, then the same one again (its copy on another path): read once
    let mut s = site(2, rng.next_u64());
    let d = initiation(&mut s, Time::ZERO);
    let responses = server.receive(now, site_addr(2), &d).expect("taken");
    assert_eq!(
        server.receive(now, site_addr(2), &d),
        Err(DropReason::StaleHandshake)
    );
    assert_eq!(server.read, 1);
    // site 2's first datagrams in the session are for its connection; with another slot in
    // their index, for none
    for mut r in responses {
        s.handle_datagram(
            now,
            Via {
                path: PathId(0),
                from: SERVER,
            },
            &mut r,
            None,
            &mut Copies,
            &mut Vec::new(),
        );
    }
    let mut d = drain(&mut s, now)
        .into_iter()
        .next()
        .expect("site 2 sends in the session")
        .contents;
    assert_eq!(
        Endpoint::route(&d, 3).map(|r| r.0),
        Ok(Route::Connection(1))
    );
    let mut h = mpt_core::wire::Header::new_checked(&mut d[..]).expect("a header");
    let session = h.session();
    h.set_session((session & 0xffff_0000) | 9);
    assert_eq!(
        Endpoint::route(&d, 3).map(|r| r.0),
        Err(DropReason::UnknownSession)
    );
}
