//! The handshake's hello: its body and the datagram that carries it.

use super::*;

/// The body of a hello (handshake, see `docs/protocol.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloRepr {
    /// The sender's random for this daemon start; the session keys derive from both sides'.
    pub random: [u8; 32],
    /// The sender's current challenge; a hello that echoes it is fresh.
    pub challenge: [u8; 16],
    /// The last challenge the sender received from its peer (zeros if none).
    pub echo: [u8; 16],
    /// Bit 0: [`HelloRepr::FLAG_REQUEST`]; bit 1: [`HelloRepr::FLAG_AES`].
    pub flags: u8,
}

impl HelloRepr {
    /// The sender has no keys for the receiver's random yet: answer with a hello.
    pub const FLAG_REQUEST: u8 = 1;
    /// The sender runs `encryption = "auto"` and has AES in hardware: the session uses
    /// AES-256-GCM if the receiver's hellos say so too, ChaCha20-Poly1305 otherwise.
    pub const FLAG_AES: u8 = 2;

    /// This body behind `header`: a hello datagram to emit.
    pub fn with(self, header: HeaderRepr) -> HelloDatagram {
        HelloDatagram {
            header,
            hello: self,
        }
    }

    pub(crate) fn parse(b: &[u8]) -> HelloRepr {
        let mut h = HelloRepr {
            random: [0; 32],
            challenge: [0; 16],
            echo: [0; 16],
            flags: b[field::H_FLAGS],
        };
        h.random.copy_from_slice(&b[field::H_RANDOM]);
        h.challenge.copy_from_slice(&b[field::H_CHALLENGE]);
        h.echo.copy_from_slice(&b[field::H_ECHO]);
        h
    }

    pub fn request(&self) -> bool {
        self.flags & Self::FLAG_REQUEST != 0
    }

    pub fn offers_aes(&self) -> bool {
        self.flags & Self::FLAG_AES != 0
    }
}

/// Builds a hello datagram: the header and a [`HelloRepr`] body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloDatagram {
    pub header: HeaderRepr,
    pub hello: HelloRepr,
}

impl HelloDatagram {
    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HELLO_LEN
    }

    /// Write the header and the body into `buf`; returns [`HELLO_LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        self.header.emit(buf);
        let h = &self.hello;
        buf[field::H_RANDOM].copy_from_slice(&h.random);
        buf[field::H_CHALLENGE].copy_from_slice(&h.challenge);
        buf[field::H_ECHO].copy_from_slice(&h.echo);
        buf[field::H_FLAGS] = h.flags;
        buf[field::H_RESERVED].fill(0);
        HELLO_LEN
    }
}
