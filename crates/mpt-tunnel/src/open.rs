//! Opening sealed datagrams outside the connection: the AEAD is the costly part of receiving,
//! and a driver that keeps the connection behind a lock (shared with the sending side) can open
//! a whole batch first, without the lock, and hand the results in under it.
//!
//! [`crate::Connection::opener`] gives the current session's key; [`Opener::open`] opens in place
//! what is sealed data or control of that session, and leaves everything else (handshakes, other
//! sessions, malformed input) to [`crate::Connection::handle_datagram`], which also takes what it
//! opened. The replay window is checked there, after authentication: a replay
//! is opened for nothing, which a forgery with a fresh counter costs anyway.

use std::sync::Arc;

use mpt_core::seal::{self, ReplayWindow, SealKey, COUNTER_LEN, SEALED_HEADER_LEN};
use mpt_core::wire::Header;
use mpt_core::Time;

use crate::crypto::{CryptoState, NextSession};
use crate::DropReason;

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

/// What [`Opener::open`] made of a datagram, for [`crate::Connection::handle_datagram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub(crate) epoch: u64,
    /// The counter and body length, or why it did not open (the buffer is then spoilt).
    pub(crate) result: Result<(u64, usize), DropReason>,
}

impl Opener {
    /// Open `buf` in place if it is a sealed datagram of this session that fits;
    /// `None` leaves it untouched for [`crate::Connection::handle_datagram`].
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

/// Where a datagram's plain form lies in its buffer, once opened.
pub(crate) type Span = (usize, usize);

/// A datagram of another session than the current one, opened.
pub(crate) enum Other {
    /// Of the session a rekey replaced (it was in flight when it was replaced).
    Previous(Span),
    /// Of the session we made as a rekey's responder: the peer has it, and it becomes the
    /// current one (its replay window has the datagram's counter).
    Next {
        next: NextSession,
        replay: ReplayWindow,
        span: Span,
    },
}

/// Opening a sealed datagram of the session, or of another one (the session a rekey
/// replaced, or a new one of the peer).
impl CryptoState {
    /// Open a sealed datagram of the session in place. Returns where its plain form lies in
    /// `buf`.
    pub(crate) fn open(&mut self, buf: &mut [u8]) -> Result<Span, DropReason> {
        match self.open.as_ref() {
            Some(key) => open_in_place(key, &mut self.replay, buf),
            None => Err(DropReason::UnknownSession),
        }
    }

    /// A datagram of `session` at `now`, not the current one: of the session a rekey replaced
    /// (while it is kept), or of the session we made as a rekey's responder. Anything else is
    /// dropped.
    pub(crate) fn other_session(
        &mut self,
        now: Time,
        session: u32,
        sealed: bool,
        buf: &mut [u8],
    ) -> Result<Other, DropReason> {
        if let Some(old) = self
            .previous
            .as_mut()
            .filter(|o| o.session == session && now < o.until)
        {
            return match (sealed, old.open.as_ref()) {
                (true, Some(key)) => open_in_place(key, &mut old.replay, buf),
                (false, None) => Ok((0, buf.len())),
                _ => Err(DropReason::UnknownSession),
            }
            .map(Other::Previous);
        }
        let Some(next) = self.next.take_if(|n| n.ours == session) else {
            return Err(DropReason::UnknownSession);
        };
        let mut replay = ReplayWindow::default();
        let r = match (sealed, next.keys.open.as_ref()) {
            (true, Some(key)) => open_in_place(key, &mut replay, buf),
            (false, None) => Ok((0, buf.len())),
            _ => Err(DropReason::UnknownSession),
        };
        match r {
            Ok(span) => Ok(Other::Next { next, replay, span }),
            Err(e) => {
                self.next = Some(next);
                Err(e)
            }
        }
    }

    /// The current session's [`Opener`], once keys are agreed (sealing only): our index in it
    /// is `session`, and a valid datagram is at most `max_datagram` bytes.
    pub(crate) fn opener(&self, session: u32, max_datagram: usize) -> Option<Opener> {
        Some(Opener {
            key: self.open.clone()?,
            session,
            epoch: self.epoch,
            max_datagram,
            highest: self.replay.highest(),
        })
    }

    /// What an [`Opener`] made of a datagram in `buf` at `now`, checked against the replay
    /// window of its session (the current one, or the one a rekey replaced, while it is
    /// kept) and unsealed. Returns its body's length.
    pub(crate) fn accept_opened(
        &mut self,
        now: Time,
        opened: Opened,
        buf: &mut [u8],
    ) -> Result<usize, DropReason> {
        let (counter, body) = opened.result?;
        // Opened under the keys a rekey replaced since: of the old session, still taken.
        let replay = if self.epoch == opened.epoch {
            &mut self.replay
        } else if let Some(old) = self
            .previous
            .as_mut()
            .filter(|o| o.epoch == opened.epoch && now < o.until)
        {
            &mut old.replay
        } else {
            return Err(DropReason::UnknownSession);
        };
        if replay.check(counter).is_err() {
            return Err(DropReason::Replayed);
        }
        replay.mark(counter);
        seal::unseal_in_place(buf);
        Ok(body)
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
