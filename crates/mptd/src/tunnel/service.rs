//! What the service manager and the operator's log see of a running tunnel: the systemd
//! watchdog, fed while the datapath turns, and the `-v` summaries.

use tracing::warn;

use super::Tunnel;

impl Tunnel {
    /// With `-v`: every 5 s, a line per path (state, RTT, loss, rate and throughput each way),
    /// so that an operator sees the tunnel work without asking. Idle without debug logging.
    pub async fn summaries(self: std::sync::Arc<Self>) -> anyhow::Result<()> {
        if tracing::level_filters::LevelFilter::current() < tracing::Level::DEBUG {
            return std::future::pending().await;
        }
        let every = std::time::Duration::from_secs(5);
        let mut throughput = crate::status::Throughput::default();
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            let st = self.status();
            for r in throughput.rates(&st, every.as_secs_f64()) {
                let p = r.path;
                tracing::debug!(
                    peer = %r.peer.name,
                    path = %p.name,
                    state = %p.state,
                    rtt_ms = p.rtt_us.map_or(-1.0, |r| r as f64 / 1000.0),
                    loss_pct = p.loss_pct,
                    rate_mbps = p.rate_bps.map_or(-1.0, |r| r as f64 / 1e6),
                    tx_mbps = r.tx_bps / 1e6,
                    rx_mbps = r.rx_bps / 1e6,
                    "path summary"
                );
            }
        }
    }

    /// Every peer's resequencer hold times and occupancy (for the metrics' histograms).
    pub fn reseq_histograms(&self) -> Vec<crate::metrics::ReseqHistograms> {
        self.peers
            .list()
            .iter()
            .filter_map(|p| {
                let ep = p.lock();
                let t = &ep.as_ref()?.stats().total;
                Some((
                    p.cfg().name.clone(),
                    t.hold_time_ns.clone(),
                    t.occupancy.clone(),
                ))
            })
            .collect()
    }

    /// Feed the systemd watchdog (`WatchdogSec=`) every half of its interval, while the
    /// receive loop turns; a stalled datapath goes unfed, and systemd restarts the service.
    /// Returns at once without a watchdog.
    pub async fn watchdog(self: std::sync::Arc<Self>) -> anyhow::Result<()> {
        let mut usec = 0u64;
        if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
            return std::future::pending().await;
        }
        let every = std::time::Duration::from_micros(usec / 2);
        let stale_ms = (usec / 2000).max(2000);
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let now_ms = self.clock.now().as_nanos() / 1_000_000;
            let beat = self.rx_beat.load(std::sync::atomic::Ordering::Relaxed);
            if now_ms.saturating_sub(beat) <= stale_ms {
                notify_nonblocking(b"WATCHDOG=1");
            } else {
                warn!(
                    stalled_ms = now_ms - beat,
                    "the receive loop has not turned: the watchdog is not fed"
                );
            }
        }
    }
}

/// Send `msg` to systemd's notify socket without ever blocking a worker: a manager that does
/// not read (or a full queue) loses the message, as a missed watchdog ping would be.
fn notify_nonblocking(msg: &[u8]) {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let addr = match path.to_str().and_then(|p| p.strip_prefix('@')) {
        Some(abstract_name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name.as_bytes())
        }
        None => SocketAddr::from_pathname(&path),
    };
    let Ok(addr) = addr else { return };
    if let Ok(sock) = UnixDatagram::unbound() {
        if sock.set_nonblocking(true).is_ok() {
            let _ = sock.send_to_addr(msg, &addr);
        }
    }
}

impl crate::metrics::Source for Tunnel {
    fn status(&self) -> crate::status::Status {
        Tunnel::status(self)
    }

    fn reseq_histograms(&self) -> Vec<crate::metrics::ReseqHistograms> {
        Tunnel::reseq_histograms(self)
    }
}
