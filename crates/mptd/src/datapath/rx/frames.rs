//! Frames from stream paths (TCP) into the receive task's batches: each is copied into a
//! receive slice, as if a UDP socket had given it, and handled as a batch of the socket whose
//! stream it came on ([`handle_batch`]).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use mpt_tunnel::DropReason;

use super::bufs::{RxBufs, RX_SLICES};
use super::handle_batch;
use crate::stream::Frames;
use crate::tunnel::{Outputs, SockIo, Tunnel};

/// Frames one read of a stream gave, as the receive task takes them a batch at a time.
pub(super) struct Pending {
    frames: Frames,
    /// The next frame, and where its bytes start.
    next: usize,
    at: usize,
}

impl Pending {
    pub(super) fn new(frames: Frames) -> Pending {
        Pending {
            frames,
            next: 0,
            at: 0,
        }
    }

    /// Whether every frame was taken.
    pub(super) fn done(&self) -> bool {
        self.next >= self.frames.lens.len()
    }

    /// Handle the next batch of frames (at most [`RX_SLICES`]) as datagrams received at the
    /// socket their stream belongs to; returns the socket of the path the resequencer waits
    /// for, as [`handle_batch`] does. Frames of a socket a reload removed are dropped and
    /// counted.
    pub(super) fn take_batch(
        &mut self,
        t: &Tunnel,
        socks: &[Arc<SockIo>],
        b: &mut RxBufs,
        outputs: &mut Outputs,
    ) -> Option<usize> {
        let f = &self.frames;
        let origin = f.conn.origin.load(Relaxed);
        let Some(s) = socks
            .iter()
            .position(|s| s.stream.as_ref().is_some_and(|x| x.id == origin))
        else {
            t.io_drop(
                DropReason::UnknownSession,
                (f.lens.len() - self.next) as u64,
            );
            self.next = f.lens.len();
            return None;
        };
        let mut n = 0;
        while n < RX_SLICES && self.next < f.lens.len() {
            let len = f.lens[self.next];
            let d = &f.bytes[self.at..self.at + len];
            self.next += 1;
            self.at += len;
            if len > b.slices[n].len() {
                t.io_drop(DropReason::Oversize, 1);
                continue;
            }
            b.slices[n][..len].copy_from_slice(d);
            b.metas[n] = quinn_udp::RecvMeta {
                addr: f.conn.peer,
                len,
                stride: len,
                ..Default::default()
            };
            n += 1;
        }
        if n == 0 {
            return None;
        }
        let lagging = handle_batch(t, socks, s, n, b, outputs);
        if b.authentic {
            f.conn.authenticated.store(true, Relaxed);
        }
        lagging
    }
}
