//! Opening sealed datagrams outside the connection: the AEAD is the costly part of receiving,
//! and a driver that keeps the connection behind a lock (shared with the sending side) can open
//! a whole batch first, without the lock, and hand the results in under it.
//!
//! [`Connection::opener`] gives the current session's key; [`Opener::open`] opens in place
//! what is sealed data or control of that session, and leaves everything else (handshakes, other
//! sessions, malformed input) to [`Connection::handle_datagram`], which also takes what it
//! opened. The replay window is checked there, after authentication: a replay
//! is opened for nothing, which a forgery with a fresh counter costs anyway.

use std::sync::Arc;

use mpt_core::seal::{self, SealKey};
use mpt_core::wire::Header;

#[cfg(doc)]
use crate::Connection;
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
