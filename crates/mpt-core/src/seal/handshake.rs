//! The hello exchange that agrees on both sides' randoms (sans-IO: randomness comes from the
//! caller).

use crate::wire::HelloRepr;

/// The peer a [`Handshake`] agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub random: [u8; 32],
    /// The session id in the peer's headers.
    pub session: u32,
}

/// What to do with a hello that opened with the handshake key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloOutcome {
    /// It carries our own random: a reflection. Dropped.
    Reflected,
    Accepted {
        /// A new peer was agreed on: derive and install its session keys (the old ones, if
        /// any, belong to a peer that restarted).
        install: bool,
        /// The peer asked for an answer: send this hello back (rate-limited by the caller).
        reply: Option<HelloRepr>,
    },
}

/// The hello exchange (`docs/protocol.md`, "Handshake").
///
/// Each side has a random for its lifetime and a challenge it renews at each agreement. A
/// hello whose echo is our current challenge was written after the peer saw that challenge,
/// so it is fresh, not a replay: only such a hello can change the agreed peer. A side without
/// keys for its peer's random sets the request flag, and the other side answers.
#[derive(Debug, Clone)]
pub struct Handshake {
    random: [u8; 32],
    challenge: [u8; 16],
    peer_challenge: [u8; 16],
    peer: Option<Peer>,
}

impl Handshake {
    pub fn new(random: [u8; 32], challenge: [u8; 16]) -> Handshake {
        Handshake {
            random,
            challenge,
            peer_challenge: [0; 16],
            peer: None,
        }
    }

    pub fn random(&self) -> &[u8; 32] {
        &self.random
    }

    /// The agreed peer, once there is one.
    pub fn peer(&self) -> Option<Peer> {
        self.peer
    }

    /// Our hello; `request` asks the peer to answer.
    pub fn hello(&self, request: bool) -> HelloRepr {
        HelloRepr {
            random: self.random,
            challenge: self.challenge,
            echo: self.peer_challenge,
            flags: if request { HelloRepr::FLAG_REQUEST } else { 0 },
        }
    }

    /// A hello arrived (already authenticated) from a peer whose headers carry `session`.
    /// `next_challenge` replaces our challenge if a new peer is agreed on.
    pub fn on_hello(
        &mut self,
        session: u32,
        h: &HelloRepr,
        next_challenge: [u8; 16],
    ) -> HelloOutcome {
        if h.random == self.random {
            return HelloOutcome::Reflected;
        }
        self.peer_challenge = h.challenge;
        let fresh = h.echo == self.challenge;
        let known = self.peer.is_some_and(|p| p.random == h.random);
        let install = fresh && !known;
        if install {
            self.peer = Some(Peer {
                random: h.random,
                session,
            });
            self.challenge = next_challenge;
        }
        let reply = h.request().then(|| {
            let have_keys = self.peer.is_some_and(|p| p.random == h.random);
            self.hello(!have_keys)
        });
        HelloOutcome::Accepted { install, reply }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A and B run the exchange over a lossless channel.
    fn exchange(a: &mut Handshake, b: &mut Handshake) -> (u32, u32) {
        let (mut installs_a, mut installs_b) = (0, 0);
        let mut to_b = Some(a.hello(true));
        let mut to_a = None;
        for round in 0..10u8 {
            if let Some(h) = to_b.take() {
                if let HelloOutcome::Accepted { install, reply } = b.on_hello(1, &h, [round; 16]) {
                    installs_b += u32::from(install);
                    to_a = reply;
                }
            }
            if let Some(h) = to_a.take() {
                if let HelloOutcome::Accepted { install, reply } =
                    a.on_hello(2, &h, [100 + round; 16])
                {
                    installs_a += u32::from(install);
                    to_b = reply;
                }
            }
        }
        (installs_a, installs_b)
    }

    #[test]
    fn handshake_agrees_in_three_hellos_and_replays_change_nothing() {
        let mut a = Handshake::new([1; 32], [11; 16]);
        let mut b = Handshake::new([2; 32], [22; 16]);
        assert_eq!(exchange(&mut a, &mut b), (1, 1));
        assert_eq!(a.peer().map(|p| p.random), Some([2; 32]));
        assert_eq!(b.peer().map(|p| p.random), Some([1; 32]));
        assert_eq!(a.peer().map(|p| p.session), Some(2));

        // B restarts; its old hellos are replayed to A afterwards
        let old_b = b.hello(true);
        let mut b2 = Handshake::new([3; 32], [33; 16]);
        assert_eq!(exchange(&mut b2, &mut a), (1, 1));
        assert_eq!(a.peer().map(|p| p.random), Some([3; 32]));
        let HelloOutcome::Accepted { install, .. } = a.on_hello(2, &old_b, [0; 16]) else {
            panic!("replay refused as a reflection")
        };
        assert!(!install, "a replayed hello changed the peer");
        assert_eq!(a.peer().map(|p| p.random), Some([3; 32]));
        // our own hello reflected back
        assert_eq!(
            a.on_hello(1, &a.hello(true), [0; 16]),
            HelloOutcome::Reflected
        );
    }

    #[test]
    fn a_fresh_hello_from_an_older_session_of_the_peer_is_not_fresh_after_an_agreement() {
        // B's hello that echoed A's challenge, captured, replayed after B restarted and A
        // agreed with the new B: A renewed its challenge, so the echo is stale.
        let mut a = Handshake::new([1; 32], [11; 16]);
        let mut b = Handshake::new([2; 32], [22; 16]);
        let _ = b.on_hello(1, &a.hello(true), [23; 16]);
        let captured = b.hello(true); // echoes A's challenge 11
        let mut b2 = Handshake::new([3; 32], [33; 16]);
        assert_eq!(exchange(&mut b2, &mut a), (1, 1));
        let HelloOutcome::Accepted { install, .. } = a.on_hello(2, &captured, [0; 16]) else {
            panic!()
        };
        assert!(!install);
        assert_eq!(a.peer().map(|p| p.random), Some([3; 32]));
    }
}
