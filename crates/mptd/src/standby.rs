//! Several peers allowed one prefix (the servers of a site): each has a `priority` (1 is the
//! highest), and one of them carries the prefixes they share, the others stand by, connected
//! and kept alive. Which one is a function of who is up, and for how long ([`choose`]); the
//! tunnel asks again when a peer goes up or down, and while a peer waits out its failback
//! hold (`tunnel.failback_ms`).
//!
//! A peer that went down and comes back takes its prefixes back only after it has been up for
//! the hold, so that a server that flaps does not drag the site's traffic with it. A peer up
//! for the first time since the daemon started takes them at once.

use std::time::Duration;

use crate::config::{IpNet, PeerConfig};

/// A peer as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub priority: u8,
    pub up: bool,
    /// It went down after it had been up.
    pub failed: bool,
    /// How long it has been up (zero while down).
    pub up_for: Duration,
}

/// Why the active peer of a shared prefix is the one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// It has the highest priority of those up.
    Best,
    /// `better` (a higher priority) is up again after it was down, and takes over when it
    /// has been up for the failback hold: `left` from now.
    Holding { better: usize, left: Duration },
    /// No peer is up but some that are back from being down and not yet past their hold:
    /// this one (the one that was active, or the highest priority of them) carries it.
    OnlyHeld,
    /// No peer of the prefix is up: the highest priority waits for its peer.
    NoneUp,
}

/// The peer that carries a prefix `holders` share (indices into `peers`, at least one), and
/// why; `current` is the one that carries it now.
pub fn choose(
    peers: &[Candidate],
    holders: &[usize],
    current: Option<usize>,
    failback: Duration,
) -> (usize, Why) {
    let mut order = holders.to_vec();
    order.sort_by_key(|&i| peers[i].priority);
    let past_hold = |c: &Candidate| c.up && (!c.failed || c.up_for >= failback);
    if let Some(&best) = order.iter().find(|&&i| past_hold(&peers[i])) {
        let held = order
            .iter()
            .take_while(|&&i| i != best)
            .find(|&&i| peers[i].up);
        return match held {
            Some(&better) => (
                best,
                Why::Holding {
                    better,
                    left: failback.saturating_sub(peers[better].up_for),
                },
            ),
            None => (best, Why::Best),
        };
    }
    if let Some(c) = current.filter(|c| holders.contains(c) && peers[*c].up) {
        return (c, Why::OnlyHeld);
    }
    match order.iter().find(|&&i| peers[i].up) {
        Some(&i) => (i, Why::OnlyHeld),
        None => (order[0], Why::NoneUp),
    }
}

/// A prefix that several peers are allowed: who holds it, who carries it now, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shared {
    pub net: IpNet,
    /// The peers allowed it, by slot position, the highest priority first.
    pub holders: Vec<usize>,
    pub active: usize,
    pub why: Why,
}

/// The prefixes that several of `peers` (each with its slot position) are allowed, in the
/// order they first appear, each carried by `previous`'s choice where that is still one of its
/// holders, else by the highest priority.
pub fn shared(peers: &[(usize, &PeerConfig)], previous: &[Shared]) -> Vec<Shared> {
    let mut out: Vec<Shared> = Vec::new();
    for (_, p) in peers {
        for net in &p.allowed {
            if out.iter().any(|s| s.net == *net) {
                continue;
            }
            let mut holders: Vec<(u8, usize)> = peers
                .iter()
                .filter(|(_, q)| q.allowed.contains(net))
                .map(|(k, q)| (q.priority.unwrap_or(u8::MAX), *k))
                .collect();
            if holders.len() < 2 {
                continue;
            }
            holders.sort();
            let holders: Vec<usize> = holders.into_iter().map(|(_, k)| k).collect();
            let active = previous
                .iter()
                .find(|s| s.net == *net)
                .map(|s| s.active)
                .filter(|a| holders.contains(a))
                .unwrap_or(holders[0]);
            out.push(Shared {
                net: *net,
                holders,
                active,
                why: Why::NoneUp,
            });
        }
    }
    out
}

/// What `mptctl show` says of peer `i`'s part in the shared prefixes: `None` if it shares
/// none. `names` gives a peer's name by position.
pub fn describe(i: usize, shared: &[Shared], names: &dyn Fn(usize) -> String) -> Option<String> {
    let mine: Vec<&Shared> = shared.iter().filter(|s| s.holders.contains(&i)).collect();
    if mine.is_empty() {
        return None;
    }
    let parts: Vec<String> = mine
        .iter()
        .map(|s| {
            let net = s.net;
            if s.active == i {
                match s.why {
                    Why::Best => format!("active for {net}: the highest priority up"),
                    Why::Holding { better, left } => format!(
                        "active for {net}: {} is up again, takes over in {:.1} s (failback hold)",
                        names(better),
                        left.as_secs_f64()
                    ),
                    Why::OnlyHeld => format!(
                        "active for {net}: the peers up are all back from being down, within their failback hold"
                    ),
                    Why::NoneUp => format!("active for {net}, but no peer of it is up"),
                }
            } else {
                format!("standby for {net}: {} carries it", names(s.active))
            }
        })
        .collect();
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_secs(10);

    fn up(priority: u8, failed: bool, secs: u64) -> Candidate {
        Candidate {
            priority,
            up: true,
            failed,
            up_for: Duration::from_secs(secs),
        }
    }

    fn down(priority: u8) -> Candidate {
        Candidate {
            priority,
            up: false,
            failed: true,
            up_for: Duration::ZERO,
        }
    }

    #[test]
    fn the_highest_priority_up_carries_and_the_next_takes_over_when_it_goes_down() {
        let both = [up(1, false, 5), up(2, false, 5)];
        assert_eq!(choose(&both, &[0, 1], Some(0), HOLD), (0, Why::Best));
        // priorities, not the order in the config
        let both = [up(2, false, 5), up(1, false, 5)];
        assert_eq!(choose(&both, &[0, 1], Some(0), HOLD), (1, Why::Best));
        let first_down = [down(1), up(2, false, 5)];
        assert_eq!(choose(&first_down, &[0, 1], Some(0), HOLD), (1, Why::Best));
        let none = [down(1), down(2)];
        assert_eq!(choose(&none, &[0, 1], Some(1), HOLD), (0, Why::NoneUp));
    }

    #[test]
    fn a_peer_back_from_down_takes_over_only_after_the_hold_and_a_first_up_at_once() {
        let back = [up(1, true, 3), up(2, false, 60)];
        assert_eq!(
            choose(&back, &[0, 1], Some(1), HOLD),
            (
                1,
                Why::Holding {
                    better: 0,
                    left: Duration::from_secs(7)
                }
            )
        );
        let held_long_enough = [up(1, true, 10), up(2, false, 60)];
        assert_eq!(
            choose(&held_long_enough, &[0, 1], Some(1), HOLD),
            (0, Why::Best)
        );
        let first_time = [up(1, false, 0), up(2, false, 60)];
        assert_eq!(choose(&first_time, &[0, 1], Some(1), HOLD), (0, Why::Best));
        // held, but the only one up: better than nothing
        let only = [up(1, true, 1), down(2)];
        assert_eq!(choose(&only, &[0, 1], Some(1), HOLD), (0, Why::OnlyHeld));
        // both held: the one that carries it keeps it
        let both_held = [up(1, true, 1), up(2, true, 2)];
        assert_eq!(
            choose(&both_held, &[0, 1], Some(1), HOLD),
            (1, Why::OnlyHeld)
        );
    }

    #[test]
    fn shared_prefixes_are_found_and_keep_their_active_peer() {
        let peer = |name: &str, allowed: &[&str], priority: Option<u8>| PeerConfig {
            name: name.into(),
            public_key: mpt_core::seal::PublicKey::from_bytes([name.len() as u8; 32]),
            endpoint: None,
            allowed: allowed.iter().map(|a| a.parse().expect("prefix")).collect(),
            preshared_key_file: None,
            priority,
        };
        let peers = [
            peer("b", &["0.0.0.0/0", "198.19.99.3/32"], Some(2)),
            peer("a", &["0.0.0.0/0", "198.19.99.1/32"], Some(1)),
            peer("lan", &["198.18.210.0/24"], None),
        ];
        let slots: Vec<(usize, &PeerConfig)> = peers.iter().enumerate().collect();
        let s = shared(&slots, &[]);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].holders.clone(), s[0].active), (vec![1, 0], 1));
        let mut was = s.clone();
        was[0].active = 0;
        assert_eq!(shared(&slots, &was)[0].active, 0);
        let names = |i: usize| peers[i].name.clone();
        let d = describe(0, &s, &names).expect("shares");
        assert!(d.starts_with("standby for 0.0.0.0/0: a carries it"), "{d}");
        assert_eq!(describe(2, &s, &names), None);
    }
}
