//! Writing what the resequencer released to the TUN device, from where each packet lies.

use std::sync::atomic::Ordering::Relaxed;

use anyhow::{Context, Result};
use mpt_tunnel::DropReason;
use tracing::warn;

use crate::peer::RxBuf;
use crate::tunnel::Tunnel;

/// Most packets coalesced per TUN write batch (GRO's cost grows with the batch).
const TUN_WRITE_BATCH: usize = 64;

/// A packet on its way to tun0, written from where it lies (its receive slice, or the buffer
/// the resequencer held it in), unless GRO makes it the head of a super-packet: then it moves
/// to `spare`, a buffer with room for 64 KiB, where the packets of its flow are appended. So
/// only one packet per super-packet is copied here.
struct TunBuf<'a> {
    data: &'a mut [u8],
    spare: &'a mut Vec<u8>,
    moved: bool,
}

impl TunBuf<'_> {
    fn move_to_spare(&mut self) {
        if !self.moved {
            self.spare.clear();
            self.spare.extend_from_slice(self.data);
            self.moved = true;
        }
    }
}

impl AsRef<[u8]> for TunBuf<'_> {
    fn as_ref(&self) -> &[u8] {
        if self.moved {
            self.spare
        } else {
            self.data
        }
    }
}

impl AsMut<[u8]> for TunBuf<'_> {
    fn as_mut(&mut self) -> &mut [u8] {
        if self.moved {
            self.spare
        } else {
            self.data
        }
    }
}

impl tun_rs::ExpandBuffer for TunBuf<'_> {
    /// What the packet can grow to: the spare's room.
    fn buf_capacity(&self) -> usize {
        self.spare.capacity()
    }

    fn buf_resize(&mut self, new_len: usize, value: u8) {
        self.move_to_spare();
        self.spare.resize(new_len, value);
    }

    fn buf_extend_from_slice(&mut self, src: &[u8]) {
        self.move_to_spare();
        self.spare.extend_from_slice(src);
    }
}

/// The packets of `chunk` as [`TunBuf`]s, in order, each with `prefix` bytes before it: the
/// held ones in their own buffers, the others cut out of the receive slices (disjoint pieces:
/// each datagram is in `chunk` once). `places` is scratch space.
fn tun_bufs<'a>(
    prefix: usize,
    chunk: &'a mut [RxBuf],
    slices: &'a mut [Vec<u8>],
    spares: &'a mut [Vec<u8>],
    places: &mut Vec<(usize, usize, usize, usize)>,
) -> Vec<TunBuf<'a>> {
    places.clear();
    let mut bufs: Vec<TunBuf<'a>> = Vec::with_capacity(chunk.len());
    for ((k, p), spare) in chunk.iter_mut().enumerate().zip(spares.iter_mut()) {
        let data: &'a mut [u8] = match p {
            RxBuf::Own { buf, start, end } => &mut buf[*start - prefix..*end],
            RxBuf::Slice { slice, at, end, .. } => {
                places.push((*slice, *at, *end, k));
                &mut [] // cut out of its slice below
            }
        };
        bufs.push(TunBuf {
            data,
            spare,
            moved: false,
        });
    }
    // each slice cut front to back
    places.sort_unstable();
    let mut rest: Vec<(&'a mut [u8], usize)> = slices.iter_mut().map(|s| (&mut s[..], 0)).collect();
    for &(slice, at, end, k) in places.iter() {
        let (left, base) = &mut rest[slice];
        let piece = std::mem::take(left);
        let (_, tail) = piece.split_at_mut(at - *base);
        let (mine, tail) = tail.split_at_mut(end);
        *left = tail;
        *base = at + end;
        bufs[k].data = mine;
    }
    bufs
}

/// The rx task's state for writing to the TUN device.
pub struct TunWriter {
    /// Where GRO builds its super-packets, one per packet of a batch.
    spares: Vec<Vec<u8>>,
    /// Scratch for [`tun_bufs`].
    places: Vec<(usize, usize, usize, usize)>,
    gro: tun_rs::GROTable,
}

impl std::fmt::Debug for TunWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunWriter")
            .field("spares", &self.spares.len())
            .finish_non_exhaustive()
    }
}

impl TunWriter {
    pub fn new(prefix: usize) -> TunWriter {
        TunWriter {
            spares: (0..TUN_WRITE_BATCH)
                .map(|_| Vec::with_capacity(2 * prefix + 65_535 + 64))
                .collect(),
            places: Vec::with_capacity(TUN_WRITE_BATCH),
            gro: tun_rs::GROTable::default(),
        }
    }

    /// Write the packets the resequencer released (`out`, emptied) to the TUN device in
    /// batches, coalesced by GRO into super-packets where the device takes them, from where
    /// they lie (see [`TunBuf`]); every inner packet has the same `prefix` before it, room for
    /// the virtio header (a received one lies there in its slice, a held one there or further
    /// into its buffer). The buffers of held ones go back to `pool`.
    pub async fn write(
        &mut self,
        t: &Tunnel,
        out: &mut Vec<RxBuf>,
        slices: &mut [Vec<u8>],
        pool: &mut Vec<Vec<u8>>,
    ) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        for chunk in out.chunks_mut(TUN_WRITE_BATCH) {
            debug_assert!(chunk.iter().all(|p| match p {
                RxBuf::Slice { start, .. } => *start == t.prefix,
                RxBuf::Own { start, .. } => *start >= t.prefix,
            }));
            let mut batch = tun_bufs(t.prefix, chunk, slices, &mut self.spares, &mut self.places);
            t.calls.tun_write_batches.fetch_add(1, Relaxed);
            if let Err(e) = t.tun[0]
                .send_multiple(&mut self.gro, &mut batch, t.prefix)
                .await
            {
                if e.raw_os_error() == Some(libc::EBADFD) {
                    return Err(e).context("writing to the TUN device");
                }
                if let Some(n) = t.io_drop(DropReason::TunWriteError, 1) {
                    warn!(error = %e, dropped = n, "writing to the TUN device failed");
                }
            }
        }
        pool.extend(out.drain(..).filter_map(|p| match p {
            RxBuf::Own { buf, .. } => Some(buf),
            RxBuf::Slice { .. } => None,
        }));
        Ok(())
    }
}
