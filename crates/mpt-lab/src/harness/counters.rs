//! What a run counted, for reports: the kernel's UDP counters in a namespace, and a daemon's
//! drop reasons.

use anyhow::{Context, Result};

use super::*;

impl Lab {
    /// What `side`'s `tbf` on path `i` counted so far: (bytes sent, packets dropped, backlog
    /// in bytes).
    pub fn tbf(&self, side: Side, i: usize) -> Result<(u64, u64, u64)> {
        let out = self.sh(side, &format!("tc -s qdisc show dev {}", Lab::link(i)))?;
        Ok(tbf_counts(&String::from_utf8_lossy(&out.stdout)))
    }

    /// The kernel's UDP counters in `side`'s namespace (`/proc/net/snmp`), by name.
    pub fn kernel_udp(&self, side: Side) -> Result<Vec<(String, u64)>> {
        let out = self.sh(side, "cat /proc/net/snmp")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (
            udp.next().context("no Udp counters")?,
            udp.next().context("no Udp values")?,
        );
        Ok(names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
            .map(|(n, v)| (n.to_owned(), v.parse().unwrap_or(0)))
            .collect())
    }
}

/// The drop reasons counted at least once, with their counts, for a report ("none" when
/// none was).
pub fn nonzero_drops(d: &mpt_tunnel::DropCounts) -> String {
    let counted: Vec<String> = mpt_tunnel::DropReason::ALL
        .iter()
        .filter(|&&r| d.get(r) > 0)
        .map(|&r| format!("{} {}", r.name(), d.get(r)))
        .collect();
    if counted.is_empty() {
        "none".into()
    } else {
        counted.join(", ")
    }
}

/// `tc -s qdisc` of a link: (bytes sent, packets dropped so far, backlog in bytes).
pub fn tbf_counts(tc: &str) -> (u64, u64, u64) {
    let after = |key: &str| -> u64 {
        tc.split(key)
            .nth(1)
            .and_then(|r| {
                r.trim_start()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or(0)
    };
    (after("Sent"), after("dropped"), after("backlog"))
}
