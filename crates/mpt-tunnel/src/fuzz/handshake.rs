//! The `handshake` target: handshake messages and cookie replies between a site (a connection
//! that initiates) and a server (an [`Endpoint`] that makes the site's connection from its
//! first initiation), each message the genuine one or changed as the input says.

use std::net::SocketAddr;

use mpt_core::wire::{Kind, HEADER_LEN};
use mpt_core::{PathId, Time};

use super::{addr, config, key, later, random, Input};
use crate::{Admission, Connection, Copies, Endpoint, Outcome, PeerEntry, Route, Via};

/// Each operation's first byte picks it: the site's latest initiation (as the input changes
/// it) arrives at the server from one of a few addresses; the server's latest answer (a
/// response or a cookie reply, changed) arrives at the site; time passes (the site retries);
/// the server comes under load (it answers with cookies); plain bytes with a handshake kind
/// arrive at either; or the site's and the server's datagrams are exchanged unchanged. Never
/// panics; the engine drops what it cannot take.
pub fn handshake(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut h = Handshake::new();
    let mut ops = 0;
    while !inp.is_empty() && ops < 64 {
        ops += 1;
        match inp.byte() % 7 {
            0 => {
                let mut d = h.initiation.clone();
                inp.mutate(&mut d);
                let from = source(inp.byte());
                h.deliver_server(from, d);
            }
            1 => {
                let mut d = h.answer.clone();
                inp.mutate(&mut d);
                h.deliver_site(d);
            }
            2 => {
                h.now = later(h.now, &mut inp);
                h.site.handle_timeout(h.now);
                if let Some(c) = h.conn.as_mut() {
                    c.handle_timeout(h.now);
                }
                h.site_output();
            }
            3 => h.server.limits.load(h.now),
            4 | 5 => {
                let kind = [Kind::Initiation, Kind::Response, Kind::CookieReply]
                    [usize::from(inp.byte() % 3)];
                let n = usize::from(inp.u16() % 400);
                let mut d = inp.bytes(n).to_vec();
                if let Some(b) = d.first_mut() {
                    *b = (*b & 0xf0) | kind as u8;
                }
                match inp.byte() % 2 {
                    0 => {
                        h.deliver_server(source(inp.byte()), d);
                    }
                    _ => h.deliver_site(d),
                }
            }
            _ => h.exchange(),
        }
    }
}

/// One of a few addresses: the site's own, or another's.
fn source(b: u8) -> SocketAddr {
    match b % 4 {
        0 => addr(0, 0),
        n => SocketAddr::from(([203, 0, 113, n], 5000 + u16::from(b))),
    }
}

struct Handshake {
    site: Connection<Vec<u8>>,
    server: Endpoint,
    /// The site's connection at the server, once an initiation made it.
    conn: Option<Connection<Vec<u8>>>,
    /// The site's latest initiation, and the server's latest answer to one.
    initiation: Vec<u8>,
    answer: Vec<u8>,
    /// Cookie replies the server sent.
    cookies: usize,
    now: Time,
}

impl Handshake {
    fn new() -> Handshake {
        let mut server = Endpoint::new(key(1), random(3));
        server.set_peers(vec![Some(PeerEntry {
            key: key(0).public(),
            psk: None,
            listening: true,
        })]);
        let mut base = config(1, 1);
        base.keys.initiate = false;
        base.follow_peer_paths = true;
        server.set_listening(Some(base));
        let mut h = Handshake {
            site: Connection::new(config(0, 1), Time::ZERO, random(1)),
            server,
            conn: None,
            initiation: Vec::new(),
            answer: Vec::new(),
            cookies: 0,
            now: Time::ZERO,
        };
        h.site.handle_timeout(h.now);
        h.site_output();
        h
    }

    /// The site's datagrams: the last initiation is kept; all are dropped.
    fn site_output(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(d) = self.site.poll_datagram(self.now) {
            if is_kind(&d.contents, Kind::Initiation) {
                self.initiation = d.contents.clone();
            }
            out.push(d.contents);
        }
        while self.site.poll_event().is_some() {}
        out
    }

    /// `d` arrives at the server from `from`, as the daemon routes it: an initiation to the
    /// endpoint (then, read, to the site's connection), anything else to the connection its
    /// header names. What the server answers is kept, and returned.
    fn deliver_server(&mut self, from: SocketAddr, d: Vec<u8>) -> Vec<Vec<u8>> {
        let Ok((route, path)) = Endpoint::route(&d, 1) else {
            return Vec::new();
        };
        let via = Via { path, from };
        match route {
            Route::Initiation => match self.server.handle_initiation(self.now, from, &d) {
                Admission::Read(a) => {
                    let outcome = self
                        .server
                        .accept(self.now, via, &mut self.conn, a, || Some(random(4)));
                    if let Outcome::Dropped(_) = outcome {
                        return Vec::new();
                    }
                }
                Admission::Cookie(reply) => {
                    self.cookies += 1;
                    self.answer = reply.to_vec();
                    return vec![reply.to_vec()];
                }
                Admission::UnknownKey(_) | Admission::Dropped(_) => return Vec::new(),
            },
            Route::Connection(_) => {
                let Some(c) = self.conn.as_mut() else {
                    return Vec::new();
                };
                let mut d = d;
                c.handle_datagram(self.now, via, &mut d, None, &mut Copies, &mut Vec::new());
            }
        }
        let mut out = Vec::new();
        if let Some(c) = self.conn.as_mut() {
            while let Some(d) = c.poll_datagram(self.now) {
                if is_kind(&d.contents, Kind::Response) {
                    self.answer = d.contents.clone();
                }
                out.push(d.contents);
            }
            while c.poll_event().is_some() {}
        }
        out
    }

    /// `d` arrives at the site from the server, on the path its header names.
    fn deliver_site(&mut self, mut d: Vec<u8>) {
        let path = PathId(d.get(1).copied().unwrap_or(0));
        let via = Via {
            path,
            from: addr(1, 0),
        };
        self.site
            .handle_datagram(self.now, via, &mut d, None, &mut Copies, &mut Vec::new());
    }

    /// The site's datagrams go to the server and its answers back, unchanged, a few rounds;
    /// the first, its latest initiation if it has nothing else to send.
    fn exchange(&mut self) {
        for round in 0..3 {
            let mut out = self.site_output();
            if out.is_empty() && round == 0 && !self.site.keys_agreed() {
                out.push(self.initiation.clone());
            }
            if out.is_empty() {
                return;
            }
            for d in out {
                for back in self.deliver_server(addr(0, 0), d) {
                    self.deliver_site(back);
                }
            }
        }
    }
}

/// Whether `d` is a plain datagram of `kind`.
fn is_kind(d: &[u8], kind: Kind) -> bool {
    d.len() > HEADER_LEN && d[0] & 0x0f == kind as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unchanged, the site and the server make a session; under load, by way of a cookie.
    #[test]
    fn the_genuine_exchange_makes_a_session() {
        for load in [false, true] {
            let mut h = Handshake::new();
            if load {
                h.server.limits.load(h.now);
            }
            h.exchange();
            assert!(h.site.keys_agreed(), "load {load}");
            assert_eq!(h.cookies, usize::from(load));
        }
    }
}
