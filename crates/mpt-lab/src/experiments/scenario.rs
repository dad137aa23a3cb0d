//! Experiment descriptions (`scenarios/*.toml`) and the runners that reproduce the MPT
//! paper's Table I (FTP aggregation) and Table II (UDP stream), plus the delay-diversity case.
//!
//! Every runner prints a markdown table with the paper's figure and ours side by side, and
//! writes the raw results as CSV and the time series as CSV + PNG (gnuplot) under the output
//! directory.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::harness::{Impair, LinkSpec};

/// A set of cases (one TOML file).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub title: String,
    /// UDP cases: seconds per run.
    #[serde(default)]
    pub duration_s: Option<u64>,
    /// UDP cases: datagram payload bytes (default [`IPERF_DATAGRAM`]).
    #[serde(default)]
    pub datagram: Option<usize>,
    #[serde(default)]
    pub reorder_window: Option<usize>,
    #[serde(default)]
    pub reorder_timeout_ms: Option<u64>,
    /// Model the rates as serial links in the emulator instead of `tbf` (see
    /// [`crate::harness::emulator`]): needed where a lone small packet must take its serialisation
    /// time, as on the paper's 64–128 kbit/s lines.
    #[serde(default)]
    pub serial: bool,
    /// `[connection] bundle` of the tunnel (`None`: the default, on).
    #[serde(default)]
    pub bundle: Option<bool>,
    /// `[connection] pace` of the tunnel under `rate` (`None`: the default, on).
    #[serde(default)]
    pub pace: Option<bool>,
    /// UDP cases: the tunnel MTU (`tunnel.mtu`; `None`: the daemon's default).
    #[serde(default)]
    pub mtu: Option<u16>,
    pub case: Vec<Case>,
}

/// iperf's default UDP datagram payload, bytes: what the MPT paper's streams used.
pub const IPERF_DATAGRAM: usize = 1470;

impl Suite {
    /// The datagram payload of UDP case `c`: its own, the suite's, or iperf's default.
    pub fn datagram_of(&self, c: &Case) -> usize {
        c.datagram.or(self.datagram).unwrap_or(IPERF_DATAGRAM)
    }
}

/// One experiment: the paths and the traffic.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: u32,
    /// Per path, both directions: `"2mbit"`, `"128kbit"`.
    pub rates: Vec<String>,
    /// Per path, one way, both directions.
    #[serde(default)]
    pub delay_ms: Vec<f64>,
    #[serde(default)]
    pub jitter_ms: Vec<f64>,
    #[serde(default)]
    pub loss_pct: Vec<f64>,
    /// FTP download of this many MiB.
    #[serde(default)]
    pub ftp_mb: Option<u64>,
    /// UDP stream of this many kbit/s.
    #[serde(default)]
    pub udp_kbit: Option<u64>,
    /// Datagram payload bytes for this case (default: the suite's).
    #[serde(default)]
    pub datagram: Option<usize>,
    /// A label shown instead of the id (e.g. "17b").
    #[serde(default)]
    pub label: Option<String>,
    /// The paper's figures for this case.
    #[serde(default)]
    pub paper: Option<toml::Table>,
}

impl Case {
    pub fn rates_bps(&self) -> Result<Vec<u64>> {
        self.rates
            .iter()
            .map(|r| {
                mptd::config::parse_rate(r)
                    .with_context(|| format!("case {}: bad rate {r:?}", self.id))
            })
            .collect()
    }

    /// The lab's paths; with `serial`, the rates are the emulator's serial links.
    pub fn paths(&self, serial: bool) -> Result<Vec<LinkSpec>> {
        let rates = self.rates_bps()?;
        Ok(rates
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let imp = Impair {
                    delay_ms: self.delay_ms.get(i).copied().unwrap_or(0.0),
                    jitter_ms: self.jitter_ms.get(i).copied().unwrap_or(0.0),
                    loss_pct: self.loss_pct.get(i).copied().unwrap_or(0.0),
                    rate_bps: serial.then_some(r),
                    queue_ms: 0.0,
                    handover: None,
                };
                LinkSpec {
                    rate_bps: (!serial).then_some(r),
                    ab: imp,
                    ba: imp,
                }
            })
            .collect())
    }

    pub(crate) fn paper_f64(&self, key: &str) -> Option<f64> {
        let v = self.paper.as_ref()?.get(key)?;
        v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
    }

    pub(crate) fn paper_str(&self, key: &str) -> String {
        match self.paper.as_ref().and_then(|p| p.get(key)) {
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "—".into(),
        }
    }

    /// The case's label, or its id.
    pub fn name(&self) -> String {
        self.label.clone().unwrap_or_else(|| self.id.to_string())
    }

    pub(crate) fn rates_label(&self) -> String {
        self.rates.join("/")
    }
}

/// The suites shipped in `scenarios/`.
pub fn builtin(name: &str) -> Result<Suite> {
    let text = match name {
        "table1" => include_str!("../../scenarios/table1.toml"),
        "table2" => include_str!("../../scenarios/table2.toml"),
        "delay" => include_str!("../../scenarios/delay.toml"),
        other => {
            let p = Path::new(other);
            if p.is_file() {
                return load(p);
            }
            bail!("unknown suite {other:?}: expected table1, table2, delay or a scenario file")
        }
    };
    toml::from_str(text).with_context(|| format!("built-in suite {name}"))
}

/// Read a suite from a file.
pub fn load(path: &Path) -> Result<Suite> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("{}", path.display()))
}
