//! Batched UDP I/O on a path socket: runs of datagrams to one destination leave in one
//! `sendmsg` with UDP GSO (segmentation offload), one iovec per datagram, and datagrams arrive
//! in batches with `recvmmsg` and UDP GRO. quinn-udp probes what the kernel supports and does
//! the receiving and the single sends; the GSO send is written here because quinn-udp takes a
//! run only as one contiguous buffer, which would cost a copy of every datagram.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Most bytes one GSO send carries (the kernel's limit is 64 KiB of UDP payload).
const GSO_MAX_BYTES: usize = 65_000;
/// Most datagrams (iovecs) in one send; the kernel's UDP GSO takes at most 64 segments.
const MAX_IOV: usize = 64;

/// A path socket with its batching state.
#[derive(Debug)]
pub struct BatchSocket {
    pub sock: UdpSocket,
    state: UdpSocketState,
    /// An IPv6 socket: IPv4 destinations go to their mapped address (`::ffff:a.b.c.d`), which
    /// a dual-stack socket sends as IPv4 (and an IPv6-only one refuses, as it refuses IPv4).
    v6: bool,
}

impl BatchSocket {
    pub fn new(sock: UdpSocket) -> io::Result<BatchSocket> {
        let state = UdpSocketState::new(UdpSockRef::from(&sock))?;
        let v6 = sock.local_addr()?.is_ipv6();
        Ok(BatchSocket { sock, state, v6 })
    }

    /// Where a datagram to `to` is addressed on this socket ([`BatchSocket::v6`]).
    fn dest(&self, to: SocketAddr) -> SocketAddr {
        match to {
            SocketAddr::V4(a) if self.v6 => {
                std::net::SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0).into()
            }
            _ => to,
        }
    }

    /// Datagrams one send may carry (1 where the kernel has no UDP GSO).
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Datagrams the kernel may coalesce into one received buffer (1 without UDP GRO).
    pub fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    /// Send one datagram to `to`. Waits while the socket buffer is full: the backpressure TCP
    /// inside the tunnel needs. (Runs of datagrams go with [`send_run`](Self::send_run).)
    pub async fn send(
        &self,
        datagram: &[u8],
        to: SocketAddr,
        from: Option<std::net::IpAddr>,
    ) -> io::Result<()> {
        let t = single(datagram, self.dest(to), from);
        self.sock
            .async_io(Interest::WRITABLE, || {
                self.state.try_send(UdpSockRef::from(&self.sock), &t)
            })
            .await
    }

    /// Send `run`'s datagrams (out of `bufs`) to `to` in one `sendmsg`: one iovec per datagram
    /// and, for more than one, UDP GSO with the run's segment size — the kernel joins and
    /// cuts them, so they are never copied together here. `from`: the source address (a
    /// socket bound to a wildcard address answers from the address it was reached at, not
    /// from whichever the kernel would pick). Waits while the socket buffer is full.
    pub async fn send_run<B: AsRef<[u8]>>(
        &self,
        run: &GsoRun,
        bufs: &[B],
        to: SocketAddr,
        from: Option<std::net::IpAddr>,
    ) -> io::Result<()> {
        let addr = socket2::SockAddr::from(self.dest(to));
        let segment = run.segment();
        self.sock
            .async_io(Interest::WRITABLE, || {
                // (built per attempt: raw pointers must not live across the await)
                let mut iov = [libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                }; MAX_IOV];
                let mut n = 0;
                for (slot, d) in iov.iter_mut().zip(run.datagrams(bufs)) {
                    *slot = libc::iovec {
                        iov_base: d.as_ptr() as *mut libc::c_void,
                        iov_len: d.len(),
                    };
                    n += 1;
                }
                // room for a cmsg carrying a u16 and one carrying an in6_pktinfo
                let mut control = [0u64; 12];
                // SAFETY: every pointer in `msg` (address, iovecs and the data they name,
                // control buffer) stays valid for the call; the control buffer is aligned
                // (u64) and large enough for both cmsgs (checked by CMSG_SPACE below).
                let r = unsafe {
                    let mut msg: libc::msghdr = std::mem::zeroed();
                    msg.msg_name = addr.as_ptr() as *mut libc::c_void;
                    msg.msg_namelen = addr.len();
                    msg.msg_iov = iov.as_mut_ptr();
                    msg.msg_iovlen = n;
                    let seg_space = libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) as usize;
                    let info_space =
                        libc::CMSG_SPACE(std::mem::size_of::<libc::in6_pktinfo>() as u32) as usize;
                    debug_assert!(seg_space + info_space <= std::mem::size_of_val(&control));
                    let mut used = 0;
                    if segment.is_some() {
                        used += seg_space;
                    }
                    if from.is_some() {
                        used += info_space;
                    }
                    if used > 0 {
                        msg.msg_control = control.as_mut_ptr().cast();
                        // socklen_t on musl, size_t on glibc
                        msg.msg_controllen = used as _;
                    }
                    let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
                    if let Some(seg) = segment {
                        put_cmsg(cmsg, libc::SOL_UDP, libc::UDP_SEGMENT, seg as u16);
                        cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
                    }
                    match from {
                        Some(std::net::IpAddr::V4(a)) if !cmsg.is_null() => {
                            let info = libc::in_pktinfo {
                                ipi_ifindex: 0,
                                ipi_spec_dst: libc::in_addr {
                                    s_addr: u32::from_ne_bytes(a.octets()),
                                },
                                ipi_addr: libc::in_addr { s_addr: 0 },
                            };
                            put_cmsg(cmsg, libc::IPPROTO_IP, libc::IP_PKTINFO, info);
                        }
                        Some(std::net::IpAddr::V6(a)) if !cmsg.is_null() => {
                            let info = libc::in6_pktinfo {
                                ipi6_ifindex: 0,
                                ipi6_addr: libc::in6_addr {
                                    s6_addr: a.octets(),
                                },
                            };
                            put_cmsg(cmsg, libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, info);
                        }
                        _ => {}
                    }
                    libc::sendmsg(self.sock.as_raw_fd(), &msg, 0)
                };
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            })
            .await
    }

    /// Send without waiting; `WouldBlock` when the socket buffer is full.
    pub fn try_send(
        &self,
        datagram: &[u8],
        to: SocketAddr,
        from: Option<std::net::IpAddr>,
    ) -> io::Result<()> {
        let t = single(datagram, self.dest(to), from);
        self.sock.try_io(Interest::WRITABLE, || {
            self.state.try_send(UdpSockRef::from(&self.sock), &t)
        })
    }

    /// Receive what is waiting (several datagrams per buffer with GRO: `meta.stride` apart).
    /// `WouldBlock` when nothing is. IPv4 that came to a dual-stack socket has its addresses
    /// as IPv4 (not mapped), so that they match the IPv4 a path sends to.
    pub fn try_recv(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let n = self.sock.try_io(Interest::READABLE, || {
            self.state.recv(UdpSockRef::from(&self.sock), bufs, meta)
        })?;
        if self.v6 {
            for m in meta.iter_mut().take(n) {
                m.addr = SocketAddr::new(m.addr.ip().to_canonical(), m.addr.port());
                m.dst_ip = m.dst_ip.map(|ip| ip.to_canonical());
            }
        }
        Ok(n)
    }
}

/// Fill the control message at `cmsg` with `value` of `level` and `ty`.
///
/// # Safety
/// `cmsg` points into a control buffer with room for a control message carrying a `T`.
unsafe fn put_cmsg<T>(cmsg: *mut libc::cmsghdr, level: libc::c_int, ty: libc::c_int, value: T) {
    // SAFETY: the caller's room for the header and a `T` after it; unaligned writes.
    unsafe {
        (*cmsg).cmsg_level = level;
        (*cmsg).cmsg_type = ty;
        // socklen_t on musl, size_t on glibc
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<T>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<T>(), value);
    }
}

/// quinn-udp's description of one datagram to `to` (from `from`, if given).
fn single(datagram: &[u8], to: SocketAddr, from: Option<std::net::IpAddr>) -> Transmit<'_> {
    Transmit {
        destination: to,
        ecn: None,
        contents: datagram,
        segment_size: None,
        src_ip: from,
    }
}

/// Datagrams for one path gathered for a GSO send: all of one size but the last. The run
/// names them (which buffer of the caller's batch, how long), it does not copy them: the send
/// hands the kernel one iovec per datagram and the kernel joins and cuts them.
#[derive(Debug)]
pub struct GsoRun {
    /// (buffer index, length) per datagram, in order.
    members: Vec<(usize, usize)>,
    segment: usize,
    bytes: usize,
    /// The last datagram was shorter than `segment`: the run is closed.
    closed: bool,
    max_segments: usize,
}

impl GsoRun {
    pub fn new(max_segments: usize) -> GsoRun {
        let max_segments = max_segments.clamp(1, MAX_IOV);
        GsoRun {
            members: Vec::with_capacity(max_segments),
            segment: 0,
            bytes: 0,
            closed: false,
            max_segments,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `len` more bytes can join the run.
    pub fn fits(&self, len: usize) -> bool {
        self.members.is_empty()
            || (!self.closed
                && len <= self.segment
                && self.members.len() < self.max_segments
                && self.bytes + len <= GSO_MAX_BYTES)
    }

    /// Add datagram `bufs[k][..len]` (the caller checked [`fits`](Self::fits)).
    pub fn push(&mut self, k: usize, len: usize) {
        if self.members.is_empty() {
            self.segment = len;
        } else if len < self.segment {
            self.closed = true;
        }
        self.members.push((k, len));
        self.bytes += len;
    }

    /// Datagrams in the run.
    pub fn count(&self) -> usize {
        self.members.len()
    }

    /// Bytes in the run.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The segment size for a GSO send (`None` for a single datagram).
    pub fn segment(&self) -> Option<usize> {
        (self.members.len() > 1).then_some(self.segment)
    }

    pub fn clear(&mut self) {
        self.members.clear();
        self.bytes = 0;
        self.closed = false;
    }

    /// Each datagram of the run, out of the caller's buffers.
    pub fn datagrams<'a, B: AsRef<[u8]>>(
        &'a self,
        bufs: &'a [B],
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.members
            .iter()
            .map(move |&(k, len)| &bufs[k].as_ref()[..len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_hold_equal_segments_and_one_shorter_last() {
        let bufs: Vec<Vec<u8>> = (0..6u8).map(|b| vec![b; 1500]).collect();
        let mut r = GsoRun::new(4);
        assert!(r.fits(1440));
        assert_eq!(r.segment(), None);
        r.push(1, 1440);
        assert_eq!(r.segment(), None, "one datagram needs no segmentation");
        assert!(r.fits(1440) && r.fits(100) && !r.fits(1441));
        r.push(2, 1440);
        r.push(3, 100);
        assert!(!r.fits(100), "a shorter datagram closes the run");
        assert_eq!((r.bytes(), r.segment(), r.count()), (2980, Some(1440), 3));
        let got: Vec<(u8, usize)> = r.datagrams(&bufs).map(|d| (d[0], d.len())).collect();
        assert_eq!(got, vec![(1, 1440), (2, 1440), (3, 100)]);
        r.clear();
        assert!(r.is_empty() && r.fits(2000));
        for k in 0..4 {
            r.push(k, 10);
        }
        assert!(!r.fits(10), "at most max_segments");
    }

    /// A dual-stack socket (IPv6, IPv4 mapped) sends to an IPv4 address as it is given, in
    /// runs and alone, and what comes back over IPv4 has IPv4 addresses, not mapped ones.
    #[tokio::test]
    async fn a_dual_stack_socket_talks_ipv4_with_ipv4_addresses() {
        let s = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::DGRAM, None)
            .expect("IPv6 socket");
        s.set_only_v6(false).expect("dual-stack");
        s.bind(&"[::]:0".parse::<SocketAddr>().expect("addr").into())
            .expect("bind");
        s.set_nonblocking(true).expect("nonblocking");
        let dual = BatchSocket::new(UdpSocket::from_std(s.into()).expect("tokio")).expect("batch");
        let v4 = UdpSocket::bind("127.0.0.1:0").await.expect("IPv4 socket");
        let to = v4.local_addr().expect("addr");
        let port = dual.sock.local_addr().expect("addr").port();
        let mut buf = [0u8; 64];
        dual.send(b"one", to, None).await.expect("send");
        let (n, from) = v4.recv_from(&mut buf).await.expect("recv");
        assert_eq!(
            (&buf[..n], from),
            (&b"one"[..], SocketAddr::from(([127, 0, 0, 1], port)))
        );
        let bufs = [b"two".to_vec(), b"two".to_vec()];
        let mut run = GsoRun::new(dual.max_gso_segments().max(1));
        run.push(0, 3);
        dual.send_run(&run, &bufs, to, None)
            .await
            .expect("send_run");
        let (n, _) = v4.recv_from(&mut buf).await.expect("recv");
        assert_eq!(&buf[..n], b"two");
        v4.send_to(b"back", ("127.0.0.1", port))
            .await
            .expect("send back");
        dual.sock.readable().await.expect("readable");
        let mut data = [0u8; 64];
        let mut meta = [RecvMeta::default()];
        let n = loop {
            match dual.try_recv(&mut [IoSliceMut::new(&mut data)], &mut meta) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    dual.sock.readable().await.expect("readable");
                }
                r => break r.expect("recv"),
            }
        };
        assert_eq!((n, &data[..meta[0].len]), (1, &b"back"[..]));
        assert_eq!(meta[0].addr, to, "the sender's address is IPv4");
        assert_eq!(meta[0].dst_ip, Some([127, 0, 0, 1].into()));
    }
}
