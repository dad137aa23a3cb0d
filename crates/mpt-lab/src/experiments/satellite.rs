//! A satellite-like link beside an LTE-like one (issue 72): the links
//! ([`satellite_and_lte`], `mpt-lab run realworld`'s fifth scenario), and what light traffic
//! meets across the satellite's handovers ([`light_across_handovers`], the e2e test's
//! measurement): a 100/s ping marked EF over each link alone, then through mptd (`adaptive`,
//! nothing configured per path) idle, beside one BBR transfer and beside one cubic transfer.

use std::net::SocketAddr;

use anyhow::{Context, Result};

use super::pings::{PingStats, Pings};
use super::tcp::transfer;
use crate::harness::{tunnel_addr, Impair, Lab, LinkSpec, Side, TunnelOpts};

/// A path of `mbit` Mbit/s (`tbf`, both ways) and `ms` one-way delay, with `jitter_ms` of
/// jitter and `loss_pct` of random loss, both ways.
pub fn link(mbit: u64, ms: f64, jitter_ms: f64, loss_pct: f64) -> LinkSpec {
    let i = Impair {
        delay_ms: ms,
        jitter_ms,
        loss_pct,
        ..Impair::default()
    };
    LinkSpec {
        rate_bps: Some(mbit * 1_000_000),
        ab: i,
        ba: i,
    }
}

/// A satellite-like path: `mbit` Mbit/s, Starlink's handovers both ways (dark 50-300 ms every
/// 15 s, at 12, 27, 42 and 57 s of the minute; a one-way delay of 12-40 ms that steps by up to
/// ±20 ms), ±5 ms of jitter and 0.5 % random loss (`docs/results.md` cites the figures).
pub fn satellite(mbit: u64) -> LinkSpec {
    let mut p = link(mbit, 0.0, 5.0, 0.5);
    p.ab.handover = Some(crate::harness::emulator::Handover::starlink());
    p.ba.handover = p.ab.handover;
    p
}

/// The satellite (40 Mbit/s) beside LTE (20 Mbit/s at 30 ms ±5 ms, 0.1 % loss).
pub fn satellite_and_lte() -> Vec<LinkSpec> {
    vec![satellite(40), link(20, 30.0, 5.0, 0.1)]
}

/// What 100/s pings met ([`light_across_handovers`]).
#[derive(Debug, Clone, Copy)]
pub struct LightAcross {
    /// Each link alone, idle, all at once.
    pub alone: [PingStats; 2],
    /// Through the tunnel: idle, beside BBR, beside cubic.
    pub idle: PingStats,
    pub beside_bbr: PingStats,
    pub beside_cubic: PingStats,
    /// The transfers' Mbit/s.
    pub bbr_mbit: f64,
    pub cubic_mbit: f64,
}

impl LightAcross {
    /// The better link's own 99th percentile round trip (the lower), ms.
    pub fn better_p99_ms(&self) -> f64 {
        self.alone[0].p99_ms.min(self.alone[1].p99_ms)
    }
}

/// In a lab of [`satellite_and_lte`]: `secs` of pings over each link alone, then a tunnel
/// (`adaptive`, nothing configured) and `secs` of pings through it idle, beside a BBR
/// transfer and beside a cubic transfer. At 15 s between handovers, `secs` of 30 cross two.
pub fn light_across_handovers(secs: u64) -> Result<LightAcross> {
    let mut lab = Lab::new(&satellite_and_lte()).context("lab")?;
    let alone: Vec<PingStats> = (0..2)
        .map(|i| Pings::start(&lab, &lab.path_addr(Side::B, i), secs))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .map(Pings::finish)
        .collect::<Result<_>>()?;
    lab.start_tunnel(&TunnelOpts::default()).context("tunnel")?;
    let through = tunnel_addr(Side::B);
    let idle = Pings::start(&lab, &through, secs)?.finish()?;
    let inner: SocketAddr = format!("{through}:5700").parse()?;
    let mut beside = Vec::new();
    for cc in ["bbr", "cubic"] {
        let pings = Pings::start(&lab, &through, secs)?;
        let got = transfer(&lab, &[inner], false, cc, secs)?[0];
        beside.push((pings.finish()?, got));
    }
    Ok(LightAcross {
        alone: [alone[0], alone[1]],
        idle,
        beside_bbr: beside[0].0,
        beside_cubic: beside[1].0,
        bbr_mbit: beside[0].1,
        cubic_mbit: beside[1].1,
    })
}
