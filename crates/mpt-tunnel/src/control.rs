//! Control datagrams: queued as [`Pending`] and built when polled (so that an answer says
//! how long it was held and fences are current), each sealed under the next counter and
//! given to the scheduler's clock of its path.

use mpt_core::seal::SEAL_OVERHEAD;
use mpt_core::wire::{self, AckRepr, HeaderRepr, Kind, ReportRepr, HEADER_LEN};
use mpt_core::{PathId, Time};

use std::time::Duration;

use crate::counts::Counts;
use crate::out::Out;
use crate::pending::Pending;
use crate::report::ReportScratch;
use crate::resend::Resend;
use crate::{Transmit, TransmitKind};

/// A keepalive to answer: the timestamp it carried, and when it arrived.
#[derive(Debug, Clone, Copy)]
struct Echo {
    echo: u32,
    arrived: Time,
}

/// What control datagrams are built from as they are polled: the way out (session, paths,
/// scheduler), the next global sequence number (for fences), the keepalive interval, the
/// report being sent, and where what they cost is counted.
pub(crate) struct Control<'a> {
    pub(crate) out: Out<'a>,
    pub(crate) seq: u32,
    pub(crate) keepalive: Duration,
    pub(crate) report: &'a ReportScratch,
    pub(crate) counts: &'a mut Counts,
    pub(crate) resend: &'a mut Resend,
}

/// Control datagrams ([`crate::control`]): built and sealed as they are polled, with their
/// fences.
impl Control<'_> {
    /// A control header: the sequence fields are our fences on `path` — the next global and
    /// per-path numbers, which tell the peer that every data datagram sent on the path before
    /// has lower ones. While a numbered batch for the path has not been handed to its socket,
    /// the fence is the one from before it: the control message may leave first, and a fence
    /// that overtook the batch would make the peer give its datagrams up as lost.
    fn fence_header(&self, kind: Kind, path: PathId, now: Time) -> HeaderRepr {
        let p = &self.out.paths[path.index()];
        let (seq, path_seq) = if p.unsent > 0 {
            p.fence_before
        } else {
            (self.seq, p.path_seq)
        };
        HeaderRepr {
            kind,
            path,
            path_seq,
            session: self.out.session.theirs.unwrap_or(0),
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
                    .saturating_sub(self.out.session.overhead())
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
            } => self.build_ack(now, path, Echo { echo, arrived }, buf)?,
            Pending::Report { path } => {
                let entries = &self.report.entries;
                buf.resize(wire::report_len(entries.len()) + SEAL_OVERHEAD, 0);
                let h = self.fence_header(Kind::Report, path, now);
                let plain = ReportRepr { header: h, entries }.emit(buf);
                let len = self.seal_control(now, path, buf, plain)?;
                let outer = self.out.settings[path.index()].overhead;
                self.counts.report_bytes += (len + outer) as u64;
                path
            }
        };
        Some(Transmit {
            path,
            destination: self.out.paths[path.index()].remote?,
            kind: TransmitKind::Control,
        })
    }

    /// A keepalive on `path` into `buf`, sealed and counted; returns `path`. It tells the peer
    /// when we hear nothing from it there: down, and nothing heard lately (a path coming back,
    /// heard again, is not silent).
    fn build_keepalive(&mut self, now: Time, path: PathId, buf: &mut Vec<u8>) -> Option<PathId> {
        buf.resize(wire::KEEPALIVE_LEN + SEAL_OVERHEAD, 0);
        self.fence_header(Kind::Keepalive, path, now).emit(buf);
        let live = &self.out.paths[path.index()].live;
        let recent = self.keepalive * 2;
        let silent = live.state == crate::LinkState::Down
            && live
                .last_heard
                .is_none_or(|t| now.saturating_since(t) > recent);
        buf[HEADER_LEN] = if silent { wire::KEEPALIVE_SILENT } else { 0 };
        self.seal_control(now, path, buf, wire::KEEPALIVE_LEN)?;
        self.counts.keepalives_sent += 1;
        let p = &mut self.out.paths[path.index()];
        p.idle_sent_at = now;
        p.told_silent = silent;
        Some(path)
    }

    /// The answer on `path` to a keepalive (`e`), into `buf`, sealed and counted; returns
    /// `path`.
    fn build_ack(&mut self, now: Time, path: PathId, e: Echo, buf: &mut Vec<u8>) -> Option<PathId> {
        let Echo { echo, arrived } = e;
        buf.resize(wire::ACK_LEN + SEAL_OVERHEAD, 0);
        let plain = AckRepr {
            header: self.fence_header(Kind::KeepaliveAck, path, now),
            echo,
            hold_us: now.wire_micros().wrapping_sub(arrived.wire_micros()),
        }
        .emit(buf);
        self.seal_control(now, path, buf, plain)?;
        self.counts.keepalive_acks_sent += 1;
        self.out.paths[path.index()].idle_sent_at = now;
        Some(path)
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
        let outer = self.out.settings[path.index()].overhead;
        self.resend.request_sent(len + outer);
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
        let len = self.out.session.seal_plain(buf, plain)?;
        let overhead = self.out.settings[path.index()].overhead;
        self.out.sched.on_control_sent(now, path, len + overhead);
        Some(len)
    }
}
