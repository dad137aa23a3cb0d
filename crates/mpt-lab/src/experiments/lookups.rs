//! DNS lookups beside a transfer (`mpt-lab run realworld --lookups MS`): every so often, from
//! host A, an A and an AAAA query (two UDP datagrams from one fresh port) to port 53 of B's
//! tunnel address, as a host's resolver sends them. Nothing answers there (B's kernel returns
//! a port unreachable): what counts is the light traffic the tunnel carries beside the
//! transfer, which goes the fastest way (the built-in DNS class).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::harness::{in_netns, tunnel_addr, Lab, Side};

/// Lookups running on a thread in A's namespace until [`Lookups::finish`].
pub(crate) struct Lookups {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Lookups {
    /// One lookup every `every`, the first at once.
    pub(crate) fn start(lab: &Lab, every: Duration) -> Lookups {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let ns = lab.ns(Side::A);
        let to = format!("{}:53", tunnel_addr(Side::B));
        let thread = std::thread::spawn(move || {
            in_netns(&ns, || {
                let mut sent = 0;
                while !flag.load(Ordering::Relaxed) {
                    if let Ok(s) = UdpSocket::bind("0.0.0.0:0") {
                        // a query's size: a header and a name of about 30 bytes
                        for q in [[0x41u8; 48], [0x36u8; 48]] {
                            sent += u64::from(s.send_to(&q, &to).is_ok());
                        }
                    }
                    std::thread::sleep(every);
                }
                sent
            })
            .unwrap_or(0)
        });
        Lookups { stop, thread }
    }

    /// Stop; the queries sent.
    pub(crate) fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}
