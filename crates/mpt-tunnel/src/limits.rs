//! The bounds on the work initiations cost the [`Endpoint`](crate::Endpoint): token buckets in
//! total and per source address, and the load above which an initiation must prove its address
//! (a cookie) before it is read.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use mpt_core::Time;

/// Bounds on the work initiations cost (two X25519 operations to read one, two more to
/// answer): in total, and from one address. A flood of forged initiations, from many
/// addresses or one, costs at most this much key exchange; established sessions do not
/// need handshakes and carry on.
///
/// Under load (initiations arriving faster than [`LOAD_PER_SECOND`], and for a second after),
/// an initiation is read only if its mac2 proves that its sender receives at its address;
/// the others get a cookie reply (a hash and a small encryption, no key exchange), with
/// which a real initiator proves it at once. Forged sources never see their cookie: a flood
/// from them costs no key exchange at all, and real sites still get through.
#[derive(Debug)]
pub(crate) struct HandshakeLimits {
    total: Bucket,
    per_source: HashMap<IpAddr, Bucket>,
    /// Under load: per address and port, the initiations that proved them.
    proven: HashMap<SocketAddr, Bucket>,
    /// Every initiation with a valid mac1 takes a token: when they run out, we are under load.
    arrivals: Bucket,
    load_until: Time,
}

/// What to do with an initiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    Read,
    /// Under load, without proof of its address: answer with a cookie, unread.
    Cookie,
    /// Over a bound: refuse it unread (its sender retries).
    Refuse,
}

/// Initiations per second (and at once) above which we are under load.
pub const LOAD_PER_SECOND: f64 = 200.0;
const LOAD_BURST: f64 = 400.0;
/// How long load lasts after the arrivals last ran over.
const LOAD_HOLD: Duration = Duration::from_secs(1);

/// Initiations read per second in all, and at once.
pub const HANDSHAKES_PER_SECOND: f64 = 1000.0;
const HANDSHAKE_BURST: f64 = 1000.0;
/// Initiations read per second from one address (sites behind one carrier NAT share one),
/// and at once.
pub const HANDSHAKES_PER_SOURCE: f64 = 50.0;
const HANDSHAKE_SOURCE_BURST: f64 = 100.0;
/// Addresses remembered before the per-address buckets start again.
const SOURCES_REMEMBERED: usize = 4096;

/// A token bucket on the driver's clock.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Time,
}

impl Bucket {
    fn full(burst: f64, now: Time) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Take one token at `now`, if there is one.
    fn take(&mut self, now: Time, rate: f64, burst: f64) -> bool {
        let dt = now.saturating_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl HandshakeLimits {
    pub(crate) fn new(now: Time) -> HandshakeLimits {
        HandshakeLimits {
            total: Bucket::full(HANDSHAKE_BURST, now),
            per_source: HashMap::new(),
            proven: HashMap::new(),
            arrivals: Bucket::full(LOAD_BURST, now),
            load_until: now,
        }
    }

    /// The bucket of `from` in `buckets` (the buckets start again past
    /// [`SOURCES_REMEMBERED`] addresses).
    fn source<A: std::hash::Hash + Eq>(
        buckets: &mut HashMap<A, Bucket>,
        from: A,
        burst: f64,
        now: Time,
    ) -> &mut Bucket {
        if buckets.len() >= SOURCES_REMEMBERED && !buckets.contains_key(&from) {
            buckets.clear();
        }
        buckets
            .entry(from)
            .or_insert_with(|| Bucket::full(burst, now))
    }

    /// Under load from `now` (as if the arrivals had just run over): the fuzz targets' way to
    /// have cookies sent.
    pub(crate) fn load(&mut self, now: Time) {
        self.load_until = now + LOAD_HOLD;
    }

    /// Whether an initiation from `from` may be read at `now`; `proven`: its mac2 is valid.
    pub(crate) fn admit(
        &mut self,
        now: Time,
        from: SocketAddr,
        proven: impl FnOnce() -> bool,
    ) -> Admit {
        if !self.arrivals.take(now, LOAD_PER_SECOND, LOAD_BURST) {
            self.load_until = now + LOAD_HOLD;
        }
        if now < self.load_until {
            // Only initiators that proved their address and port are read, within the total
            // and the bound of one address and port: sites behind one carrier NAT share an
            // address but not a port, and one that proves its own cannot take the total.
            if !proven() {
                return Admit::Cookie;
            }
            let source = Self::source(&mut self.proven, from, HANDSHAKE_SOURCE_BURST, now);
            return match source.take(now, HANDSHAKES_PER_SOURCE, HANDSHAKE_SOURCE_BURST)
                && self.total.take(now, HANDSHAKES_PER_SECOND, HANDSHAKE_BURST)
            {
                true => Admit::Read,
                false => Admit::Refuse,
            };
        }
        let source = Self::source(&mut self.per_source, from.ip(), HANDSHAKE_SOURCE_BURST, now);
        if source.take(now, HANDSHAKES_PER_SOURCE, HANDSHAKE_SOURCE_BURST)
            && self.total.take(now, HANDSHAKES_PER_SECOND, HANDSHAKE_BURST)
        {
            Admit::Read
        } else {
            Admit::Refuse
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> SocketAddr {
        SocketAddr::new(std::net::Ipv4Addr::from(0xc612_0000 + n).into(), 4754)
    }

    #[test]
    fn one_address_is_bounded_before_load_and_a_flood_gets_cookies_while_proven_sites_are_read() {
        let mut l = HandshakeLimits::new(Time::ZERO);
        let t = Time::from_secs(10);
        // a burst from one address: its own bound
        let read = (0..150)
            .filter(|_| l.admit(t, ip(1), || false) == Admit::Read)
            .count();
        assert_eq!(read, HANDSHAKE_SOURCE_BURST as usize);
        // a flood from many addresses: once more than the load burst has arrived, every
        // unproven initiation gets a cookie, and a proven one is read
        let answers: Vec<Admit> = (0..2000)
            .map(|k| l.admit(t, ip(100 + k), || false))
            .collect();
        assert!(answers[..100].iter().all(|a| *a == Admit::Read));
        assert!(answers[300..].iter().all(|a| *a == Admit::Cookie));
        assert_eq!(
            l.admit(t, ip(1), || true),
            Admit::Read,
            "proven, though its address is over its bound"
        );
        // one address and port that prove themselves are read within their own bound, and
        // others (another port of the same address too) still
        let read = (0..2000)
            .filter(|_| l.admit(t, ip(2), || true) == Admit::Read)
            .count();
        assert_eq!(read, HANDSHAKE_SOURCE_BURST as usize);
        let other_port = SocketAddr::new(ip(2).ip(), 4755);
        assert_eq!(l.admit(t, other_port, || true), Admit::Read);
        // load lasts while the flood does, and a second after it stops
        let later = t + Duration::from_millis(900);
        assert_eq!(l.admit(later, ip(5000), || false), Admit::Cookie);
        let calm = later + LOAD_HOLD + Duration::from_secs(2);
        assert_eq!(l.admit(calm, ip(5001), || false), Admit::Read);
    }

    #[test]
    fn proven_initiations_under_load_are_bounded_in_total() {
        let mut l = HandshakeLimits::new(Time::ZERO);
        let t = Time::from_secs(10);
        for k in 0..500 {
            l.admit(t, ip(k), || false);
        }
        let read = (0..3000)
            .filter(|_| l.admit(t, ip(7), || true) == Admit::Read)
            .count();
        assert!(read <= HANDSHAKE_BURST as usize, "{read} read");
        assert!(read > 0);
    }
}
