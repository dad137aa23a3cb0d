//! The send side: numbering data packets in batches, and what a numbered packet sets going
//! (its copy kept for resending, its parity). Compressing a packet's headers is
//! `compress.rs`'s, bundles and pieces `bundle/send.rs`'s, control datagrams `control.rs`'s,
//! the fastest path and copies `fastest.rs`'s, resends `resend/connection.rs`'s, parity
//! `fec/connection.rs`'s; a batch is sealed by `crypto.rs`'s [`Sealer`].

use mpt_core::seal::{SealError, TAG_LEN};
use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::{PathId, Time};

use crate::class::Classes;
use crate::crypto::Sealer;
use crate::pending::Pending;
use crate::{BatchOut, Connection, Datagram, DropReason, Mode, TransmitKind};

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
        let sealer = self.number(now, sizes, bufs, plan, out, true);
        self.batch_gave(out);
        sealer
    }

    /// What else numbering a batch gave, into `out`: the bundles it closed, what leaves after
    /// it, ICMP answers.
    fn batch_gave(&mut self, out: &mut BatchOut) {
        out.before.extend(self.outbox.ready.drain(..));
        out.after.extend(self.outbox.after.drain(..));
        self.tx.icmp.drain_into(&mut out.icmp);
    }

    /// Number the batch (as [`Connection::number_batch`] says), bonded packets held while
    /// pacing finds every path full when `pace` (a driver that sends one packet at a time has
    /// no queue to hold them in).
    fn number<B: AsMut<[u8]>>(
        &mut self,
        now: Time,
        sizes: &mut [usize],
        bufs: &mut [B],
        plan: &mut [Option<PathId>],
        out: &mut BatchOut,
        pace: bool,
    ) -> Option<Sealer> {
        let n = sizes.len();
        plan[..n].fill(None);
        let Some(peer_session) = self.session.theirs else {
            let packets = sizes.iter().filter(|&&s| s > 0).count();
            self.counts.drops.add(DropReason::NoSession, packets as u64);
            return None;
        };
        let key = self.session.key.clone();
        // what a packet costs on the link, as the scheduler counts it before it has chosen
        // the path (and with it the outer address family): as over IPv4
        let overhead = self.overhead();
        self.tx.classes.light_expire(now, self.tx.sched.as_mut());
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
            let at = self.prefix();
            let (class, mode) = Classes::of(&self.cfg.classes, &bufs[k].as_mut()[at..at + inner]);
            // while pacing finds every path full, bonded packets wait in the sender, and so
            // do those behind one that waits: a flow's packets keep their order
            if mode == Mode::Bond && pace {
                if out.paced_until.is_none() {
                    out.paced_until = self.tx.sched.paced_until(now);
                }
                if out.paced_until.is_some() {
                    out.held.push(k);
                    continue;
                }
            }
            if len > crate::BASE_DATAGRAM {
                crate::path::note_big(&mut self.tx.big, now, len);
            }
            let chosen = match mode {
                Mode::Bond => self.tx.sched.select(now, inner + overhead.link()),
                Mode::Fastest | Mode::Duplicate => self
                    .soonest(now, None)
                    .or_else(|| self.tx.sched.select(now, inner + overhead.link())),
            };
            let Some(path) = chosen else {
                self.count(DropReason::NoPath);
                continue;
            };
            let i = path.index();
            self.data_on(i, now);
            self.tx.classes.count(self.cfg.classes.len(), class, path);
            let keeps_short = Classes::keeps_short(&self.cfg.classes, class);
            if mode != Mode::Bond && keeps_short {
                let flow = Classes::flow(&bufs[k].as_mut()[at..at + whole_len]);
                self.tx
                    .classes
                    .light_sent(now, (path, flow), self.tx.sched.as_mut());
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
                && crate::compress::pack(
                    &mut self.tx.hc,
                    crate::compress::Packing {
                        seq: self.tx.seq,
                        format: self.session.caps.compressed_format(),
                        at,
                        cap,
                    },
                    &mut sizes[k],
                    bufs[k].as_mut(),
                );
            inner = sizes[k];
            len = inner + overhead.datagram();
            let whole = inner <= cap;
            if !whole && !self.session.peer.pieces {
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
                && (mode == Mode::Bond || !self.session.peer.express)
                && self
                    .tx
                    .hc
                    .sent_whole(self.tx.seq, &bufs[k].as_mut()[at..at + inner]);
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
                    seq: self.tx.seq,
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
                kind: if mode == Mode::Bond || !self.session.peer.express {
                    Kind::Data
                } else {
                    Kind::Express
                },
                path,
                path_seq: p.path_seq,
                session: peer_session,
                seq: self.tx.seq,
                timestamp: now.wire_micros(),
            };
            self.tx.seq = self.tx.seq.wrapping_add(1);
            p.path_seq = p.path_seq.wrapping_add(1);
            p.data_unsent += 1;
            self.pmtu_data_sent(i, len, header.path_seq);
            let outer = self.cfg.paths[i].overhead;
            self.tx.sched.on_sent(now, path, len + outer);
            self.counts.tx_packets += 1;
            self.counts.tx_bytes += whole_len as u64;
            // a reference is kept for resending on every path (a path keeps the rest once it
            // lost something): the packets compressed against it are lost with it
            if self.keeps(i, now) || reference {
                let packet = &bufs[k].as_mut()[at..at + inner];
                self.resend
                    .buffer
                    .keep(path, header.path_seq, header.seq, now, packet, reference);
            }
            // a parity its packet completes leaves after it
            let parity = if self.paths[i].fec_tx.k > 0 && self.parity() {
                let packet = &bufs[k].as_mut()[at..at + inner];
                self.parity_tx().add(now, &header, packet)
            } else {
                None
            };
            if b.tail & (1 << i) != 0 {
                // something numbered before it on the path leaves after the batch: so does it
                let packet = &bufs[k].as_mut()[at..at + inner];
                if let Some(t) = self.owned_datagram(&header, packet) {
                    self.outbox.after.push_back(t);
                }
                self.outbox.after.extend(parity);
                continue;
            }
            self.outbox.after.extend(parity);
            header.emit(bufs[k].as_mut());
            self.session.stamp(bufs[k].as_mut());
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
        if out.held.is_empty() {
            self.tx.codel.empty();
        }
        // one counter per packet of the batch, planned or not, but for those pacing held (they
        // are offered again, as often as a batch is numbered: each would take one every time,
        // and the counters would outrun the replay window of a far path's datagrams); taken
        // after the bundles the batch closed, which leave before it
        let first_counter = self.session.counter;
        if key.is_some() {
            self.session.counter += (n - out.held.len()) as u64;
        }
        Some(Sealer {
            key,
            first_counter,
            used: b.used,
            held: out.held.clone(),
        })
    }

    /// Path `i` takes part in the batch being numbered, whose paths are `used`: the first
    /// time, the fence that holds until the batch has left is the one from before it.
    pub(crate) fn join_batch(&mut self, i: usize, used: &mut u64) {
        if *used & (1 << i) == 0 {
            *used |= 1 << i;
            let p = &mut self.paths[i];
            if p.unsent == 0 {
                p.fence_before = (self.tx.seq, p.path_seq);
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
    ) -> Option<Datagram> {
        let destination = self.remote(header.path)?;
        let prefix = self.prefix();
        let mut buf = Vec::with_capacity(prefix + packet.len() + TAG_LEN);
        buf.resize(prefix, 0);
        buf.extend_from_slice(packet);
        let contents = self.session.seal_owned(header, buf, packet.len())?;
        Some(Datagram {
            path: header.path,
            destination,
            kind: TransmitKind::Data,
            contents,
        })
    }

    /// What control datagrams are built from ([`crate::control::Control`]).
    pub(crate) fn control(&mut self) -> crate::control::Control<'_> {
        crate::control::Control {
            out: crate::out::Out {
                session: &mut self.session,
                paths: &mut self.paths,
                settings: &self.cfg.paths,
                sched: self.tx.sched.as_mut(),
            },
            seq: self.tx.seq,
            keepalive: self.cfg.keepalive,
            report: &self.reports.scratch,
            counts: &mut self.counts,
            resend: &mut self.resend,
        }
    }

    /// Parity's way out ([`crate::parity::ParityTx`]).
    pub(crate) fn parity_tx(&mut self) -> crate::parity::ParityTx<'_> {
        crate::parity::ParityTx {
            out: crate::out::Out {
                session: &mut self.session,
                paths: &mut self.paths,
                settings: &self.cfg.paths,
                sched: self.tx.sched.as_mut(),
            },
            resend: &mut self.resend,
        }
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
        self.tx.icmp.answer(now, packet, most);
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
        out.clear();
        let sealer = self.number(now, &mut sizes, &mut [&mut *buf], &mut plan, out, false);
        self.batch_gave(out);
        let sealer = sealer.ok_or(SendError::Dropped(DropReason::NoSession))?;
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
            self.outbox
                .pending
                .push_back(Pending::Goodbye(PathId(i as u8)));
        }
    }

    /// The oldest packet the driver holds for this peer (after pacing held it) has waited
    /// `sojourn` at `now`: whether to drop it (counted as [`DropReason::Paced`]) instead of
    /// offering it again.
    pub fn pace_drop(&mut self, now: Time, sojourn: std::time::Duration) -> bool {
        let drop = self.tx.codel.drop_head(now, sojourn);
        if drop {
            self.count(DropReason::Paced);
        }
        drop
    }

    /// The path where a datagram sent at `now` arrives soonest, other than `not`
    /// ([`crate::fastest::soonest_where`]).
    pub(crate) fn soonest(&self, now: Time, not: Option<PathId>) -> Option<PathId> {
        self.soonest_where(now, |p| Some(p) != not)
    }

    /// [`Connection::soonest`] among the paths `allowed` admits.
    pub(crate) fn soonest_where(
        &self,
        now: Time,
        allowed: impl Fn(PathId) -> bool + Copy,
    ) -> Option<PathId> {
        let paths = (&self.paths[..], &self.cfg.paths[..]);
        crate::fastest::soonest_where(now, paths, self.tx.sched.as_ref(), allowed)
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
        let Some(session) = self.session.theirs else {
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
            kind: if express && self.session.peer.express {
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
        self.tx.sched.on_sent(now, path, cost);
        self.tx.classes.copy_sent();
        self.tx.classes.count(self.cfg.classes.len(), class, path);
        self.outbox.after.push_back(t);
    }

    /// Whether data goes with compressed headers: configured, with resending (a reference
    /// lost is sent again), in a session that compresses TCP (a peer of version 5 makes
    /// references of packets in pieces too).
    pub(crate) fn compressing(&self) -> bool {
        self.cfg.compress && self.resending() && self.session.caps.compresses_tcp()
    }

    /// What a bulk TCP packet's IP and TCP headers take in a datagram while data goes with
    /// compressed headers: a driver that cuts TCP segments to fit a datagram
    /// ([`Connection::largest_whole_packet`]) counts this for headers that compress
    /// ([`crate::COMPRESSED_HEADERS`], or [`crate::COMPRESSED_HEADERS_V6`] in a session of
    /// version 6). One longer than that does not fit, and goes whole, in pieces.
    pub fn compressed_headers(&self) -> Option<usize> {
        self.compressing()
            .then(|| crate::compress::padded_to(self.session.caps.compressed_format()))
    }

    /// Per context, the flow ([`mpt_core::hc::flow_hash`]) whose next packets may be
    /// compressed against a reference ([`mpt_core::hc::Compressor::ready`]; all 0 while data
    /// goes whole). A driver that cuts TCP segments for [`Connection::compressed_headers`]
    /// cuts the first of a burst of any other flow to fit a datagram whole, as it would
    /// without compression: it goes whole, and becomes its flow's reference.
    pub fn compress_ready(&self, out: &mut [u32; mpt_core::hc::CONTEXTS]) {
        if self.compressing() {
            self.tx.hc.ready(self.tx.seq, out);
        } else {
            out.fill(0);
        }
    }
}
