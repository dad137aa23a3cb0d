//! Counting what arrives: the nftables counter of UDP datagrams at B, what the iperf3 client
//! sent, and the loss between them.

use anyhow::{bail, Context, Result};

use crate::harness::{Lab, Side};

/// Counts the UDP datagrams that reach B for a stream's ports: an nftables counter in B's
/// namespace. iperf3's server stops counting when the client's end-of-test message comes, and
/// through the tunnel that message (light traffic, which never waits behind bulk) overtakes
/// the stream's last datagrams while a slow line still carries them: they arrived, one or two
/// at 128 kbit/s, but the server had them lost (0.46-0.92 % in Table II rows that lost nothing).
/// Without a tunnel the message queues behind them on the line.
#[derive(Debug)]
pub struct Arrivals;

/// The nftables table of [`Arrivals`].
const ARRIVALS_TABLE: &str = "inet mptlab_arrivals";

impl Arrivals {
    /// Count from now on the datagrams B receives for UDP ports `first..=last`.
    pub fn start(lab: &Lab, first: u16, last: u16) -> Result<Arrivals> {
        lab.sh(
            Side::B,
            &format!(
                "nft add table {ARRIVALS_TABLE}
                 nft flush table {ARRIVALS_TABLE}
                 nft add chain {ARRIVALS_TABLE} input '{{ type filter hook input priority 0; }}'
                 nft add rule {ARRIVALS_TABLE} input udp dport {first}-{last} counter"
            ),
        )
        .context("counting the stream's datagrams at B (nft)")?;
        Ok(Arrivals)
    }

    /// The datagrams of `payload` bytes each counted, after a second for what the lines
    /// still carry (a 300 ms queue at the most, and the one-way delay); the counter is
    /// removed. The counter sees packets as the stack takes them in: mptd writes datagrams
    /// that leave the resequencer together as one (UDP GRO), so datagrams are counted from
    /// the bytes, each packet's IPv4 and UDP headers taken out.
    pub fn count(self, lab: &Lab, payload: usize) -> Result<u64> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let out = lab.sh(Side::B, &format!("nft list chain {ARRIVALS_TABLE} input"))?;
        let _ = lab.sh(Side::B, &format!("nft delete table {ARRIVALS_TABLE}"));
        let text = String::from_utf8_lossy(&out.stdout);
        let words: Vec<&str> = text.split_whitespace().collect();
        let after = |key: &str| -> Option<u64> {
            words
                .windows(2)
                .find(|w| w[0] == key)
                .and_then(|w| w[1].parse().ok())
        };
        let (Some(packets), Some(bytes)) = (after("packets"), after("bytes")) else {
            bail!("no packet and byte counts in nft's output: {text}");
        };
        let headers = mpt_core::wire::UDP4_HEADERS as u64;
        Ok(bytes.saturating_sub(packets * headers) / payload.max(1) as u64)
    }
}

/// Datagrams the iperf3 client sent, from its JSON. (The receiver's own count, and its
/// `lost_percent`, miss those lost at the end of the stream, and those that arrive after the
/// client's end-of-test message: see [`Arrivals`].)
pub fn udp_sent(v: &serde_json::Value) -> u64 {
    let end = &v["end"];
    end["sum_sent"]["packets"]
        .as_u64()
        .or_else(|| end["sum"]["packets"].as_u64())
        .unwrap_or(0)
}

/// The share of `sent` datagrams that did not arrive, in %.
pub fn loss_pct(sent: u64, received: u64) -> f64 {
    if sent == 0 {
        return f64::NAN;
    }
    100.0 * sent.saturating_sub(received) as f64 / sent as f64
}
