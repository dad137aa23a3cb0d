//! Pings beside a transfer (`mpt-lab run realworld`, the scenarios that ask for them): 100 a
//! second from A, marked EF (TOS 184: light traffic, which mptd's built-in class sends the
//! fastest way), over a link alone or through the tunnel; what they lost and their round
//! trips' 99th percentile and most.

use std::fmt;
use std::process::{Child, Stdio};

use anyhow::{Context, Result};

use crate::harness::{Lab, Side};

/// Pings running in A's namespace until they are all sent and answered or given up.
pub(crate) struct Pings {
    child: Child,
    count: u64,
}

impl Pings {
    /// `secs` seconds of pings to `addr`, 10 ms apart, each given up after a second.
    pub(crate) fn start(lab: &Lab, addr: &str, secs: u64) -> Result<Pings> {
        let count = secs * 100;
        let child = lab
            .cmd(Side::A, "ping")
            .args(["-n", "-i", "0.01", "-W", "1", "-Q", "184"])
            .args(["-c", &count.to_string(), addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start ping")?;
        Ok(Pings { child, count })
    }

    /// Wait for them; what they met.
    pub(crate) fn finish(self) -> Result<PingStats> {
        let out = self.child.wait_with_output()?;
        Ok(PingStats::read(
            &String::from_utf8_lossy(&out.stdout),
            self.count,
        ))
    }
}

/// What a ping stream met.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PingStats {
    pub sent: u64,
    pub answered: u64,
    /// Round trips, ms (`NaN` when nothing was answered).
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl PingStats {
    /// From ping's output, `sent` pings sent (each answer counted once: a duplicate is not).
    pub fn read(text: &str, sent: u64) -> PingStats {
        let mut rtts: Vec<f64> = text
            .lines()
            .filter(|l| !l.contains("DUP!"))
            .filter_map(|l| l.split("time=").nth(1)?.split_whitespace().next())
            .filter_map(|v| v.parse().ok())
            .collect();
        rtts.sort_by(f64::total_cmp);
        let p99 = match rtts.len() {
            0 => f64::NAN,
            n => rtts[(n * 99 / 100).min(n - 1)],
        };
        PingStats {
            sent,
            answered: (rtts.len() as u64).min(sent),
            p99_ms: p99,
            max_ms: rtts.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// Lost, % of those sent.
    pub fn loss_pct(&self) -> f64 {
        100.0 * self.sent.saturating_sub(self.answered) as f64 / self.sent.max(1) as f64
    }

    /// The mean of several runs' figures, each figure on its own.
    pub fn mean(runs: &[PingStats]) -> PingStats {
        let n = runs.len().max(1) as f64;
        let avg = |f: fn(&PingStats) -> f64| runs.iter().map(f).sum::<f64>() / n;
        PingStats {
            sent: runs.iter().map(|r| r.sent).sum(),
            answered: runs.iter().map(|r| r.answered).sum(),
            p99_ms: avg(|r| r.p99_ms),
            max_ms: avg(|r| r.max_ms),
        }
    }
}

/// `lost % / p99 / max` (ms).
impl fmt::Display for PingStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.2} % / {:.0} / {:.0}",
            self.loss_pct(),
            self.p99_ms,
            self.max_ms
        )
    }
}

/// One scenario's pings over its runs: each link alone and idle, through mptd idle, and beside
/// mptd's transfers (in the order of the realworld table's congestion controls).
#[derive(Debug, Default)]
pub(crate) struct PingRuns {
    /// Per link, per run.
    pub alone: Vec<Vec<PingStats>>,
    pub idle: Vec<PingStats>,
    pub beside: [Vec<PingStats>; 2],
}

impl PingRuns {
    /// Each link alone at once, idle, for `secs`: recorded, and returned for the log.
    pub(crate) fn links_alone(&mut self, lab: &Lab, secs: u64) -> Result<Vec<PingStats>> {
        let n = lab.paths.len();
        let pings = (0..n)
            .map(|i| Pings::start(lab, &lab.path_addr(Side::B, i), secs))
            .collect::<Result<Vec<_>>>()?;
        let got = pings
            .into_iter()
            .map(Pings::finish)
            .collect::<Result<Vec<_>>>()?;
        self.alone.resize(n, Vec::new());
        for (runs, s) in self.alone.iter_mut().zip(&got) {
            runs.push(*s);
        }
        Ok(got)
    }

    /// The table the realworld report adds for the scenarios with pings.
    pub(crate) fn header(secs: u64) -> String {
        format!(
            "\nPings beside the transfers (the scenarios that have them): {} pings, 100 a \
             second from A, marked EF (light traffic), mean of the runs: lost % / p99 / max \
             round trip (ms). *each link alone*: to B's address on that link, no tunnel, idle, \
             all links at once. *mptd idle*: through the tunnel with nothing else. *beside \
             mptd BBR / cubic*: through the tunnel during that transfer.\n\n\
             | # | scenario | each link alone, idle | mptd idle | beside mptd BBR | beside mptd cubic |\n\
             |---|---|---|---|---|---|",
            secs * 100
        )
    }

    /// This scenario's row.
    pub(crate) fn row(&self, id: u32, name: &str) -> String {
        let alone: Vec<String> = self
            .alone
            .iter()
            .enumerate()
            .map(|(i, runs)| format!("p{i}: {}", PingStats::mean(runs)))
            .collect();
        format!(
            "\n| {id} | {name} | {} | {} | {} | {} |",
            alone.join("; "),
            PingStats::mean(&self.idle),
            PingStats::mean(&self.beside[0]),
            PingStats::mean(&self.beside[1]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_once_and_the_99th_percentile_read() {
        let mut text = String::from("PING 198.18.0.2 (198.18.0.2) 56(84) bytes of data.\n");
        for k in 1..=98 {
            text += &format!("64 bytes from 198.18.0.2: icmp_seq={k} ttl=64 time={k}.4 ms\n");
        }
        text += "64 bytes from 198.18.0.2: icmp_seq=98 ttl=64 time=99.0 ms (DUP!)\n";
        let s = PingStats::read(&text, 100);
        assert_eq!((s.sent, s.answered), (100, 98));
        assert!((s.loss_pct() - 2.0).abs() < 1e-9);
        assert_eq!((s.p99_ms, s.max_ms), (98.4, 98.4));
        assert_eq!(s.to_string(), "2.00 % / 98 / 98");
    }
}
