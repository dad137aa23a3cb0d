//! A stream path's TCP socket: set up so that its queue stays short and visible (no Nagle
//! delay, a small unsent part in the kernel, a dead peer found in seconds), and what the
//! kernel still holds unsent.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// The most bytes the kernel holds unsent on a stream path's socket: beyond them the socket
/// is not writable, and what waits stays in the daemon's queue, which the scheduler sees.
pub const NOTSENT_LOWAT: u32 = 32 * 1024;

/// Unacknowledged data older than this closes the connection (`TCP_USER_TIMEOUT`): a path
/// whose link died is connected again, rather than retransmitting for minutes.
pub const USER_TIMEOUT: Duration = Duration::from_secs(5);

/// Set up the TCP socket of a stream path: `TCP_NODELAY`, [`NOTSENT_LOWAT`], keepalives
/// (5 s idle, 1 s apart, 3 missed), [`USER_TIMEOUT`], the daemon's mark (its packets leave by
/// the uplinks, not a full tunnel's default route) and, where given, its interface.
pub fn configure(sock: &socket2::Socket, interface: Option<&str>) -> io::Result<()> {
    sock.set_tcp_nodelay(true)?;
    sock.set_tcp_notsent_lowat(NOTSENT_LOWAT)?;
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(1))
        .with_retries(3);
    sock.set_tcp_keepalive(&keepalive)?;
    sock.set_tcp_user_timeout(Some(USER_TIMEOUT))?;
    if let Err(e) = crate::net::set_int_option(
        sock,
        libc::SOL_SOCKET,
        libc::SO_MARK,
        crate::fulltunnel::MARK as libc::c_int,
    ) {
        tracing::debug!(error = %e, "cannot mark a stream socket (SO_MARK)");
    }
    if let Some(ifname) = interface {
        sock.bind_device(Some(ifname.as_bytes()))?;
    }
    Ok(())
}

/// Bytes the kernel holds on `sock` not yet acknowledged: unsent, and sent but still on the
/// way or in the link's queue (`SIOCOUTQ`); 0 if it cannot tell. What a datagram written now
/// waits behind.
pub fn unacked(sock: &impl AsRawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ on an open TCP socket writes one c_int through the pointer.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ as _, &mut n) };
    if r < 0 {
        0
    } else {
        usize::try_from(n).unwrap_or(0)
    }
}

/// What `TCP_INFO` says of `sock`: bytes sent (retransmissions included) and received, and
/// segments sent and received, for what a stream path costs on the wire; `None` if it
/// cannot tell.
pub fn wire(sock: &impl AsRawFd) -> Option<TcpWire> {
    // SAFETY: tcp_info is plain data; zero is a valid value of every field.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt(TCP_INFO) writes at most `len` bytes into `info` and sets `len`.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(TcpWire {
        bytes_sent: info.tcpi_bytes_sent,
        bytes_received: info.tcpi_bytes_received,
        segs_out: u64::from(info.tcpi_segs_out),
        segs_in: u64::from(info.tcpi_segs_in),
        rtt_us: info.tcpi_rtt,
        retrans: info.tcpi_total_retrans,
    })
}

/// A TCP connection's counts, as the kernel keeps them ([`wire`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpWire {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    pub rtt_us: u32,
    pub retrans: u32,
}

impl TcpWire {
    /// Bytes on the wire each way since `before`: payload plus `header` bytes a segment (IP
    /// and TCP headers with the timestamp option: 52 over IPv4, 72 over IPv6).
    pub fn since(&self, before: &TcpWire, header: u64) -> (u64, u64) {
        let tx = self.bytes_sent.saturating_sub(before.bytes_sent)
            + self.segs_out.saturating_sub(before.segs_out) * header;
        let rx = self.bytes_received.saturating_sub(before.bytes_received)
            + self.segs_in.saturating_sub(before.segs_in) * header;
        (tx, rx)
    }
}
