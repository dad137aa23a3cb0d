//! Writing what the resequencer released to the TUN device, from where each packet lies.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use anyhow::{Context, Result};
use mpt_tunnel::DropReason;
use tracing::warn;

use crate::peer::RxBuf;
use crate::tunnel::Tunnel;

/// Most packets coalesced per TUN write batch (GRO's cost grows with the batch).
const TUN_WRITE_BATCH: usize = 64;

/// A packet on its way to tun0, written from where it lies (its receive slice, or the buffer
/// the resequencer held it in), unless GRO makes it the head of a super-packet: then it moves
/// to `spare`, a buffer with room for 64 KiB (`room`) taken from `spares`, where the packets
/// of its flow are appended. So only one packet per super-packet is copied here, and there are
/// as many spares as super-packets one batch made at most, not one per packet.
struct TunBuf<'a> {
    data: &'a mut [u8],
    spare: Option<Vec<u8>>,
    spares: &'a Mutex<Vec<Vec<u8>>>,
    room: usize,
}

impl TunBuf<'_> {
    fn move_to_spare(&mut self) -> &mut Vec<u8> {
        let (data, spares, room) = (&*self.data, self.spares, self.room);
        self.spare.get_or_insert_with(|| {
            let mut spare = spares
                .lock()
                .expect("spares")
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(room));
            spare.clear();
            spare.extend_from_slice(data);
            spare
        })
    }
}

impl AsRef<[u8]> for TunBuf<'_> {
    fn as_ref(&self) -> &[u8] {
        match &self.spare {
            Some(spare) => spare,
            None => self.data,
        }
    }
}

impl AsMut<[u8]> for TunBuf<'_> {
    fn as_mut(&mut self) -> &mut [u8] {
        match &mut self.spare {
            Some(spare) => spare,
            None => self.data,
        }
    }
}

impl Drop for TunBuf<'_> {
    /// The spare back to the writer's, for the next super-packet.
    fn drop(&mut self) {
        if let Some(spare) = self.spare.take() {
            if let Ok(mut spares) = self.spares.lock() {
                spares.push(spare);
            }
        }
    }
}

impl tun_rs::ExpandBuffer for TunBuf<'_> {
    /// What the packet can grow to: a spare's room.
    fn buf_capacity(&self) -> usize {
        self.spare
            .as_ref()
            .map_or(self.room, |s| s.capacity().max(self.room))
    }

    fn buf_resize(&mut self, new_len: usize, value: u8) {
        self.move_to_spare().resize(new_len, value);
    }

    fn buf_extend_from_slice(&mut self, src: &[u8]) {
        self.move_to_spare().extend_from_slice(src);
    }
}

/// The packets of `chunk` as [`TunBuf`]s, in order, each with `prefix` bytes before it: the
/// held ones in their own buffers, the others cut out of the receive slices (disjoint pieces:
/// each datagram is in `chunk` once). `places` is scratch space.
fn tun_bufs<'a>(
    prefix: usize,
    chunk: &'a mut [RxBuf],
    slices: &'a mut [Vec<u8>],
    spares: &'a Mutex<Vec<Vec<u8>>>,
    places: &mut Vec<(usize, usize, usize, usize)>,
) -> Vec<TunBuf<'a>> {
    places.clear();
    let mut bufs: Vec<TunBuf<'a>> = Vec::with_capacity(chunk.len());
    for (k, p) in chunk.iter_mut().enumerate() {
        let data: &'a mut [u8] = match p {
            RxBuf::Own { buf, start, end } => &mut buf[*start - prefix..*end],
            RxBuf::Slice { slice, at, end, .. } => {
                places.push((*slice, *at, *end, k));
                &mut [] // cut out of its slice below
            }
        };
        bufs.push(TunBuf {
            data,
            spare: None,
            spares,
            room: 2 * prefix + 65_535 + 64,
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
#[derive(Default)]
pub struct TunWriter {
    /// Where GRO builds its super-packets: as many as one batch made at most.
    spares: Mutex<Vec<Vec<u8>>>,
    /// Scratch for [`tun_bufs`].
    places: Vec<(usize, usize, usize, usize)>,
    /// Made at the first write (it holds about 2 MB of flow slots, which an idle tunnel
    /// does not need).
    gro: Option<tun_rs::GROTable>,
}

impl std::fmt::Debug for TunWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunWriter")
            .field("spares", &self.spares.lock().map_or(0, |s| s.len()))
            .finish_non_exhaustive()
    }
}

impl TunWriter {
    pub fn new() -> TunWriter {
        TunWriter {
            places: Vec::with_capacity(TUN_WRITE_BATCH),
            ..TunWriter::default()
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
            let mut batch = tun_bufs(t.prefix, chunk, slices, &self.spares, &mut self.places);
            t.counters.calls.tun_write_batches.fetch_add(1, Relaxed);
            if let Err(e) = t.tun[0]
                .send_multiple(
                    self.gro.get_or_insert_with(Default::default),
                    &mut batch,
                    t.prefix,
                )
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
