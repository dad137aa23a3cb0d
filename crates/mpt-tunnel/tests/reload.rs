//! Reload (`Connection::reconfigure`), driven through a simulated pair of connections (`sim`):
//! paths added, replaced and removed under data, a listening peer following the initiator's
//! paths, and settings applied at once.

#[allow(dead_code)]
mod sim;

use mpt_core::wire::Kind;
use mpt_tunnel::{DropReason, Event};
use sim::helpers::{agreed_pair, assert_exactly, down_at, kind_of, ms};
use sim::{Pair, Side, LEN};

/// `side`'s running configuration with its paths named `names` (ids in order), each on the
/// sim's link of its id.
fn with_paths(p: &mut Pair, side: Side, names: &[&str]) -> mpt_tunnel::ConnectionConfig {
    let mut cfg = p.ep(side).config().clone();
    let all = sim::config(side, names.len(), cfg.keys.encryption.is_some()).paths;
    cfg.paths = names
        .iter()
        .zip(all)
        .map(|(n, s)| mpt_tunnel::PathSettings {
            name: (*n).to_owned(),
            ..s
        })
        .collect();
    cfg
}

/// Data datagrams `side` sent on each path since `from` entries of its log.
fn data_per_path(p: &Pair, side: Side, from: usize) -> Vec<usize> {
    let mut n = vec![0; mpt_core::MAX_PATHS];
    for (path, d) in &p.node(side).sent_log[from..] {
        if kind_of(d) == Kind::Data {
            n[*path] += 1;
        }
    }
    n
}

#[test]
fn a_reload_adds_a_path_and_replaces_another_while_data_flows_and_nothing_is_lost() {
    for sealing in [true, false] {
        let mut p = Pair::new(sim::seed(50), 2, sealing);
        p.add_links(3);
        p.run_until(ms(500), Pair::agreed).expect("keys agreed");
        let sessions = (p.ep(Side::A).session(), p.ep(Side::B).session());
        let mut n = p.stream(Side::A, ms(300), ms(2), LEN, 0);
        // A reloads first: path 1 is another ("q1", in p1's place), and a third comes
        let a = with_paths(&mut p, Side::A, &["p0", "q1", "p2"]);
        let now = p.now;
        p.ep(Side::A).reconfigure(now, a);
        let from = p.node(Side::A).sent_log.len();
        n += p.stream(Side::A, ms(200), ms(2), LEN, n);
        // until the peer has them too, the new paths carry no data
        let early = data_per_path(&p, Side::A, from);
        assert_eq!(early[2], 0, "sealing {sealing}: {early:?}");
        let b = with_paths(&mut p, Side::B, &["p0", "q1", "p2"]);
        let now = p.now;
        p.ep(Side::B).reconfigure(now, b);
        let from = p.node(Side::A).sent_log.len();
        n += p.stream(Side::A, ms(3000), ms(2), LEN, n);
        p.run(ms(300));
        let what = format!("sealing {sealing}");
        assert_exactly(&p.delivered_numbers(Side::B), 0..n, &what);
        let later = data_per_path(&p, Side::A, from);
        assert!(
            later[..3].iter().all(|&k| k > 100),
            "{what}: all three paths carry data once both ends have them: {later:?}"
        );
        // path 0, kept, lost nothing; the session is the same, or continued (the count was
        // announced in a handshake that goes on from it)
        assert_eq!(p.ep(Side::B).stats().paths[0].lost, 0, "{what}");
        for side in [Side::A, Side::B] {
            assert_eq!(p.ep(side).peer_restarts(), 0, "{what} {side:?}");
            assert_eq!(p.ep(side).path_count(), 3);
            assert!(!p
                .events_since(side, mpt_core::Time::ZERO)
                .iter()
                .any(|e| matches!(e, Event::NewSession { .. })));
        }
        assert!(p.agreed(), "{what}");
        assert_ne!(
            sessions,
            (p.ep(Side::A).session(), p.ep(Side::B).session()),
            "{what}: the new count was announced in a handshake"
        );
        assert!(p.ep(Side::A).rekeys() >= 1, "{what}");
    }
}

#[test]
fn a_listening_peer_follows_the_initiators_paths_as_they_are_added_and_removed() {
    let a = sim::config(Side::A, 2, true);
    let mut b = sim::config(Side::B, 2, true);
    b.follow_peer_paths = true;
    for p in &mut b.paths {
        p.remote = None;
    }
    let mut p = Pair::with(sim::seed(51), a, b);
    p.add_links(3);
    p.run_until(ms(500), Pair::agreed).expect("keys agreed");
    let mut n = p.stream(Side::A, ms(200), ms(2), LEN, 0);
    let a3 = with_paths(&mut p, Side::A, &["p0", "p1", "p2"]);
    let now = p.now;
    p.ep(Side::A).reconfigure(now, a3);
    let at = p.now;
    n += p.stream(Side::A, ms(1000), ms(2), LEN, n);
    assert_eq!(p.ep(Side::B).path_count(), 3);
    assert!(p
        .events_since(Side::B, at)
        .contains(&Event::PeerPathsChanged { from: 2, to: 3 }));
    // B answers on the new path too, once it has heard A there
    let from = p.node(Side::A).sent_log.len();
    let bf = p.node(Side::B).sent_log.len();
    n += p.stream(Side::A, ms(500), ms(2), LEN, n);
    assert!(data_per_path(&p, Side::A, from)[2] > 50);
    assert!(p.node(Side::B).sent_log[bf..]
        .iter()
        .any(|(path, _)| *path == 2));
    // and back to two
    let a2 = with_paths(&mut p, Side::A, &["p0", "p1"]);
    let now = p.now;
    p.ep(Side::A).reconfigure(now, a2);
    n += p.stream(Side::A, ms(1000), ms(2), LEN, n);
    p.run(ms(300));
    assert_eq!(p.ep(Side::B).path_count(), 2);
    assert_exactly(&p.delivered_numbers(Side::B), 0..n, "follow");
    for side in [Side::A, Side::B] {
        assert_eq!(p.ep(side).peer_restarts(), 0, "{side:?}");
    }
    assert_eq!(p.ep(Side::B).drop_count(DropReason::PathMismatch), 0);
}

#[test]
fn a_reload_applies_the_connection_settings_and_a_path_spec_at_once() {
    let mut p = agreed_pair(52, 2);
    let mut cfg = with_paths(&mut p, Side::A, &["p0", "p1"]);
    cfg.paths[1].backup = true;
    cfg.dead = ms(200);
    cfg.keepalive = ms(50);
    let now = p.now;
    p.ep(Side::A).reconfigure(now, cfg);
    let from = p.node(Side::A).sent_log.len();
    p.stream(Side::A, ms(200), ms(5), LEN, 0);
    assert_eq!(data_per_path(&p, Side::A, from)[..2], [40, 0]);
    assert_eq!(p.ep(Side::A).config().dead, ms(200));
    // path 0 fails: with dead_ms 200 it is down within 250 ms, and the backup takes over
    p.set_up(0, false);
    let t0 = p.now;
    p.stream(Side::A, ms(400), ms(5), LEN, 40);
    let down = down_at(&p, Side::A, 0).expect("path 0 down");
    assert!(down - t0 <= ms(260), "down after {:?}", down - t0);
}
