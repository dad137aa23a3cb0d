//! Taking initiations at our sockets: the [`mpt_tunnel::Endpoint`] reads them (mac1, cookies,
//! bounds, the responder's key exchange, the peer by its key); here the one it read is handed
//! to its peer's connection under the peer's lock, and cookie replies are sent.

use std::net::{IpAddr, SocketAddr};

use mpt_core::{PathId, Time};
use mpt_tunnel::{Admission, DropReason, Outcome};
use tracing::warn;

use super::{random_source, Outputs, Tunnel};

/// Where a datagram arrived: the socket, the path (the socket's `[[path]]`, or what a listen
/// socket's datagram says), who sent it and to which of our addresses.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub socket: usize,
    pub path: PathId,
    pub from: SocketAddr,
    pub to: Option<IpAddr>,
}

impl Tunnel {
    /// An initiation `d` arrived at `now` as `at` says: the endpoint reads it, and the peer's
    /// connection (made now for a listening peer that has none) answers it. Returns the peer
    /// it was for, or why it was dropped.
    ///
    /// Lock order: the endpoint's, then the peer's (nothing takes them the other way).
    pub fn take_initiation(
        &self,
        now: Time,
        at: Arrival,
        d: &[u8],
        out: &mut Outputs,
    ) -> Result<usize, DropReason> {
        let mut endpoint = self.peers.lock_endpoint();
        let accepted = match endpoint.handle_initiation(now, at.from, d) {
            Admission::Read(a) => a,
            Admission::Cookie(reply) => {
                drop(endpoint);
                self.send_cookie(at, &reply);
                return Err(DropReason::HandshakeLimited);
            }
            Admission::UnknownKey(key) => {
                if let Some(n) = self.counters.drop_logged(DropReason::UnknownKey) {
                    warn!(%key, from = %at.from, refused = n,
                        "a handshake from a key no [[peer]] has: refused");
                }
                return Err(DropReason::UnknownKey);
            }
            Admission::Dropped(DropReason::HandshakeLimited) => {
                if let Some(n) = self.counters.drop_logged(DropReason::HandshakeLimited) {
                    warn!(from = %at.from, refused = n,
                        "more initiations than the handshake bounds allow (a flood?): refused unread");
                }
                return Err(DropReason::HandshakeLimited);
            }
            Admission::Dropped(r) => return Err(r),
        };
        let i = accepted.peer();
        // (the endpoint's table and the peer list change together: see `Peers::replace`)
        let Some(peer) = self.peers.get(i).filter(|p| !p.retired) else {
            return Err(DropReason::UnknownKey);
        };
        let mut guard = peer.lock();
        let outcome = endpoint.accept(
            now,
            mpt_tunnel::Via {
                path: at.path,
                from: at.from,
            },
            &mut guard,
            accepted,
            || random_source().ok(),
        );
        drop(endpoint);
        if let Some(c) = guard.as_mut() {
            Tunnel::gather(c, now, i, out);
            peer.note_deadline(c);
        }
        drop(guard);
        match outcome {
            Outcome::Dropped(r) => Err(r),
            _ => {
                peer.arrived(at.path, at.socket, at.to);
                Ok(i)
            }
        }
    }

    /// Send a cookie reply back where the initiation came from, by the socket it came to.
    fn send_cookie(&self, at: Arrival, reply: &[u8]) {
        let Some(sock) = self.socket(at.socket) else {
            return;
        };
        let way = super::socket::way(&sock, at.from);
        let sent = match way {
            crate::stream::Way::Udp => {
                let ok = sock.io.try_send(reply, at.from, at.to).is_ok();
                if ok {
                    sock.wire.sent(at.from, 1, reply.len());
                }
                ok
            }
            way => super::socket::send_on(&self.counters, &way, reply),
        };
        if sent {
            self.counters
                .calls
                .cookie_replies
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
