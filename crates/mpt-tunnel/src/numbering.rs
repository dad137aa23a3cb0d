//! Numbering data packets in batches, and what a numbered packet sets going: its copy kept
//! for resending, its parity, copies of duplicate classes and of packets on a woken path.

use mpt_core::wire::{HeaderRepr, Kind};
use mpt_core::{PathId, Time};

use crate::bundling::BatchPaths;
use crate::class::{Classes, CopyOf};
use crate::crypto::Sealer;
use crate::sending::Sending;
use crate::{BatchOut, DropReason, Mode};

/// A batch being numbered: the peer's index of the session, whether bonded packets wait
/// while pacing holds them, the paths it uses, and the copies to send once it is numbered
/// (of `duplicate` classes and on paths data woke from idle: the packet's index, and what).
struct Batch {
    session: u32,
    pace: bool,
    paths: BatchPaths,
    copies: Vec<(usize, CopyOf)>,
}

/// One packet of a batch: its index, its size (compressing its headers changes it), and its
/// buffer (the inner packet at the prefix).
struct Slot<'b> {
    k: usize,
    size: &'b mut usize,
    buf: &'b mut [u8],
}

/// A data packet that goes in a datagram of its own: its path, whether it goes express
/// (light traffic, where the peer takes it), its length before and after compression, and
/// whether it is its flow's reference.
#[derive(Debug, Clone, Copy)]
struct Numbered {
    path: PathId,
    express: bool,
    whole_len: usize,
    inner: usize,
    reference: bool,
}

/// Numbering a batch.
impl Sending<'_> {
    /// Number the batch (as [`crate::Connection::number_batch`] says), bonded packets held
    /// while pacing finds every path full when `pace` (a driver that sends one packet at a
    /// time has no queue to hold them in).
    pub(crate) fn number<B: AsMut<[u8]>>(
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
        let Some(session) = self.session.theirs else {
            let packets = sizes.iter().filter(|&&s| s > 0).count();
            self.counts.drops.add(DropReason::NoSession, packets as u64);
            return None;
        };
        let key = self.session.key.clone();
        self.tx.classes.light_expire(now, self.tx.sched.as_mut());
        let mut batch = Batch {
            session,
            pace,
            paths: BatchPaths::default(),
            copies: Vec::new(),
        };
        for k in 0..n {
            if sizes[k] == 0 {
                continue;
            }
            let slot = Slot {
                k,
                size: &mut sizes[k],
                buf: bufs[k].as_mut(),
            };
            plan[k] = self.number_one(now, &mut batch, slot, out);
        }
        // pieces on a path that is not busy leave with the batch
        for i in 0..self.paths.len() {
            if self.paths[i].bundle.as_ref().is_some_and(|o| o.due <= now) {
                self.close_riding(now, i, &mut batch.paths);
            }
        }
        let at = self.prefix();
        for (k, copy) in std::mem::take(&mut batch.copies) {
            let packet = &bufs[k].as_mut()[at..at + sizes[k]];
            self.send_copy(now, copy, packet, &mut batch.paths.used);
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
            used: batch.paths.used,
            held: out.held.clone(),
        })
    }

    /// Number packet `slot` of `batch`: the path it goes on in the batch's own buffers, or
    /// `None` (pacing holds it, it waits in a bundle or goes in pieces, it leaves after the
    /// batch, or it is dropped and counted).
    fn number_one(
        &mut self,
        now: Time,
        batch: &mut Batch,
        slot: Slot<'_>,
        out: &mut BatchOut,
    ) -> Option<PathId> {
        let at = self.prefix();
        let whole_len = *slot.size;
        let (class, mode) = Classes::of(&self.cfg.classes, &slot.buf[at..at + whole_len]);
        // while pacing finds every path full, bonded packets wait in the sender, and so do
        // those behind one that waits: a flow's packets keep their order
        if mode == Mode::Bond && batch.pace {
            if out.paced_until.is_none() {
                out.paced_until = self.tx.sched.paced_until(now);
            }
            if out.paced_until.is_some() {
                out.held.push(slot.k);
                return None;
            }
        }
        let path = self.pick(now, class, mode, &slot.buf[at..at + whole_len])?;
        let i = path.index();
        // light traffic never waits in a bundle (but for acknowledgements, which wait there
        // no longer than the path's queue would hold them anyway, and which a fast transfer
        // sends by the hundred thousand a second); a packet larger than the path's datagram
        // goes in pieces, whatever its class
        let cap = self.body_cap(i);
        // bulk TCP goes in a datagram of its own, its headers compressed (a small packet may
        // share one in a bundle instead)
        let packed = mode == Mode::Bond
            && self.compressing()
            && whole_len >= mpt_core::hc::COMPRESS_FROM
            && crate::compress::pack(
                &mut self.tx.hc,
                crate::compress::Packing {
                    seq: self.tx.seq,
                    format: self.session.caps.compressed_format(),
                    at,
                    cap,
                },
                slot.size,
                slot.buf,
            );
        let inner = *slot.size;
        let packet = &slot.buf[at..at + inner];
        let whole = inner <= cap;
        if !whole && !self.session.peer.pieces {
            // the peer cannot put pieces together: the sender learns the size that passes
            self.too_big(now, packet, cap);
            return None;
        }
        if !whole && self.queue_full(now, path, inner) {
            self.count(DropReason::QueueFull);
            return None;
        }
        // a TCP packet that goes in order in one datagram is its flow's reference (one in
        // pieces is not: were a piece lost, it could not be sent again whole)
        let reference = !packed
            && whole
            && self.compressing()
            && (mode == Mode::Bond || !self.session.peer.express)
            && self.tx.hc.sent_whole(self.tx.seq, packet);
        let keeps_short = Classes::keeps_short(&self.cfg.classes, class);
        if !packed
            && (mode == Mode::Bond || !whole || !keeps_short)
            && self.bundle_packet(now, path, packet, &mut batch.paths)
        {
            return None;
        }
        // on a woken path, light packets only: bulk copied onto the other paths would double
        // their load while a far path answers (a BBR start over 10 and 60 ms paths put 74 ms
        // of queue before voice on the near one)
        let wake_copy = self.paths[i].woken_at.is_some() && inner <= crate::WAKE_COPY_MAX;
        // light traffic on a path that lost something lately, or has not shown whether it
        // loses, goes twice (issue 72): a few small packets a second cost little copied, and
        // the copy covers random losses and a dark moment (a satellite's handover) that the
        // sender cannot see yet. Not acknowledgements, which a transfer sends by the thousand.
        let light_copy = mode == Mode::Fastest
            && keeps_short
            && inner <= crate::WAKE_COPY_MAX
            && self.paths[i].copies_light(now);
        if whole && (mode == Mode::Duplicate || wake_copy || light_copy) {
            let copy = CopyOf {
                class,
                seq: self.tx.seq,
                first: path,
                express: mode != Mode::Bond,
            };
            batch.copies.push((slot.k, copy));
        }
        let data = Numbered {
            path,
            express: mode != Mode::Bond,
            whole_len,
            inner,
            reference,
        };
        self.number_data(now, batch, data, slot.buf)
    }

    /// The path packet `packet` (before compression) goes on at `now`, as its `class` and
    /// `mode` say: the scheduler's for bonded data, the soonest for light traffic. The path carries data now, and the packet counts for its class; `None`
    /// when no path is up (counted).
    fn pick(
        &mut self,
        now: Time,
        class: Option<usize>,
        mode: Mode,
        packet: &[u8],
    ) -> Option<PathId> {
        // what a packet costs on the link, as the scheduler counts it before it has chosen
        // the path (and with it the outer address family): as over IPv4
        let overhead = self.cfg.overhead();
        let len = packet.len() + overhead.datagram();
        if len > crate::BASE_DATAGRAM {
            crate::path::note_big(&mut self.tx.big, now, len);
        }
        let link = packet.len() + overhead.link();
        let chosen = match mode {
            Mode::Bond => self.tx.sched.select(now, link),
            Mode::Fastest | Mode::Duplicate => self
                .soonest(now, None)
                .or_else(|| self.tx.sched.select(now, link)),
        };
        let Some(path) = chosen else {
            self.count(DropReason::NoPath);
            return None;
        };
        self.data_on(path.index(), now);
        self.tx.classes.count(self.cfg.classes.len(), class, path);
        if mode != Mode::Bond && Classes::keeps_short(&self.cfg.classes, class) {
            let flow = Classes::flow(packet);
            self.tx
                .classes
                .light_sent(now, path, flow, self.tx.sched.as_mut());
        }
        Some(path)
    }

    /// Number the data datagram `d` of `batch` in `buf` (its inner packet at the prefix,
    /// compressed or not): its header, sequences and accounting, its copy kept for resending
    /// and its parity. Returns its path when it leaves in the batch's own buffers; `None` when
    /// it leaves after the batch (something numbered before it on the path does).
    fn number_data(
        &mut self,
        now: Time,
        batch: &mut Batch,
        d: Numbered,
        buf: &mut [u8],
    ) -> Option<PathId> {
        let Numbered {
            path,
            express,
            whole_len,
            inner,
            reference,
        } = d;
        let i = path.index();
        // an open bundle leaves before the packets that follow it on the path
        self.close_riding(now, i, &mut batch.paths);
        self.join_batch(i, &mut batch.paths.used);
        // light traffic is delivered as soon as it arrives, not in order with bulk
        let header = self.data_header(now, path, batch.session, self.tx.seq, express);
        self.tx.seq = self.tx.seq.wrapping_add(1);
        let at = self.prefix();
        let len = inner + self.cfg.overhead().datagram();
        self.pmtu_data_sent(i, len, header.path_seq);
        let outer = self.cfg.paths[i].overhead;
        self.tx.sched.on_sent(now, path, len + outer);
        self.counts.tx_packets += 1;
        self.counts.tx_bytes += whole_len as u64;
        let packet = &buf[at..at + inner];
        // a reference is kept for resending on every path (a path keeps the rest once it lost
        // something): the packets compressed against it are lost with it
        if self.keeps(i, now) || reference {
            let kept = &mut self.resend.buffer;
            kept.keep(path, header.path_seq, header.seq, now, packet, reference);
        }
        // a parity its packet completes leaves after it
        let parity = if self.paths[i].parity_on() && self.parity() {
            self.parity_tx().add(now, &header, packet)
        } else {
            None
        };
        if batch.paths.tail & (1 << i) != 0 {
            // something numbered before it on the path leaves after the batch: so does it
            if let Some(t) = self.owned_datagram(&header, packet) {
                self.outbox.after.push_back(t);
            }
            if let Some(p) = parity {
                self.outbox.after.push_back(p);
            }
            return None;
        }
        if let Some(p) = parity {
            self.outbox.after.push_back(p);
        }
        header.emit(buf);
        self.session.stamp(buf);
        batch.paths.inbuf |= 1 << i;
        Some(path)
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
        let header = self.data_header(now, path, session, seq, express);
        let Some(t) = self.owned_datagram(&header, packet) else {
            return;
        };
        let cost = t.contents.len() + self.cfg.paths[i].overhead;
        self.tx.sched.on_sent(now, path, cost);
        self.tx.classes.copy_sent();
        self.tx.classes.count(self.cfg.classes.len(), class, path);
        self.outbox.after.push_back(t);
    }

    /// The header of a data datagram of global sequence `seq` in the peer's `session`, sent on
    /// `path` at `now` (express if `express` and the peer takes it): it takes the path's next
    /// sequence, and counts as unsent on the path until its batch has left.
    fn data_header(
        &mut self,
        now: Time,
        path: PathId,
        session: u32,
        seq: u32,
        express: bool,
    ) -> HeaderRepr {
        let p = &mut self.paths[path.index()];
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
        header
    }

    /// `packet` cannot be carried: dropped, counted, and answered (within the rate limit)
    /// with the largest inner packet that passes, `most` bytes.
    pub(crate) fn too_big(&mut self, now: Time, packet: &[u8], most: usize) {
        self.count(DropReason::TooBig);
        self.tx.icmp.answer(now, packet, most);
    }
}
