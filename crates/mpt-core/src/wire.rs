//! The mptd wire format (specified in `docs/protocol.md`).
//!
//! Every UDP payload starts with a 16-byte [`Header`]. A data datagram carries one inner IPv4 or
//! IPv6 packet after it; control datagrams (keepalive, keepalive-ack, receiver report) carry
//! their own small bodies. [`Datagram::parse`] validates a buffer once; after that no accessor
//! can panic. The `*Repr` types build datagrams into caller-provided buffers.

use crate::PathId;

/// Protocol version carried in the top three bits of byte 0.
pub const VERSION: u8 = 1;
/// Length of the common header.
pub const HEADER_LEN: usize = 16;
/// Length of a keepalive-ack (header + echoed timestamp + hold time).
pub const ACK_LEN: usize = HEADER_LEN + 8;
/// Length of the fixed part of a receiver report, before its entries.
pub const REPORT_FIXED_LEN: usize = HEADER_LEN + 4;
/// Length of a hello body: random, challenge, echo, flags, reserved.
pub const HELLO_BODY_LEN: usize = 68;
/// Length of a plain hello datagram (header + body); sealed it is [`SEAL_OVERHEAD`] longer.
pub const HELLO_LEN: usize = HEADER_LEN + HELLO_BODY_LEN;
/// Length of the counter that follows the header of a sealed datagram.
pub const COUNTER_LEN: usize = 8;
/// Length of the authentication tag at the end of a sealed datagram.
pub const TAG_LEN: usize = 16;
/// Header and counter: the associated data, before the encrypted body.
pub const SEALED_HEADER_LEN: usize = HEADER_LEN + COUNTER_LEN;
/// Bytes a sealed datagram has beyond its plain form.
pub const SEAL_OVERHEAD: usize = COUNTER_LEN + TAG_LEN;
/// Link-layer framing counted per datagram (an Ethernet header, as `tbf` counts it): a
/// configured path rate is a link rate, and a 200-byte packet is 7 % more on the wire.
pub const FRAMING: usize = 14;

/// What a datagram adds to the inner packet it carries: all the overhead arithmetic in one
/// place. The cipher does not matter (both add [`SEAL_OVERHEAD`]); sealing and the outer
/// address family do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overhead {
    sealed: bool,
    ipv6: bool,
}

impl Overhead {
    pub const fn new(sealed: bool, ipv6: bool) -> Overhead {
        Overhead { sealed, ipv6 }
    }

    /// UDP payload beyond the inner packet: the header, and the counter and tag when sealed.
    pub const fn datagram(self) -> usize {
        HEADER_LEN + if self.sealed { SEAL_OVERHEAD } else { 0 }
    }

    /// The outer IP and UDP headers.
    pub const fn outer(self) -> usize {
        if self.ipv6 {
            48
        } else {
            28
        }
    }

    /// What the path adds around a datagram on the wire: outer IP + UDP and [`FRAMING`].
    pub const fn outer_link(self) -> usize {
        self.outer() + FRAMING
    }

    /// Beyond the inner packet, in the path's IP MTU: [`datagram`](Self::datagram) +
    /// [`outer`](Self::outer).
    pub const fn ip(self) -> usize {
        self.datagram() + self.outer()
    }

    /// Beyond the inner packet on the wire, framing included: what a path's rate carries.
    pub const fn link(self) -> usize {
        self.ip() + FRAMING
    }
}

/// Length of one report entry in this version. Receivers accept longer entries (and ignore the
/// extra bytes) so that later versions can append fields.
pub const REPORT_ENTRY_LEN: usize = 44;

mod field {
    use std::ops::Range;
    pub const VER_TYPE: usize = 0;
    pub const PATH: usize = 1;
    pub const PATH_SEQ: Range<usize> = 2..4;
    pub const SESSION: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..12;
    pub const TIMESTAMP: Range<usize> = 12..16;
    // sealed: the counter after the header
    pub const COUNTER: Range<usize> = 16..24;
    // keepalive-ack body
    pub const ACK_ECHO: Range<usize> = 16..20;
    pub const ACK_HOLD: Range<usize> = 20..24;
    // report body
    pub const REPORT_COUNT: usize = 16;
    pub const REPORT_ENTRY_LEN: usize = 17;
    pub const REPORT_RESERVED: Range<usize> = 18..20;
    // report entry, relative to the entry's start
    pub const E_PATH: usize = 0;
    pub const E_FLAGS: usize = 1;
    pub const E_PATH_SEQ: Range<usize> = 2..4;
    pub const E_PACKETS: Range<usize> = 4..8;
    pub const E_BYTES: Range<usize> = 8..16;
    pub const E_LOST: Range<usize> = 16..20;
    pub const E_OWD_MIN: Range<usize> = 20..24;
    pub const E_JITTER: Range<usize> = 24..28;
    pub const E_OWD: Range<usize> = 28..32;
    pub const E_ECHO: Range<usize> = 32..36;
    pub const E_ECHO_AGE: Range<usize> = 36..40;
    pub const E_OWD_MIN_LEN: Range<usize> = 40..42;
    pub const E_RESERVED: Range<usize> = 42..44;
    // hello body
    pub const H_RANDOM: Range<usize> = 16..48;
    pub const H_CHALLENGE: Range<usize> = 48..64;
    pub const H_ECHO: Range<usize> = 64..80;
    pub const H_FLAGS: usize = 80;
    pub const H_RESERVED: Range<usize> = 81..84;
}

/// Bit 4 of byte 0: "sealed" — a counter follows the header and the body is encrypted and
/// authenticated ([`crate::seal`]). [`Datagram::parse`] takes plain datagrams only: a sealed
/// one is opened first and turned into its plain form.
pub const SEALED_FLAG: u8 = 0x10;

/// What a datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An inner IP packet follows the header.
    Data = 0,
    /// Liveness probe; the header alone.
    Keepalive = 1,
    /// Answer to a keepalive, echoing its timestamp so the prober measures RTT.
    KeepaliveAck = 2,
    /// Receiver report: per-path counters and delay figures.
    Report = 3,
    /// Handshake: the sender's random and challenge, always sealed with the handshake key.
    Hello = 4,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        match v {
            0 => Some(Kind::Data),
            1 => Some(Kind::Keepalive),
            2 => Some(Kind::KeepaliveAck),
            3 => Some(Kind::Report),
            4 => Some(Kind::Hello),
            _ => None,
        }
    }
}

/// Why a datagram was refused. Each variant has its own drop counter in the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("datagram too short: {got} bytes, need {need}")]
    Truncated { need: usize, got: usize },
    #[error("unsupported protocol version {0}")]
    BadVersion(u8),
    #[error("sealed flag set: authenticated datagrams are not supported by this version")]
    Sealed,
    #[error("unknown message type {0}")]
    UnknownKind(u8),
    #[error("data datagram carries no inner packet")]
    EmptyPayload,
    #[error("inner packet is not IPv4 or IPv6 (version nibble {0})")]
    NotIp(u8),
    #[error("inner packet length field says {claimed} bytes, datagram holds {got}")]
    InnerLength { claimed: usize, got: usize },
    #[error("report entries are {0} bytes, shorter than the {min} a version 1 entry needs", min = REPORT_ENTRY_LEN)]
    ReportEntryLen(u8),
    #[error("control message of {got} bytes, expected {expected}")]
    ControlLength { expected: usize, got: usize },
}

/// The fields of the common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRepr {
    pub kind: Kind,
    pub path: PathId,
    /// Data: this datagram's sequence number on its path. Control: the next one the sender
    /// will use on this path (so the receiver can count loss at the tail of a burst).
    pub path_seq: u16,
    /// Random per daemon start; a new value tells the peer to reset its receive state.
    pub session: u32,
    /// Data: the global sequence number. Control: the next global sequence number the sender
    /// will assign — every data datagram sent on this path before it has a lower one.
    pub seq: u32,
    /// Send time, microseconds on the sender's clock (wrapping).
    pub timestamp: u32,
}

/// A view of a datagram's common header (and, when sealed, the counter after it) in a buffer,
/// in the manner of smoltcp's packet types: [`Header::new_checked`] validates once (length,
/// version, kind), after which no accessor can panic. Setters need a mutable buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// A view without checks: for building a header in a buffer of at least [`HEADER_LEN`]
    /// bytes (accessors panic on a shorter one).
    pub const fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    /// A view of a received datagram: at least [`HEADER_LEN`] bytes, our version, a known
    /// kind. (A sealed datagram's header is authenticated only once it is opened.)
    pub fn new_checked(buffer: T) -> Result<Header<T>, WireError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                need: HEADER_LEN,
                got: b.len(),
            });
        }
        let vt = b[field::VER_TYPE];
        if vt >> 5 != VERSION {
            return Err(WireError::BadVersion(vt >> 5));
        }
        Kind::from_u8(vt & 0x0f).ok_or(WireError::UnknownKind(vt & 0x0f))?;
        Ok(Header { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn kind(&self) -> Kind {
        // checked in new_checked; an unchecked view built by emit holds a valid kind too
        Kind::from_u8(self.b()[field::VER_TYPE] & 0x0f).unwrap_or(Kind::Data)
    }

    /// The sealed flag: a counter follows the header and the body is encrypted.
    pub fn sealed(&self) -> bool {
        self.b()[field::VER_TYPE] & SEALED_FLAG != 0
    }

    pub fn path(&self) -> PathId {
        PathId(self.b()[field::PATH])
    }

    pub fn path_seq(&self) -> u16 {
        be16(&self.b()[field::PATH_SEQ])
    }

    pub fn session(&self) -> u32 {
        be32(&self.b()[field::SESSION])
    }

    pub fn seq(&self) -> u32 {
        be32(&self.b()[field::SEQ])
    }

    pub fn timestamp(&self) -> u32 {
        be32(&self.b()[field::TIMESTAMP])
    }

    /// The counter after the header of a sealed datagram; `None` when the buffer is too short
    /// to hold one (not yet authenticated either way).
    pub fn counter(&self) -> Option<u64> {
        let c: [u8; COUNTER_LEN] = self.b().get(field::COUNTER)?.try_into().ok()?;
        Some(u64::from_be_bytes(c))
    }

    /// The header's fields.
    pub fn repr(&self) -> HeaderRepr {
        HeaderRepr {
            kind: self.kind(),
            path: self.path(),
            path_seq: self.path_seq(),
            session: self.session(),
            seq: self.seq(),
            timestamp: self.timestamp(),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Our version and `kind`, the sealed flag cleared.
    pub fn set_kind(&mut self, kind: Kind) {
        self.b_mut()[field::VER_TYPE] = (VERSION << 5) | (kind as u8);
    }

    pub fn set_sealed(&mut self, sealed: bool) {
        let b = &mut self.b_mut()[field::VER_TYPE];
        if sealed {
            *b |= SEALED_FLAG;
        } else {
            *b &= !SEALED_FLAG;
        }
    }

    pub fn set_path(&mut self, path: PathId) {
        self.b_mut()[field::PATH] = path.0;
    }

    pub fn set_path_seq(&mut self, v: u16) {
        self.b_mut()[field::PATH_SEQ].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_session(&mut self, v: u32) {
        self.b_mut()[field::SESSION].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_seq(&mut self, v: u32) {
        self.b_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_timestamp(&mut self, v: u32) {
        self.b_mut()[field::TIMESTAMP].copy_from_slice(&v.to_be_bytes());
    }

    /// Write the counter of a sealed datagram; refused when the buffer cannot hold one.
    pub fn set_counter(&mut self, counter: u64) -> Result<(), WireError> {
        let got = self.b_mut().len();
        let c = self
            .b_mut()
            .get_mut(field::COUNTER)
            .ok_or(WireError::Truncated {
                need: SEALED_HEADER_LEN,
                got,
            })?;
        c.copy_from_slice(&counter.to_be_bytes());
        Ok(())
    }
}

impl HeaderRepr {
    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the first [`HEADER_LEN`] bytes of `buf`; returns [`HEADER_LEN`].
    ///
    /// # Panics
    /// If `buf` is shorter than [`HEADER_LEN`]; buffers are the caller's, sized once.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let mut h = Header::new_unchecked(&mut buf[..HEADER_LEN]);
        h.set_kind(self.kind);
        h.set_path(self.path);
        h.set_path_seq(self.path_seq);
        h.set_session(self.session);
        h.set_seq(self.seq);
        h.set_timestamp(self.timestamp);
        HEADER_LEN
    }

    fn parse(b: &[u8]) -> Result<HeaderRepr, WireError> {
        match HeaderRepr::parse_outer(b)? {
            (_, true) => Err(WireError::Sealed),
            (h, false) => Ok(h),
        }
    }

    /// Validate the header of a datagram that may be sealed; returns it and the sealed flag.
    /// The header of a sealed datagram is authenticated only once the datagram is opened.
    pub fn parse_outer(b: &[u8]) -> Result<(HeaderRepr, bool), WireError> {
        let h = Header::new_checked(b)?;
        Ok((h.repr(), h.sealed()))
    }
}

/// One path's figures in a receiver report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportEntry {
    pub path: PathId,
    /// Bit 0: the reporter has heard from this path within its dead interval.
    pub flags: u8,
    /// Highest per-path sequence number received (wrapping).
    pub path_seq: u16,
    /// Data packets received on the path since the session began (wrapping).
    pub packets: u32,
    /// Data bytes (inner packets) received on the path since the session began (wrapping).
    pub bytes: u64,
    /// Packets found missing from the per-path sequence since the session began (wrapping).
    pub lost: u32,
    /// Smallest one-way delay of this path minus the smallest over all paths, microseconds:
    /// the path's delay offset.
    pub owd_min_us: u32,
    /// RFC 3550 interarrival jitter on this path, microseconds.
    pub jitter_us: u32,
    /// Smoothed one-way delay of this path minus the smallest over all paths, microseconds;
    /// above `owd_min_us` by the queue building on the path.
    pub owd_us: u32,
    /// Send timestamp of the newest data packet received on the path (the sender's clock).
    pub echo: u32,
    /// How long before this report that packet arrived, microseconds (`now - echo - age` is
    /// the sender's RTT sample).
    pub echo_age_us: u32,
    /// Inner length of the packet that saw `owd_min_us`: its serialisation at the path's rate
    /// is part of that delay, so the sender can take it out.
    pub owd_min_len: u16,
}

impl ReportEntry {
    pub const FLAG_UP: u8 = 1;

    fn emit(&self, b: &mut [u8]) {
        b[field::E_PATH] = self.path.0;
        b[field::E_FLAGS] = self.flags;
        b[field::E_PATH_SEQ].copy_from_slice(&self.path_seq.to_be_bytes());
        b[field::E_PACKETS].copy_from_slice(&self.packets.to_be_bytes());
        b[field::E_BYTES].copy_from_slice(&self.bytes.to_be_bytes());
        b[field::E_LOST].copy_from_slice(&self.lost.to_be_bytes());
        b[field::E_OWD_MIN].copy_from_slice(&self.owd_min_us.to_be_bytes());
        b[field::E_JITTER].copy_from_slice(&self.jitter_us.to_be_bytes());
        b[field::E_OWD].copy_from_slice(&self.owd_us.to_be_bytes());
        b[field::E_ECHO].copy_from_slice(&self.echo.to_be_bytes());
        b[field::E_ECHO_AGE].copy_from_slice(&self.echo_age_us.to_be_bytes());
        b[field::E_OWD_MIN_LEN].copy_from_slice(&self.owd_min_len.to_be_bytes());
        b[field::E_RESERVED].fill(0);
    }

    fn parse(b: &[u8]) -> ReportEntry {
        ReportEntry {
            path: PathId(b[field::E_PATH]),
            flags: b[field::E_FLAGS],
            path_seq: be16(&b[field::E_PATH_SEQ]),
            packets: be32(&b[field::E_PACKETS]),
            bytes: be64(&b[field::E_BYTES]),
            lost: be32(&b[field::E_LOST]),
            owd_min_us: be32(&b[field::E_OWD_MIN]),
            jitter_us: be32(&b[field::E_JITTER]),
            owd_us: be32(&b[field::E_OWD]),
            echo: be32(&b[field::E_ECHO]),
            echo_age_us: be32(&b[field::E_ECHO_AGE]),
            owd_min_len: be16(&b[field::E_OWD_MIN_LEN]),
        }
    }
}

/// A validated datagram borrowed from a receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram<'a> {
    Data {
        header: HeaderRepr,
        packet: &'a [u8],
    },
    Keepalive {
        header: HeaderRepr,
    },
    KeepaliveAck {
        header: HeaderRepr,
        echo: u32,
        hold_us: u32,
    },
    Report {
        header: HeaderRepr,
        report: Report<'a>,
    },
    Hello {
        header: HeaderRepr,
        hello: HelloRepr,
    },
}

impl<'a> Datagram<'a> {
    /// Validate `buf` (one UDP payload) completely.
    pub fn parse(buf: &'a [u8]) -> Result<Datagram<'a>, WireError> {
        let header = HeaderRepr::parse(buf)?;
        let body = &buf[HEADER_LEN..];
        match header.kind {
            Kind::Data => {
                check_inner_packet(body)?;
                Ok(Datagram::Data {
                    header,
                    packet: body,
                })
            }
            Kind::Keepalive => {
                exact_len(buf, HEADER_LEN)?;
                Ok(Datagram::Keepalive { header })
            }
            Kind::KeepaliveAck => {
                exact_len(buf, ACK_LEN)?;
                Ok(Datagram::KeepaliveAck {
                    header,
                    echo: be32(&buf[field::ACK_ECHO]),
                    hold_us: be32(&buf[field::ACK_HOLD]),
                })
            }
            Kind::Report => Ok(Datagram::Report {
                header,
                report: Report::parse(buf)?,
            }),
            Kind::Hello => {
                exact_len(buf, HELLO_LEN)?;
                Ok(Datagram::Hello {
                    header,
                    hello: HelloRepr::parse(buf),
                })
            }
        }
    }

    pub fn header(&self) -> &HeaderRepr {
        match self {
            Datagram::Data { header, .. }
            | Datagram::Keepalive { header }
            | Datagram::KeepaliveAck { header, .. }
            | Datagram::Report { header, .. }
            | Datagram::Hello { header, .. } => header,
        }
    }
}

fn exact_len(buf: &[u8], expected: usize) -> Result<(), WireError> {
    if buf.len() == expected {
        Ok(())
    } else {
        Err(WireError::ControlLength {
            expected,
            got: buf.len(),
        })
    }
}

/// Check that `p` is a whole IPv4 or IPv6 packet whose length field matches its size.
pub fn check_inner_packet(p: &[u8]) -> Result<(), WireError> {
    let Some(&first) = p.first() else {
        return Err(WireError::EmptyPayload);
    };
    let (min, claimed) = match first >> 4 {
        4 if p.len() >= 20 => (20, usize::from(be16(&p[2..4]))),
        6 if p.len() >= 40 => (40, 40 + usize::from(be16(&p[4..6]))),
        4 => {
            return Err(WireError::Truncated {
                need: 20,
                got: p.len(),
            })
        }
        6 => {
            return Err(WireError::Truncated {
                need: 40,
                got: p.len(),
            })
        }
        v => return Err(WireError::NotIp(v)),
    };
    if claimed < min || claimed != p.len() {
        return Err(WireError::InnerLength {
            claimed,
            got: p.len(),
        });
    }
    Ok(())
}

/// A validated receiver report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report<'a> {
    count: u8,
    entry_len: u8,
    entries: &'a [u8],
}

impl<'a> Report<'a> {
    fn parse(buf: &'a [u8]) -> Result<Report<'a>, WireError> {
        if buf.len() < REPORT_FIXED_LEN {
            return Err(WireError::Truncated {
                need: REPORT_FIXED_LEN,
                got: buf.len(),
            });
        }
        let count = buf[field::REPORT_COUNT];
        let entry_len = buf[field::REPORT_ENTRY_LEN];
        if usize::from(entry_len) < REPORT_ENTRY_LEN {
            return Err(WireError::ReportEntryLen(entry_len));
        }
        let expected = REPORT_FIXED_LEN + usize::from(count) * usize::from(entry_len);
        exact_len(buf, expected)?;
        Ok(Report {
            count,
            entry_len,
            entries: &buf[REPORT_FIXED_LEN..],
        })
    }

    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The entries, in the order the reporter wrote them.
    pub fn entries(&self) -> impl Iterator<Item = ReportEntry> + 'a {
        self.entries
            .chunks_exact(usize::from(self.entry_len))
            .map(ReportEntry::parse)
    }
}

/// Builds a keepalive-ack: the header, the timestamp of the keepalive it answers and how long
/// the answering side held it (so the prober can subtract it from the RTT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRepr {
    pub header: HeaderRepr,
    pub echo: u32,
    pub hold_us: u32,
}

impl AckRepr {
    /// Bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        ACK_LEN
    }

    /// Write the ack into `buf` and return its length ([`ACK_LEN`]).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        self.header.emit(buf);
        buf[field::ACK_ECHO].copy_from_slice(&self.echo.to_be_bytes());
        buf[field::ACK_HOLD].copy_from_slice(&self.hold_us.to_be_bytes());
        ACK_LEN
    }
}

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

    fn parse(b: &[u8]) -> HelloRepr {
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

/// Builds a receiver report: the header and one entry per path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportRepr<'a> {
    pub header: HeaderRepr,
    pub entries: &'a [ReportEntry],
}

impl ReportRepr<'_> {
    /// Bytes [`emit`](Self::emit) writes: [`report_len`] of the entries.
    pub const fn buffer_len(&self) -> usize {
        report_len(self.entries.len())
    }

    /// Write the report into `buf`; returns its length.
    ///
    /// # Panics
    /// If more than 255 entries are given or `buf` is too short; at most [`crate::MAX_PATHS`]
    /// entries exist and buffers are sized by [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let count = u8::try_from(self.entries.len()).expect("at most 255 report entries");
        self.header.emit(buf);
        buf[field::REPORT_COUNT] = count;
        buf[field::REPORT_ENTRY_LEN] = REPORT_ENTRY_LEN as u8;
        buf[field::REPORT_RESERVED].fill(0);
        let mut off = REPORT_FIXED_LEN;
        for e in self.entries {
            e.emit(&mut buf[off..off + REPORT_ENTRY_LEN]);
            off += REPORT_ENTRY_LEN;
        }
        off
    }
}

/// Length of a report with `n` entries.
pub const fn report_len(n: usize) -> usize {
    REPORT_FIXED_LEN + n * REPORT_ENTRY_LEN
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// `a - b` for wrapping 32-bit sequence numbers and timestamps (RFC 1982 serial arithmetic):
/// positive when `a` is after `b` by less than 2^31.
pub fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// `a - b` for wrapping 16-bit per-path sequence numbers.
pub fn seq16_diff(a: u16, b: u16) -> i16 {
    a.wrapping_sub(b) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_header_view_reads_and_writes_the_fields_in_place() {
        // version 1, sealed, keepalive; path 2, path_seq 0x0304, session, seq, timestamp,
        // then the counter
        let mut b = [
            0x31, 2, 3, 4, 0xca, 0xfe, 0xba, 0xbe, 0, 0, 1, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 7,
        ];
        let h = Header::new_checked(&b[..]).expect("valid");
        assert_eq!(
            (h.kind(), h.sealed(), h.path()),
            (Kind::Keepalive, true, PathId(2))
        );
        assert_eq!(
            (h.path_seq(), h.session(), h.seq(), h.timestamp()),
            (0x0304, 0xcafe_babe, 256, 9)
        );
        assert_eq!(h.counter(), Some(7));
        let mut h = Header::new_checked(&mut b[..]).expect("valid");
        h.set_sealed(false);
        h.set_seq(257);
        h.set_counter(8).expect("room");
        assert_eq!(&b[..1], &[0x21]);
        assert_eq!(&b[8..12], &[0, 0, 1, 1]);
        assert_eq!(b[23], 8);
        // a plain header alone has no room for a counter
        let mut short = [0x21u8; HEADER_LEN];
        assert_eq!(Header::new_unchecked(&short[..]).counter(), None);
        assert!(Header::new_unchecked(&mut short[..])
            .set_counter(1)
            .is_err());
        // checked once: too short, another version, an unknown kind
        assert_eq!(
            Header::new_checked(&b[..15]),
            Err(WireError::Truncated { need: 16, got: 15 })
        );
        assert_eq!(
            Header::new_checked(&[0x41u8; 16][..]),
            Err(WireError::BadVersion(2))
        );
        assert_eq!(
            Header::new_checked(&[0x2fu8; 16][..]),
            Err(WireError::UnknownKind(15))
        );
    }

    #[test]
    fn every_message_emits_what_buffer_len_says() {
        let h = HeaderRepr {
            kind: Kind::Report,
            path: PathId(1),
            path_seq: 5,
            session: 6,
            seq: 7,
            timestamp: 8,
        };
        let mut buf = [0u8; 256];
        assert_eq!(h.emit(&mut buf), h.buffer_len());
        let ack = AckRepr {
            header: h,
            echo: 1,
            hold_us: 2,
        };
        assert_eq!(ack.emit(&mut buf), ack.buffer_len());
        let entries = [ReportEntry::default(); 3];
        let r = ReportRepr {
            header: h,
            entries: &entries,
        };
        assert_eq!(r.emit(&mut buf), r.buffer_len());
        let hello = HelloRepr {
            random: [1; 32],
            challenge: [2; 16],
            echo: [3; 16],
            flags: 1,
        }
        .with(h);
        assert_eq!(hello.emit(&mut buf), hello.buffer_len());
    }

    #[test]
    fn overhead_adds_up_for_each_kind_of_datagram() {
        let plain4 = Overhead::new(false, false);
        assert_eq!(
            (
                plain4.datagram(),
                plain4.outer(),
                plain4.ip(),
                plain4.link()
            ),
            (16, 28, 44, 58)
        );
        let sealed6 = Overhead::new(true, true);
        assert_eq!(
            (
                sealed6.datagram(),
                sealed6.outer(),
                sealed6.ip(),
                sealed6.link()
            ),
            (40, 48, 88, 102)
        );
        assert_eq!(sealed6.outer_link(), 62);
    }

    /// A minimal IPv4 packet of `len` bytes (header + zero payload).
    fn ipv4(len: u16) -> Vec<u8> {
        let mut p = vec![0u8; usize::from(len)];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p
    }

    fn header(kind: Kind) -> HeaderRepr {
        HeaderRepr {
            kind,
            path: PathId(3),
            path_seq: 0xBEEF,
            session: 0x0102_0304,
            seq: 0xA0B0_C0D0,
            timestamp: 0x1122_3344,
        }
    }

    #[test]
    fn data_header_bytes_are_as_specified() {
        let mut buf = vec![0u8; HEADER_LEN];
        header(Kind::Data).emit(&mut buf);
        assert_eq!(
            buf,
            [
                0x20, 0x03, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04, 0xA0, 0xB0, 0xC0, 0xD0, 0x11, 0x22,
                0x33, 0x44
            ]
        );
    }

    #[test]
    fn parses_data_with_ipv4_and_ipv6() {
        let mut buf = vec![0u8; HEADER_LEN];
        header(Kind::Data).emit(&mut buf);
        buf.extend(ipv4(28));
        match Datagram::parse(&buf) {
            Ok(Datagram::Data { header: h, packet }) => {
                assert_eq!(h, header(Kind::Data));
                assert_eq!(packet.len(), 28);
            }
            other => panic!("unexpected {other:?}"),
        }
        let mut v6 = vec![0u8; 48];
        v6[0] = 0x60;
        v6[4..6].copy_from_slice(&8u16.to_be_bytes());
        buf.truncate(HEADER_LEN);
        buf.extend(&v6);
        assert!(matches!(Datagram::parse(&buf), Ok(Datagram::Data { .. })));
    }

    #[test]
    fn refuses_malformed() {
        let mut buf = vec![0u8; HEADER_LEN];
        header(Kind::Data).emit(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[..5]),
            Err(WireError::Truncated { need: 16, got: 5 })
        );
        assert_eq!(Datagram::parse(&buf), Err(WireError::EmptyPayload));
        let mut bad = buf.clone();
        bad.extend([0x45, 0, 0]);
        assert_eq!(
            Datagram::parse(&bad),
            Err(WireError::Truncated { need: 20, got: 3 })
        );
        let mut bad = buf.clone();
        bad.extend(ipv4(40));
        bad.push(0);
        assert_eq!(
            Datagram::parse(&bad),
            Err(WireError::InnerLength {
                claimed: 40,
                got: 41
            })
        );
        let mut bad = buf.clone();
        bad.extend([0x55; 30]);
        assert_eq!(Datagram::parse(&bad), Err(WireError::NotIp(5)));
        let mut bad = buf.clone();
        bad[0] = 2 << 5;
        assert_eq!(Datagram::parse(&bad), Err(WireError::BadVersion(2)));
        bad[0] = (1 << 5) | SEALED_FLAG;
        assert_eq!(Datagram::parse(&bad), Err(WireError::Sealed));
        bad[0] = (1 << 5) | 9;
        assert_eq!(Datagram::parse(&bad), Err(WireError::UnknownKind(9)));
        let mut ka = vec![0u8; HEADER_LEN + 1];
        header(Kind::Keepalive).emit(&mut ka);
        assert_eq!(
            Datagram::parse(&ka),
            Err(WireError::ControlLength {
                expected: 16,
                got: 17
            })
        );
    }

    #[test]
    fn keepalive_and_ack_round_trip() {
        let mut buf = vec![0u8; 64];
        header(Kind::Keepalive).emit(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[..HEADER_LEN]),
            Ok(Datagram::Keepalive {
                header: header(Kind::Keepalive)
            })
        );
        let ack = AckRepr {
            header: header(Kind::KeepaliveAck),
            echo: 77,
            hold_us: 12,
        };
        let n = ack.emit(&mut buf);
        assert_eq!(
            Datagram::parse(&buf[..n]),
            Ok(Datagram::KeepaliveAck {
                header: ack.header,
                echo: 77,
                hold_us: 12
            })
        );
    }

    #[test]
    fn report_accepts_longer_entries_from_later_versions() {
        let e = ReportEntry {
            path: PathId(1),
            packets: 9,
            bytes: 1 << 40,
            ..Default::default()
        };
        let mut buf = vec![0u8; report_len(1)];
        ReportRepr {
            header: header(Kind::Report),
            entries: &[e],
        }
        .emit(&mut buf);
        // Rewrite as a "version 1.x" report whose entries carry 4 extra bytes.
        buf[field::REPORT_ENTRY_LEN] = (REPORT_ENTRY_LEN + 4) as u8;
        buf.extend([0xEE; 4]);
        let Ok(Datagram::Report { report, .. }) = Datagram::parse(&buf) else {
            panic!("report refused")
        };
        assert_eq!(report.entries().collect::<Vec<_>>(), vec![e]);
        buf[field::REPORT_ENTRY_LEN] = 10;
        assert_eq!(Datagram::parse(&buf), Err(WireError::ReportEntryLen(10)));
    }

    #[test]
    fn serial_arithmetic_wraps() {
        assert_eq!(seq_diff(2, u32::MAX), 3);
        assert_eq!(seq_diff(u32::MAX, 2), -3);
        assert_eq!(seq16_diff(1, u16::MAX), 2);
    }

    fn any_kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Data),
            Just(Kind::Keepalive),
            Just(Kind::KeepaliveAck),
            Just(Kind::Report),
            Just(Kind::Hello)
        ]
    }

    prop_compose! {
        fn any_header(kind: Kind)(path: u8, path_seq: u16, session: u32, seq: u32, timestamp: u32)
            -> HeaderRepr {
            HeaderRepr { kind, path: PathId(path), path_seq, session, seq, timestamp }
        }
    }

    prop_compose! {
        fn any_entry()(path: u8, flags: u8, path_seq: u16, packets: u32, bytes: u64, lost: u32,
                       owd_min_us: u32, jitter_us: u32, owd_us: u32, echo: u32, echo_age_us: u32,
                       owd_min_len: u16)
            -> ReportEntry {
            ReportEntry {
                path: PathId(path), flags, path_seq, packets, bytes, lost, owd_min_us, jitter_us,
                owd_us, echo, echo_age_us, owd_min_len,
            }
        }
    }

    proptest! {
        #[test]
        fn data_round_trips(h in any_header(Kind::Data), len in 20u16..1500) {
            let mut buf = vec![0u8; HEADER_LEN];
            h.emit(&mut buf);
            let inner = ipv4(len);
            buf.extend(&inner);
            prop_assert_eq!(Datagram::parse(&buf), Ok(Datagram::Data { header: h, packet: &inner[..] }));
        }

        #[test]
        fn control_round_trips(kind in any_kind(), h0 in any_header(Kind::Keepalive), echo: u32,
                               hold_us: u32, entries in proptest::collection::vec(any_entry(), 0..64),
                               random: [u8; 32], challenge: [u8; 16], hecho: [u8; 16], flags: u8) {
            let h = HeaderRepr { kind, ..h0 };
            let mut buf = vec![0u8; report_len(64)];
            match kind {
                Kind::Data => return Ok(()),
                Kind::Keepalive => {
                    h.emit(&mut buf);
                    prop_assert_eq!(Datagram::parse(&buf[..HEADER_LEN]), Ok(Datagram::Keepalive { header: h }));
                }
                Kind::KeepaliveAck => {
                    let n = AckRepr { header: h, echo, hold_us }.emit(&mut buf);
                    prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::KeepaliveAck { header: h, echo, hold_us }));
                }
                Kind::Report => {
                    let n = ReportRepr { header: h, entries: &entries }.emit(&mut buf);
                    prop_assert_eq!(n, report_len(entries.len()));
                    let Ok(Datagram::Report { header, report }) = Datagram::parse(&buf[..n]) else {
                        return Err(TestCaseError::fail("report refused"));
                    };
                    prop_assert_eq!(header, h);
                    prop_assert_eq!(report.entries().collect::<Vec<_>>(), entries);
                }
                Kind::Hello => {
                    let hello = HelloRepr { random, challenge, echo: hecho, flags };
                    let n = hello.with(h).emit(&mut buf);
                    prop_assert_eq!(Datagram::parse(&buf[..n]), Ok(Datagram::Hello { header: h, hello }));
                    prop_assert!(Datagram::parse(&buf[..n - 1]).is_err());
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(d) = Datagram::parse(&bytes) {
                let _ = d.header();
                if let Datagram::Report { report, .. } = d {
                    prop_assert_eq!(report.entries().count(), report.len());
                }
            }
        }

        #[test]
        fn mutated_valid_datagrams_never_panic(h in any_header(Kind::Data), pos in 0usize..64, val: u8, cut in 0usize..64) {
            let mut buf = vec![0u8; HEADER_LEN];
            h.emit(&mut buf);
            buf.extend(ipv4(48));
            let pos = pos % buf.len();
            buf[pos] = val;
            buf.truncate(buf.len() - cut.min(buf.len()));
            let _ = Datagram::parse(&buf);
        }
    }
}
