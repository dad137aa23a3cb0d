//! The least a userspace tunnel can do, for `mpt-lab bench latency` to measure beside mptd: per
//! side a TUN device and a connected UDP socket, one thread copying TUN → socket and one
//! socket → TUN, one packet per system call, no header, no runtime. What it adds to a round
//! trip is what waking sleeping threads costs on this machine — the floor for any tunnel that
//! sleeps when idle. With `spin`, each side is instead one thread polling both descriptors
//! without sleeping (a core each), to show what only busy polling buys.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::harness::{in_netns, Lab, Side};

/// How long a blocked thread waits before it looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// The tunnel's address on `side` (its own /24, apart from mptd's).
pub fn floor_addr(side: Side) -> String {
    format!("198.19.251.{}", side.octet())
}

/// A running minimal tunnel over the lab's path 0; stopped and removed on drop.
#[derive(Debug)]
pub struct MinimalTunnel {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl MinimalTunnel {
    pub fn start(lab: &Lab, spin: bool) -> Result<MinimalTunnel> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for side in [Side::A, Side::B] {
            let local = format!("{}:4760", lab.path_addr(side, 0));
            let remote = format!("{}:4760", lab.path_addr(side.other(), 0));
            let addr: std::net::Ipv4Addr = floor_addr(side).parse()?;
            // Created inside the namespace; the descriptors stay bound to it.
            let (dev, sock) = in_netns(&lab.ns(side), || -> Result<_> {
                let dev = tun_rs::DeviceBuilder::new()
                    .name("mflr0")
                    .mtu(1400)
                    .ipv4(addr, 24, None)
                    .build_sync()
                    .context("minimal tunnel: TUN device")?;
                let sock = UdpSocket::bind(&local).context("minimal tunnel: socket")?;
                sock.connect(&remote)?;
                Ok((dev, sock))
            })??;
            let (dev, sock) = (Arc::new(dev), Arc::new(sock));
            if spin {
                dev.set_nonblocking(true)?;
                sock.set_nonblocking(true)?;
                let stop = stop.clone();
                threads.push(std::thread::spawn(move || {
                    let mut b = vec![0u8; 2048];
                    while !stop.load(Relaxed) {
                        if let Ok(n) = dev.recv(&mut b) {
                            let _ = sock.send(&b[..n]);
                        }
                        if let Ok(n) = sock.recv(&mut b) {
                            let _ = dev.send(&b[..n]);
                        }
                    }
                }));
                continue;
            }
            sock.set_read_timeout(Some(STOP_CHECK))?;
            let (d, s, st) = (dev.clone(), sock.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut b = vec![0u8; 2048];
                while !st.load(Relaxed) {
                    // wait in poll(2) with a timeout, so that the stop flag is seen
                    let mut pfd = libc::pollfd {
                        fd: d.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd for the duration of the call.
                    if unsafe { libc::poll(&mut pfd, 1, STOP_CHECK.as_millis() as i32) } > 0 {
                        if let Ok(n) = d.recv(&mut b) {
                            let _ = s.send(&b[..n]);
                        }
                    }
                }
            }));
            let st = stop.clone();
            threads.push(std::thread::spawn(move || {
                let mut b = vec![0u8; 2048];
                while !st.load(Relaxed) {
                    if let Ok(n) = sock.recv(&mut b) {
                        let _ = dev.send(&b[..n]);
                    }
                }
            }));
        }
        Ok(MinimalTunnel { stop, threads })
    }
}

impl Drop for MinimalTunnel {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
