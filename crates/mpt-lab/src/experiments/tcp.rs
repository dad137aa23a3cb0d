//! One TCP (or MPTCP) transfer at a time between the lab's two ends, with this program's own
//! sockets (one writes for the run's length, one reads and counts), so that every column a
//! run reports is measured the same way; and kernel MPTCP set up over the lab's paths.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use socket2::{Domain, Protocol, Socket, Type};

use crate::harness::{in_netns, Lab, Side};

/// IPPROTO_MPTCP.
const IPPROTO_MPTCP: i32 = 262;

/// Receive one connection on `listener` (in B) and count its bytes: bytes and seconds from
/// the first byte to the end.
fn receive(listener: TcpListener) -> Result<(u64, f64)> {
    let (mut s, _) = listener.accept()?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        total += n as u64;
    }
    let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    Ok((total, secs))
}

/// A TCP (or MPTCP) socket in the current namespace with congestion control `cc`.
fn socket(mptcp: bool, cc: &str) -> Result<Socket> {
    let proto = if mptcp {
        Protocol::from(IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(proto))
        .with_context(|| format!("socket (mptcp {mptcp})"))?;
    s.set_tcp_congestion(cc.as_bytes())
        .with_context(|| format!("congestion control {cc}"))?;
    Ok(s)
}

/// Transfers from A to each of `targets` (B's addresses) at once for `secs`, congestion
/// control `cc`, over MPTCP or TCP: Mbit/s received at each.
pub fn transfer(
    lab: &Lab,
    targets: &[SocketAddr],
    mptcp: bool,
    cc: &str,
    secs: u64,
) -> Result<Vec<f64>> {
    let ns_b = lab.ns(Side::B);
    let mut receivers = Vec::new();
    for &t in targets {
        let (ready_tx, ready_rx) = mpsc::channel();
        let ns = ns_b.clone();
        let cc = cc.to_owned();
        receivers.push(std::thread::spawn(move || {
            in_netns(&ns, move || -> Result<(u64, f64)> {
                let s = socket(mptcp, &cc)?;
                s.set_reuse_address(true)?;
                // MPTCP: the subflows B announces join at its other addresses
                let at = if mptcp {
                    SocketAddr::from(([0, 0, 0, 0], t.port()))
                } else {
                    t
                };
                s.bind(&at.into())?;
                s.listen(4)?;
                ready_tx.send(()).map_err(|_| anyhow!("ready"))?;
                receive(s.into())
            })?
        }));
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| anyhow!("the receiver on {t} did not start"))?;
    }
    let senders: Vec<_> = targets
        .iter()
        .map(|&t| {
            let ns = lab.ns(Side::A);
            let cc = cc.to_owned();
            std::thread::spawn(move || {
                in_netns(&ns, move || -> Result<()> {
                    let s = socket(mptcp, &cc)?;
                    s.connect_timeout(&t.into(), Duration::from_secs(5))?;
                    let mut s: TcpStream = s.into();
                    s.set_write_timeout(Some(Duration::from_secs(30)))?;
                    let chunk = vec![0x5au8; 1 << 16];
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_secs(secs) {
                        s.write_all(&chunk)?;
                    }
                    s.shutdown(std::net::Shutdown::Write)?;
                    // until the receiver has read everything
                    let mut rest = [0u8; 16];
                    let _ = s.read(&mut rest);
                    Ok(())
                })?
            })
        })
        .collect();
    for s in senders {
        s.join().map_err(|_| anyhow!("sender panicked"))??;
    }
    receivers
        .into_iter()
        .map(|r| {
            let (bytes, secs) = r.join().map_err(|_| anyhow!("receiver panicked"))??;
            Ok(if secs > 0.0 {
                bytes as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            })
        })
        .collect()
}

/// Kernel MPTCP in the lab: the in-kernel path managers may add a subflow per path, and B
/// announces each of its path addresses but the first (`signal` endpoints), to which A opens a
/// subflow each, over the path its routes give (the path of that address).
pub fn set_up_mptcp(lab: &Lab) -> Result<()> {
    let mut s = String::new();
    let n = lab.paths.len();
    for side in [Side::A, Side::B] {
        writeln!(
            s,
            "ip -n {} mptcp limits set subflow {n} add_addr_accepted {n}",
            lab.ns(side)
        )?;
    }
    let b = lab.ns(Side::B);
    for i in 1..n {
        writeln!(
            s,
            "ip -n {b} mptcp endpoint add {} dev {} signal",
            lab.path_addr(Side::B, i),
            Lab::link(i)
        )?;
    }
    crate::harness::process::sh(&s)?;
    Ok(())
}
