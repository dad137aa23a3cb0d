//! The send side as the driver calls it: numbering batches (the work is [`Sending`]'s:
//! `numbering.rs`, `bundling.rs`, `resending.rs`), a batch sent, one packet at a time,
//! closing, pacing's drops, asking for the paths' losses, and what the send side shows of
//! itself. Control datagrams are [`crate::control::Control`]'s; a batch is sealed by
//! `crypto.rs`'s [`crate::Sealer`].

use mpt_core::seal::SealError;
use mpt_core::{PathId, Time};

use crate::crypto::Sealer;
use crate::pending::Pending;
use crate::sending::Sending;
use crate::{BatchOut, Connection, DropReason, Transmit};

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
        let sealer = self.sending().number(now, sizes, bufs, plan, out, true);
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

    /// What sending data needs of the connection ([`Sending`]).
    pub(crate) fn sending(&mut self) -> Sending<'_> {
        Sending {
            cfg: &self.cfg,
            session: &mut self.session,
            paths: &mut self.paths,
            tx: &mut self.tx,
            resend: &mut self.resend,
            counts: &mut self.counts,
            outbox: &mut self.outbox,
        }
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

    /// A keepalive on `path` built and sealed at `now` for the driver to send some other way
    /// than the path's transport: `transport = "auto"` asks with it whether UDP answers again
    /// while the path rides a stream. It goes to the path's remote; `None` without keys.
    pub fn probe_keepalive(
        &mut self,
        now: Time,
        path: PathId,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        if path.index() >= self.paths.len() {
            return None;
        }
        self.control().build(now, Pending::Keepalive(path), buf)
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

    /// Number, seal and account one packet (`buf` as for [`Connection::number_batch`], with
    /// [`mpt_core::seal::TAG_LEN`] bytes of room after the packet): the path it goes on,
    /// where to, and the datagram's length; `None` when it waits in a bundle. For drivers
    /// that send one packet at a time; `out` as for [`Connection::number_batch`].
    pub fn send_one(
        &mut self,
        now: Time,
        buf: &mut [u8],
        inner: usize,
        out: &mut BatchOut,
    ) -> Result<Option<(PathId, std::net::SocketAddr, usize)>, SendError> {
        let mut plan = [None];
        let held = self.counts.held_packets;
        let mut sizes = [inner];
        out.clear();
        let sealer =
            self.sending()
                .number(now, &mut sizes, &mut [&mut *buf], &mut plan, out, false);
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
        self.sending().bundle_tick(now);
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
        let largest = usize::from(self.cfg.mtu) + self.overhead().datagram();
        let granule = self.tx.sched.pace_granule(largest);
        let drop = self.tx.codel.drop_head(now, sojourn, granule);
        if drop {
            self.count(DropReason::Paced);
        }
        drop
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

    /// Whether resending is on: both ends' handshakes said they take resend requests and
    /// resent packets.
    pub fn resending(&self) -> bool {
        self.session.peer.resend && self.cfg.resend
    }

    /// Tell the resequencer whether resending is on: it then keeps the gaps to ask for, and
    /// a gap the progress rule gives up does not wait for its packet to come again (zero
    /// wait): the packets behind it are released at once, and the resent one is delivered
    /// late, when it comes. Of those released, the TCP goes on; the rest waits for it
    /// ([`crate::ordered`]: a stream that does not back off keeps its order).
    ///
    /// Why not wait: a request and its resend take the fastest path's round trip and the
    /// queue the resend waits in, tens of milliseconds, and every bonded packet behind the
    /// gap would wait with it: the inner TCP's receiver would get nothing meanwhile, then a
    /// burst above the bundle's rate (which BBR takes for bandwidth). Delivered at once, TCP
    /// acknowledges what came after the gap (SACK), keeps sending, and the resend fills the
    /// gap before its own retransmission would.
    pub(crate) fn update_repair_wait(&mut self) {
        let wait = self.resending().then_some(std::time::Duration::ZERO);
        self.rx.reseq.set_repair(wait);
    }

    /// What resending did for the packets first sent on `path`.
    pub fn resend_counts(&self, path: PathId) -> crate::ResendCounts {
        self.resend.counts(path)
    }

    /// Resend requests we sent, and the path sequences they named.
    pub fn nack_counts(&self) -> (u64, u64) {
        let (sent, named, _) = self.resend.request_counts();
        (sent, named)
    }

    /// Bytes our resend requests took on the links (outer headers included).
    pub fn nack_bytes(&self) -> u64 {
        self.resend.request_counts().2
    }

    /// Whether parity may be used with this peer: both ends take it, and resending is on.
    pub fn parity(&self) -> bool {
        self.session.peer.parity && self.cfg.parity && self.resending()
    }

    /// The sender's loss rate and parity group size for `path` (0: no parity).
    pub fn parity_state(&self, path: PathId) -> (f64, usize) {
        self.paths
            .get(path.index())
            .map_or((0.0, 0), |p| (p.fec_tx.loss, p.fec_tx.k))
    }

    /// What parity did at the receiver.
    pub fn parity_counts(&self) -> crate::ParityCounts {
        self.counts.parity
    }

    /// The receiver's half of resending: the path sequence gaps the resequencer saw since the
    /// last call go into resend requests (queued for [`Connection::poll_transmit`]), but for
    /// packets a parity made again already ([`crate::fec`]).
    pub(crate) fn request_resends(&mut self, now: Time) {
        if !self.resending() {
            return;
        }
        self.request_references();
        let paths = &self.paths;
        self.resend.collect_gaps(now, &mut self.rx.reseq, |g| {
            let p = &paths[g.path.index()];
            p.stream || (g.count == 1 && p.fec_rx.repaired(g.first))
        });
        let Some(ranges) = self.resend.take_asked() else {
            return;
        };
        let Some(path) = self.report_path() else {
            return;
        };
        for chunk in ranges.chunks(mpt_core::wire::MAX_NACK_RANGES) {
            self.resend.requested(chunk);
            self.outbox.pending.push_back(Pending::Nack {
                path,
                ranges: chunk.to_vec(),
            });
        }
    }

    /// The references that packets named and that did not come ([`crate::hc`]'s asks) go
    /// into resend requests of their own, in a session of version 7 (an older peer takes
    /// only path sequences).
    fn request_references(&mut self) {
        let asks = self.rx.released.take_asks();
        if asks.is_empty() || !self.session.caps.requests_references() {
            return;
        }
        let Some(path) = self.report_path() else {
            return;
        };
        for chunk in asks.chunks(mpt_core::wire::MAX_NACK_RANGES) {
            self.resend.references_requested(chunk.len());
            self.outbox.pending.push_back(Pending::NackReferences {
                path,
                references: chunk.to_vec(),
            });
        }
    }
}
