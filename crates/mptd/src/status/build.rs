//! The status document, read from the running tunnel.

use std::sync::atomic::Ordering::Relaxed;

use mpt_core::PathId;

use super::{CallCounts, DropCounts, PathStatus, PeerReport, ReseqStatus, Status, TunnelStatus};
use crate::tunnel::Tunnel;

impl Tunnel {
    /// The document `mptctl status` shows.
    pub fn status(&self) -> Status {
        let now = self.clock.now();
        let ep = self.lock();
        let st = ep.stats();
        let t = &st.total;
        let io = self.io_drop_counts();
        let mut counts = ep.drop_counts();
        for (c, i) in counts.iter_mut().zip(io) {
            *c += i;
        }
        let paths = self
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let ps = st.paths.get(i).cloned().unwrap_or_default();
                let info = ep.path_info(PathId(i as u8));
                let expected = ps.packets + ps.lost;
                PathStatus {
                    id: p.cfg.id.0,
                    name: p.cfg.name.clone(),
                    state: info.state.name().to_owned(),
                    backup: p.cfg.backup,
                    local: p.cfg.local.to_string(),
                    remote: info
                        .remote
                        .map_or_else(|| "unknown".to_owned(), |r| r.to_string()),
                    tx_packets: p.tx_packets.load(Relaxed),
                    tx_bytes: p.tx_bytes.load(Relaxed),
                    rx_packets: ps.packets,
                    rx_bytes: ps.bytes,
                    last_heard_ms: info.last_heard.map(|h| (now - h).as_millis() as u64),
                    rtt_us: info.srtt_us,
                    rate_bps: info.rate_bps,
                    lost: ps.lost,
                    loss_pct: if expected == 0 {
                        0.0
                    } else {
                        100.0 * ps.lost as f64 / expected as f64
                    },
                    jitter_us: ps.jitter_us,
                    owd_us: ps.owd_us.unwrap_or(0.0),
                    owd_min_us: ps.owd_min_us.unwrap_or(0) as f64,
                    reordered: ps.reordered,
                    reorder_extent_max: ps.reorder_extent_max,
                    peer: info.peer_report.map(|(at, e)| PeerReport {
                        age_ms: (now - at).as_millis() as u64,
                        rx_packets: u64::from(e.packets),
                        rx_bytes: e.bytes,
                        lost: u64::from(e.lost),
                        jitter_us: u64::from(e.jitter_us),
                        owd_us: u64::from(e.owd_us),
                    }),
                    down_events: info.down_events,
                }
            })
            .collect();
        let c = &self.cfg.connection;
        let (tx_packets, tx_bytes) = ep.tx_counts();
        let (keepalives_sent, keepalive_acks_sent) = ep.keepalive_counts();
        Status {
            version: 2,
            tunnel: TunnelStatus {
                name: self.cfg.tunnel.name.clone(),
                scheduler: c.scheduler.to_string(),
                encryption: self
                    .sealing()
                    .map_or_else(|| "none".to_owned(), |c| c.name().to_owned()),
                cipher: ep.cipher().map(|c| c.name().to_owned()),
                keys_agreed: ep.keys_agreed(),
                uptime_ms: now.as_nanos() / 1_000_000,
                session: format!("{:08x}", ep.session()),
                peer_session: ep.peer_session().map(|s| format!("{s:08x}")),
                peer_restarts: ep.peer_restarts(),
                tx_packets,
                tx_bytes,
                rx_packets: t.packets,
                rx_bytes: t.bytes,
                delivered: ep.delivered(),
                tx_report_bytes: ep.report_bytes(),
                keepalives_sent,
                keepalive_acks_sent,
                calls: CallCounts {
                    tun_reads: self.calls.tun_reads.load(Relaxed),
                    tun_write_batches: self.calls.tun_write_batches.load(Relaxed),
                    udp_sends: self.calls.udp_sends.load(Relaxed),
                    udp_recvs: self.calls.udp_recvs.load(Relaxed),
                },
                report_fraction: ep.report_fraction(),
                drops: DropCounts::from_counts(&counts),
                reseq: ReseqStatus {
                    window: c.reorder_window,
                    timeout_ms: c.reorder_timeout.as_millis() as u64,
                    held: ep.held(),
                    reordered: t.reordered,
                    reorder_extent_max: t.reorder_extent_max,
                    delivered_out_of_order: t.delivered_out_of_order,
                    skipped: t.skipped,
                    late: t.late,
                    released_by_timeout: t.released_by_timeout,
                    released_by_fence: t.released_by_fence,
                    released_by_overflow: t.released_by_overflow,
                    hold_p50_us: t.hold_time_percentile(0.5).as_micros() as u64,
                    hold_p90_us: t.hold_time_percentile(0.9).as_micros() as u64,
                    hold_p99_us: t.hold_time_percentile(0.99).as_micros() as u64,
                    hold_max_us: t.hold_time_max().as_micros() as u64,
                    occupancy_mean: t.occupancy.mean(),
                    occupancy_p50: t.occupancy.percentile(0.5) as u64,
                    occupancy_p90: t.occupancy.percentile(0.9) as u64,
                    occupancy_p99: t.occupancy.percentile(0.99) as u64,
                    occupancy_max: t.occupancy.percentile(1.0) as u64,
                },
            },
            paths,
        }
    }
}
