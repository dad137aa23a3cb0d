//! The status page's history: per peer and path, the last [`SAMPLES`] one-second samples of
//! throughput each way and round trip, in memory. Paths and peers the status no longer has are
//! dropped, so it stays bounded by what the tunnel has now.

use std::collections::VecDeque;

use serde::Serialize;

use crate::status::Status;

/// Samples kept per path: ten minutes at one a second.
pub const SAMPLES: usize = 600;

/// Every peer's samples, in the status's order.
#[derive(Debug, Default, Serialize)]
pub struct History {
    pub peers: Vec<PeerHistory>,
}

/// One peer: the sample times, and each path's samples at those times.
#[derive(Debug, Serialize)]
pub struct PeerHistory {
    pub name: String,
    /// Unix seconds of each sample.
    pub t: VecDeque<f64>,
    pub paths: Vec<PathHistory>,
}

/// One path's samples, one per entry of its peer's `t` (`None`: not known then, such as
/// before the path was there).
#[derive(Debug, Serialize)]
pub struct PathHistory {
    pub name: String,
    /// Bits per second sent and received on the path (outer headers included).
    pub tx_bps: VecDeque<Option<u64>>,
    pub rx_bps: VecDeque<Option<u64>>,
    /// Smoothed round trip, milliseconds.
    pub rtt_ms: VecDeque<Option<f64>>,
    /// Bytes sent and received as of the previous sample.
    #[serde(skip)]
    last_bytes: Option<[u64; 2]>,
}

impl History {
    /// Add a sample of `st` taken at `unix` (seconds).
    pub fn sample(&mut self, st: &Status, unix: f64) {
        let mut old = std::mem::take(&mut self.peers);
        for peer in &st.peers {
            let mut h = match old.iter().position(|h| h.name == peer.name) {
                Some(i) => old.swap_remove(i),
                None => PeerHistory {
                    name: peer.name.clone(),
                    t: VecDeque::with_capacity(SAMPLES + 1),
                    paths: Vec::new(),
                },
            };
            let secs = h.t.back().map(|t0| unix - t0).filter(|s| *s > 1e-3);
            h.t.push_back(unix);
            let before = h.t.len() - 1;
            let mut paths = std::mem::take(&mut h.paths);
            for path in &peer.paths {
                let mut p = match paths.iter().position(|p| p.name == path.name) {
                    Some(i) => paths.swap_remove(i),
                    None => PathHistory::new(&path.name, before),
                };
                let now = [path.tx_bytes, path.rx_bytes];
                let rate = |i: usize| {
                    let (last, secs) = (p.last_bytes?, secs?);
                    Some((now[i].saturating_sub(last[i]) as f64 * 8.0 / secs).round() as u64)
                };
                let (tx, rx) = (rate(0), rate(1));
                p.tx_bps.push_back(tx);
                p.rx_bps.push_back(rx);
                p.rtt_ms.push_back(path.rtt_us.map(|us| us as f64 / 1000.0));
                p.last_bytes = Some(now);
                h.paths.push(p);
            }
            if h.t.len() > SAMPLES {
                h.t.pop_front();
                for p in &mut h.paths {
                    p.tx_bps.pop_front();
                    p.rx_bps.pop_front();
                    p.rtt_ms.pop_front();
                }
            }
            self.peers.push(h);
        }
    }
}

impl PathHistory {
    /// A path first seen now, with `before` unknown samples ahead of its first.
    fn new(name: &str, before: usize) -> Self {
        PathHistory {
            name: name.to_owned(),
            tx_bps: unknown(before),
            rx_bps: unknown(before),
            rtt_ms: unknown(before),
            last_bytes: None,
        }
    }
}

/// `n` unknown samples, with room for a sample more than are kept (one is added before the
/// oldest goes): 29 kB a path in all.
fn unknown<T>(n: usize) -> VecDeque<Option<T>> {
    let mut v = VecDeque::with_capacity(SAMPLES + 1);
    v.extend(std::iter::repeat_with(|| None).take(n));
    v
}
