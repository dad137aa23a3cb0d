//! The send side: numbering data packets in batches and sealing them (control datagrams,
//! with their fences, are built in `control.rs`).

use crate::bundle::{Closed, OpenBundle, BUNDLE_MARGIN, BUNDLE_MAX_HOLD, BUNDLE_MIN_WAIT};
use mpt_core::seal::SEAL_OVERHEAD;
use mpt_core::wire::{self, AckRepr, ReportRepr};
use mpt_core::wire::{BUNDLE_ENTRY_LEN, CONTINUATION_LEN};
use std::sync::Arc;

use mpt_core::seal::{SealError, SealKey, TAG_LEN};
use std::time::Duration;

use mpt_core::wire::{HeaderRepr, Kind, HEADER_LEN};
use mpt_core::{PathId, Time};

use crate::class::Classes;
use crate::control::Pending;
use crate::{BatchOut, Connection, DropReason, Mode, Transmit};

/// What [`Connection::compressed_headers`] counts for a compressed header.
pub const COMPRESSED_HEADERS: usize = 20;

/// The paths a batch being numbered uses, one bit each: all of them (`used`: their fences
/// hold until it has left), those with datagrams in the batch's own buffers (`inbuf`), and
/// those where something numbered in the batch leaves after it (`tail`: a bundle the batch
/// closed after the path had datagrams in it), so that what is numbered next on them leaves
/// after it too and each path's datagrams leave in the order of their path sequences.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BatchPaths {
    pub(crate) used: u64,
    pub(crate) inbuf: u64,
    pub(crate) tail: u64,
}

/// Why [`Connection::send_one`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// Dropped and counted: no session key yet, or no path up.
    Dropped(DropReason),
    /// The buffer had no room for the seal (the caller's bug).
    Seal(SealError),
}

/// Seals the packets of one numbered batch, outside any lock the driver holds around the
/// connection: the batch's key and first counter. Hand [`Sealer::used`] back to
/// [`Connection::batch_sent`] once the batch has left.
#[derive(Debug, Clone)]
pub struct Sealer {
    key: Option<Arc<SealKey>>,
    first_counter: u64,
    used: u64,
}

impl Sealer {
    /// Seal packet `k` of the batch in place (`buf` as numbered, the inner packet of `inner`
    /// bytes after the prefix); returns the datagram's length.
    pub fn seal(&self, k: usize, buf: &mut [u8], inner: usize) -> Result<usize, SealError> {
        match &self.key {
            Some(key) => key.seal(self.first_counter + k as u64, buf, inner),
            None => Ok(HEADER_LEN + inner),
        }
    }

    /// The paths the batch uses, one bit each.
    pub fn used(&self) -> u64 {
        self.used
    }
}

impl<P> Connection<P> {
    /// Number a batch of packets read from the TUN device: `bufs[k]` holds an inner packet of
    /// `sizes[k]` bytes at [`Connection::prefix`] (0: none). For each, the scheduler picks a path
    /// and its header is written; `plan[k]` says the path, or `None` when the packet is
    /// dropped (counted). Returns the batch's [`Sealer`], or `None` while sealing has no
    /// session key (every packet counted as [`DropReason::NoSession`]).
    ///
    /// `out` (emptied first) gets what else the batch gives, in the order it must go: send
    /// [`BatchOut::before`] on their paths, then the batch's datagrams (each path's in
    /// order), then [`BatchOut::after`]; write [`BatchOut::icmp`] to the TUN device. Then
    /// [`Connection::batch_sent`]: until it, control messages on the batch's paths carry the
    /// fences from before it, and may leave first.
    pub fn number_batch<B: AsMut<[u8]>>(
        &mut self,
        now: Time,
        sizes: &mut [usize],
        bufs: &mut [B],
        plan: &mut [Option<PathId>],
        out: &mut BatchOut,
    ) -> Option<Sealer> {
        out.clear();
        let sealer = self.number(now, sizes, bufs, plan);
        out.before.append(&mut self.ready);
        out.after.append(&mut self.after);
        self.icmp.drain_into(&mut out.icmp);
        sealer
    }

    fn number<B: AsMut<[u8]>>(
        &mut self,
        now: Time,
        sizes: &mut [usize],
        bufs: &mut [B],
        plan: &mut [Option<PathId>],
    ) -> Option<Sealer> {
        let n = sizes.len();
        plan[..n].fill(None);
        let Some(peer_session) = self.peer_session else {
            let packets = sizes.iter().filter(|&&s| s > 0).count();
            self.counts.drops.add(DropReason::NoSession, packets as u64);
            return None;
        };
        let key = self.seal.clone();
        // what a packet costs on the link, as the scheduler counts it before it has chosen
        // the path (and with it the outer address family): as over IPv4
        let overhead = self.overhead();
        let first_counter = self.counter;
        // one counter per packet of the batch, planned or not: simple, and never reused (taken
        // before the loop: a bundle closed in it is sealed under the counter after them)
        if key.is_some() {
            self.counter += n as u64;
        }
        self.classes.light_expire(now, self.sched.as_mut());
        let mut b = BatchPaths::default();
        // packets copied once the batch is numbered, of `duplicate` classes and on paths data
        // woke from idle: (k, what)
        let mut copies = Vec::new();
        for k in 0..n {
            let mut inner = sizes[k];
            if inner == 0 {
                continue;
            }
            let whole_len = inner;
            let mut len = inner + overhead.datagram();
            if len > crate::BASE_DATAGRAM {
                self.note_big(now, len);
            }
            let at = self.prefix();
            let (class, mode) = Classes::of(&self.cfg.classes, &bufs[k].as_mut()[at..at + inner]);
            let chosen = match mode {
                Mode::Bond => self.sched.select(now, inner + overhead.link()),
                Mode::Fastest | Mode::Duplicate => self
                    .soonest(now, None)
                    .or_else(|| self.sched.select(now, inner + overhead.link())),
            };
            let Some(path) = chosen else {
                self.count(DropReason::NoPath);
                continue;
            };
            let i = path.index();
            self.data_on(i, now);
            self.classes.count(self.cfg.classes.len(), class, path);
            let keeps_short = Classes::keeps_short(&self.cfg.classes, class);
            if mode != Mode::Bond && keeps_short {
                self.classes.light_sent(now, path, self.sched.as_mut());
            }
            // light traffic never waits in a bundle (but for acknowledgements, which wait
            // there no longer than the path's queue would hold them anyway, and which a fast
            // transfer sends by the hundred thousand a second); a packet larger than the
            // path's datagram goes in pieces, whatever its class
            let cap = self.body_cap(i);
            // bulk TCP goes in a datagram of its own, its headers compressed (a small packet
            // may share one in a bundle instead)
            let packed = mode == Mode::Bond
                && self.compressing()
                && inner >= mpt_core::hc::COMPRESS_FROM
                && self.pack(&mut sizes[k], bufs[k].as_mut(), cap);
            inner = sizes[k];
            len = inner + overhead.datagram();
            let whole = inner <= cap;
            if !whole && !self.peer_pieces {
                // the peer cannot put pieces together: the sender learns the size that passes
                let packet = bufs[k].as_mut()[at..at + inner].to_vec();
                self.too_big(now, &packet, cap);
                continue;
            }
            if !whole && self.queue_full(now, path, inner) {
                self.count(DropReason::QueueFull);
                continue;
            }
            // a TCP packet that goes in order in one datagram is its flow's reference (one in
            // pieces is not: were a piece lost, it could not be sent again whole)
            let reference = !packed
                && whole
                && self.compressing()
                && (mode == Mode::Bond || !self.peer_express)
                && self
                    .hc_tx
                    .sent_whole(self.seq, &bufs[k].as_mut()[at..at + inner]);
            if !packed
                && (mode == Mode::Bond || !whole || !keeps_short)
                && self.bundle_packet(now, path, &bufs[k].as_mut()[at..at + inner], &mut b)
            {
                continue;
            }
            // on a woken path, light packets only: bulk copied onto the other paths would
            // double their load while a far path answers (a BBR start over 10 and 60 ms
            // paths put 74 ms of queue before voice on the near one)
            let wake_copy = self.woken(i) && inner <= crate::WAKE_COPY_MAX;
            if whole && (mode == Mode::Duplicate || wake_copy) {
                let copy = crate::class::CopyOf {
                    class,
                    seq: self.seq,
                    first: path,
                    express: mode != Mode::Bond,
                };
                copies.push((k, copy));
            }
            // an open bundle leaves before the packets that follow it on the path
            self.close_riding(now, i, &mut b);
            self.join_batch(i, &mut b.used);
            let p = &mut self.paths[i];
            let header = HeaderRepr {
                // light traffic is delivered as soon as it arrives, not in order with bulk
                kind: if mode == Mode::Bond || !self.peer_express {
                    Kind::Data
                } else {
                    Kind::Express
                },
                path,
                path_seq: p.path_seq,
                session: peer_session,
                seq: self.seq,
                timestamp: now.wire_micros(),
            };
            self.seq = self.seq.wrapping_add(1);
            p.path_seq = p.path_seq.wrapping_add(1);
            p.data_unsent += 1;
            self.pmtu_data_sent(i, len, header.path_seq);
            let outer = self.cfg.paths[i].overhead;
            self.sched.on_sent(now, path, len + outer);
            self.counts.tx_packets += 1;
            self.counts.tx_bytes += whole_len as u64;
            // a reference is kept for resending on every path (a path keeps the rest once it
            // lost something): the packets compressed against it are lost with it
            if self.keeps(i, now) || reference {
                let packet = &bufs[k].as_mut()[at..at + inner];
                self.resend
                    .buffer
                    .keep(path, header.path_seq, header.seq, now, packet);
            }
            // a parity its packet completes leaves after it
            let parity = if self.paths[i].fec_tx.k > 0 {
                let packet = &bufs[k].as_mut()[at..at + inner];
                self.parity_add(now, &header, packet)
            } else {
                None
            };
            if b.tail & (1 << i) != 0 {
                // something numbered before it on the path leaves after the batch: so does it
                let packet = &bufs[k].as_mut()[at..at + inner];
                if let Some(t) = self.owned_datagram(&header, packet) {
                    self.after.push(t);
                }
                self.after.extend(parity);
                continue;
            }
            self.after.extend(parity);
            header.emit(bufs[k].as_mut());
            self.stamp(bufs[k].as_mut());
            b.inbuf |= 1 << i;
            plan[k] = Some(path);
        }
        // pieces on a path that is not busy leave with the batch
        for i in 0..self.paths.len() {
            if self.paths[i].bundle.as_ref().is_some_and(|o| o.due <= now) {
                self.close_riding(now, i, &mut b);
            }
        }
        for (k, copy) in copies {
            let at = self.prefix();
            let packet = &bufs[k].as_mut()[at..at + sizes[k]];
            self.send_copy(now, copy, packet, &mut b.used);
        }
        Some(Sealer {
            key,
            first_counter,
            used: b.used,
        })
    }

    /// Whether data goes with compressed headers: configured, with resending (a reference
    /// lost is sent again), in a session of version 6 (a peer of version 5 makes references of
    /// packets in pieces too).
    pub(crate) fn compressing(&self) -> bool {
        self.cfg.compress && self.resending() && self.wire_version >= 6
    }

    /// What a bulk TCP packet's IP and TCP headers take in a datagram while data goes with
    /// compressed headers: a driver that cuts TCP segments to fit a datagram
    /// ([`Connection::largest_whole_packet`]) counts this for headers that compress. A
    /// compressed header is 12 to 14 bytes in a bulk flow (more when its window or flags
    /// change); one that does not fit goes whole, in pieces.
    pub fn compressed_headers(&self) -> Option<usize> {
        self.compressing().then_some(COMPRESSED_HEADERS)
    }

    /// Per context, the flow ([`mpt_core::hc::flow_hash`]) whose next packets may be
    /// compressed against a reference ([`mpt_core::hc::Compressor::ready`]; all 0 while data
    /// goes whole). A driver that cuts TCP segments for [`Connection::compressed_headers`]
    /// cuts the first of a burst of any other flow to fit a datagram whole, as it would
    /// without compression: it goes whole, and becomes its flow's reference.
    pub fn compress_ready(&self, out: &mut [u32; mpt_core::hc::CONTEXTS]) {
        if self.compressing() {
            self.hc_tx.ready(self.seq, out);
        } else {
            out.fill(0);
        }
    }

    /// Compress the inner packet of `*size` bytes in `buf` (at [`Connection::prefix`]) in
    /// place, as the next global sequence number's, if it is TCP whose flow has a reference
    /// ([`mpt_core::hc::Compressor::compress`]) and the result is at most `cap` bytes: a
    /// compressed header, padded to [`COMPRESSED_HEADERS`] (a flow's full segments then make
    /// datagrams of one size, a run for UDP GSO), in place of its IP and TCP headers. `*size` becomes the body's;
    /// returns whether it changed.
    fn pack(&mut self, size: &mut usize, buf: &mut [u8], cap: usize) -> bool {
        let (at, inner) = (self.prefix(), *size);
        let packet = &buf[at..at + inner];
        let mut header = mpt_core::hc::Headers::new();
        let Some(replaces) =
            self.hc_tx
                .compress_into(self.seq, packet, cap, COMPRESSED_HEADERS, &mut header)
        else {
            return false;
        };
        let h = header.len();
        buf.copy_within(at + replaces..at + inner, at + h);
        buf[at..at + h].copy_from_slice(&header);
        *size = inner - replaces + h;
        true
    }

    /// Whether a packet of `inner` bytes that goes in pieces on `path` would overflow the
    /// path's queue: a slow path (below [`crate::timers::SLOW_PATH`], where a queue holds a
    /// few datagrams) whose rate is configured (its clock is the link's), and whose clock
    /// would run more than two full datagrams (or 50 ms, whichever is longer) ahead of `now`
    /// once the packet is on it. An overloaded link drops datagrams, and a packet in pieces is
    /// lost with any of them: on a line offered twice what it carries, almost every packet
    /// would lose a piece, where whole packets lose only the half the line cannot carry.
    pub(crate) fn queue_full(&self, now: Time, path: PathId, inner: usize) -> bool {
        let i = path.index();
        let Some(rate) = self.cfg.paths[i]
            .rate_bps
            .filter(|&r| r > 0 && r < crate::timers::SLOW_PATH)
        else {
            return false;
        };
        let serialise = |bytes: usize| crate::pmtu::airtime(bytes, Some(rate));
        // two of the largest datagrams the tunnel sends there, not of the size found so far:
        // while the path's MTU is searched, data goes at 1200 bytes behind probes of up to
        // the largest, and a limit of two 1200-byte datagrams would drop the packet behind a
        // probe
        let datagram = self
            .max_datagram()
            .max(self.body_cap(i) + self.overhead().datagram())
            + self.cfg.paths[i].overhead;
        let limit = (2 * serialise(datagram)).max(mpt_sched::MAX_BACKLOG);
        self.sched.backlog(now, path) + serialise(inner) > limit
    }

    /// A datagram of `len` bytes, more than the base datagram carries, is sent at `now`: it is
    /// the largest sent lately unless a larger one went within [`crate::timers::BIG_FOR`].
    fn note_big(&mut self, now: Time, len: usize) {
        match self.big {
            Some((at, most)) if most > len && now.saturating_since(at) < crate::timers::BIG_FOR => {
            }
            _ => self.big = Some((now, len)),
        }
    }

    /// Path `i` takes part in the batch being numbered, whose paths are `used`: the first
    /// time, the fence that holds until the batch has left is the one from before it.
    pub(crate) fn join_batch(&mut self, i: usize, used: &mut u64) {
        if *used & (1 << i) == 0 {
            *used |= 1 << i;
            let p = &mut self.paths[i];
            if p.unsent == 0 {
                p.fence_before = (self.seq, p.path_seq);
            }
            p.unsent += 1;
        }
    }

    /// A data datagram built in a buffer of our own for `header` and the inner packet
    /// `packet`, sealed, to the path's remote (`None` while sealing has no key or the remote
    /// is unknown).
    pub(crate) fn owned_datagram(
        &mut self,
        header: &HeaderRepr,
        packet: &[u8],
    ) -> Option<Transmit> {
        let destination = self.remote(header.path)?;
        let prefix = self.prefix();
        let mut buf = Vec::with_capacity(prefix + packet.len() + TAG_LEN);
        buf.resize(prefix, 0);
        buf.extend_from_slice(packet);
        let contents = self.seal_owned(header, buf, packet.len())?;
        Some(Transmit {
            path: header.path,
            destination,
            contents,
        })
    }

    /// The batch that used the paths of `used` (from [`Sealer::used`]) has left: its data
    /// counts as sent on those paths (a path that carried data since the last keepalive tick
    /// needs no keepalive), and control messages may fence it now.
    pub fn batch_sent(&mut self, used: u64) {
        for i in mpt_core::bits(used) {
            let p = &mut self.paths[i];
            p.unsent -= 1;
            p.data_sent += std::mem::take(&mut p.data_unsent);
        }
    }

    /// `packet` cannot be carried: dropped, counted, and answered (within the rate limit)
    /// with the largest inner packet that passes, `most` bytes.
    pub(crate) fn too_big(&mut self, now: Time, packet: &[u8], most: usize) {
        self.count(DropReason::TooBig);
        self.icmp.answer(now, packet, most);
    }

    /// Number, seal and account one packet (`buf` as for [`Connection::number_batch`], with
    /// [`mpt_core::seal::TAG_LEN`] bytes of room after the packet): the path it goes on,
    /// where to, and the datagram's length; `None` when it waits in a bundle. For drivers
    /// that send one packet at a time; `out` as for [`Connection::number_batch`].
    pub fn send_one(
        &mut self,
        now: Time,
        (buf, inner): (&mut [u8], usize),
        out: &mut BatchOut,
    ) -> Result<Option<(PathId, std::net::SocketAddr, usize)>, SendError> {
        let mut plan = [None];
        let held = self.counts.held_packets;
        let mut sizes = [inner];
        let sealer = self
            .number_batch(now, &mut sizes, &mut [&mut *buf], &mut plan, out)
            .ok_or(SendError::Dropped(DropReason::NoSession))?;
        let inner = sizes[0];
        self.batch_sent(sealer.used());
        if self.counts.held_packets != held {
            return Ok(None);
        }
        let path = plan[0].ok_or(SendError::Dropped(DropReason::NoPath))?;
        let len = sealer.seal(0, buf, inner).map_err(SendError::Seal)?;
        let to = self
            .remote(path)
            .ok_or(SendError::Dropped(DropReason::NoPath))?;
        Ok(Some((path, to, len)))
    }

    /// The path where a datagram sent at `now` arrives soonest, other than `not`: its delay
    /// plus its queue ([`Connection::queue_seen`], or the scheduler's clock). The delay is the
    /// path's smallest one-way delay above the nearest path's, as the peer's last report (within
    /// a second) gives it, or else half its smoothed round-trip time (which a report's way back
    /// and the queue of the packet it answers are part of). Only paths the scheduler may
    /// use, and backup paths only while no regular one is usable.
    pub(crate) fn soonest(&self, now: Time, not: Option<PathId>) -> Option<PathId> {
        self.soonest_where(now, |p| Some(p) != not)
    }

    /// [`Connection::soonest`] among the paths `allowed` admits.
    pub(crate) fn soonest_where(
        &self,
        now: Time,
        allowed: impl Fn(PathId) -> bool + Copy,
    ) -> Option<PathId> {
        let usable = || {
            (0..self.paths.len())
                .map(|i| PathId(i as u8))
                .filter(move |&p| allowed(p) && self.usable(p))
        };
        // the highest tier that has a usable path
        let tier = |p: PathId| self.cfg.paths[p.index()].tier();
        let top = usable().map(tier).min()?;
        let arrival = |p: PathId| {
            let path = &self.paths[p.index()];
            let delay = match path.peer_report {
                Some((at, e)) if now.saturating_since(at) <= Duration::from_secs(1) => {
                    Duration::from_micros(u64::from(e.owd_min_us))
                }
                _ => {
                    path.srtt_us
                        .map_or(crate::class::UNMEASURED_RTT, Duration::from_micros)
                        / 2
                }
            };
            let queue = self
                .queue_seen(now, p)
                .unwrap_or_else(|| self.sched.backlog(now, p));
            (delay, delay + queue)
        };
        let candidates = || usable().filter(move |&p| tier(p) == top);
        let soonest = candidates().map(|p| arrival(p).1).min()?;
        // Bulk spread by earliest delivery queues on the near paths until they are no sooner
        // than the far ones, so the paths that carry it tie. Of those, the nearest: the
        // stream keeps its path short, and there the queue drains, where on a farther path
        // every packet after would pay the difference in delay.
        candidates()
            .map(|p| (arrival(p), p))
            .filter(|&((_, at), _)| at <= soonest + crate::class::SOONEST_TIE)
            .min_by_key(|&(key, _)| key)
            .map(|(_, p)| p)
    }

    /// Send a copy of `packet` (as `c` says) on the next soonest path, numbered after the
    /// batch's packets there and leaving after them
    /// ([`crate::BatchOut::after`]), so that each path's datagrams stay in order. `used` is the
    /// batch's set of paths: the copy's path joins it, and its fences hold until the batch
    /// and the copy have left.
    pub(crate) fn send_copy(
        &mut self,
        now: Time,
        c: crate::class::CopyOf,
        packet: &[u8],
        used: &mut u64,
    ) {
        let crate::class::CopyOf {
            class,
            seq,
            first,
            express,
        } = c;
        let Some(session) = self.peer_session else {
            return;
        };
        let Some(path) = self.soonest(now, Some(first)) else {
            return;
        };
        let i = path.index();
        // a copy goes whole or not at all
        if self.remote(path).is_none() || packet.len() > self.body_cap(i) {
            return;
        }
        self.data_on(i, now);
        self.join_batch(i, used);
        let p = &mut self.paths[i];
        let header = HeaderRepr {
            kind: if express && self.peer_express {
                Kind::Express
            } else {
                Kind::Data
            },
            path,
            path_seq: p.path_seq,
            session,
            seq,
            timestamp: now.wire_micros(),
        };
        p.path_seq = p.path_seq.wrapping_add(1);
        p.data_unsent += 1;
        let Some(t) = self.owned_datagram(&header, packet) else {
            return;
        };
        let cost = t.contents.len() + self.cfg.paths[i].overhead;
        self.sched.on_sent(now, path, cost);
        self.classes.copy_sent();
        self.classes.count(self.cfg.classes.len(), class, path);
        self.after.push(t);
    }

    /// Whether a packet sent on path `i` at `now` is kept for resending: the path lost
    /// something lately.
    #[inline]
    pub(crate) fn keeps(&self, i: usize, now: Time) -> bool {
        self.paths[i].keep_until.is_some_and(|t| now < t) && self.resending()
    }

    /// The receiver's half of resending: the path sequence gaps the resequencer saw since the
    /// last call go into resend requests (queued for [`Connection::poll_transmit`]), but for
    /// packets a parity made again already ([`crate::fec`]).
    pub(crate) fn request_resends(&mut self, now: Time) {
        if !self.resending() {
            return;
        }
        let paths = &self.paths;
        self.resend.collect_gaps(now, &mut self.reseq, |path, ps| {
            paths[path.index()].fec_rx.repaired(ps)
        });
        let Some(ranges) = self.resend.take_asked() else {
            return;
        };
        let Some(path) = self.report_path() else {
            return;
        };
        for chunk in ranges.chunks(mpt_core::wire::MAX_NACK_RANGES) {
            self.resend.requested(chunk);
            self.pending.push_back(Pending::Nack {
                path,
                ranges: chunk.to_vec(),
            });
        }
    }

    /// The sender's half: the peer asks for the packets `ranges` name. Each one still kept
    /// goes again, once, on the path where it arrives soonest.
    pub(crate) fn take_nack(
        &mut self,
        now: Time,
        ranges: impl Iterator<Item = mpt_core::wire::NackRange>,
    ) {
        let Some(session) = self.peer_session else {
            return;
        };
        let max_age = self.cfg.reorder_timeout;
        let n = self.paths.len();
        // not on the path light traffic keeps short, while another path is up: a burst of
        // resends there is a queue the light stream waits behind
        let kept = self.classes.kept_path(now);
        for r in ranges {
            let lost = r.path.index();
            if lost >= self.paths.len() {
                continue;
            }
            self.paths[lost].keep_until = Some(now + crate::resend::KEEP_AFTER_LOSS);
            for k in 0..u16::from(r.count) {
                let path_seq = r.first.wrapping_add(k);
                self.resend.counts_mut(lost, n).requested += 1;
                let prefix = self.prefix();
                let Some((seq, buf)) =
                    self.resend
                        .buffer
                        .take(r.path, path_seq, now, max_age)
                        .map(|(seq, packet)| {
                            let mut buf = Vec::with_capacity(prefix + packet.len() + TAG_LEN);
                            buf.resize(prefix, 0);
                            buf.extend_from_slice(packet);
                            (seq, buf)
                        })
                else {
                    self.resend.counts_mut(lost, n).missed += 1;
                    continue;
                };
                // on a path the packet fits whole (one first sent in pieces may not); a
                // datagram larger than every path surely carries, lost on its path, may have
                // met a black hole there (a path MTU that dropped, not noticed yet): on
                // another path, if one fits it, or it is lost again, and with it every packet
                // compressed against it
                let len = buf.len() - prefix;
                let fits = |p: PathId| self.body_cap(p.index()) >= len;
                let big = len + self.overhead().datagram() > crate::BASE_DATAGRAM;
                let elsewhere = |p: PathId| !big || p != r.path;
                let Some(via) = self
                    .soonest_where(now, |p| Some(p) != kept && fits(p) && elsewhere(p))
                    .or_else(|| self.soonest_where(now, |p| fits(p) && elsewhere(p)))
                    .or_else(|| self.soonest_where(now, |p| Some(p) != kept && fits(p)))
                    .or_else(|| self.soonest_where(now, fits))
                else {
                    self.resend.counts_mut(lost, n).missed += 1;
                    continue;
                };
                let header = HeaderRepr {
                    kind: Kind::Resent,
                    path: via,
                    // not a number of the path's: its next, not taken
                    path_seq: self.paths[via.index()].path_seq,
                    session,
                    seq,
                    timestamp: now.wire_micros(),
                };
                let body = buf.len() - prefix;
                let Some(contents) = self.seal_owned(&header, buf, body) else {
                    continue;
                };
                let Some(destination) = self.remote(via) else {
                    continue;
                };
                let cost = contents.len() + self.cfg.paths[via.index()].overhead;
                self.sched.on_control_sent(now, via, cost);
                let c = self.resend.counts_mut(lost, n);
                c.resent += 1;
                c.resent_bytes += cost as u64;
                self.pending.push_back(Pending::Raw {
                    path: via,
                    destination,
                    contents,
                });
            }
        }
    }

    /// Keep the whole packets of a data, bundle or continued datagram with `header` and plain
    /// `body` for resending (not a continuation or a head piece: a packet in pieces is kept
    /// whole where it is cut, in [`Connection::bundle_packet`]); on a path that lost nothing
    /// lately, the flows' references among them only.
    pub(crate) fn keep_bundled(&mut self, now: Time, header: &HeaderRepr, body: &[u8]) {
        let all = self.keeps(header.path.index(), now);
        if !all && !self.compressing() {
            return;
        }
        let path = header.path;
        let hc = &self.hc_tx;
        let buffer = &mut self.resend.buffer;
        crate::resend::whole_packets(header, body, |path_seq, seq, packet| {
            // references on every path, as in [`Connection::number_batch`]
            if all || hc.is_reference(seq, packet) {
                buffer.keep(path, path_seq, seq, now, packet)
            }
        });
    }

    /// A data datagram with `header` and inner `packet` was numbered on its path: it joins
    /// the path's parity group, and a group complete is summed into a parity, to leave after
    /// it.
    pub(crate) fn parity_add(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        packet: &[u8],
    ) -> Option<Transmit> {
        let i = header.path.index();
        if self.paths[i].fec_tx.k == 0 || !self.parity() {
            return None;
        }
        let crate::Group {
            first,
            k,
            seqs,
            lens,
            sum,
        } = self.paths[i]
            .fec_tx
            .add(now, header.path_seq, header.seq, packet)?;
        let session = self.peer_session?;
        // a peer of version 4 takes the group's size alone
        let lens = if self.wire_version >= 5 { lens } else { 0 };
        let h = HeaderRepr {
            kind: Kind::Parity,
            path: header.path,
            path_seq: first,
            session,
            seq: seqs,
            timestamp: k as u32 | u32::from(lens) << 16,
        };
        let prefix = self.prefix();
        let mut buf = Vec::with_capacity(prefix + sum.len() + TAG_LEN);
        buf.resize(prefix, 0);
        buf.extend_from_slice(&sum);
        let contents = self.seal_owned(&h, buf, sum.len())?;
        let destination = self.remote(header.path)?;
        let cost = contents.len() + self.cfg.paths[i].overhead;
        self.sched.on_control_sent(now, header.path, cost);
        let c = self.resend.counts_mut(i, self.paths.len());
        c.parity_sent += 1;
        c.parity_bytes += cost as u64;
        Some(Transmit {
            path: header.path,
            destination,
            contents,
        })
    }

    /// The whole packets of a data, bundle or continued datagram with `header` and plain
    /// `body` join the path's parity group (in the order of their path sequences); the
    /// parities they complete go in `out`, to leave after the datagram.
    pub(crate) fn parity_entries(
        &mut self,
        now: Time,
        header: &HeaderRepr,
        body: &[u8],
        out: &mut Vec<Transmit>,
    ) {
        // a head piece is not a whole packet: the group it falls in has no parity
        crate::resend::whole_packets(header, body, |path_seq, seq, packet| {
            let h = HeaderRepr {
                path_seq,
                seq,
                ..*header
            };
            out.extend(self.parity_add(now, &h, packet));
        });
    }

    /// A data datagram of `len` bytes went on path `i`, the last of its per-path sequences
    /// `path_seq`. On a slow path (below [`crate::timers::SLOW_PATH`]) one of the size found
    /// confirms it once the peer has it (the path MTU's report): a probe there holds the line
    /// long (94 ms at 128 kbit/s) and delays what goes behind it on schedulers that do not go
    /// around it. Faster paths keep their probes, which find a drop among small packets sooner.
    pub(crate) fn pmtu_data_sent(&mut self, i: usize, len: usize, path_seq: u16) {
        if len < self.paths[i].pmtu.size || !self.slow_path(i) {
            return;
        }
        let p = &mut self.paths[i];
        let lost = p.peer_report.as_ref().map(|(_, e)| e.lost);
        p.pmtu.data_sent(len, path_seq, lost);
    }

    /// We are stopping at `now`: open bundles leave, then a goodbye on every path (sealed,
    /// once keys are agreed), for [`Connection::poll_transmit`]. The peer takes our paths down
    /// at once instead of after `dead` of silence; its fences also release what it held of
    /// ours.
    pub fn close(&mut self, now: Time) {
        for p in &mut self.paths {
            if let Some(b) = p.bundle.as_mut() {
                b.due = now;
            }
        }
        self.bundle_tick(now);
        for i in 0..self.paths.len() {
            self.pending.push_back(Pending::Goodbye(PathId(i as u8)));
        }
    }
}

/// Bundling ([`crate::bundle`]): small packets wait for a busy path, and a packet too large
/// goes in pieces.
impl<P> Connection<P> {
    /// Bundle the inner packet `packet`, which the scheduler put on `path`, if its path is
    /// busy (or a bundle is open there already), or put it in pieces if it is larger than a
    /// datagram on the path carries: numbered, accounted and held. `used` is the batch's
    /// paths, which a full bundle joins to leave with the batch. Returns whether the packet
    /// was taken.
    ///
    /// A packet in pieces fills the path's open bundle (or a new one) with its head piece;
    /// each full datagram leaves with the batch, and the last piece opens the next, which the
    /// packets after it fill up. That last datagram is held as a bundle would be while the
    /// path is busy, and leaves with the batch when it is not.
    pub(crate) fn bundle_packet(
        &mut self,
        now: Time,
        path: PathId,
        packet: &[u8],
        b: &mut BatchPaths,
    ) -> bool {
        let i = path.index();
        let cap = self.body_cap(i);
        let pieces = packet.len() > cap && self.peer_pieces;
        if !pieces
            && (!self.cfg.bundle || !self.peer_express || packet.len() + BUNDLE_ENTRY_LEN > cap)
        {
            return false;
        }
        let wait = self.bundle_wait(now, path);
        let seq = self.seq;
        let prefix = self.prefix();
        // a UDP packet like the one before it in the bundle goes without its headers (a peer
        // of version 3 takes whole entries only)
        let how = (pieces, self.wire_version >= 4);
        let mut entry = Default::default();
        if let Some(open) = &self.paths[i].bundle {
            match open.fits(seq, packet, how, (prefix, cap)) {
                Some(e) => entry = e,
                None => self.close_riding(now, i, b),
            }
        }
        if self.paths[i].bundle.is_none() {
            if wait < BUNDLE_MIN_WAIT && !pieces {
                return false;
            }
            // pieces on an idle path leave with the batch
            let hold = match wait.checked_sub(BUNDLE_MARGIN) {
                Some(h) if wait >= BUNDLE_MIN_WAIT => h.min(BUNDLE_MAX_HOLD),
                _ => Duration::ZERO,
            };
            self.open_bundle(i, now + hold, None);
        }
        let overhead = self.overhead().datagram() + self.cfg.paths[i].overhead;
        let Some(open) = self.paths[i].bundle.as_mut() else {
            return false;
        };
        let Some(pushed) = open.push(seq, packet, entry, (prefix, cap)) else {
            return false;
        };
        if pushed.squeezed {
            self.counts.compressed_packets += 1;
        }
        // the first packet pays for the datagram; the others only for their entries
        let mut cost = pushed.bytes + if pushed.first { overhead } else { 0 };
        let due = open.due;
        // the head piece's bundle is sealed next, in the loop below, and takes the path's next
        // sequences: the head piece's is its entry's among them
        let head = pushed.head;
        let head_path_seq = self.paths[i].path_seq.wrapping_add(pushed.index as u16);
        let mut offset = head;
        while offset < packet.len() {
            // this datagram is full: the rest goes in the next ones
            self.close_riding(now, i, b);
            self.open_bundle(i, due, Some(seq));
            let Some(open) = self.paths[i].bundle.as_mut() else {
                return true;
            };
            let n = open.push_rest(offset, &packet[offset..], cap);
            offset += n;
            cost += overhead + CONTINUATION_LEN + n;
        }
        self.seq = self.seq.wrapping_add(1);
        self.sched.on_sent(now, path, cost);
        if head < packet.len() && self.keeps(i, now) {
            // a lost piece is asked for by the head piece's path sequence: the packet goes
            // again whole, on a path it fits
            self.resend
                .buffer
                .keep(path, head_path_seq, seq, now, packet);
        }
        if pieces {
            // the last piece waits for the packets after it while the path still carries
            // what went before (never past the time it would have left the link's queue)
            let wait = self.bundle_wait(now, path);
            let hold = match wait.checked_sub(BUNDLE_MARGIN) {
                Some(h) if wait >= BUNDLE_MIN_WAIT => h,
                _ => wait,
            };
            if let Some(open) = self.paths[i].bundle.as_mut() {
                open.due = open.due.max(now + hold.min(BUNDLE_MAX_HOLD));
            }
        }
        self.counts.tx_packets += 1;
        self.counts.tx_bytes += packet.len() as u64;
        self.counts.held_packets += 1;
        true
    }

    /// How long a datagram sent on `path` at `now` would wait behind what the path carries,
    /// as bundling may count on: [`Connection::queue_seen`], or nothing without a report.
    pub(crate) fn bundle_wait(&self, now: Time, path: PathId) -> Duration {
        self.queue_seen(now, path).unwrap_or(Duration::ZERO)
    }

    /// The queue a datagram sent on `path` at `now` would wait behind, as far as we know it:
    /// the scheduler's clock where the path's rate is configured; where it is learned, no
    /// longer than the queue the peer's last report (within a second) shows on the path (its
    /// smoothed delay above its minimum); `None` for a learned rate without such a report. A
    /// learned rate is what the path was offered: on a path that carries little (TCP
    /// acknowledgements back to a site, or what BBR, which keeps its queues short, left to
    /// it), it runs the clock far ahead of a queue that is not there. Every acknowledgement
    /// then waited in a bundle (two sites through a NAT fell from 2.4 to 0.1–0.8 Gbit/s
    /// each), and light traffic took a path 50 ms further.
    pub(crate) fn queue_seen(&self, now: Time, path: PathId) -> Option<Duration> {
        let clock = self.sched.backlog(now, path);
        let i = path.index();
        if self.cfg.paths[i].rate_bps.is_some() {
            return Some(clock);
        }
        match self.paths[i].peer_report {
            Some((at, e)) if now.saturating_since(at) <= Duration::from_secs(1) => {
                let queue = e.owd_us.saturating_sub(e.owd_min_us);
                Some(clock.min(Duration::from_micros(u64::from(queue))))
            }
            _ => None,
        }
    }

    /// Open a bundle on path `i` that leaves at `due` at the latest: one that continues packet
    /// `continues` (its last pieces), or an empty one.
    fn open_bundle(&mut self, i: usize, due: Time, continues: Option<u32>) {
        let prefix = self.prefix();
        let cap = self.body_cap(i);
        let p = &mut self.paths[i];
        if p.unsent == 0 {
            p.fence_before = (self.seq, p.path_seq);
        }
        p.unsent += 1;
        p.bundle = Some(OpenBundle::new((prefix, cap), self.seq, continues, due));
    }

    /// Close `path`'s bundle, if one is open, to leave with a batch that uses the path: before
    /// it ([`crate::BatchOut::before`]), or after it ([`crate::BatchOut::after`]) when the
    /// batch has datagrams on the path already, which were numbered before the bundle. The
    /// batch's fences hold until it has left.
    pub(crate) fn close_riding(&mut self, now: Time, i: usize, b: &mut BatchPaths) {
        if self.paths[i].bundle.is_none() {
            return;
        }
        let p = &mut self.paths[i];
        if b.used & (1 << i) == 0 {
            b.used |= 1 << i;
            // the open bundle counts in `unsent`: the fence from before it holds
            p.unsent += 1;
        }
        p.unsent -= 1;
        p.data_unsent += 1;
        let mut parities = Vec::new();
        if let Some(t) = self.seal_bundle(now, i, &mut parities) {
            if b.inbuf & (1 << i) != 0 {
                b.tail |= 1 << i;
                self.after.push(t);
                self.after.append(&mut parities);
            } else {
                self.ready.push(t);
                self.ready.append(&mut parities);
            }
        }
    }

    /// Build and seal `path`'s open bundle; it takes the next path sequences. Parities its
    /// packets complete, to leave after it, go in `parities`.
    fn seal_bundle(
        &mut self,
        now: Time,
        i: usize,
        parities: &mut Vec<Transmit>,
    ) -> Option<Transmit> {
        let prefix = self.prefix();
        let Closed {
            kind,
            first_seq,
            count,
            buf,
        } = self.paths[i].bundle.take()?.close(prefix);
        let Some(session) = self.peer_session else {
            self.counts.drops.add(DropReason::NoSession, count as u64);
            return None;
        };
        let path = PathId(i as u8);
        let p = &mut self.paths[i];
        let header = HeaderRepr {
            kind,
            path,
            path_seq: p.path_seq,
            session,
            seq: first_seq,
            timestamp: now.wire_micros(),
        };
        p.path_seq = p.path_seq.wrapping_add(count as u16);
        let body = buf.len() - prefix;
        if count > 0 {
            let last = header.path_seq.wrapping_add(count as u16 - 1);
            self.pmtu_data_sent(i, body + self.overhead().datagram(), last);
        }
        self.keep_bundled(now, &header, &buf[prefix..]);
        if self.paths[i].fec_tx.k > 0 {
            self.parity_entries(now, &header, &buf[prefix..], parities);
        }
        let Some(buf) = self.seal_owned(&header, buf, body) else {
            self.counts.drops.add(DropReason::NoSession, count as u64);
            return None;
        };
        if count > 1 || (count == 1 && kind != Kind::Data) {
            self.counts.bundles_sent += 1;
            self.counts.bundled_packets += count as u64;
        }
        Some(Transmit {
            path,
            destination: self.remote(path)?,
            contents: buf,
        })
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
        let len = if self.sealing() {
            let key = self.seal.clone()?;
            buf.resize(prefix + body + TAG_LEN, 0);
            let counter = self.counter;
            self.counter += 1;
            key.seal(counter, &mut buf, body).ok()?
        } else {
            prefix + body
        };
        buf.truncate(len);
        Some(buf)
    }

    /// When the first open bundle is due.
    pub(crate) fn bundle_due(&self) -> Option<Time> {
        self.paths
            .iter()
            .filter_map(|p| p.bundle.as_ref().map(|b| b.due))
            .min()
    }

    /// Bundles due at `now` leave: first in the control queue, so that no fence polled after
    /// them overtakes them.
    pub(crate) fn bundle_tick(&mut self, now: Time) {
        for i in 0..self.paths.len() {
            if self.paths[i].bundle.as_ref().is_none_or(|b| b.due > now) {
                continue;
            }
            let p = &mut self.paths[i];
            p.unsent -= 1;
            p.data_sent += 1;
            let mut parities = Vec::new();
            if let Some(t) = self.seal_bundle(now, i, &mut parities) {
                let raw = |t: Transmit| Pending::Raw {
                    path: t.path,
                    destination: t.destination,
                    contents: t.contents,
                };
                // the bundle first, then its parities
                for p in parities.into_iter().rev() {
                    self.pending.push_front(raw(p));
                }
                self.pending.push_front(raw(t));
            }
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
    pub(crate) fn build(&mut self, now: Time, pending: Pending) -> Option<Transmit> {
        let mut buf = Vec::new();
        let path = match pending {
            Pending::Raw {
                path,
                destination,
                contents,
            } => {
                return Some(Transmit {
                    path,
                    destination,
                    contents,
                })
            }
            Pending::Keepalive(path) => {
                buf.resize(wire::KEEPALIVE_LEN + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::Keepalive, path, now).emit(&mut buf);
                // we tell the peer when we hear nothing from it here: down, and nothing heard
                // lately (a path coming back, heard again, is not silent)
                let live = &self.paths[path.index()].live;
                let recent = self.cfg.keepalive * 2;
                let silent = live.state == crate::LinkState::Down
                    && live
                        .last_heard
                        .is_none_or(|t| now.saturating_since(t) > recent);
                buf[HEADER_LEN] = if silent { wire::KEEPALIVE_SILENT } else { 0 };
                self.seal_control(now, path, &mut buf, wire::KEEPALIVE_LEN)?;
                self.counts.keepalives_sent += 1;
                let p = &mut self.paths[path.index()];
                p.idle_sent_at = now;
                p.told_silent = silent;
                path
            }
            Pending::Probe { path, size } => {
                // padded to `size` on the wire: its plain form says how long it is
                let plain = size
                    .saturating_sub(self.seal_overhead())
                    .max(wire::PROBE_MIN_LEN);
                buf.resize(plain + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::Probe, path, now).emit(&mut buf);
                buf[HEADER_LEN..wire::PROBE_MIN_LEN].copy_from_slice(&(plain as u16).to_be_bytes());
                self.seal_control(now, path, &mut buf, plain)?;
                path
            }
            Pending::ProbeAck { path, size } => {
                buf.resize(wire::PROBE_ACK_LEN + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::ProbeAck, path, now).emit(&mut buf);
                buf[HEADER_LEN..wire::PROBE_ACK_LEN].copy_from_slice(&size.to_be_bytes());
                self.seal_control(now, path, &mut buf, wire::PROBE_ACK_LEN)?;
                path
            }
            Pending::Nack { path, ranges } => {
                let plain = wire::nack_len(ranges.len());
                buf.resize(plain + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::Nack, path, now).emit(&mut buf);
                wire::emit_nack(&mut buf[HEADER_LEN..plain], &ranges);
                let len = self.seal_control(now, path, &mut buf, plain)?;
                self.resend
                    .request_sent(len + self.cfg.paths[path.index()].overhead);
                path
            }
            Pending::Goodbye(path) => {
                buf.resize(HEADER_LEN + SEAL_OVERHEAD, 0);
                self.fence_header(Kind::Goodbye, path, now).emit(&mut buf);
                self.seal_control(now, path, &mut buf, HEADER_LEN)?;
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
                .emit(&mut buf);
                self.seal_control(now, path, &mut buf, plain)?;
                self.counts.keepalive_acks_sent += 1;
                self.paths[path.index()].idle_sent_at = now;
                path
            }
            Pending::Report { path, entries } => {
                buf.resize(wire::report_len(entries.len()) + SEAL_OVERHEAD, 0);
                let h = self.fence_header(Kind::Report, path, now);
                let plain = ReportRepr {
                    header: h,
                    entries: &entries,
                }
                .emit(&mut buf);
                let len = self.seal_control(now, path, &mut buf, plain)?;
                self.counts.report_bytes += (len + self.cfg.paths[path.index()].overhead) as u64;
                path
            }
        };
        Some(Transmit {
            path,
            destination: self.remote(path)?,
            contents: buf,
        })
    }

    /// Bytes sealing adds to a datagram's plain form (counter and tag; none in the clear).
    pub(crate) fn seal_overhead(&self) -> usize {
        if self.sealing() {
            SEAL_OVERHEAD
        } else {
            0
        }
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
