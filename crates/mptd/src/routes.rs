//! Which peer an inner packet goes to (longest prefix of the peers' `allowed`), and whether a
//! peer may send a packet from its source address.

use ahash::AHashMap as HashMap;
use mpt_core::inner::Ip;
use std::net::IpAddr;

use crate::config::{IpNet, PeerConfig};
use crate::standby::Shared;

/// The peers' `allowed` prefixes, for longest-prefix matching: per address family and prefix
/// length (longest first), the prefixes of that length.
#[derive(Debug, Default)]
pub struct Routes {
    v4: Vec<(u8, HashMap<u32, usize>)>,
    v6: Vec<(u8, HashMap<u128, usize>)>,
    /// One peer with no `allowed` at all: everything goes to it (and it may send anything).
    only: Option<usize>,
    /// Prefixes shared by several peers ([`crate::standby`]), and each peer that holds one
    /// but does not carry it now: it may still send from it.
    standby: Vec<(IpNet, usize)>,
}

fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl Routes {
    /// The routes to `peers`, each (its position by slot, its `[[peer]]`); a prefix in
    /// `shared` goes to its active peer.
    pub fn new<'a>(
        peers: impl IntoIterator<Item = (usize, &'a PeerConfig)>,
        shared: &[Shared],
    ) -> Routes {
        let mut r = Routes::default();
        let peers: Vec<(usize, &PeerConfig)> = peers.into_iter().collect();
        if let [(i, p)] = peers[..] {
            if p.allowed.is_empty() {
                r.only = Some(i);
                return r;
            }
        }
        for (i, p) in peers {
            for net in &p.allowed {
                if shared.iter().any(|s| s.net == *net && s.active != i) {
                    r.standby.push((*net, i));
                    continue;
                }
                match net {
                    IpNet::V4(n) => {
                        let len = n.prefix_len();
                        let table = match r.v4.iter_mut().find(|(l, _)| *l == len) {
                            Some((_, t)) => t,
                            None => {
                                r.v4.push((len, HashMap::new()));
                                &mut r.v4.last_mut().expect("pushed").1
                            }
                        };
                        table.insert(u32::from(n.network()), i);
                    }
                    IpNet::V6(n) => {
                        let len = n.prefix_len();
                        let table = match r.v6.iter_mut().find(|(l, _)| *l == len) {
                            Some((_, t)) => t,
                            None => {
                                r.v6.push((len, HashMap::new()));
                                &mut r.v6.last_mut().expect("pushed").1
                            }
                        };
                        table.insert(u128::from(n.network()), i);
                    }
                }
            }
        }
        r.v4.sort_by_key(|t| std::cmp::Reverse(t.0));
        r.v6.sort_by_key(|t| std::cmp::Reverse(t.0));
        r
    }

    /// The peer whose prefix matches `addr` longest.
    pub fn lookup(&self, addr: IpAddr) -> Option<usize> {
        if self.only.is_some() {
            return self.only;
        }
        self.longest(addr).map(|(_, i)| i)
    }

    /// The length of the longest prefix that matches `addr`, and its peer.
    fn longest(&self, addr: IpAddr) -> Option<(u8, usize)> {
        match addr {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4
                    .iter()
                    .find_map(|(len, t)| t.get(&(a & mask4(*len))).map(|&i| (*len, i)))
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                self.v6
                    .iter()
                    .find_map(|(len, t)| t.get(&(a & mask6(*len))).map(|&i| (*len, i)))
            }
        }
    }

    /// Whether `peer` may send an inner packet from `source`: its longest match is that peer,
    /// or a prefix that peer shares with the one that carries it.
    pub fn allows(&self, peer: usize, source: IpAddr) -> bool {
        if self.only.is_some() {
            return self.only == Some(peer);
        }
        match self.longest(source) {
            Some((_, i)) if i == peer => true,
            Some((len, _)) => self
                .standby
                .iter()
                .any(|(net, i)| *i == peer && net.prefix_len() == len && net.contains(&source)),
            None => false,
        }
    }

    /// Every packet goes to one peer (no lookup needed).
    pub fn single(&self) -> Option<usize> {
        self.only
    }
}

/// The destination of an inner IPv4 or IPv6 packet.
pub fn destination(packet: &[u8]) -> Option<IpAddr> {
    Ip::new_checked(packet).map(|ip| ip.dst())
}

/// The source of an inner IPv4 or IPv6 packet.
pub fn source(packet: &[u8]) -> Option<IpAddr> {
    Ip::new_checked(packet).map(|ip| ip.src())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpt_core::seal::PublicKey;

    fn peer(allowed: &[&str]) -> PeerConfig {
        PeerConfig {
            name: "p".into(),
            public_key: PublicKey::from_bytes([0; 32]),
            endpoint: None,
            allowed: allowed.iter().map(|a| a.parse().expect("prefix")).collect(),
            preshared_key_file: None,
            priority: None,
        }
    }

    #[test]
    fn the_longest_prefix_wins_and_sources_are_checked() {
        let peers = [
            peer(&["10.99.0.2/32", "192.168.10.0/24"]),
            peer(&["10.99.0.3/32", "192.168.0.0/16", "2001:db8:1::/48"]),
            peer(&["0.0.0.0/0"]),
        ];
        let r = Routes::new(peers.iter().enumerate(), &[]);
        let ip = |s: &str| s.parse::<IpAddr>().expect("address");
        assert_eq!(r.lookup(ip("10.99.0.2")), Some(0));
        assert_eq!(r.lookup(ip("192.168.10.7")), Some(0));
        assert_eq!(r.lookup(ip("192.168.11.7")), Some(1));
        assert_eq!(r.lookup(ip("8.8.8.8")), Some(2));
        assert_eq!(r.lookup(ip("2001:db8:1::5")), Some(1));
        assert_eq!(r.lookup(ip("2001:db8:2::5")), None);
        assert!(r.allows(0, ip("192.168.10.1")));
        assert!(!r.allows(0, ip("192.168.11.1")), "peer 1's address");
        assert!(!r.allows(1, ip("10.99.0.2")), "peer 0's address");
        // one peer without prefixes takes everything
        let one = Routes::new([(0, &peer(&[]))], &[]);
        assert_eq!(one.lookup(ip("2001:db8::1")), Some(0));
        assert!(one.allows(0, ip("1.2.3.4")));
        // a retired slot before it: the peer at slot position 1 takes everything
        let one = Routes::new([(1, &peer(&[]))], &[]);
        assert_eq!(one.lookup(ip("2001:db8::1")), Some(1));
    }

    #[test]
    fn a_shared_prefix_goes_to_its_active_peer_and_the_standby_may_still_send_from_it() {
        let peers = [
            peer(&["0.0.0.0/0", "198.19.99.1/32"]),
            peer(&["0.0.0.0/0", "198.19.99.3/32"]),
            peer(&["198.18.210.0/24"]),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().expect("address");
        for active in [0, 1] {
            let shared = [Shared {
                net: "0.0.0.0/0".parse().expect("prefix"),
                holders: vec![0, 1],
                active,
                why: crate::standby::Why::Best,
            }];
            let r = Routes::new(peers.iter().enumerate(), &shared);
            assert_eq!(r.lookup(ip("8.8.8.8")), Some(active));
            assert_eq!(r.lookup(ip("198.19.99.3")), Some(1), "its own /32");
            assert!(r.allows(0, ip("8.8.8.8")) && r.allows(1, ip("8.8.8.8")));
            assert!(!r.allows(0, ip("198.18.210.5")), "the LAN peer's prefix");
            assert!(!r.allows(0, ip("198.19.99.3")), "the other server's /32");
        }
    }

    #[test]
    fn addresses_come_from_the_right_bytes() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[12..16].copy_from_slice(&[10, 0, 0, 1]);
        v4[16..20].copy_from_slice(&[10, 0, 0, 2]);
        assert_eq!(source(&v4), Some("10.0.0.1".parse().expect("a")));
        assert_eq!(destination(&v4), Some("10.0.0.2".parse().expect("a")));
        assert_eq!(destination(&v4[..19]), None);
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[23] = 1;
        v6[39] = 2;
        assert_eq!(source(&v6), Some("::1".parse().expect("a")));
        assert_eq!(destination(&v6), Some("::2".parse().expect("a")));
        assert_eq!(source(&[0x50; 40]), None);
    }
}
