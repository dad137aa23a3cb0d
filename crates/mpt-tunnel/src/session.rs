//! The session data is sealed in ([`Session`]): both ends' indices, the key and its next
//! counter, and what the session can do.

use std::sync::Arc;

use mpt_core::seal::{SealKey, SEALED_HEADER_LEN, SEAL_OVERHEAD, TAG_LEN};
use mpt_core::wire::{Capabilities, HeaderRepr, HEADER_LEN};

/// The session with the peer, as what we send is sealed in it.
#[derive(Debug)]
pub(crate) struct Session {
    /// Our index for the current session (random per handshake): the peer puts it in the
    /// `session` field of what it sends us.
    pub(crate) ours: u32,
    /// The peer's index for the current session, once a handshake made one: what we put in
    /// the `session` field.
    pub(crate) theirs: Option<u32>,
    /// Data is sealed (the configuration says so).
    pub(crate) sealing: bool,
    /// This session's send key once the handshake made one (sealing only).
    pub(crate) key: Option<Arc<SealKey>>,
    /// Next counter (nonce) under `key`.
    pub(crate) counter: u64,
    /// What the session can do, as its handshake settled it: the protocol version of our
    /// datagrams ([`mpt_core::wire::VERSION`] until a handshake set it, older with a peer that
    /// speaks no later), and the features both ends' capability lists named.
    pub(crate) caps: Capabilities,
    /// What the peer's handshake said it takes besides the cipher.
    pub(crate) peer: crate::negotiate::PeerFeatures,
}

impl Session {
    /// No session yet: our index `ours`, sealing if `sealing`.
    pub(crate) fn new(ours: u32, sealing: bool) -> Session {
        Session {
            ours,
            theirs: None,
            sealing,
            key: None,
            counter: 0,
            caps: Capabilities::of_version(mpt_core::wire::VERSION, 0),
            peer: Default::default(),
        }
    }

    /// Whether data goes with compressed headers: configured (`cfg`), with resending (a
    /// reference lost is sent again), in a session that compresses TCP.
    pub(crate) fn compressing(&self, cfg: &crate::ConnectionConfig) -> bool {
        cfg.compress && self.peer.resending(cfg) && self.caps.compresses_tcp()
    }

    /// Where the prefix before an inner packet ends: [`HEADER_LEN`], or
    /// [`SEALED_HEADER_LEN`] when sealing.
    pub(crate) fn prefix(&self) -> usize {
        if self.sealing {
            SEALED_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Bytes sealing adds to a datagram's plain form (counter and tag; none in the clear).
    pub(crate) fn overhead(&self) -> usize {
        if self.sealing {
            SEAL_OVERHEAD
        } else {
            0
        }
    }

    /// Give a datagram whose header was just written the session's version (before it is
    /// sealed: the header is authenticated with it).
    pub(crate) fn stamp(&self, datagram: &mut [u8]) {
        if self.caps.version() != mpt_core::wire::VERSION {
            mpt_core::wire::set_version(datagram, self.caps.version());
        }
    }

    /// The next counter, taken.
    fn take_counter(&mut self) -> u64 {
        let counter = self.counter;
        self.counter += 1;
        counter
    }

    /// Seal a message whose plain form is `buf[..plain]` (header written, room for the seal
    /// after it) under the next counter; truncates `buf` to the datagram and returns its
    /// length. `None` while sealing has no key.
    pub(crate) fn seal_plain(&mut self, buf: &mut Vec<u8>, plain: usize) -> Option<usize> {
        self.stamp(buf);
        let len = if self.sealing {
            let key = self.key.clone()?;
            let counter = self.take_counter();
            key.seal_plain(counter, buf, plain).ok()?
        } else {
            plain
        };
        buf.truncate(len);
        Some(len)
    }

    /// Seal a datagram built in a buffer of our own: `header` written into its prefix, then
    /// `body` bytes after it, sealed under the next counter. `None` while sealing has no key.
    pub(crate) fn seal_owned(
        &mut self,
        header: &HeaderRepr,
        mut buf: Vec<u8>,
        body: usize,
    ) -> Option<Vec<u8>> {
        let prefix = self.prefix();
        header.emit(&mut buf);
        self.stamp(&mut buf);
        let len = if self.sealing {
            let key = self.key.clone()?;
            buf.resize(prefix + body + TAG_LEN, 0);
            let counter = self.take_counter();
            key.seal(counter, &mut buf, body).ok()?
        } else {
            prefix + body
        };
        buf.truncate(len);
        Some(buf)
    }

    /// A buffer for an inner packet of `len` bytes, its prefix and tag room reserved, the
    /// prefix zeroed: fill it with [`Vec::extend_from_slice`].
    pub(crate) fn buffer(&self, len: usize) -> Vec<u8> {
        let prefix = self.prefix();
        let mut buf = Vec::with_capacity(prefix + len + TAG_LEN);
        buf.resize(prefix, 0);
        buf
    }
}

/// A random index (drawn from `random`) for a new session, never 0 nor `current`: its low 16
/// bits `slot`, if configured.
pub(crate) fn fresh_index(random: &mut crate::Random, slot: Option<u16>, current: u32) -> u32 {
    loop {
        let mut b = [0u8; 4];
        random(&mut b);
        let mut i = u32::from_be_bytes(b);
        if let Some(slot) = slot {
            i = (i & 0xFFFF_0000) | u32::from(slot);
        }
        if i != 0 && i != current {
            return i;
        }
    }
}
