//! `GET /api/status`: the part of the status document the page shows, per peer and path.

use serde::Serialize;

use crate::status::{BudgetStatus, PathStatus, PeerStatus, Status};

/// The tunnel as the page shows it.
#[derive(Debug, Serialize)]
pub struct View<'a> {
    pub tunnel: &'a str,
    pub uptime_ms: u64,
    pub peers: Vec<PeerView<'a>>,
}

#[derive(Debug, Serialize)]
pub struct PeerView<'a> {
    pub name: &'a str,
    pub role: Option<&'a str>,
    pub keys_agreed: bool,
    pub cipher: Option<&'a str>,
    pub last_heard_ms: Option<u64>,
    pub paths: Vec<PathView<'a>>,
}

#[derive(Debug, Serialize)]
pub struct PathView<'a> {
    pub name: &'a str,
    /// "up", "down" or "unknown", and why it is down.
    pub state: &'a str,
    pub down_reason: Option<&'a str>,
    pub transport: &'a str,
    pub tier: u8,
    pub backup: bool,
    pub rtt_ms: Option<f64>,
    pub loss_pct: f64,
    /// The rate the scheduler assumes for it, bits per second.
    pub rate_bps: Option<u64>,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub budget: Option<&'a BudgetStatus>,
}

impl<'a> View<'a> {
    pub fn of(st: &'a Status) -> Self {
        View {
            tunnel: &st.tunnel.name,
            uptime_ms: st.tunnel.uptime_ms,
            peers: st.peers.iter().map(PeerView::of).collect(),
        }
    }
}

impl<'a> PeerView<'a> {
    fn of(p: &'a PeerStatus) -> Self {
        PeerView {
            name: &p.name,
            role: p.role.as_deref(),
            keys_agreed: p.keys_agreed,
            cipher: p.cipher.as_deref(),
            last_heard_ms: p.last_heard_ms,
            paths: p.paths.iter().map(PathView::of).collect(),
        }
    }
}

impl<'a> PathView<'a> {
    fn of(p: &'a PathStatus) -> Self {
        PathView {
            name: &p.name,
            state: &p.state,
            down_reason: p.down_reason.as_deref(),
            transport: &p.transport,
            tier: p.priority,
            backup: p.backup,
            rtt_ms: p.rtt_us.map(|us| us as f64 / 1000.0),
            loss_pct: p.loss_pct,
            rate_bps: p.rate_bps,
            tx_bytes: p.tx_bytes,
            rx_bytes: p.rx_bytes,
            budget: p.budget.as_ref(),
        }
    }
}
