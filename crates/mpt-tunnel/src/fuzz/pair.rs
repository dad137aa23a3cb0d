//! The `connection` and `control` targets: a pair of connections that made a session (with
//! valid keys); the input then makes datagrams that side B seals in its session and hands to
//! side A, on a clock it moves, among packets both sides send.

use mpt_core::seal::SEAL_OVERHEAD;
use mpt_core::wire::{HeaderRepr, Kind, HEADER_LEN};
use mpt_core::{PathId, Time};

use super::{addr, config, later, random, Input};
use crate::{BatchOut, Connection, Copies, Via};

/// Control kinds: reports, keepalives and their acks, goodbyes, resend requests, MTU probes
/// and their acks, parity.
const CONTROL: [Kind; 8] = [
    Kind::Keepalive,
    Kind::KeepaliveAck,
    Kind::Report,
    Kind::Goodbye,
    Kind::Probe,
    Kind::ProbeAck,
    Kind::Nack,
    Kind::Parity,
];

/// Every kind.
const ALL: [Kind; 16] = [
    Kind::Data,
    Kind::Keepalive,
    Kind::KeepaliveAck,
    Kind::Report,
    Kind::Initiation,
    Kind::Goodbye,
    Kind::Response,
    Kind::CookieReply,
    Kind::Bundle,
    Kind::Express,
    Kind::Continued,
    Kind::Probe,
    Kind::ProbeAck,
    Kind::Nack,
    Kind::Resent,
    Kind::Parity,
];

/// Every control datagram, sealed in the session, in sequences (see [`run`]).
pub fn control_datagrams(data: &[u8]) {
    run(data, &CONTROL);
}

/// Datagrams of every kind (data, pieces, bundles, resent packets, parity and the control
/// messages), sealed in the session, in sequences (see [`run`]).
pub fn connection(data: &[u8]) {
    run(data, &ALL);
}

/// Byte 0 picks the number of paths (1 to 3); then each operation's first byte picks it:
/// time passes (A's timers run when due), B seals a datagram of one of `kinds` from the
/// input's fields and body (the right session and path, unless the input says otherwise) and
/// A takes it, A or B sends an inner packet (B's datagrams go to A, but those the input
/// drops), or plain bytes arrive at A. A's output is taken after each, as a driver does.
fn run(data: &[u8], kinds: &[Kind]) {
    let mut inp = Input::new(data);
    let paths = usize::from(inp.byte() % 3) + 1;
    let Some(mut p) = Pair::new(paths) else {
        return;
    };
    let mut ops = 0;
    while !inp.is_empty() && ops < 256 {
        ops += 1;
        match inp.byte() % 8 {
            0 => {
                p.now = later(p.now, &mut inp);
                if p.a.poll_timeout() <= p.now {
                    p.a.handle_timeout(p.now);
                }
                if p.b.poll_timeout() <= p.now {
                    p.b.handle_timeout(p.now);
                }
            }
            1..=4 => {
                let d = p.sealed(&mut inp, kinds);
                p.deliver(d);
            }
            5 => {
                let packet = packet(&mut inp);
                let mut out = BatchOut::default();
                p.send(true, &packet, &mut out);
            }
            6 => {
                let packet = packet(&mut inp);
                let mut out = BatchOut::default();
                let keep = inp.byte();
                let sent = p.send(false, &packet, &mut out);
                let all = out.before.into_iter().map(|d| (d.path, d.contents));
                let all = all
                    .chain(sent)
                    .chain(out.after.into_iter().map(|d| (d.path, d.contents)));
                for (i, (path, d)) in all.enumerate() {
                    if keep & (1 << (i % 8)) == 0 {
                        p.deliver_on(path, d);
                    }
                }
            }
            _ => {
                let n = usize::from(inp.u16() % 1600);
                let d = inp.bytes(n).to_vec();
                p.deliver(d);
            }
        }
        p.drain();
    }
}

/// An inner IPv4 packet of a length the input gives, its payload from the input.
fn packet(inp: &mut Input<'_>) -> Vec<u8> {
    let len = usize::from(inp.u16() % 1500).max(20);
    let mut p = vec![0u8; len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[8] = 64;
    p[9] = inp.byte();
    let body = inp.bytes(len - 20);
    p[20..20 + body.len()].copy_from_slice(body);
    p
}

/// Two connections that made a session: A (which the input's datagrams go to) and B.
struct Pair {
    a: Connection<Vec<u8>>,
    b: Connection<Vec<u8>>,
    now: Time,
    paths: usize,
}

impl Pair {
    /// A initiates; datagrams go both ways until both have the keys (`None` if they never do).
    fn new(paths: usize) -> Option<Pair> {
        let mut p = Pair {
            a: Connection::new(config(0, paths), Time::ZERO, random(1)),
            b: Connection::new(config(1, paths), Time::ZERO, random(2)),
            now: Time::ZERO,
            paths,
        };
        for _ in 0..8 {
            p.a.handle_timeout(p.now);
            p.b.handle_timeout(p.now);
            let mut moved = false;
            while let Some(d) = p.a.poll_datagram(p.now) {
                let via = Via {
                    path: d.path,
                    from: addr(0, d.path.index()),
                };
                let mut buf = d.contents;
                p.b.handle_datagram(p.now, via, &mut buf, None, &mut Copies, &mut Vec::new());
                moved = true;
            }
            while let Some(d) = p.b.poll_datagram(p.now) {
                p.deliver_on(d.path, d.contents);
                moved = true;
            }
            if p.a.keys_agreed() && p.b.keys_agreed() && !moved {
                return Some(p);
            }
            p.now = p.now + std::time::Duration::from_millis(1);
        }
        debug_assert!(false, "the pair made no session");
        None
    }

    /// A datagram B seals in its session: kind, header fields and body from the input.
    fn sealed(&mut self, inp: &mut Input<'_>, kinds: &[Kind]) -> Vec<u8> {
        let kind = kinds[usize::from(inp.byte()) % kinds.len()];
        let how = inp.byte();
        // one path past the last: a path the connection does not have
        let path = PathId(how % (self.paths as u8 + 1));
        let session = match how & 0x80 {
            0 => self.a.session.ours,
            _ => inp.u32(),
        };
        let header = HeaderRepr {
            kind,
            path,
            path_seq: inp.u16(),
            session,
            seq: inp.u32(),
            timestamp: inp.u32(),
        };
        let n = usize::from(inp.u16() % 1500);
        let body = inp.bytes(n);
        let mut buf = vec![0u8; HEADER_LEN + body.len() + SEAL_OVERHEAD];
        header.emit(&mut buf);
        buf[HEADER_LEN..][..body.len()].copy_from_slice(body);
        match self.b.session.seal_plain(&mut buf, HEADER_LEN + body.len()) {
            Some(_) => buf,
            None => Vec::new(),
        }
    }

    /// `d` arrives at A on the path its header names (on path 0 if it names none).
    fn deliver(&mut self, d: Vec<u8>) {
        let path = PathId(d.get(1).copied().unwrap_or(0));
        self.deliver_on(path, d);
    }

    fn deliver_on(&mut self, path: PathId, mut d: Vec<u8>) {
        let via = Via {
            path,
            from: addr(1, path.index()),
        };
        let mut delivered = Vec::new();
        self.a
            .handle_datagram(self.now, via, &mut d, None, &mut Copies, &mut delivered);
        for p in &delivered {
            assert!(!p.is_empty(), "an empty packet delivered");
        }
    }

    /// A (`a`) or B sends `packet` now: the datagram it went in, if any, with its path.
    fn send(&mut self, a: bool, packet: &[u8], out: &mut BatchOut) -> Option<(PathId, Vec<u8>)> {
        let c = if a { &mut self.a } else { &mut self.b };
        let prefix = c.prefix();
        let mut buf = vec![0u8; prefix + packet.len() + 16];
        buf[prefix..][..packet.len()].copy_from_slice(packet);
        match c.send_one(self.now, &mut buf, packet.len(), out) {
            Ok(Some((path, _, len))) => {
                buf.truncate(len);
                Some((path, buf))
            }
            _ => None,
        }
    }

    /// What A (and B) have to send, their events and the packets released, taken.
    fn drain(&mut self) {
        for c in [&mut self.a, &mut self.b] {
            while c.poll_datagram(self.now).is_some() {}
            while c.poll_event().is_some() {}
            let mut out = Vec::new();
            c.take_delivered(&mut Copies, &mut out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pair makes a session, and a data datagram B seals from the input reaches A's
    /// resequencer.
    #[test]
    fn a_sealed_datagram_from_the_input_is_taken() {
        let mut p = Pair::new(2).expect("a session");
        let body = [
            0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        let mut data = vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20];
        data.extend_from_slice(&body);
        let d = p.sealed(&mut Input::new(&data), &ALL);
        let mut buf = d.clone();
        let via = Via {
            path: PathId(0),
            from: addr(1, 0),
        };
        let out =
            p.a.handle_datagram(p.now, via, &mut buf, None, &mut Copies, &mut Vec::new());
        assert_eq!(out, crate::Outcome::Data(1));
    }
}
