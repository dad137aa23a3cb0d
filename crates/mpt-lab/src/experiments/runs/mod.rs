//! The building blocks of the experiments: sampling the daemons' status, the paths alone,
//! an FTP download and a UDP stream through the tunnel, with an optional trace.
//!
//! This module keeps the paths alone and the FTP download; `sampling` holds the status
//! sampler and the `MPT_LAB_TRACE` trace, `arrivals` the datagram counts, and `udp` the UDP
//! stream runs (plain and through the tunnel).

mod arrivals;
mod sampling;
mod udp;

pub use arrivals::*;
pub(crate) use sampling::*;
pub(crate) use udp::*;

use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::harness::{iperf3_bps, Lab, Side};

/// iperf3 TCP on every path alone, all at once; goodput per path in bit/s.
pub(crate) fn paths_alone(lab: &mut Lab, secs: u64) -> Result<Vec<f64>> {
    let targets: Vec<(String, u16)> = (0..lab.paths.len())
        .map(|i| (lab.path_addr(Side::B, i), 5300 + i as u16))
        .collect();
    Ok(lab
        .iperf3_many(Side::A, &targets, &["-t", &secs.to_string()])?
        .iter()
        .map(iperf3_bps)
        .collect())
}

pub(crate) fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or("—".into(), |x| format!("{x:.digits$}"))
}

/// A download through the tunnel, and both daemons' status while it ran.
pub(crate) struct Download {
    pub(crate) seconds: f64,
    pub(crate) bytes: f64,
    /// The sender's (B's) status every 500 ms: what it put on each path.
    pub(crate) sent: Samples,
    /// The receiver's (A's) status every 500 ms: what arrived.
    pub(crate) arrived: Samples,
}

/// Serve `mb` MiB from B over the tunnel and download it on A with curl, sampling both
/// daemons' status every 500 ms.
pub(crate) fn ftp_download(lab: &mut Lab, mb: u64) -> Result<Download> {
    let ftp = lab.ftp_server(Side::B, mb * 1024 * 1024)?;
    let every = Duration::from_millis(500);
    let sampler = Sampler::start(lab.control_socket(Side::B), every);
    let receiver = Sampler::start(lab.control_socket(Side::A), every);
    let o = lab
        .cmd(Side::A, "curl")
        .args([
            "-sS",
            "--max-time",
            "300",
            "-o",
            "/dev/null",
            "-w",
            "%{time_total} %{size_download}",
        ])
        .arg(format!("{}/random.bin", ftp.url))
        .output()?;
    let sent = sampler.finish();
    let arrived = receiver.finish();
    lab.reap(ftp.pid);
    if !o.status.success() {
        bail!("download failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let mut it = text.split_whitespace();
    let time: f64 = it
        .next()
        .and_then(|v| v.parse().ok())
        .context("curl time")?;
    let size: f64 = it
        .next()
        .and_then(|v| v.parse().ok())
        .context("curl size")?;
    Ok(Download {
        seconds: time,
        bytes: size,
        sent,
        arrived,
    })
}
