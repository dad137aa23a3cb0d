//! Handshake and session rules, driven through a simulated pair of connections (`sim`): agreeing
//! keys, initiation back-off, replayed initiations, mac1 and cookie replies, unknown keys,
//! restarts of either end, rekeys under traffic and idle, opening datagrams outside the
//! connection, and hostile input.

#[allow(dead_code)]
mod sim;

use std::time::Duration;

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::PathId;
use mpt_tunnel::{DropReason, Event, Outcome, SendError, Via};
use sim::helpers::{
    agreed_pair, assert_exactly, kind_of, last_sent, ms, restart_and_rekey, sent, sim_time,
};
use sim::{packet, Pair, Side, LEN};

// ---- handshake

#[test]
fn handshake_agrees_within_one_round_trip_and_data_flows_both_ways() {
    let mut p = Pair::new(sim::seed(1), 2, true);
    let took = p.run_until(ms(500), Pair::agreed).expect("keys agreed");
    // hellos go at start on every path; a hello and its answer take one RTT (20 ms)
    assert!(took <= ms(25), "took {took:?}");
    assert_eq!(p.ep(Side::A).cipher(), p.ep(Side::B).cipher());
    assert_eq!(p.ep(Side::A).peer_session(), Some(p.ep(Side::B).session()));
    assert_eq!(p.ep(Side::B).peer_session(), Some(p.ep(Side::A).session()));
    p.stream(Side::A, ms(100), ms(5), LEN, 0);
    p.stream(Side::B, ms(100), ms(5), LEN, 1000);
    p.run(ms(200));
    assert_eq!(p.delivered_numbers(Side::B), (0..20).collect::<Vec<_>>());
    assert_eq!(
        p.delivered_numbers(Side::A),
        (1000..1020).collect::<Vec<_>>()
    );
}

#[test]
fn nothing_is_sent_before_keys_are_agreed_and_initiations_back_off() {
    let mut p = Pair::new(sim::seed(2), 1, true);
    // every path down: no initiation gets through
    p.set_up(0, false);
    assert_eq!(
        p.send(Side::A, &packet(1, LEN)),
        Err(SendError::Dropped(DropReason::NoSession))
    );
    p.run(ms(13_500));
    assert!(!p.agreed());
    assert_eq!(p.ep(Side::A).drop_count(DropReason::NoSession), 1);
    // while waiting, initiations only, at 0, 1, 3, 7 and 12 s: the first retry within 1 s,
    // then backing off to 5 s; the responder sends nothing
    let sent = &p.node(Side::A).sent_log;
    assert!(sent.iter().all(|(_, d)| kind_of(d) == Kind::Initiation));
    let at: Vec<u64> = p
        .node(Side::A)
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::HandshakeSent { .. }))
        .map(|(t, _)| t.as_micros() / 1000)
        .collect();
    assert_eq!(at, vec![0, 1000, 3000, 7000, 12000]);
    assert_eq!(sent.len(), 5);
    assert!(p.node(Side::B).sent_log.is_empty());
}

#[test]
fn a_replayed_initiation_changes_nothing() {
    let mut p = agreed_pair(3, 1);
    let (_, init) = p
        .node(Side::A)
        .sent_log
        .iter()
        .find(|(_, d)| kind_of(d) == Kind::Initiation)
        .expect("A sent an initiation")
        .clone();
    let session = p.ep(Side::B).session();
    let answers = sent(&p, Side::B, Kind::Response);
    let from = p.source(Side::A, 0);
    for _ in 0..50 {
        assert_eq!(
            p.inject(Side::B, 0, from, init.clone()),
            Outcome::Dropped(DropReason::StaleHandshake)
        );
    }
    p.run(ms(50));
    assert_eq!(p.ep(Side::B).peer_restarts(), 0);
    assert_eq!(p.ep(Side::B).session(), session);
    assert_eq!(
        sent(&p, Side::B, Kind::Response),
        answers,
        "replays answered"
    );
    // and the session still carries data
    p.stream(Side::A, ms(50), ms(5), LEN, 0);
    p.run(ms(50));
    assert_eq!(p.delivered_numbers(Side::B).len(), 10);
}

// ---- mac1, cookies and strangers

/// An initiation datagram from the key `from` to B on path 0.
fn initiation(from: &mpt_core::seal::PrivateKey, to: &mpt_core::seal::PublicKey) -> Vec<u8> {
    use mpt_core::wire::{Initiation, HEADER_LEN, INITIATION_LEN, NOISE_INITIATION_LEN};
    let payload = Initiation {
        index: 9,
        timestamp: u64::MAX / 2,
        flags: 2,
        paths: 1,
    }
    .emit();
    let mut d = vec![0u8; INITIATION_LEN];
    HeaderRepr {
        kind: Kind::Initiation,
        path: PathId(0),
        path_seq: 0,
        session: 0,
        seq: 0,
        timestamp: 0,
    }
    .emit(&mut d);
    let end = HEADER_LEN + NOISE_INITIATION_LEN;
    mpt_core::seal::Initiator::start(from, to, None, &payload, &mut d[HEADER_LEN..end])
        .expect("initiation");
    let mac1 = mpt_core::seal::MacKeys::new(to).mac1(&d[HEADER_LEN..end]);
    d[end..end + 16].copy_from_slice(&mac1);
    d
}

/// The last initiation `side` sent: its datagram.
fn last_initiation(p: &Pair, side: Side) -> Vec<u8> {
    last_sent(p, side, Kind::Initiation)
}

/// An initiation's Noise message, mac1 and mac2 (the last 32 bytes, after a Noise message as
/// long as its payload's capability list makes it).
fn noise_and_macs(d: &[u8]) -> (&[u8], &[u8], &[u8]) {
    use mpt_core::wire::{HEADER_LEN, INITIATION_MACS};
    let (noise, macs) = d[HEADER_LEN..].split_at(d.len() - HEADER_LEN - INITIATION_MACS);
    (noise, &macs[..16], &macs[16..])
}

/// The cookie reply a responder with key `responder` and cookies `cookies` sends to the
/// initiation `init` that came from `from`.
fn cookie_reply(
    responder: &mpt_core::seal::PublicKey,
    cookies: &mut mpt_core::seal::Cookies,
    now: mpt_core::Time,
    from: std::net::SocketAddr,
    init: &[u8],
) -> Vec<u8> {
    use mpt_core::wire::{COOKIE_REPLY_LEN, HEADER_LEN};
    let header = HeaderRepr::parse_outer(init).expect("header").0;
    let (_, mac1, _) = noise_and_macs(init);
    let cookie = cookies.cookie(now, from, |b| b.fill(0x5a));
    let nonce = [3u8; 24];
    let sealed = mpt_core::seal::MacKeys::new(responder).seal_cookie(
        mac1.try_into().expect("16 bytes"),
        &cookie,
        &nonce,
    );
    let mut d = vec![0u8; COOKIE_REPLY_LEN];
    HeaderRepr {
        kind: Kind::CookieReply,
        path: PathId(0),
        path_seq: 0,
        session: header.session,
        seq: 0,
        timestamp: 0,
    }
    .emit(&mut d);
    d[HEADER_LEN..HEADER_LEN + 24].copy_from_slice(&nonce);
    d[HEADER_LEN + 24..].copy_from_slice(&sealed);
    d
}

#[test]
fn an_initiation_without_its_mac1_is_refused_before_any_key_exchange() {
    let mut p = Pair::new(sim::seed(43), 1, true);
    p.set_up(0, false);
    p.run(ms(10));
    let mut d = last_initiation(&p, Side::A);
    let (noise, mac1, _) = noise_and_macs(&d);
    let b = sim::private_key(Side::B).public();
    assert!(mpt_core::seal::MacKeys::new(&b).mac1_valid(noise, mac1));
    let end = d.len() - 17;
    d[end] ^= 1;
    let from = p.source(Side::A, 0);
    let out = p.inject(Side::B, 0, from, d);
    assert_eq!(out, Outcome::Dropped(DropReason::BadHandshake));
    p.run(ms(10));
    assert_eq!(sent(&p, Side::B, Kind::Response), 0);
}

#[test]
fn a_cookie_reply_makes_the_initiator_prove_its_address_at_once_and_only_once() {
    let mut p = Pair::new(sim::seed(44), 1, true);
    // nothing gets through: the test plays the loaded responder
    p.set_up(0, false);
    p.run(ms(10));
    let b = sim::private_key(Side::B).public();
    let (a_addr, b_addr) = (p.source(Side::A, 0), p.source(Side::B, 0));
    let mut cookies = mpt_core::seal::Cookies::default();
    let first = last_initiation(&p, Side::A);
    assert_eq!(
        noise_and_macs(&first).2,
        &[0u8; 16],
        "no cookie yet: no mac2"
    );
    // a reply bound to another initiation's mac1, or for an index not in flight, is refused
    let mut wrong = first.clone();
    let mac1_at = wrong.len() - mpt_core::wire::INITIATION_MACS;
    wrong[mac1_at] ^= 1;
    let now = p.now;
    let forged = cookie_reply(&b, &mut cookies, now, a_addr, &wrong);
    let mut forged_index = cookie_reply(&b, &mut cookies, now, a_addr, &first);
    forged_index[4] ^= 1; // the session field
    assert_eq!(
        p.inject(Side::A, 0, b_addr, forged),
        Outcome::Dropped(DropReason::BadHandshake)
    );
    assert_eq!(
        p.inject(Side::A, 0, b_addr, forged_index),
        Outcome::Dropped(DropReason::StaleHandshake)
    );
    let initiations = sent(&p, Side::A, Kind::Initiation);
    // the real reply: A sends again at once, with a mac2 the responder can check
    let reply = cookie_reply(&b, &mut cookies, now, a_addr, &first);
    assert_eq!(p.inject(Side::A, 0, b_addr, reply), Outcome::Handled);
    assert_eq!(sent(&p, Side::A, Kind::Initiation), initiations + 1);
    let second = last_initiation(&p, Side::A);
    let (noise, mac1, mac2) = noise_and_macs(&second);
    assert!(cookies.mac2_valid(p.now, a_addr, noise, mac1, mac2));
    assert!(
        !cookies.mac2_valid(p.now, b_addr, noise, mac1, mac2),
        "bound to A's address"
    );
    // a cookie for the proven initiation does not make it send again at once
    let reply = cookie_reply(&b, &mut cookies, now, a_addr, &second);
    p.inject(Side::A, 0, b_addr, reply);
    assert_eq!(sent(&p, Side::A, Kind::Initiation), initiations + 1);
    assert!(p
        .events_since(Side::A, mpt_core::Time::ZERO)
        .iter()
        .any(|e| matches!(e, Event::CookieReceived { again: true, .. })));
    // and the path back: the proven initiation makes the session
    p.set_up(0, true);
    p.run_until(ms(3000), Pair::agreed).expect("agreed");
}

#[test]
fn a_stranger_key_gets_no_answer_and_is_counted() {
    let mut p = agreed_pair(4, 1);
    let session = p.ep(Side::B).session();
    let stranger = mpt_core::seal::PrivateKey::from_bytes([77; 32]);
    let b_public = sim::private_key(Side::B).public();
    let from = "198.19.6.6:6666".parse().expect("address");
    let out = p.inject(Side::B, 0, from, initiation(&stranger, &b_public));
    assert_eq!(out, Outcome::Dropped(DropReason::UnknownKey));
    // a message for another host's key does not even decrypt
    let other = mpt_core::seal::PrivateKey::from_bytes([78; 32]).public();
    let out = p.inject(
        Side::B,
        0,
        from,
        initiation(&sim::private_key(Side::A), &other),
    );
    assert_eq!(out, Outcome::Dropped(DropReason::BadHandshake));
    p.run(ms(10));
    assert_eq!(
        sent(&p, Side::B, Kind::Response),
        1,
        "only the real one answered"
    );
    assert_eq!(p.ep(Side::B).session(), session);
    assert_ne!(p.ep(Side::B).remote(PathId(0)), Some(from));
}

// ---- restarts

#[test]
fn a_restarted_initiator_makes_a_new_session_and_a_fresh_resequencer() {
    let mut p = agreed_pair(5, 2);
    p.stream(Side::A, ms(100), ms(5), LEN, 0);
    let old = p.ep(Side::B).session();
    p.restart(Side::A);
    let took = p.run_until(ms(1000), |p| {
        p.agreed() && p.node(Side::B).ep.peer_restarts() == 1
    });
    let took = took.expect("B took up the restarted peer");
    assert!(took <= ms(25), "took {took:?}");
    let new = p.ep(Side::B).session();
    assert_ne!(old, new);
    assert!(p.events_since(Side::B, sim_time(0)).iter().any(|e| matches!(e,
        Event::NewSession { old: o, session, cipher: Some(_), .. } if *o == old && *session == new)));
    // numbering starts again at 0 and is delivered (a stale resequencer would drop it as old)
    p.stream(Side::A, ms(100), ms(5), LEN, 5000);
    p.run(ms(100));
    let got = p.delivered_numbers(Side::B);
    assert_eq!(
        &got[got.len() - 20..],
        &(5000..5020).collect::<Vec<_>>()[..]
    );
}

#[test]
fn a_restarted_responder_is_found_again_by_the_initiator_within_a_second_and_a_half() {
    let mut p = agreed_pair(6, 2);
    p.stream(Side::A, ms(100), ms(5), LEN, 0);
    let start = p.now;
    p.restart(Side::B);
    // B knows no session: A's datagrams are dropped until A, hearing nothing for `dead`
    // (500 ms), starts a handshake
    let took = p
        .run_until(ms(3000), Pair::agreed)
        .expect("the tunnel healed");
    assert!(took <= ms(600), "healed after {took:?}");
    assert!(p
        .events_since(Side::A, start)
        .iter()
        .any(|e| matches!(e, Event::NewSession { .. })));
    // the path the handshake crossed is up at once; the other after its keepalives
    let up: Vec<_> = (0..2)
        .map(|i| p.ep(Side::A).path_info(PathId(i)).state)
        .collect();
    assert!(up.contains(&mpt_tunnel::LinkState::Up), "{up:?}");
    p.run(ms(200));
    p.stream(Side::A, ms(100), ms(5), LEN, 7000);
    p.stream(Side::B, ms(100), ms(5), LEN, 8000);
    p.run(ms(100));
    let (to_b, to_a) = (p.delivered_numbers(Side::B), p.delivered_numbers(Side::A));
    assert!(
        to_b.ends_with(&(7000..7020).collect::<Vec<_>>()),
        "{to_b:?}"
    );
    assert!(
        to_a.ends_with(&(8000..8020).collect::<Vec<_>>()),
        "{to_a:?}"
    );
}

// ---- rekeys

/// A sealed pair whose initiator renews its keys every `rekey`, over paths of 10 and 60 ms
/// (what one path carries arrives long after what the other carried: reordering).
fn rekeying_pair(seed: u64, rekey: Duration, split_open: bool) -> Pair {
    let mut a = sim::config(Side::A, 2, true);
    a.keys.rekey_after = rekey;
    let b = sim::config(Side::B, 2, true);
    let mut p = Pair::with(sim::seed(seed), a, b);
    p.split_open = split_open;
    for side in [Side::A, Side::B] {
        p.link(side, 1).delay = ms(60);
    }
    p.run_until(ms(500), Pair::agreed).expect("keys agreed");
    // both paths measured and carrying, both ways, before the run counts
    p.stream(Side::A, ms(200), ms(5), LEN, 900_000);
    p.stream(Side::B, ms(200), ms(5), LEN, 900_000);
    p.run(ms(200));
    for node in &mut p.nodes {
        node.delivered.clear();
    }
    p
}

/// Both ends stream to each other for `d` (A numbers from 0, B from 100 000, a packet every
/// `every`); returns how many each sent.
fn both_ways(p: &mut Pair, d: Duration, every: Duration) -> u32 {
    let mut n = 0u32;
    let start = p.now;
    while p.now - start < d {
        let _ = p.send(Side::A, &packet(n, LEN));
        let _ = p.send(Side::B, &packet(100_000 + n, LEN));
        n += 1;
        let next = p.now + every;
        p.run_until(every, |p| p.now >= next);
    }
    n
}

#[test]
fn keys_are_renewed_under_traffic_without_losing_or_reordering_a_packet() {
    for split_open in [false, true] {
        let mut p = rekeying_pair(40, ms(1000), split_open);
        let first = (p.ep(Side::A).session(), p.ep(Side::B).session());
        // both ways at once, for four and a half rekey periods
        let start = p.now;
        let n = both_ways(&mut p, ms(4500), ms(2));
        p.run(ms(300));
        let what = format!("split_open {split_open}");
        assert_exactly(&p.delivered_numbers(Side::B), 0..n, &what);
        assert_exactly(&p.delivered_numbers(Side::A), 100_000..100_000 + n, &what);
        for side in [Side::A, Side::B] {
            let ep = p.ep(side);
            assert!(ep.rekeys() >= 4, "{side:?} rekeyed {} times", ep.rekeys());
            assert_eq!(ep.peer_restarts(), 0, "{side:?}");
            for r in [
                DropReason::UnknownSession,
                DropReason::Replayed,
                DropReason::BadTag,
                DropReason::NoSession,
                DropReason::Duplicate,
                DropReason::TooOld,
            ] {
                assert_eq!(ep.drop_count(r), 0, "{side:?} {r:?}");
            }
        }
        assert!(p.agreed());
        assert_ne!(first, (p.ep(Side::A).session(), p.ep(Side::B).session()));
        // the responder confirmed every new session by the initiator's first datagram in it
        assert!(p
            .events_since(Side::B, start)
            .iter()
            .any(|e| matches!(e, Event::Rekeyed { .. })));
        assert!(!p
            .events_since(Side::B, start)
            .iter()
            .any(|e| matches!(e, Event::NewSession { .. })));
    }
}

#[test]
fn an_idle_tunnel_renews_its_keys_too_and_the_replaced_keys_expire() {
    let mut p = rekeying_pair(41, ms(1000), false);
    p.stream(Side::A, ms(20), ms(5), LEN, 0);
    let old_data = last_sent(&p, Side::A, Kind::Data);
    p.run(ms(1100));
    assert_eq!(p.ep(Side::A).rekeys(), 1);
    assert_eq!(p.ep(Side::B).rekeys(), 1);
    // a datagram of the replaced session is still taken a while (it was in flight) but a
    // copy of it is a replay; and after PREVIOUS_SESSION_KEPT it is of no session at all
    let from = p.source(Side::A, 0);
    let out = p.inject(Side::B, 0, from, old_data.clone());
    assert_eq!(out, Outcome::Dropped(DropReason::Replayed));
    p.run(mpt_tunnel::PREVIOUS_SESSION_KEPT);
    let from = p.source(Side::A, 0);
    let out = p.inject(Side::B, 0, from, old_data);
    assert_eq!(out, Outcome::Dropped(DropReason::UnknownSession));
    p.stream(Side::A, ms(20), ms(5), LEN, 4);
    p.run(ms(100));
    assert_exactly(&p.delivered_numbers(Side::B), 0..8, "B");
}

#[test]
fn a_lost_rekey_response_leaves_the_old_session_working_until_the_retry() {
    let mut p = rekeying_pair(42, ms(1000), false);
    let old = (p.ep(Side::A).session(), p.ep(Side::B).session());
    // idle until the rekey's initiation goes; B's next datagram on each path (its response)
    // is lost
    let since = p.now;
    let rekey_sent = |p: &Pair| {
        p.events_since(Side::A, since)
            .iter()
            .any(|e| matches!(e, Event::HandshakeSent { rekey: true, .. }))
    };
    p.run_until(ms(1500), rekey_sent).expect("a rekey started");
    p.drop_next(Side::B, 0, 1);
    p.drop_next(Side::B, 1, 1);
    p.run(ms(70));
    let n = both_ways(&mut p, ms(1500), ms(5));
    p.run(ms(300));
    assert_exactly(&p.delivered_numbers(Side::B), 0..n, "B");
    assert_exactly(&p.delivered_numbers(Side::A), 100_000..100_000 + n, "A");
    assert_ne!(old, (p.ep(Side::A).session(), p.ep(Side::B).session()));
    assert!(p.agreed());
    assert_eq!(p.ep(Side::A).rekeys(), 1);
    // the session was renewed by the retry
    assert!(p.events_since(Side::A, since).iter().any(|e| matches!(
        e,
        Event::HandshakeSent {
            rekey: true,
            attempt: 2
        }
    )));
}

// ---- without encryption

#[test]
fn without_encryption_the_handshake_still_authenticates_and_data_flows() {
    let mut p = Pair::new(sim::seed(14), 1, false);
    p.run_until(ms(500), Pair::agreed).expect("a session");
    assert_eq!(p.ep(Side::B).cipher(), None);
    p.stream(Side::A, ms(50), ms(5), LEN, 0);
    p.run(ms(20));
    assert_eq!(p.delivered_numbers(Side::B).len(), 10);
    let (_, d) = p.node(Side::A).sent_log.last().expect("sent").clone();
    assert_eq!(d.len(), 16 + LEN, "data in the clear");
    // a peer restart is a new handshake, and a new session
    p.restart(Side::A);
    p.run_until(ms(500), |p| {
        p.agreed() && p.node(Side::B).ep.peer_restarts() == 1
    })
    .expect("a new session");
    p.stream(Side::A, ms(50), ms(5), LEN, 100);
    p.run(ms(20));
    let got = p.delivered_numbers(Side::B);
    assert_eq!(&got[10..], &(100..110).collect::<Vec<_>>()[..]);
}

// ---- hostile input

#[test]
fn garbage_is_dropped_by_reason_and_never_delivered() {
    let mut p = agreed_pair(17, 1);
    let from = p.source(Side::A, 0);
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (vec![], DropReason::Truncated),
        (vec![0x10; 3], DropReason::Truncated),
        (vec![0x01; 40], DropReason::BadVersion),
        // versions 3 and 4, before the oldest spoken
        (vec![0x61; 40], DropReason::BadVersion),
        (vec![0x81; 40], DropReason::BadVersion),
        // versions 5 (the oldest spoken), 6 and 7, a keepalive, not sealed
        (vec![0xa1; 40], DropReason::Unauthenticated),
        (vec![0xc1; 40], DropReason::Unauthenticated),
        (vec![0xe1; 40], DropReason::Unauthenticated),
        (vec![0x11; 2000], DropReason::Oversize),
    ];
    for (d, reason) in cases {
        assert_eq!(p.inject(Side::B, 0, from, d), Outcome::Dropped(reason));
    }
    // a sealed datagram of our session with a flipped byte fails authentication
    p.send(Side::A, &packet(1, LEN)).expect("sent");
    let (_, mut d) = p.node(Side::A).sent_log.last().expect("sent").clone();
    let last = d.len() - 1;
    d[last] ^= 1;
    assert_eq!(
        p.inject(Side::B, 0, from, d),
        Outcome::Dropped(DropReason::BadTag)
    );
    // random bytes with the sealed flag, many of them
    let mut rng = sim::Rng::new(99);
    for _ in 0..1000 {
        let mut d = vec![0u8; 20 + (rng.next_u64() % 1400) as usize];
        rng.fill(&mut d);
        d[0] = 0x30 | (d[0] & 0x0f); // version 1, sealed
        assert!(matches!(p.inject(Side::B, 0, from, d), Outcome::Dropped(_)));
    }
    p.run(ms(50));
    assert_eq!(p.delivered_numbers(Side::B), [1]);
}

// ---- opening outside the connection

/// A run that exercises opening: a stream both ways, a restart, replays and forgeries.
fn opening_run(split_open: bool) -> (Vec<u32>, Vec<u32>, mpt_tunnel::DropCounts) {
    let mut p = Pair::new(sim::seed(18), 2, true);
    p.split_open = split_open;
    p.run_until(ms(500), Pair::agreed).expect("keys agreed");
    p.stream(Side::A, ms(200), ms(4), LEN, 0);
    p.stream(Side::B, ms(200), ms(4), LEN, 1000);
    let from = p.source(Side::A, 0);
    let data: Vec<Vec<u8>> = p
        .node(Side::A)
        .sent_log
        .iter()
        .filter(|(path, d)| *path == 0 && kind_of(d) == Kind::Data)
        .map(|(_, d)| d.clone())
        .take(5)
        .collect();
    for d in &data {
        p.inject(Side::B, 0, from, d.clone());
        // a forgery under a counter never used: fails authentication either way
        let mut forged = d.clone();
        let mut h = mpt_core::wire::Header::new_unchecked(&mut forged[..]);
        let fresh = u64::from(h.counter().expect("sealed")) + 1_000_000;
        h.set_counter(fresh).expect("room");
        p.inject(Side::B, 0, from, forged);
    }
    restart_and_rekey(&mut p);
    p.stream(Side::A, ms(200), ms(4), LEN, 5000);
    p.run(ms(100));
    (
        p.delivered_numbers(Side::B),
        p.delivered_numbers(Side::A),
        p.ep(Side::B).drops(),
    )
}

#[test]
fn opening_outside_the_connection_gives_the_same_results() {
    let inside = opening_run(false);
    let outside = opening_run(true);
    assert_eq!(inside, outside);
    let (to_b, to_a, drops) = outside;
    assert_eq!(
        to_b.len(),
        100,
        "50 before the restart and 50 after, each once"
    );
    // B's last datagrams to A were in flight when A restarted
    assert!(to_a.len() >= 45, "{} of 50", to_a.len());
    assert_eq!(to_a, (1000..1000 + to_a.len() as u32).collect::<Vec<_>>());
    // the replays (authentic, seen before) and the forgeries (fail authentication)
    assert_eq!((drops.replayed, drops.bad_tag), (5, 5));
}

#[test]
fn a_datagram_opened_under_replaced_keys_is_an_old_sessions() {
    let mut p = agreed_pair(19, 1);
    p.stream(Side::A, ms(20), ms(5), LEN, 0);
    let old = p.ep(Side::B).opener().expect("keys agreed");
    restart_and_rekey(&mut p);
    // a datagram of the new session, opened with the old session's key: it cannot
    // authenticate under it, nor count against the new session's replay window
    p.stream(Side::A, ms(5), ms(5), LEN, 100);
    let last_data = |p: &Pair| last_sent(p, Side::A, Kind::Data);
    let mut d = last_data(&p);
    assert_eq!(
        old.open(&mut d),
        None,
        "another session: left to handle_datagram"
    );
    let new = p.ep(Side::B).opener().expect("new keys");
    let mut copy = last_data(&p);
    let opened = new.open(&mut copy).expect("opened");
    // keys replaced once more before the opened datagram is handed in
    restart_and_rekey(&mut p);
    let now = p.now;
    let from = p.source(Side::A, 0);
    let out = p.ep(Side::B).handle_datagram(
        now,
        Via {
            path: PathId(0),
            from,
        },
        &mut copy,
        Some(opened),
        &mut mpt_tunnel::Copies,
        &mut Vec::new(),
    );
    assert_eq!(out, Outcome::Dropped(DropReason::UnknownSession));
}
