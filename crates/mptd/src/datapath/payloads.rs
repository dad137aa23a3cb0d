//! How the receive task holds the inner packets a connection gives it: in the receive slice
//! they arrived in, or in a buffer of the pool.

use crate::peer::RxBuf;

/// Where the inner packets of a datagram at `at` in receive slice `slice` are held: a data
/// datagram's in place, any other in a buffer of the pool (`cap` bytes), at `prefix` as every
/// packet to the TUN device.
pub(super) struct Payloads<'a> {
    pub(super) pool: &'a mut Vec<Vec<u8>>,
    pub(super) cap: usize,
    pub(super) prefix: usize,
    pub(super) slice: usize,
    pub(super) at: usize,
}

impl Payloads<'_> {
    fn spare(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(|| vec![0u8; self.cap])
    }
}

impl mpt_tunnel::Payloads<RxBuf> for Payloads<'_> {
    fn in_datagram(&mut self, _: &[u8], packet: std::ops::Range<usize>) -> RxBuf {
        RxBuf::Slice {
            slice: self.slice,
            at: self.at,
            start: packet.start,
            end: packet.end,
        }
    }

    fn own(&mut self, packet: &[u8]) -> RxBuf {
        let prefix = self.prefix;
        let mut buf = self.spare();
        if buf.len() < prefix + packet.len() {
            buf.resize(prefix + packet.len(), 0);
        }
        buf[prefix..prefix + packet.len()].copy_from_slice(packet);
        RxBuf::Own {
            buf,
            start: prefix,
            end: prefix + packet.len(),
        }
    }

    /// Held: copied out of the slice, which the next batch reuses (with what comes before
    /// the packet in the datagram, as it lay there).
    fn keep(&mut self, p: RxBuf, datagram: &[u8]) -> RxBuf {
        match p {
            RxBuf::Slice { start, end, .. } => {
                let mut buf = self.spare();
                if buf.len() < end {
                    buf.resize(end, 0);
                }
                buf[..end].copy_from_slice(&datagram[..end]);
                RxBuf::Own { buf, start, end }
            }
            own @ RxBuf::Own { .. } => own,
        }
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.spare()
    }

    /// Held where it lies (a rebuilt packet has the connection's prefix before it, room
    /// enough for the virtio header).
    fn adopt(&mut self, buf: Vec<u8>, packet: std::ops::Range<usize>) -> RxBuf {
        if packet.start < self.prefix {
            let p = mpt_tunnel::Payloads::own(self, &buf[packet]);
            self.pool.push(buf);
            return p;
        }
        RxBuf::Own {
            buf,
            start: packet.start,
            end: packet.end,
        }
    }
}
