//! Which address family a path to a peer named by host name uses. An interface-only path to a
//! host name has a dual-stack socket (IPv6, IPv4 mapped), and sends to whichever of the
//! peer's addresses its interface can reach: what the interface has now ([`of_interface`]:
//! an IPv6-only LTE uplink, an IPv4-only DSL line, or both), among what the name resolves to
//! ([`candidates`]: one address per family, IPv6 first). Where both families are there, the
//! path tries IPv6 first and IPv4 when IPv6 does not answer, and keeps what answers
//! ([`choose`]). Pure, with the time passed in, but for reading the interface's addresses.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use mpt_core::Time;

/// How long a candidate that has not answered is tried before the next one.
pub const TRY_FOR: Duration = Duration::from_secs(2);

/// How old a peer's resolved addresses may get before they are looked up again (DNS changes),
/// even while all its paths answer.
pub const REFRESH_EVERY: Duration = Duration::from_secs(300);

/// The address families an interface can send from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Families {
    /// An IPv4 address (not link-local 169.254/16).
    pub v4: bool,
    /// An IPv6 address that reaches beyond the link (not link-local, loopback or
    /// unspecified).
    pub v6: bool,
}

impl Families {
    /// The one family of a socket bound to `local` (a path that is not dual-stack).
    pub fn of_local(local: SocketAddr) -> Families {
        Families {
            v4: local.is_ipv4(),
            v6: local.is_ipv6(),
        }
    }

    /// The families `addrs` (an interface's addresses) give.
    pub fn of_addresses(addrs: impl IntoIterator<Item = IpAddr>) -> Families {
        let mut f = Families::default();
        for a in addrs {
            match a.to_canonical() {
                IpAddr::V4(a) => f.v4 |= !a.is_link_local() && !a.is_unspecified(),
                IpAddr::V6(a) => {
                    let link_local = (a.segments()[0] & 0xffc0) == 0xfe80;
                    f.v6 |= !link_local && !a.is_loopback() && !a.is_unspecified();
                }
            }
        }
        f
    }

    /// What its name says in logs.
    pub fn name(self) -> &'static str {
        match (self.v4, self.v6) {
            (true, true) => "IPv4 and IPv6",
            (true, false) => "IPv4 only",
            (false, true) => "IPv6 only",
            (false, false) => "no address",
        }
    }
}

/// The families interface `ifname` has addresses of now (none if it is absent or the
/// addresses cannot be read).
pub fn of_interface(ifname: &str) -> Families {
    let mut addrs = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below by freeifaddrs; every node and
    // the address it points to stay valid until then, and are only read.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return Families::default();
        }
        let mut at = head;
        while !at.is_null() {
            let ifa = &*at;
            at = ifa.ifa_next;
            if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
                continue;
            }
            if std::ffi::CStr::from_ptr(ifa.ifa_name).to_bytes() != ifname.as_bytes() {
                continue;
            }
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    addrs.push(IpAddr::from(
                        u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                    ));
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    addrs.push(IpAddr::from(sin6.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
        libc::freeifaddrs(head);
    }
    Families::of_addresses(addrs)
}

/// Where a path with `families` may send among `addrs` (what the peer's name resolves to): an
/// address of each family the path has, IPv6 first: `current` (where it sends now) if it is
/// one of them, so that a name with several addresses does not move a path that works; else
/// the first.
pub fn candidates(
    addrs: &[SocketAddr],
    families: Families,
    current: Option<SocketAddr>,
) -> Vec<SocketAddr> {
    let pick = |v6: bool| {
        let ours =
            |a: &&SocketAddr| a.is_ipv6() == v6 && if v6 { families.v6 } else { families.v4 };
        let mut of = addrs.iter().filter(ours);
        let first = of.clone().next();
        of.find(|&&a| Some(a) == current).or(first).copied()
    };
    pick(true).into_iter().chain(pick(false)).collect()
}

/// Where a path sends at `now`: it sends to `current` (`None`: nowhere yet), set at `since`,
/// and has an answer (`answered`: the path is up) or not. A path that answers keeps its
/// address while it is a candidate; one whose address is no longer a candidate (its interface
/// lost that family, or the name moved) goes to the first candidate; one that has not
/// answered for [`TRY_FOR`] goes to the next. `None` with no candidates: leave it as it is.
pub fn choose(
    cands: &[SocketAddr],
    current: Option<SocketAddr>,
    answered: bool,
    since: Time,
    now: Time,
) -> Option<SocketAddr> {
    let first = *cands.first()?;
    let Some(at) = current.and_then(|c| cands.iter().position(|&a| a == c)) else {
        return Some(first);
    };
    if answered || now.saturating_since(since) < TRY_FOR {
        return Some(cands[at]);
    }
    Some(cands[(at + 1) % cands.len()])
}

/// What was last looked up of a peer's host name, and when each path's address was last
/// chosen (a peer's, behind its lock).
#[derive(Debug, Default, Clone)]
pub struct Resolved {
    /// The addresses, as the resolver gave them.
    pub addrs: Vec<SocketAddr>,
    /// When they were looked up; `None`: never.
    pub at: Option<Time>,
    /// When each path's address was last set by [`choose`].
    pub since: Vec<Time>,
}

impl Resolved {
    /// Whether to look the name up again at `now`: never done, or older than
    /// [`REFRESH_EVERY`].
    pub fn stale(&self, now: Time) -> bool {
        self.at
            .is_none_or(|at| now.saturating_since(at) >= REFRESH_EVERY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    const BOTH: Families = Families { v4: true, v6: true };
    const V4: Families = Families {
        v4: true,
        v6: false,
    };
    const V6: Families = Families {
        v4: false,
        v6: true,
    };

    #[test]
    fn an_interface_has_the_families_of_its_addresses_beyond_the_link() {
        let f = |s: &[&str]| Families::of_addresses(s.iter().map(|s| s.parse().expect("ip")));
        assert_eq!(f(&["198.18.30.2", "fe80::1"]), V4);
        assert_eq!(f(&["2001:db8:31::2", "fe80::1"]), V6);
        assert_eq!(f(&["198.18.30.2", "2001:db8:31::2"]), BOTH);
        assert_eq!(f(&["fe80::1", "169.254.1.1", "::1"]), Families::default());
        assert_eq!(f(&["::ffff:198.18.30.2"]), V4);
        assert_eq!(f(&[]), Families::default());
        assert_eq!(Families::of_local(a("0.0.0.0:0")), V4);
        assert_eq!(Families::of_local(a("[::]:0")), V6);
    }

    #[test]
    fn candidates_are_one_address_per_family_the_path_has_ipv6_first() {
        let addrs = [
            a("198.18.100.1:4754"),
            a("198.18.100.2:4754"),
            a("[2001:db8:100::1]:4754"),
        ];
        assert_eq!(
            candidates(&addrs, BOTH, None),
            vec![a("[2001:db8:100::1]:4754"), a("198.18.100.1:4754")]
        );
        assert_eq!(candidates(&addrs, V4, None), vec![a("198.18.100.1:4754")]);
        assert_eq!(
            candidates(&addrs, V6, None),
            vec![a("[2001:db8:100::1]:4754")]
        );
        assert!(candidates(&addrs, Families::default(), None).is_empty());
        // a name with only an A record, on an IPv6-only uplink: nothing to reach (a DNS64
        // resolver gives the uplink a 64:ff9b:: address instead)
        assert!(candidates(&addrs[..2], V6, None).is_empty());
        assert!(candidates(&[], BOTH, None).is_empty());
        // where the path sends now stays its family's candidate while the name has it
        let now = Some(a("198.18.100.2:4754"));
        assert_eq!(
            candidates(&addrs, BOTH, now),
            vec![a("[2001:db8:100::1]:4754"), a("198.18.100.2:4754")]
        );
        let gone = Some(a("198.18.100.9:4754"));
        assert_eq!(candidates(&addrs, V4, gone), vec![a("198.18.100.1:4754")]);
    }

    #[test]
    fn choosing_keeps_what_answers_and_moves_on_from_what_does_not() {
        let (v6, v4) = (a("[2001:db8:100::1]:4754"), a("198.18.100.1:4754"));
        let both = [v6, v4];
        let t = |ms: u64| Time::from_millis(ms);
        // nothing yet: IPv6 first
        assert_eq!(choose(&both, None, false, t(0), t(0)), Some(v6));
        // IPv6 not answering: kept for TRY_FOR, then IPv4, then IPv6 again
        assert_eq!(choose(&both, Some(v6), false, t(0), t(1_999)), Some(v6));
        assert_eq!(choose(&both, Some(v6), false, t(0), t(2_000)), Some(v4));
        assert_eq!(choose(&both, Some(v4), false, t(2_000), t(3_000)), Some(v4));
        assert_eq!(choose(&both, Some(v4), false, t(2_000), t(4_000)), Some(v6));
        // what answers is kept, however long ago it was set
        assert_eq!(choose(&both, Some(v4), true, t(0), t(60_000)), Some(v4));
        assert_eq!(choose(&both, Some(v6), true, t(0), t(60_000)), Some(v6));
        // one family: it stays, answered or not
        assert_eq!(choose(&[v4], Some(v4), false, t(0), t(60_000)), Some(v4));
        // the interface lost IPv6 (renumbered to IPv4 only): IPv4 at once, even though the
        // old address still answered a moment ago
        assert_eq!(
            choose(&[v4], Some(v6), true, t(59_000), t(60_000)),
            Some(v4)
        );
        // an address the path learned from the peer that is not a candidate: the first
        assert_eq!(
            choose(&both, Some(a("198.18.7.7:4754")), true, t(0), t(1)),
            Some(v6)
        );
        // no candidates (no address on the interface, or the name gave none of its family):
        // left as it is
        assert_eq!(choose(&[], Some(v6), false, t(0), t(60_000)), None);
        // a clock that went back does not move it early
        assert_eq!(choose(&both, Some(v6), false, t(5_000), t(1_000)), Some(v6));
    }

    #[test]
    fn resolved_addresses_go_stale_after_the_refresh_period() {
        let mut r = Resolved::default();
        assert!(r.stale(Time::ZERO));
        r.at = Some(Time::from_secs(10));
        assert!(!r.stale(Time::from_secs(309)));
        assert!(r.stale(Time::from_secs(310)));
    }
}
