//! A whole datagram, validated once ([`Datagram::parse`]); keepalive answers; inner packets.

use super::*;
use crate::inner::Ip;

/// A validated datagram borrowed from a receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// One inner packet ([`Kind::Data`], or [`Kind::Express`] or [`Kind::Resent`] as the
    /// header says).
    Data {
        header: HeaderRepr,
        packet: &'a [u8],
    },
    /// Several inner packets ([`bundle_entries`]); `body` is checked ([`check_bundle`]) and
    /// holds `count` entries.
    Bundle {
        header: HeaderRepr,
        body: &'a [u8],
        count: usize,
    },
    /// The rest of a packet a bundle began, and more entries ([`continued_entries`]); `body`
    /// is checked ([`check_continued`]) and holds `count` entries after the continuation.
    Continued {
        header: HeaderRepr,
        cont: Continuation,
        body: &'a [u8],
        count: usize,
    },
    /// A path MTU probe of `size` bytes (the datagram's length, which it also claims).
    Probe {
        header: HeaderRepr,
        size: u16,
    },
    /// A resend request: `count` ranges ([`nack_ranges`]) in `body`, checked ([`check_nack`]).
    Nack {
        header: HeaderRepr,
        body: &'a [u8],
        count: usize,
    },
    /// The XOR of `count` packets of one path ([`check_parity`]); `body` is the sum.
    Parity {
        header: HeaderRepr,
        body: &'a [u8],
        count: usize,
    },
    /// A probe of `size` bytes arrived.
    ProbeAck {
        header: HeaderRepr,
        size: u16,
    },
    Goodbye {
        header: HeaderRepr,
    },
    /// A liveness probe; `flags` says how the sender sees the path ([`KEEPALIVE_SILENT`]).
    Keepalive {
        header: HeaderRepr,
        flags: u8,
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
    /// A handshake message ([`Kind::Initiation`], [`Kind::Response`] or
    /// [`Kind::CookieReply`], as the header says): what follows the header, of the exact
    /// length its kind has (an initiation's Noise message and its two MACs; a response's
    /// Noise message; a cookie reply's nonce and encrypted cookie).
    Handshake {
        header: HeaderRepr,
        message: &'a [u8],
    },
}

impl<'a> Datagram<'a> {
    /// Validate `buf` (one UDP payload) completely.
    pub fn parse(buf: &'a [u8]) -> Result<Datagram<'a>, WireError> {
        let header = HeaderRepr::parse(buf)?;
        let body = &buf[HEADER_LEN..];
        match header.kind {
            Kind::Data | Kind::Resent if buf[0] >> 5 >= 5 => {
                check_data_body(body)?;
                Ok(Datagram::Data {
                    header,
                    packet: body,
                })
            }
            Kind::Data | Kind::Express | Kind::Resent => {
                check_inner_packet(body)?;
                Ok(Datagram::Data {
                    header,
                    packet: body,
                })
            }
            Kind::Bundle => Ok(Datagram::Bundle {
                header,
                body,
                count: check_bundle(body)?,
            }),
            Kind::Continued => {
                let (cont, count) = check_continued(body)?;
                Ok(Datagram::Continued {
                    header,
                    cont,
                    body,
                    count,
                })
            }
            Kind::Probe => {
                let size = buf.get(HEADER_LEN..PROBE_MIN_LEN).map_or(0, be16);
                exact_len(buf, usize::from(size).max(PROBE_MIN_LEN))?;
                Ok(Datagram::Probe { header, size })
            }
            Kind::ProbeAck => {
                exact_len(buf, PROBE_ACK_LEN)?;
                Ok(Datagram::ProbeAck {
                    header,
                    size: be16(&buf[HEADER_LEN..PROBE_ACK_LEN]),
                })
            }
            Kind::Nack => Ok(Datagram::Nack {
                header,
                body,
                count: check_nack(body)?,
            }),
            Kind::Parity => Ok(Datagram::Parity {
                header,
                body,
                count: check_parity(&header, body)?,
            }),
            Kind::Keepalive => {
                exact_len(buf, KEEPALIVE_LEN)?;
                Ok(Datagram::Keepalive {
                    header,
                    flags: buf[HEADER_LEN],
                })
            }
            Kind::Goodbye => {
                exact_len(buf, HEADER_LEN)?;
                Ok(Datagram::Goodbye { header })
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
            Kind::Initiation | Kind::Response | Kind::CookieReply => {
                if !handshake_len_ok(header.kind, buf.len()) {
                    return Err(WireError::ControlLength {
                        expected: handshake_len(header.kind).unwrap_or(0),
                        got: buf.len(),
                    });
                }
                Ok(Datagram::Handshake {
                    header,
                    message: body,
                })
            }
        }
    }

    pub fn header(&self) -> &HeaderRepr {
        match self {
            Datagram::Data { header, .. }
            | Datagram::Bundle { header, .. }
            | Datagram::Continued { header, .. }
            | Datagram::Probe { header, .. }
            | Datagram::ProbeAck { header, .. }
            | Datagram::Nack { header, .. }
            | Datagram::Parity { header, .. }
            | Datagram::Keepalive { header, .. }
            | Datagram::Goodbye { header }
            | Datagram::KeepaliveAck { header, .. }
            | Datagram::Report { header, .. }
            | Datagram::Handshake { header, .. } => header,
        }
    }
}

pub(crate) fn exact_len(buf: &[u8], expected: usize) -> Result<(), WireError> {
    if buf.len() == expected {
        Ok(())
    } else {
        Err(WireError::ControlLength {
            expected,
            got: buf.len(),
        })
    }
}

/// Check a data body of version 5 or later: a whole IP packet ([`check_inner_packet`]) or a compressed
/// TCP packet (at least its marker, context, distance, mask and checksum: 6 bytes in version
/// 6's format, 5 in version 7's, whose marker holds the context; the rest is checked as it is
/// rebuilt).
pub fn check_data_body(body: &[u8]) -> Result<(), WireError> {
    let least = match body.first() {
        Some(&crate::hc::COMPRESSED_TCP) => 6,
        _ if crate::hc::is_compressed(body) => 5,
        _ => return check_inner_packet(body),
    };
    if body.len() < least {
        return Err(WireError::Truncated {
            need: HEADER_LEN + least,
            got: HEADER_LEN + body.len(),
        });
    }
    Ok(())
}

/// Check that `p` is a whole IPv4 or IPv6 packet whose length field matches its size.
pub fn check_inner_packet(p: &[u8]) -> Result<(), WireError> {
    let v = crate::inner::version(p).ok_or(WireError::EmptyPayload)?;
    let min = Ip::min_len(v).ok_or(WireError::NotIp(v))?;
    let claimed = Ip::new_checked(p)
        .ok_or(WireError::Truncated {
            need: min,
            got: p.len(),
        })?
        .total_len();
    if claimed < min || claimed != p.len() {
        return Err(WireError::InnerLength {
            claimed,
            got: p.len(),
        });
    }
    Ok(())
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
