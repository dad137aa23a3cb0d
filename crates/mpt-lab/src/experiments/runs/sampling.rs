//! Sampling the daemons' status on a thread, and the `MPT_LAB_TRACE` trace printed from it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mptd::status::Status;

use crate::harness::{Lab, Side};

/// Status snapshots with their time in seconds since sampling began.
pub(crate) type Samples = Vec<(f64, Status)>;

/// Samples a daemon's status every `every` on a thread until stopped.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<(f64, Status)>>,
}

impl Sampler {
    pub(crate) fn start(socket: PathBuf, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut out = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                if let Ok(s) = mptd::control::status(&socket) {
                    out.push((t0.elapsed().as_secs_f64(), s));
                }
                std::thread::sleep(every);
            }
            if let Ok(s) = mptd::control::status(&socket) {
                out.push((t0.elapsed().as_secs_f64(), s));
            }
            out
        });
        Sampler { stop, handle }
    }

    pub(crate) fn finish(self) -> Vec<(f64, Status)> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// With `MPT_LAB_TRACE` set, both sides' status sampled every 100 ms while it runs.
pub(crate) struct Trace(Option<(Sampler, Sampler)>);

impl Trace {
    /// Trace a run whose data goes from `sender` to the other side.
    pub(crate) fn start(lab: &Lab, sender: Side) -> Trace {
        let every = Duration::from_millis(100);
        Trace(std::env::var("MPT_LAB_TRACE").is_ok().then(|| {
            (
                Sampler::start(lab.control_socket(sender), every),
                Sampler::start(lab.control_socket(sender.other()), every),
            )
        }))
    }

    /// Stop sampling and print the trace (nothing when not tracing).
    pub(crate) fn print(self) {
        if let Some((a, b)) = self.0 {
            print_trace(&a.finish(), &b.finish());
        }
    }
}

/// `MPT_LAB_TRACE`: per sample, the receiver's resequencer skips, out-of-order deliveries and
/// late packets (cumulative), the sender's report bytes and keepalives since the previous
/// sample, then per path the sender's scheduling rate, the datagrams it sent since the previous
/// sample, the inner kbit/s the receiver got on it since its previous sample, the queue the
/// receiver sees (smoothed minus minimum one-way delay) and the packets it found missing on the
/// path (cumulative).
fn print_trace(sender: &[(f64, Status)], receiver: &[(f64, Status)]) {
    for (s, r) in sender.windows(2).zip(receiver.windows(2)) {
        let ((t, now), (_, before)) = (&s[1], &s[0]);
        let ((rt, rx), (rt0, rx0)) = (&r[1], &r[0]);
        let r = &rx.tunnel.reseq;
        // Control datagrams the sender put on its paths: its own reports (bytes) and keepalives.
        let (st, bt) = (&now.tunnel, &before.tunnel);
        let mut line = format!(
            "{t:5.2} skip {:4} ooo {:4} late {:3} ctl {:4}B {:2}ka",
            r.skipped,
            r.delivered_out_of_order,
            r.late,
            st.tx_report_bytes.saturating_sub(bt.tx_report_bytes),
            st.keepalives_sent.saturating_sub(bt.keepalives_sent)
        );
        for (i, p) in now.paths.iter().enumerate() {
            let sent = p
                .tx_packets
                .saturating_sub(before.paths.get(i).map_or(0, |b| b.tx_packets));
            let queue_ms = rx
                .paths
                .get(i)
                .map_or(0.0, |q| (q.owd_us - q.owd_min_us) / 1000.0);
            let rate_k = p.rate_bps.unwrap_or(0) / 1000;
            // What the path delivered to the receiver since its previous sample (inner bytes).
            let got = rx
                .paths
                .get(i)
                .map_or(0, |q| q.rx_bytes)
                .saturating_sub(rx0.paths.get(i).map_or(0, |q| q.rx_bytes));
            let got_k = got as f64 * 8.0 / (rt - rt0).max(1e-3) / 1000.0;
            // Packets the receiver found missing on the path (sequence gaps), cumulative.
            let lost = rx.paths.get(i).map_or(0, |q| q.lost);
            line += &format!(" | {rate_k:4}k tx{sent:3} d{got_k:4.0}k q{queue_ms:4.0}ms l{lost:3}");
        }
        eprintln!("{line}");
    }
}
