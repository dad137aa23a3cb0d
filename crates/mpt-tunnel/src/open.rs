//! Opening sealed datagrams outside the connection: the AEAD is the costly part of receiving,
//! and a driver that keeps the connection behind a lock (shared with the sending side) can open
//! a whole batch first, without the lock, and hand the results in under it.
//!
//! [`Connection::opener`] gives the current session's key; [`Opener::open`] opens in place
//! what is sealed data or control of that session, and leaves everything else (handshakes, other
//! sessions, malformed input) to [`Connection::handle_datagram`], which also takes what it
//! opened. The replay window is checked there, after authentication: a replay
//! is opened for nothing, which a forgery with a fresh counter costs anyway.

use std::net::SocketAddr;
use std::sync::Arc;

use mpt_core::seal::{self, ReplayWindow, SealKey, COUNTER_LEN, SEALED_HEADER_LEN};
use mpt_core::wire::Header;
use mpt_core::{PathId, Time};

use crate::{Arrived, Connection, DropReason};

/// The key of the session agreed when it was taken: see the module documentation.
#[derive(Clone)]
pub struct Opener {
    pub(crate) key: Arc<SealKey>,
    pub(crate) session: u32,
    pub(crate) epoch: u64,
    pub(crate) max_datagram: usize,
    /// The highest counter the session's replay window had seen when this was taken: a
    /// datagram's counter is expanded from its low bits against it.
    pub(crate) highest: Option<u64>,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("session", &format_args!("{:08x}", self.session))
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// What [`Opener::open`] made of a datagram, for [`Connection::handle_datagram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub(crate) epoch: u64,
    /// The counter and body length, or why it did not open (the buffer is then spoilt).
    pub(crate) result: Result<(u64, usize), DropReason>,
}

impl Opener {
    /// Open `buf` in place if it is a sealed datagram of this session that fits;
    /// `None` leaves it untouched for [`Connection::handle_datagram`].
    pub fn open(&self, buf: &mut [u8]) -> Option<Opened> {
        if buf.len() > self.max_datagram {
            return None;
        }
        let h = Header::new_checked(&*buf).ok()?;
        if !h.sealed() || h.session() != self.session {
            return None;
        }
        let result = match h.counter() {
            None => Err(DropReason::Truncated),
            Some(low) => {
                let counter = seal::expand_counter(self.highest, low);
                self.key
                    .open(buf, counter)
                    .map(|body| (counter, body))
                    .map_err(|e| DropReason::unsealed(&e))
            }
        };
        Some(Opened {
            epoch: self.epoch,
            result,
        })
    }
}

/// Opening a sealed datagram of the session, or of another one (the session a rekey
/// replaced, or a new one of the peer).
impl<P> Connection<P> {
    /// Open a sealed datagram of the session in place. Returns where its plain form lies in
    /// `buf`.
    pub(crate) fn open(&mut self, buf: &mut [u8]) -> Result<(usize, usize), DropReason> {
        let c = &mut self.crypto;
        let r = match c.open.as_ref() {
            Some(key) => open_in_place(key, &mut c.replay, buf),
            None => Err(DropReason::UnknownSession),
        };
        r.map_err(|e| self.count(e))
    }

    /// A datagram whose session is not the current one: of the session a rekey replaced (in
    /// flight when it was replaced), or of the session we made as a rekey's responder (the
    /// peer has it: it becomes the current one). Anything else is dropped.
    pub(crate) fn other_session(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        session: u32,
        sealed: bool,
        buf: &mut [u8],
    ) -> Result<(usize, usize), DropReason> {
        let c = &mut self.crypto;
        if let Some(old) = c
            .previous
            .as_mut()
            .filter(|o| o.session == session && now < o.until)
        {
            let r = match (sealed, old.open.as_ref()) {
                (true, Some(key)) => open_in_place(key, &mut old.replay, buf),
                (false, None) => Ok((0, buf.len())),
                _ => Err(DropReason::UnknownSession),
            };
            return r.map_err(|e| self.count(e));
        }
        let Some(next) = c.next.take_if(|n| n.ours == session) else {
            return Err(self.count(DropReason::UnknownSession));
        };
        let mut replay = ReplayWindow::default();
        let r = match (sealed, next.keys.open.as_ref()) {
            (true, Some(key)) => open_in_place(key, &mut replay, buf),
            (false, None) => Ok((0, buf.len())),
            _ => Err(DropReason::UnknownSession),
        };
        match r {
            Ok(span) => {
                self.install(now, (path, from), next, true);
                self.crypto.replay = replay;
                Ok(span)
            }
            Err(e) => {
                self.crypto.next = Some(next);
                Err(self.count(e))
            }
        }
    }
}

/// Open a sealed datagram in place with `key`, checking and marking its counter in `replay`.
/// Returns where its plain form lies in `buf`.
pub(crate) fn open_in_place(
    key: &SealKey,
    replay: &mut ReplayWindow,
    buf: &mut [u8],
) -> Result<(usize, usize), DropReason> {
    let Some(low) = seal::counter_of(buf) else {
        return Err(DropReason::Truncated);
    };
    let counter = replay.expand(low);
    if replay.check(counter).is_err() {
        return Err(DropReason::Replayed);
    }
    let body = key
        .open(buf, counter)
        .map_err(|e| DropReason::unsealed(&e))?;
    replay.mark(counter);
    seal::unseal_in_place(buf);
    Ok((COUNTER_LEN, SEALED_HEADER_LEN + body))
}

/// Opening outside the lock ([`crate::Opener`]), and packets that came in pieces.
impl<P> Connection<P> {
    /// The current session's [`Opener`], once keys are agreed (sealing only).
    pub fn opener(&self) -> Option<Opener> {
        let c = &self.crypto;
        Some(Opener {
            key: c.open.clone()?,
            session: self.session.ours,
            epoch: c.epoch,
            max_datagram: self.max_datagram(),
            highest: c.replay.highest(),
        })
    }

    pub(crate) fn take_opened(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
        opened: Opened,
    ) -> Result<Arrived, DropReason> {
        if path.index() >= self.paths.len() {
            return Err(self.count(DropReason::PathMismatch));
        }
        let (counter, body) = opened.result.map_err(|r| self.count(r))?;
        let c = &mut self.crypto;
        // Opened under the keys a rekey replaced since: of the old session, still taken.
        let replay = if c.epoch == opened.epoch {
            &mut c.replay
        } else if let Some(old) = c
            .previous
            .as_mut()
            .filter(|o| o.epoch == opened.epoch && now < o.until)
        {
            &mut old.replay
        } else {
            return Err(self.count(DropReason::UnknownSession));
        };
        if replay.check(counter).is_err() {
            return Err(self.count(DropReason::Replayed));
        }
        replay.mark(counter);
        seal::unseal_in_place(buf);
        self.dispatch(now, path, from, buf, COUNTER_LEN, SEALED_HEADER_LEN + body)
    }
}
