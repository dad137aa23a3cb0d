//! Batched UDP I/O on a path socket: runs of datagrams to one destination leave in one
//! `sendmsg` with UDP GSO (segmentation offload), and datagrams arrive in batches with
//! `recvmmsg` and UDP GRO. quinn-udp does the socket work (it probes what the kernel supports
//! and falls back to one datagram per call where GSO is refused).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Most bytes one GSO send carries (the kernel's limit is 64 KiB of UDP payload).
const GSO_MAX_BYTES: usize = 65_000;

/// A path socket with its batching state.
#[derive(Debug)]
pub struct BatchSocket {
    pub sock: UdpSocket,
    state: UdpSocketState,
}

impl BatchSocket {
    pub fn new(sock: UdpSocket) -> io::Result<BatchSocket> {
        let state = UdpSocketState::new(UdpSockRef::from(&sock))?;
        Ok(BatchSocket { sock, state })
    }

    /// Datagrams one send may carry (1 where the kernel has no UDP GSO).
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Datagrams the kernel may coalesce into one received buffer (1 without UDP GRO).
    pub fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    /// Send `contents` to `to`: one datagram, or with `segment` several of that size (the last
    /// may be shorter). Waits while the socket buffer is full: the backpressure TCP inside the
    /// tunnel needs.
    pub async fn send(
        &self,
        contents: &[u8],
        segment: Option<usize>,
        to: SocketAddr,
    ) -> io::Result<()> {
        let t = Transmit {
            destination: to,
            ecn: None,
            contents,
            segment_size: segment.filter(|&s| s < contents.len()),
            src_ip: None,
        };
        self.sock
            .async_io(Interest::WRITABLE, || {
                self.state.try_send(UdpSockRef::from(&self.sock), &t)
            })
            .await
    }

    /// Send without waiting; `WouldBlock` when the socket buffer is full.
    pub fn try_send(&self, datagram: &[u8], to: SocketAddr) -> io::Result<()> {
        let t = Transmit {
            destination: to,
            ecn: None,
            contents: datagram,
            segment_size: None,
            src_ip: None,
        };
        self.sock.try_io(Interest::WRITABLE, || {
            self.state.try_send(UdpSockRef::from(&self.sock), &t)
        })
    }

    /// Receive what is waiting (several datagrams per buffer with GRO: `meta.stride` apart).
    /// `WouldBlock` when nothing is.
    pub fn try_recv(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        self.sock.try_io(Interest::READABLE, || {
            self.state.recv(UdpSockRef::from(&self.sock), bufs, meta)
        })
    }
}

/// Datagrams for one path gathered for a GSO send: back to back, all of one size but the
/// last.
#[derive(Debug)]
pub struct GsoRun {
    buf: Vec<u8>,
    segment: usize,
    count: usize,
    /// The last datagram was shorter than `segment`: the run is closed.
    closed: bool,
    max_segments: usize,
}

impl GsoRun {
    pub fn new(max_segments: usize) -> GsoRun {
        GsoRun {
            buf: Vec::with_capacity(GSO_MAX_BYTES + 2048),
            segment: 0,
            count: 0,
            closed: false,
            max_segments: max_segments.max(1),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether `len` more bytes can join the run.
    pub fn fits(&self, len: usize) -> bool {
        self.count == 0
            || (!self.closed
                && len <= self.segment
                && self.count < self.max_segments
                && self.buf.len() + len <= GSO_MAX_BYTES)
    }

    /// Append a datagram (the caller checked [`fits`](Self::fits)).
    pub fn push(&mut self, datagram: &[u8]) {
        if self.count == 0 {
            self.segment = datagram.len();
        } else if datagram.len() < self.segment {
            self.closed = true;
        }
        self.buf.extend_from_slice(datagram);
        self.count += 1;
    }

    /// The run's bytes, its segment size and datagram count; then empty it with
    /// [`clear`](Self::clear).
    pub fn contents(&self) -> (&[u8], usize, usize) {
        (&self.buf, self.segment, self.count)
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.count = 0;
        self.closed = false;
    }

    /// Each datagram of the run, for a send without GSO.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.buf.chunks(self.segment.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_hold_equal_segments_and_one_shorter_last() {
        let mut r = GsoRun::new(4);
        assert!(r.fits(1440));
        r.push(&[1; 1440]);
        assert!(r.fits(1440) && r.fits(100) && !r.fits(1441));
        r.push(&[2; 1440]);
        r.push(&[3; 100]);
        assert!(!r.fits(100), "a shorter datagram closes the run");
        let (bytes, seg, n) = r.contents();
        assert_eq!((bytes.len(), seg, n), (2980, 1440, 3));
        let lens: Vec<usize> = r.datagrams().map(<[u8]>::len).collect();
        assert_eq!(lens, vec![1440, 1440, 100]);
        r.clear();
        assert!(r.is_empty() && r.fits(2000));
        for _ in 0..4 {
            r.push(&[0; 10]);
        }
        assert!(!r.fits(10), "at most max_segments");
    }
}
