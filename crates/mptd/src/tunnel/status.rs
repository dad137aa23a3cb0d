//! The status document, read from the running tunnel.

use std::sync::atomic::Ordering::Relaxed;

use mpt_core::Time;
use mpt_tunnel::{Connection, DropReason};

use super::Tunnel;
use crate::peer::{Peer, RxBuf};
use crate::status::{
    CallCounts, ClassStatus, DropCounts, PathStatus, PeerStatus, ReseqStatus, Status, TunnelStatus,
};

mod path;

impl Tunnel {
    /// The document `mptctl status` shows.
    pub fn status(&self) -> Status {
        let now = self.clock.now();
        let all = self.peers.list();
        let mut peers = Vec::with_capacity(all.len());
        let mut first: Option<(TunnelStatus, Vec<PathStatus>)> = None;
        let mut sums = Sums::new(&self.cfg().connection.classes);
        sums.drops = self.counters.io_drop_counts();
        for (i, peer) in all.iter().enumerate().filter(|(_, p)| !p.retired) {
            let role = self.kernel.describe(i, &all);
            let guard = peer.lock();
            let Some(ep) = guard.as_ref() else {
                peers.push(peer_status(peer, None, now, role, Vec::new()));
                continue;
            };
            sums.add(ep);
            let paths = self.path_status(now, peer, ep);
            if first.is_none() {
                first = Some((self.tunnel_status(now, ep), paths.clone()));
            }
            peers.push(peer_status(peer, Some(ep), now, role, paths));
        }
        let (mut tunnel, first_paths) =
            first.unwrap_or_else(|| (self.empty_tunnel_status(now), Vec::new()));
        sums.fill(&mut tunnel);
        Status {
            version: 3,
            tunnel,
            paths: first_paths,
            peers,
        }
    }

    /// The tunnel part of the status with nothing from an endpoint (a server before any site
    /// came); [`Tunnel::tunnel_status`] fills in the first peer's.
    fn empty_tunnel_status(&self, now: Time) -> TunnelStatus {
        let cfg = self.cfg();
        let c = &cfg.connection;
        TunnelStatus {
            name: cfg.tunnel.name.clone(),
            scheduler: c.scheduler.to_string(),
            encryption: self
                .sealing()
                .map_or_else(|| "none".to_owned(), |c| c.name().to_owned()),
            cipher: None,
            keys_agreed: false,
            uptime_ms: now.as_nanos() / 1_000_000,
            session: String::new(),
            peer_session: None,
            peer_restarts: 0,
            tx_packets: 0,
            tx_bytes: 0,
            rx_packets: 0,
            rx_bytes: 0,
            delivered: 0,
            tx_report_bytes: 0,
            keepalives_sent: 0,
            bundles_sent: 0,
            bundled_packets: 0,
            compressed_packets: 0,
            tcp_compressed: 0,
            tcp_references: 0,
            tcp_header_bytes_saved: 0,
            tcp_uncompressible: 0,
            tcp_too_long: 0,
            copies_sent: 0,
            classes: Vec::new(),
            keepalive_acks_sent: 0,
            calls: self.call_counts(),
            report_fraction: 0.0,
            drops: DropCounts::default(),
            reseq: ReseqStatus::default(),
        }
    }

    fn call_counts(&self) -> CallCounts {
        CallCounts {
            tun_reads: self.counters.calls.tun_reads.load(Relaxed),
            tun_write_batches: self.counters.calls.tun_write_batches.load(Relaxed),
            udp_sends: self.counters.calls.udp_sends.load(Relaxed),
            udp_recvs: self.counters.calls.udp_recvs.load(Relaxed),
            cookie_replies: self.counters.calls.cookie_replies.load(Relaxed),
        }
    }

    /// The tunnel part of the status from one endpoint (the first peer's): its session, its
    /// resequencer and its report budget. (The counters are the caller's sums.)
    fn tunnel_status(&self, now: Time, ep: &Connection<RxBuf>) -> TunnelStatus {
        let cfg = self.cfg();
        let c = &cfg.connection;
        let t = &ep.stats().total;
        TunnelStatus {
            cipher: ep.cipher().map(|c| c.name().to_owned()),
            keys_agreed: ep.keys_agreed(),
            session: format!("{:08x}", ep.session()),
            peer_session: ep.peer_session().map(|s| format!("{s:08x}")),
            peer_restarts: ep.peer_restarts(),
            report_fraction: ep.report_fraction(),
            reseq: ReseqStatus {
                window: c.reorder_window,
                timeout_ms: c.reorder_timeout.as_millis() as u64,
                held: ep.held(),
                waiting_in_order: ep.waiting_in_order().0,
                waited_in_order: ep.waiting_in_order().1,
                reordered: t.reordered,
                reorder_extent_max: t.reorder_extent_max,
                delivered_out_of_order: t.delivered_out_of_order,
                skipped: t.skipped,
                late: t.late,
                resend_requests: ep.nack_counts().0,
                resend_asked: ep.nack_counts().1,
                resend_request_bytes: ep.nack_bytes(),
                resent_received: t.resent,
                recovered: t.recovered,
                parity_received: ep.parity_counts().received,
                parity_repaired: ep.parity_counts().repaired,
                parity_unrepairable: ep.parity_counts().unrepairable,
                parity_unneeded: ep.parity_counts().unneeded,
                parity_mismatched: ep.parity_counts().mismatched,
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
            ..self.empty_tunnel_status(now)
        }
    }
}

/// `peer`'s part of the status: its connection's (`ep`, none yet for a listening peer that has
/// not come), its `role` in the shared prefixes and its `paths`.
fn peer_status(
    peer: &Peer,
    ep: Option<&Connection<RxBuf>>,
    now: Time,
    role: Option<String>,
    paths: Vec<PathStatus>,
) -> PeerStatus {
    let cfg = peer.cfg();
    let mut st = PeerStatus {
        name: cfg.name.clone(),
        public_key: cfg.public_key.encode(),
        endpoint: cfg.endpoint.as_ref().map(ToString::to_string),
        listening: peer.listening,
        keys_agreed: false,
        cipher: None,
        protocol: None,
        session: None,
        peer_session: None,
        restarts: 0,
        rekeys: 0,
        last_heard_ms: None,
        last_handshake_ms: None,
        tx_packets: 0,
        tx_bytes: 0,
        rx_packets: 0,
        rx_bytes: 0,
        delivered: 0,
        drops: DropCounts::default(),
        role,
        paths,
    };
    let Some(ep) = ep else { return st };
    let t = &ep.stats().total;
    (st.tx_packets, st.tx_bytes) = ep.tx_counts();
    (st.rx_packets, st.rx_bytes) = (t.packets, t.bytes);
    st.keys_agreed = ep.keys_agreed();
    st.cipher = ep.cipher().map(|c| c.name().to_owned());
    st.protocol = ep.keys_agreed().then(|| ep.wire_version());
    st.session = Some(format!("{:08x}", ep.session()));
    st.peer_session = ep.peer_session().map(|s| format!("{s:08x}"));
    st.restarts = ep.peer_restarts();
    st.rekeys = ep.rekeys();
    st.last_heard_ms = ep.last_heard().map(|h| (now - h).as_millis() as u64);
    st.last_handshake_ms = ep.session_made_at().map(|h| (now - h).as_millis() as u64);
    st.delivered = ep.delivered();
    st.drops = DropCounts::from_counts(&ep.drop_counts());
    st
}

/// The tunnel's counters: the sums over its peers' connections.
#[derive(Debug)]
struct Sums {
    /// Drops by reason: the tunnel's own, then each connection's.
    drops: [u64; DropReason::COUNT],
    /// Packets and bytes sent, and received.
    tx: (u64, u64),
    rx: (u64, u64),
    delivered: u64,
    reports: u64,
    /// Keepalives, and their acknowledgements, sent.
    keepalives: (u64, u64),
    /// Bundles sent, the packets in them, and of those compressed.
    bundles: (u64, u64, u64),
    hc: mpt_core::hc::TxCounts,
    copies: u64,
    /// Per `[[connection.class]]`.
    classes: Vec<ClassStatus>,
}

impl Sums {
    /// Nothing counted yet, for `classes`.
    fn new(classes: &[mpt_tunnel::ClassRule]) -> Sums {
        Sums {
            drops: [0; DropReason::COUNT],
            tx: (0, 0),
            rx: (0, 0),
            delivered: 0,
            reports: 0,
            keepalives: (0, 0),
            bundles: (0, 0, 0),
            hc: mpt_core::hc::TxCounts::default(),
            copies: 0,
            classes: classes
                .iter()
                .map(|c| ClassStatus {
                    name: c.name.clone(),
                    mode: c.mode.name().to_owned(),
                    ..ClassStatus::default()
                })
                .collect(),
        }
    }

    /// Add `ep`'s counters.
    fn add(&mut self, ep: &Connection<RxBuf>) {
        for (c, d) in self.drops.iter_mut().zip(ep.drop_counts()) {
            *c += d;
        }
        let t = &ep.stats().total;
        let (ptx, ptxb) = ep.tx_counts();
        let (ks, ka) = ep.keepalive_counts();
        self.tx = (self.tx.0 + ptx, self.tx.1 + ptxb);
        self.rx = (self.rx.0 + t.packets, self.rx.1 + t.bytes);
        self.delivered += ep.delivered();
        self.reports += ep.report_bytes();
        self.keepalives = (self.keepalives.0 + ks, self.keepalives.1 + ka);
        let (bs, bp, bc) = ep.bundle_counts();
        let b = &mut self.bundles;
        *b = (b.0 + bs, b.1 + bp, b.2 + bc);
        let h = ep.compression_counts();
        self.hc.compressed += h.compressed;
        self.hc.references += h.references;
        self.hc.saved_bytes += h.saved_bytes;
        self.hc.uncompressible += h.uncompressible;
        self.hc.too_long += h.too_long;
        let (per_class, c) = ep.class_counts();
        self.copies += c;
        for (status, per_path) in self.classes.iter_mut().zip(per_class) {
            if status.sent_per_path.len() < per_path.len() {
                status.sent_per_path.resize(per_path.len(), 0);
            }
            for (sum, n) in status.sent_per_path.iter_mut().zip(per_path) {
                *sum += n;
            }
            status.sent += per_path.iter().sum::<u64>();
        }
    }

    /// Put the sums into `tunnel`.
    fn fill(self, tunnel: &mut TunnelStatus) {
        (tunnel.tx_packets, tunnel.tx_bytes) = self.tx;
        (tunnel.rx_packets, tunnel.rx_bytes) = self.rx;
        tunnel.delivered = self.delivered;
        tunnel.tx_report_bytes = self.reports;
        (tunnel.keepalives_sent, tunnel.keepalive_acks_sent) = self.keepalives;
        (
            tunnel.bundles_sent,
            tunnel.bundled_packets,
            tunnel.compressed_packets,
        ) = self.bundles;
        let hc = self.hc;
        (
            tunnel.tcp_compressed,
            tunnel.tcp_references,
            tunnel.tcp_header_bytes_saved,
        ) = (hc.compressed, hc.references, hc.saved_bytes);
        (tunnel.tcp_uncompressible, tunnel.tcp_too_long) = (hc.uncompressible, hc.too_long);
        tunnel.copies_sent = self.copies;
        tunnel.classes = self.classes;
        tunnel.drops = DropCounts::from_counts(&self.drops);
    }
}
