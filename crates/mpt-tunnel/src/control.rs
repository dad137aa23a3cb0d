//! Control datagrams: queued as [`Pending`] and built when polled (so that an answer says
//! how long it was held and fences are current), each sealed under the next counter and
//! given to the scheduler's clock of its path.

use mpt_core::seal::SEAL_OVERHEAD;
use mpt_core::wire::{self, AckRepr, HeaderRepr, Kind, ReportRepr, HEADER_LEN};
use mpt_core::{PathId, Time};

use crate::{Connection, Transmit, TransmitKind};

/// A control datagram queued for [`Connection::poll_transmit`], built when polled (so that an
/// answer says how long it was held, and fences are current).
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    Keepalive(PathId),
    Goodbye(PathId),
    /// The answer to a keepalive that arrived at `arrived` carrying timestamp `echo`.
    Ack {
        path: PathId,
        echo: u32,
        arrived: Time,
    },
    /// A receiver report of [`crate::report::ReportScratch::entries`].
    Report {
        path: PathId,
    },
    /// A path MTU probe, `size` bytes on the wire (UDP payload).
    Probe {
        path: PathId,
        size: usize,
    },
    /// A resend request for `ranges` (at most [`mpt_core::wire::MAX_NACK_RANGES`]).
    Nack {
        path: PathId,
        ranges: Vec<mpt_core::wire::NackRange>,
    },
    /// A resend request for the flows' references `references` names by their global
    /// sequence numbers (at most [`mpt_core::wire::MAX_NACK_RANGES`]; version 7).
    NackReferences {
        path: PathId,
        references: Vec<u32>,
    },
    /// The answer to a probe whose plain form was `size` bytes.
    ProbeAck {
        path: PathId,
        size: u16,
    },
    /// A datagram built already: a handshake message, a bundle that closed on its timer
    /// (and its parities), a resent packet.
    Raw(crate::Datagram),
}

impl Pending {
    /// The path a control message goes on (`None` for a handshake message).
    pub(crate) fn control_path(&self) -> Option<PathId> {
        match self {
            Pending::Keepalive(path) | Pending::Goodbye(path) => Some(*path),
            Pending::Ack { path, .. } | Pending::Report { path, .. } => Some(*path),
            Pending::Probe { path, .. } | Pending::ProbeAck { path, .. } => Some(*path),
            Pending::Nack { path, .. } | Pending::NackReferences { path, .. } => Some(*path),
            Pending::Raw(_) => None,
        }
    }
}

/// Control datagrams ([`crate::control`]): built and sealed as they are polled, with their
/// fences.
impl<P> Connection<P> {
    /// A control header: the sequence fields are our fences on `path` — the next global and
    /// per-path numbers, which tell the peer that every data datagram sent on the path before
    /// has lower ones. While a numbered batch for the path has not been handed to its socket,
    /// the fence is the one from before it: the control message may leave first, and a fence
    /// that overtook the batch would make the peer give its datagrams up as lost.
    pub(crate) fn fence_header(&self, kind: Kind, path: PathId, now: Time) -> HeaderRepr {
        let p = &self.paths[path.index()];
        let (seq, path_seq) = if p.unsent > 0 {
            p.fence_before
        } else {
            (self.seq, p.path_seq)
        };
        HeaderRepr {
            kind,
            path,
            path_seq,
            session: self.peer_session.unwrap_or(0),
            seq,
            timestamp: now.wire_micros(),
        }
    }

    /// Build a pending control datagram at `now`: sealed under the session key (not built
    /// while there is no session), or a handshake message as it is.
    pub(crate) fn build(
        &mut self,
        now: Time,
        pending: Pending,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        buf.clear();
        let path = match pending {
            Pending::Raw(d) => {
                buf.extend_from_slice(&d.contents);
                return Some(Transmit {
                    path: d.path,
                    destination: d.destination,
                    kind: d.kind,
                });
            }
            Pending::Keepalive(path) => self.build_keepalive(now, path, buf)?,
            Pending::Probe { path, size } => {
                // padded to `size` on the wire: its plain form says how long it is
                let plain = size
                    .saturating_sub(self.seal_overhead())
                    .max(wire::PROBE_MIN_LEN);
                buf.resize(plain + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::Probe, path, now).emit(buf);
                buf[HEADER_LEN..wire::PROBE_MIN_LEN].copy_from_slice(&(plain as u16).to_be_bytes());
                self.seal_control(now, path, buf, plain)?;
                path
            }
            Pending::ProbeAck { path, size } => {
                buf.resize(wire::PROBE_ACK_LEN + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::ProbeAck, path, now).emit(buf);
                buf[HEADER_LEN..wire::PROBE_ACK_LEN].copy_from_slice(&size.to_be_bytes());
                self.seal_control(now, path, buf, wire::PROBE_ACK_LEN)?;
                path
            }
            Pending::Nack { path, ranges } => {
                self.build_nack(now, path, buf, ranges.len(), |body| {
                    wire::emit_nack(body, &ranges)
                })?
            }
            Pending::NackReferences { path, references } => {
                self.build_nack(now, path, buf, references.len(), |body| {
                    wire::emit_nack_references(body, &references)
                })?
            }
            Pending::Goodbye(path) => {
                buf.resize(HEADER_LEN + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::Goodbye, path, now).emit(buf);
                self.seal_control(now, path, buf, HEADER_LEN)?;
                path
            }
            Pending::Ack {
                path,
                echo,
                arrived,
            } => {
                buf.resize(wire::ACK_LEN + SEAL_OVERHEAD, 0);
                let plain = AckRepr {
                    header: self.fence_header(Kind::KeepaliveAck, path, now),
                    echo,
                    hold_us: now.wire_micros().wrapping_sub(arrived.wire_micros()),
                }
                .emit(buf);
                self.seal_control(now, path, buf, plain)?;
                self.counts.keepalive_acks_sent += 1;
                self.paths[path.index()].idle_sent_at = now;
                path
            }
            Pending::Report { path } => {
                let entries = &self.report.entries;
                buf.resize(wire::report_len(entries.len()) + SEAL_OVERHEAD, 0);
                let h = self.fence_header(Kind::Report, path, now);
                let plain = ReportRepr { header: h, entries }.emit(buf);
                let len = self.seal_control(now, path, buf, plain)?;
                self.counts.report_bytes += (len + self.cfg.paths[path.index()].overhead) as u64;
                path
            }
        };
        Some(Transmit {
            path,
            destination: self.remote(path)?,
            kind: TransmitKind::Control,
        })
    }

    /// A keepalive on `path` into `buf`, sealed and counted; returns `path`. It tells the peer
    /// when we hear nothing from it there: down, and nothing heard lately (a path coming back,
    /// heard again, is not silent).
    fn build_keepalive(&mut self, now: Time, path: PathId, buf: &mut Vec<u8>) -> Option<PathId> {
        buf.resize(wire::KEEPALIVE_LEN + SEAL_OVERHEAD, 0);
        self.fence_header(Kind::Keepalive, path, now).emit(buf);
        let live = &self.paths[path.index()].live;
        let recent = self.cfg.keepalive * 2;
        let silent = live.state == crate::LinkState::Down
            && live
                .last_heard
                .is_none_or(|t| now.saturating_since(t) > recent);
        buf[HEADER_LEN] = if silent { wire::KEEPALIVE_SILENT } else { 0 };
        self.seal_control(now, path, buf, wire::KEEPALIVE_LEN)?;
        self.counts.keepalives_sent += 1;
        let p = &mut self.paths[path.index()];
        p.idle_sent_at = now;
        p.told_silent = silent;
        Some(path)
    }

    /// Bytes sealing adds to a datagram's plain form (counter and tag; none in the clear).
    pub(crate) fn seal_overhead(&self) -> usize {
        if self.sealing() {
            SEAL_OVERHEAD
        } else {
            0
        }
    }

    /// A resend request of `entries` entries on `path` into `buf`, its body written by
    /// `emit`, sealed and counted. Returns `path`.
    fn build_nack(
        &mut self,
        now: Time,
        path: PathId,
        buf: &mut Vec<u8>,
        entries: usize,
        emit: impl FnOnce(&mut [u8]),
    ) -> Option<PathId> {
        let plain = wire::nack_len(entries);
        buf.resize(plain + SEAL_OVERHEAD, 0);
        self.fence_header(Kind::Nack, path, now).emit(buf);
        emit(&mut buf[HEADER_LEN..plain]);
        let len = self.seal_control(now, path, buf, plain)?;
        self.resend
            .request_sent(len + self.cfg.paths[path.index()].overhead);
        Some(path)
    }

    /// Seal a control message built in `buf[..plain]` (with room for the seal after it) and
    /// give its time on the link to the scheduler; truncates `buf` to the datagram.
    fn seal_control(
        &mut self,
        now: Time,
        path: PathId,
        buf: &mut Vec<u8>,
        plain: usize,
    ) -> Option<usize> {
        self.stamp(buf);
        let len = if self.sealing() {
            let key = self.seal.clone()?;
            let counter = self.counter;
            self.counter += 1;
            key.seal_plain(counter, buf, plain).ok()?
        } else {
            plain
        };
        buf.truncate(len);
        let overhead = self.cfg.paths[path.index()].overhead;
        self.sched.on_control_sent(now, path, len + overhead);
        Some(len)
    }
}
