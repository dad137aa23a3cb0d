//! The connection's side of the handshake (`docs/protocol.md`, "Handshake"): starting one and
//! starting again while the peer is silent, and answering the peer's (the session it makes
//! is installed in `crypto.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::seal::{self, Initiator, COOKIE_LIFETIME, COOKIE_NONCE_LEN, MAC_LEN};
use mpt_core::wire::{
    CapabilityList, CipherFlags, Datagram, HeaderRepr, Initiation, Kind, Response, HEADER_LEN,
    INITIATION_MACS, INITIATION_PAYLOAD_LEN, MAX_CAPABILITY_LIST, NOISE_INITIATION_LEN,
    RESPONSE_LEN, RESPONSE_PAYLOAD_LEN,
};
use mpt_core::{PathId, Time};

use crate::crypto::{Keys, NextSession};
use crate::endpoint::Accepted;
use crate::pending::Pending;
use crate::{Connection, DropReason, Event};

/// The first retry of an unanswered initiation; each next one waits twice as long, up to
/// [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// A session made in an older version than ours is renewed this long after, trying ours
/// first ([`crate::Connection`]'s handshake timer).
pub const UPGRADE_PROBE: Duration = Duration::from_secs(5);

impl<P> Connection<P> {
    /// As the initiator, at `now`: start a handshake if there is no session, or if the peer
    /// has been silent on every path for `dead` (it restarted, or a NAT forgot us); retry
    /// while unanswered.
    pub(crate) fn handshake_tick(&mut self, now: Time) {
        if self
            .crypto
            .previous
            .as_ref()
            .is_some_and(|p| p.until <= now)
        {
            self.crypto.previous = None;
        }
        if !self.cfg.keys.initiate {
            return;
        }
        // every path idle: the peer's keepalives come an idle interval apart
        let limit = (0..self.paths.len())
            .map(|i| self.silence_limit(i, now))
            .min()
            .unwrap_or(self.cfg.dead);
        let c = &self.crypto;
        let silent = c.last_heard.is_none_or(|t| now - t >= limit);
        // A working session renews its keys when they are `rekey_after` old, and tells the
        // peer at once when our number of paths changed (a reload). One in an older version
        // than ours (our first initiation was lost, or the peer had not upgraded) is renewed
        // once after [`UPGRADE_PROBE`], trying ours first.
        let upgrade = (self.session.caps.version() < mpt_core::wire::VERSION
            || !self.session.caps.listed())
            && !c.upgrade_probed
            && c.made_at.is_some_and(|t| now - t >= UPGRADE_PROBE);
        let rekey = self.session.theirs.is_some()
            && !silent
            && (c.announce_paths
                || upgrade
                || c.cipher.is_some()
                    && c.made_at
                        .is_some_and(|t| now - t >= self.cfg.keys.rekey_after));
        let c = &mut self.crypto;
        c.upgrade_probed |= upgrade;
        if self.session.theirs.is_some() && !silent && !rekey {
            c.attempts = 0;
            c.next_initiation = None;
            return;
        }
        let due = *c.next_initiation.get_or_insert(now);
        if due > now {
            return;
        }
        let wait = RETRY_FIRST
            .saturating_mul(1 << c.attempts.min(8))
            .min(RETRY_MAX);
        c.attempts += 1;
        c.next_initiation = Some(now + wait);
        let attempt = c.attempts;
        self.crypto.initiation = crate::negotiate::initiation(attempt);
        self.initiate(now);
        self.events
            .push_back(Event::HandshakeSent { attempt, rekey });
    }

    /// Write an initiation and queue it on every path whose remote we know.
    fn initiate(&mut self, now: Time) {
        let index = self.fresh_index();
        let unix = self.cfg.keys.unix_nanos_at_zero + now.as_nanos();
        let c = &mut self.crypto;
        let timestamp = unix.max(c.sent_timestamp + 1);
        c.sent_timestamp = timestamp;
        let init = Initiation {
            index,
            timestamp,
            flags: c.flags
                | crate::negotiate::continues(self.session.theirs.is_some())
                | crate::negotiate::feature_flags(&self.cfg),
            paths: self.paths.len() as u8,
        };
        let mut payload = [0u8; INITIATION_PAYLOAD_LEN + MAX_CAPABILITY_LIST];
        let payload_len = match self.crypto.initiation.listed {
            true => init.emit_with(&CapabilityList::ours(), &mut payload),
            false => {
                payload[..INITIATION_PAYLOAD_LEN].copy_from_slice(&init.emit());
                INITIATION_PAYLOAD_LEN
            }
        };
        let k = &self.cfg.keys;
        let noise_len = NOISE_INITIATION_LEN + payload_len - INITIATION_PAYLOAD_LEN;
        let mut msg = vec![0u8; HEADER_LEN + noise_len + INITIATION_MACS];
        let noise_end = HEADER_LEN + noise_len;
        let Ok((state, n)) = Initiator::start(
            &k.private,
            &k.peer,
            k.psk.as_ref(),
            &payload[..payload_len],
            &mut msg[HEADER_LEN..noise_end],
        ) else {
            return;
        };
        debug_assert_eq!(HEADER_LEN + n, noise_end);
        // mac1 under the peer's public key; mac2 under its cookie, while we have a fresh one
        let c = &mut self.crypto;
        let (noise, macs) = msg[HEADER_LEN..].split_at_mut(noise_len);
        let mac1 = c.peer_macs.mac1(noise);
        macs[..MAC_LEN].copy_from_slice(&mac1);
        let cookie = c
            .cookie
            .filter(|(_, at)| now.saturating_since(*at) < COOKIE_LIFETIME);
        if let Some((cookie, _)) = cookie {
            macs[MAC_LEN..].copy_from_slice(&seal::mac2(&cookie, noise, &mac1));
        }
        c.sent_mac1 = mac1;
        c.sent_with_cookie = cookie.is_some();
        c.initiating = Some((state, index));
        for i in 0..self.paths.len() {
            let path = PathId(i as u8);
            let Some(to) = self.paths[i]
                .remote
                .filter(|_| !self.paths[i].live.uplink_down)
            else {
                continue;
            };
            let mut d = msg.clone();
            // our index in the clear: a cookie reply is addressed with it
            HeaderRepr::handshake(Kind::Initiation, path, index, now).emit(&mut d);
            mpt_core::wire::set_version(&mut d, self.crypto.initiation.version);
            self.outbox.pending.push_back(Pending::Raw(crate::Datagram {
                path,
                destination: to,
                kind: crate::TransmitKind::Control,
                contents: d,
            }));
        }
    }

    /// A handshake datagram arrived on `path` from `from` (plain: the Noise message protects
    /// itself).
    pub(crate) fn take_handshake(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &[u8],
    ) -> Result<(), DropReason> {
        let (header, message) = match Datagram::parse(buf) {
            Ok(Datagram::Handshake { header, message }) => (header, message),
            Ok(_) => return Err(self.count(DropReason::Unexpected)),
            Err(e) => return Err(self.count(DropReason::malformed(&e))),
        };
        if header.path != path {
            return Err(self.count(DropReason::PathMismatch));
        }
        let version = mpt_core::wire::version_of(buf).unwrap_or(mpt_core::wire::VERSION);
        match header.kind {
            Kind::Initiation => self.take_initiation(now, path, from, message, version),
            Kind::CookieReply => self.take_cookie(now, path, header.session, message),
            _ => self.take_response(now, path, from, header.session, message, version),
        }
    }

    /// The peer is under load and sent a cookie for our initiation in flight (`ours` its
    /// index): keep it, and send the initiation again at once with it, unless the one in
    /// flight already had one.
    fn take_cookie(
        &mut self,
        now: Time,
        path: PathId,
        ours: u32,
        message: &[u8],
    ) -> Result<(), DropReason> {
        let c = &mut self.crypto;
        if c.initiating.as_ref().is_none_or(|(_, i)| *i != ours) {
            return Err(self.count(DropReason::StaleHandshake));
        }
        let (nonce, sealed) = message.split_at(COOKIE_NONCE_LEN);
        let Some(cookie) = c.peer_macs.open_cookie(&c.sent_mac1, nonce, sealed) else {
            return Err(self.count(DropReason::BadHandshake));
        };
        c.cookie = Some((cookie, now));
        let again = !c.sent_with_cookie;
        self.events.push_back(Event::CookieReceived { path, again });
        if again {
            self.initiate(now);
        }
        Ok(())
    }

    fn take_initiation(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        message: &[u8],
        version: u8,
    ) -> Result<(), DropReason> {
        let (message, macs) = message.split_at(message.len() - INITIATION_MACS);
        if !self.crypto.own_macs.mac1_valid(message, &macs[..MAC_LEN]) {
            return Err(self.count(DropReason::BadHandshake));
        }
        // The same initiation, sent on every path, is taken once: its copies cost nothing.
        if message[..32] == self.crypto.taken_ephemeral {
            return Err(self.count(DropReason::StaleHandshake));
        }
        let accepted =
            Accepted::read(&self.cfg.keys.private, message, version).map_err(|r| self.count(r))?;
        if *accepted.responder.peer() != self.cfg.keys.peer {
            return Err(self.count(DropReason::UnknownKey));
        }
        self.accept(now, path, from, accepted)
    }

    /// An initiation that arrived at `now` on `path` from `from`, read already by the
    /// [`crate::Endpoint`] that found this connection by the initiator's key. Answered in its
    /// version, and the session made in it, unless it is stale or our settings cannot meet.
    pub(crate) fn accept_initiation(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        accepted: Accepted,
    ) -> crate::Outcome {
        // a peer whose paths we follow may have added this one (its initiation says so)
        let limit = if self.cfg.follow_peer_paths {
            mpt_core::MAX_PATHS
        } else {
            self.paths.len()
        };
        if path.index() >= limit {
            return crate::Outcome::Dropped(self.count(DropReason::PathMismatch));
        }
        if accepted.ephemeral == self.crypto.taken_ephemeral {
            return crate::Outcome::Dropped(self.count(DropReason::StaleHandshake));
        }
        crate::Outcome::of(
            self.accept(now, path, from, accepted)
                .map(|()| crate::Outcome::Handled),
        )
    }

    fn accept(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        accepted: Accepted,
    ) -> Result<(), DropReason> {
        let Accepted {
            responder,
            init,
            list,
            ephemeral,
            version,
            ..
        } = accepted;
        if init.timestamp <= self.crypto.taken_timestamp {
            return Err(self.count(DropReason::StaleHandshake));
        }
        let n = usize::from(init.paths);
        if n != self.paths.len() {
            if !self.cfg.follow_peer_paths || !(1..=mpt_core::MAX_PATHS).contains(&n) {
                // the two ends' [[path]] lists differ: path ids would mean other paths
                return Err(self.refused(path, DropReason::PathMismatch));
            }
            // the peer added or removed paths (a reload): ours follow, the session goes on
            self.follow_paths(now, n);
            if path.index() >= n {
                return Err(self.count(DropReason::PathMismatch));
            }
        }
        let cipher = match seal::negotiate(self.crypto.flags, init.flags) {
            Ok(c) => c,
            Err(_) => return Err(self.refused(path, DropReason::CipherMismatch)),
        };
        // Both ends started at once: the initiation of the end with the lower public key goes
        // on, so that both end up in one session.
        if self.crypto.initiating.is_some() && self.cfg.keys.private.public() < self.cfg.keys.peer {
            return Ok(());
        }
        self.session.peer = crate::negotiate::PeerFeatures::of(init.flags);
        let index = self.fresh_index();
        let ours = crate::negotiate::feature_flags(&self.cfg);
        let reply = Response {
            index,
            flags: self.crypto.flags
                | crate::negotiate::continues(self.session.theirs.is_some())
                | ours,
        };
        let Some((mut d, split)) = self.response(responder, reply, list.is_some()) else {
            return Err(self.count(DropReason::BadHandshake));
        };
        HeaderRepr::handshake(Kind::Response, path, init.index, now).emit(&mut d);
        // the session speaks the initiator's version, and what both lists name
        mpt_core::wire::set_version(&mut d, version);
        self.session.caps = crate::negotiate::capabilities(version, ours & init.flags, list);
        let c = &mut self.crypto;
        c.taken_timestamp = init.timestamp;
        c.taken_ephemeral = ephemeral;
        c.initiating = None;
        self.outbox.pending.push_back(Pending::Raw(crate::Datagram {
            path,
            destination: from,
            kind: crate::TransmitKind::Control,
            contents: d,
        }));
        let keys = Keys::new(cipher, &split);
        if self.session.theirs.is_some() && init.flags & CipherFlags::CONTINUES != 0 {
            // The peer has our current session too: we go on sending in it until the peer's
            // first datagram in the new one shows that our response reached it.
            self.crypto.next = Some(NextSession {
                ours: index,
                theirs: init.index,
                keys,
            });
            self.learn_address(path, from);
            self.heard(now, path);
        } else {
            let session = NextSession {
                ours: index,
                theirs: init.index,
                keys,
            };
            self.install(now, (path, from), session, false);
        }
        Ok(())
    }

    /// The response datagram that carries `reply` (its header still to write), with our
    /// capability list when the initiation had one (`listed`), and the session's keys.
    fn response(
        &self,
        responder: mpt_core::seal::Responder,
        reply: Response,
        listed: bool,
    ) -> Option<(Vec<u8>, mpt_core::seal::Split)> {
        let mut payload = [0u8; RESPONSE_PAYLOAD_LEN + MAX_CAPABILITY_LIST];
        let payload_len = match listed {
            true => reply.emit_with(&CapabilityList::ours(), &mut payload),
            false => {
                payload[..RESPONSE_PAYLOAD_LEN].copy_from_slice(&reply.emit());
                RESPONSE_PAYLOAD_LEN
            }
        };
        let mut d = vec![0u8; RESPONSE_LEN + payload_len - RESPONSE_PAYLOAD_LEN];
        let (len, split) = responder
            .respond(
                self.cfg.keys.psk.as_ref(),
                &payload[..payload_len],
                &mut d[HEADER_LEN..],
            )
            .ok()?;
        debug_assert_eq!(HEADER_LEN + len, d.len());
        Some((d, split))
    }

    fn take_response(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        ours: u32,
        message: &[u8],
        version: u8,
    ) -> Result<(), DropReason> {
        if self
            .crypto
            .initiating
            .as_ref()
            .is_none_or(|(_, i)| *i != ours)
        {
            return Err(self.count(DropReason::StaleHandshake));
        }
        let Some((state, index)) = self.crypto.initiating.take() else {
            return Err(self.count(DropReason::StaleHandshake));
        };
        let mut payload = [0u8; RESPONSE_PAYLOAD_LEN + MAX_CAPABILITY_LIST + 16];
        let (n, split) = match state.finish(message, &mut payload) {
            Ok(x) => x,
            // the initiation is spent; the retry timer sends another
            Err(_) => return Err(self.count(DropReason::BadHandshake)),
        };
        let Some((resp, list)) = Response::parse_with(&payload[..n]) else {
            return Err(self.count(DropReason::BadHandshake));
        };
        let cipher = match seal::negotiate(self.crypto.flags, resp.flags) {
            Ok(c) => c,
            Err(_) => return Err(self.refused(path, DropReason::CipherMismatch)),
        };
        self.session.peer = crate::negotiate::PeerFeatures::of(resp.flags);
        // the responder answered in the version of the initiation it took, with its list if
        // it took ours
        let flags = crate::negotiate::feature_flags(&self.cfg) & resp.flags;
        self.session.caps = crate::negotiate::capabilities(version, flags, list);
        let continues = self.session.theirs.is_some() && resp.flags & CipherFlags::CONTINUES != 0;
        let session = NextSession {
            ours: index,
            theirs: resp.index,
            keys: Keys::new(cipher, &split),
        };
        self.install(now, (path, from), session, continues);
        // Our addresses on every path reach the peer at once (a NAT's among them), and every
        // path's RTT is measured.
        for i in 0..self.paths.len() {
            if self.paths[i].remote.is_some() && !self.paths[i].live.uplink_down {
                self.outbox
                    .pending
                    .push_back(Pending::Keepalive(PathId(i as u8)));
            }
        }
        Ok(())
    }

    /// Count a refused handshake, and tell the driver (the operator should hear of it).
    fn refused(&mut self, path: PathId, reason: DropReason) -> DropReason {
        self.events
            .push_back(Event::HandshakeRefused { path, reason });
        self.count(reason)
    }

    /// `N` random bytes.
    pub(crate) fn random<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        (self.random)(&mut b);
        b
    }
}
