//! The connection's side of the handshake (`docs/protocol.md`, "Handshake"): starting one and
//! starting again while the peer is silent, answering the peer's, and installing the session a
//! handshake made (the messages and keys are `CryptoState`'s, `crypto.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use mpt_core::seal::{self, MAC_LEN};
use mpt_core::wire::{
    CipherFlags, Datagram, HeaderRepr, Initiation, Kind, Response, INITIATION_MACS,
};
use mpt_core::{PathId, Time};

use crate::crypto::{Answered, Keys, NextSession};
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
            .map(|i| self.paths[i].silence_limit(now, &self.cfg))
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
        let index =
            crate::session::fresh_index(&mut self.random, self.cfg.index_slot, self.session.ours);
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
        let listed = self.crypto.initiation.listed;
        let Some(msg) = self
            .crypto
            .initiation_message(&self.cfg.keys, now, &init, listed)
        else {
            return;
        };
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
        let again = self
            .crypto
            .take_cookie(now, ours, message)
            .map_err(|r| self.count(r))?;
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
        let index =
            crate::session::fresh_index(&mut self.random, self.cfg.index_slot, self.session.ours);
        let ours = crate::negotiate::feature_flags(&self.cfg);
        let reply = Response {
            index,
            flags: self.crypto.flags
                | crate::negotiate::continues(self.session.theirs.is_some())
                | ours,
        };
        let psk = self.cfg.keys.psk.as_ref();
        let Some((mut d, split)) = crate::crypto::response(psk, responder, reply, list.is_some())
        else {
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
            self.install(now, path, from, session, false);
        }
        Ok(())
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
        let Answered {
            index,
            response: resp,
            list,
            split,
        } = self
            .crypto
            .take_response(ours, message)
            .map_err(|r| self.count(r))?;
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
        self.install(now, path, from, session, continues);
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

    /// A handshake made a session (on `path` from `from`): its indices and keys.
    /// `continues`: the peer had the session this one replaces, and its sequence numbers go
    /// on (a rekey): the old session's keys still open what was in flight, and nothing is
    /// reset. Otherwise the peer is new, or new again.
    pub(crate) fn install(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        session: NextSession,
        continues: bool,
    ) {
        let NextSession { ours, theirs, keys } = session;
        let c = &mut self.crypto;
        let old_open = std::mem::replace(&mut c.open, keys.open);
        self.session.key = keys.seal;
        let old_epoch = c.epoch;
        c.epoch += 1;
        c.cipher = keys.cipher;
        c.made_at = Some(now);
        let old_replay = std::mem::take(&mut c.replay);
        c.attempts = 0;
        c.next_initiation = None;
        c.announce_paths = false;
        c.next = None;
        self.session.counter = 0;
        let old = std::mem::replace(&mut self.session.ours, ours);
        c.previous = continues.then(|| crate::crypto::OldSession {
            session: old,
            open: old_open,
            epoch: old_epoch,
            replay: old_replay,
            until: now + crate::crypto::PREVIOUS_SESSION_KEPT,
        });
        let had = self.session.theirs.replace(theirs).is_some();
        let event = if continues {
            c.rekeys += 1;
            Event::Rekeyed {
                path,
                old,
                session: ours,
            }
        } else {
            // what the peer said of our paths was of the old session
            for p in &mut self.paths {
                p.peer_silent = false;
            }
            if had {
                self.rx.release_equalised(now, true, None);
                self.rx.reseq.reset();
                // the peer's references are gone, and it has none of ours
                self.rx.released.reset();
                self.tx.hc.reset();
                self.crypto.peer_restarts += 1;
                Event::NewSession {
                    path,
                    old,
                    session: ours,
                    cipher: keys.cipher,
                }
            } else {
                for p in &mut self.paths {
                    p.live.session_made(now);
                }
                Event::PeerAuthenticated {
                    path,
                    session: ours,
                    cipher: keys.cipher,
                }
            }
        };
        self.events.push_back(event);
        self.update_repair_wait();
        self.learn_address(path, from);
        self.reopen_closed(now);
        if self.paths[path.index()].live.handshake_crossed() {
            self.turn(now, path, crate::path::Turn::Up { again: true });
        }
        self.heard(now, path);
    }

    /// Count a refused handshake, and tell the driver (the operator should hear of it).
    fn refused(&mut self, path: PathId, reason: DropReason) -> DropReason {
        self.events
            .push_back(Event::HandshakeRefused { path, reason });
        self.count(reason)
    }
}
