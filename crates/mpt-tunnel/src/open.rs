//! Opening sealed datagrams outside the connection: the AEAD is the costly part of receiving,
//! and a driver that keeps the connection behind a lock (shared with the sending side) can open
//! a whole batch first, without the lock, and hand the results in under it.
//!
//! [`Connection::opener`] gives the current session's key; [`Opener::open`] opens in place
//! what is sealed data or control of that session, and leaves everything else (handshakes, other
//! sessions, malformed input) to [`Connection::handle_datagram`]; [`Connection::handle_opened`]
//! takes what it opened. The replay window is checked there, after authentication: a replay
//! is opened for nothing, which a forgery with a fresh counter costs anyway.

use std::net::SocketAddr;
use std::sync::Arc;

use mpt_core::seal::{self, SealKey, COUNTER_LEN, SEALED_HEADER_LEN};
use mpt_core::wire::Header;
use mpt_core::{PathId, Time};

use crate::{Connection, DropReason, Outcome};

/// The key of the session agreed when it was taken: see the module documentation.
#[derive(Clone)]
pub struct Opener {
    key: Arc<SealKey>,
    session: u32,
    epoch: u64,
    max_datagram: usize,
    /// The highest counter the session's replay window had seen when this was taken: a
    /// datagram's counter is expanded from its low bits against it.
    highest: Option<u64>,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("session", &format_args!("{:08x}", self.session))
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// What [`Opener::open`] made of a datagram, for [`Connection::handle_opened`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    epoch: u64,
    /// The counter and body length, or why it did not open (the buffer is then spoilt).
    result: Result<(u64, usize), DropReason>,
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

impl<P> Connection<P> {
    /// The current session's [`Opener`], once keys are agreed (sealing only).
    pub fn opener(&self) -> Option<Opener> {
        let c = &self.crypto;
        Some(Opener {
            key: c.open.clone()?,
            session: self.session,
            epoch: c.epoch,
            max_datagram: self.max_datagram(),
            highest: c.replay.highest(),
        })
    }

    /// A datagram that arrived at `now` on `path` from `from`, opened in `buf` by an
    /// [`Opener`]: as [`Connection::handle_datagram`] for the rest. One opened under keys that
    /// have been replaced since belongs to the old session and is dropped as such.
    pub fn handle_opened(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
        opened: Opened,
    ) -> Outcome {
        Outcome::of(self.take_opened(now, path, from, buf, opened))
    }

    fn take_opened(
        &mut self,
        now: Time,
        path: PathId,
        from: SocketAddr,
        buf: &mut [u8],
        opened: Opened,
    ) -> Result<crate::Outcome, DropReason> {
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
