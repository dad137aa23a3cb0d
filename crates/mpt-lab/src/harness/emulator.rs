//! A userspace link emulator: serialisation rate, propagation delay, jitter and random loss
//! per direction, and satellite handovers ([`Handover`]).
//!
//! This kernel has no `netem`, so the lab routes each path direction through a TUN device in
//! a middle namespace; this program reads every packet from it, drops it with the configured
//! probability, holds it until it would have left a serial link of the given rate (FIFO, tail
//! drop beyond `queue_ms` of backlog) plus `delay ± jitter` (never before the packet ahead of
//! it: a link does not reorder), and writes it back for the kernel to forward.
//!
//! `tbf` at the sender is the other way to set a rate; it lets a burst of at least 3000 bytes
//! through at line rate, so at 64–128 kbit/s it does not delay a lone small packet at all. A
//! serial link does: use the emulator's `rate_bps` to model one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mpt_core::rng::Rng;
use serde::{Deserialize, Serialize};

/// Impairments of one direction of a path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Impair {
    /// One-way propagation delay, milliseconds.
    pub delay_ms: f64,
    /// Each packet's delay varies uniformly within ± this, milliseconds.
    pub jitter_ms: f64,
    /// Packets dropped at random, percent.
    pub loss_pct: f64,
    /// Serial-link rate, bits per second, counting each IP packet plus 14 bytes of framing
    /// (as `tbf` counts an Ethernet frame); `None` = no rate limit here.
    pub rate_bps: Option<u64>,
    /// Most backlog the serial link queues before it drops, milliseconds (0 = 300 ms).
    pub queue_ms: f64,
    /// The link changes satellite now and then: dark for a moment, and its delay steps (then
    /// `delay_ms` is not used). Both directions of a path hand over together.
    pub handover: Option<Handover>,
}

/// A satellite link's handovers ([`mpt_core::handover`]), in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handover {
    /// Time between handovers.
    pub period_ms: f64,
    /// Handovers come at this time after each whole multiple of the period on the wall clock
    /// (Starlink's: 12 s after every 15, at 12, 27, 42 and 57 s of each minute).
    pub phase_ms: f64,
    /// Each handover's dark time is uniform in this range: everything sent then is lost.
    pub dark_ms: (f64, f64),
    /// At each handover the one-way delay steps by up to this much, up or down...
    pub step_ms: f64,
    /// ...within this range.
    pub delay_ms: (f64, f64),
}

impl Handover {
    /// Starlink's ([`mpt_core::handover::HandoverSpec::STARLINK`]).
    pub fn starlink() -> Handover {
        let s = mpt_core::handover::HandoverSpec::STARLINK;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Handover {
            period_ms: ms(s.period),
            phase_ms: ms(s.first),
            dark_ms: (ms(s.dark.0), ms(s.dark.1)),
            step_ms: ms(s.step),
            delay_ms: (ms(s.delay.0), ms(s.delay.1)),
        }
    }

    /// The model, for a link whose start is `unix` on the wall clock: its first handover
    /// comes at the next time the phase says.
    fn spec(&self, unix: Duration) -> mpt_core::handover::HandoverSpec {
        let d = |ms: f64| Duration::from_secs_f64(ms.max(0.0) / 1000.0);
        let period = self.period_ms.max(1.0);
        let since = (unix.as_secs_f64() * 1000.0) % period;
        let first = (self.phase_ms - since).rem_euclid(period);
        mpt_core::handover::HandoverSpec {
            period: d(period),
            first: d(first),
            dark: (d(self.dark_ms.0), d(self.dark_ms.1)),
            step: d(self.step_ms),
            delay: (d(self.delay_ms.0), d(self.delay_ms.1)),
        }
    }
}

/// Framing bytes the serial-link model adds to each IP packet.
pub const FRAMING: usize = 14;

/// One emulated direction: a TUN device and what to do to its packets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Link {
    pub device: String,
    pub impair: Impair,
    pub seed: u64,
    /// While this file exists, the link drops everything (an outage the lab can switch).
    #[serde(default)]
    pub outage_flag: Option<std::path::PathBuf>,
    /// Where the link keeps its [`Lateness`], rewritten every [`LATE_EVERY`] while it changes.
    #[serde(default)]
    pub late_file: Option<std::path::PathBuf>,
    /// The seed of the link's handovers: the same for both directions of a path.
    #[serde(default)]
    pub path_seed: u64,
}

/// A packet written this much after its time or more is *late*: the machine, not the link,
/// held it. Links on other threads may then hand on packets sent after it first, which a link
/// never does. On this 2-core machine a few packets in a thousand are (the emulator's threads
/// wait for a core).
pub const LATE: Duration = Duration::from_millis(2);

/// A packet written this much after its time or more was held by a *stall* of the machine:
/// as long as 100 packets a second are apart, enough to put a stream out of order.
pub const STALL: Duration = Duration::from_millis(10);

/// How often a link's late file is brought up to date.
pub const LATE_EVERY: Duration = Duration::from_millis(100);

/// What one direction's writer counted of its own timeliness since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lateness {
    /// Packets written [`LATE`] or more after their time.
    pub late: u64,
    /// Of those, packets written [`STALL`] or more after it.
    pub stalled: u64,
    /// Packets the kernel dropped for a full TUN device queue before the emulator read them:
    /// the machine held the emulator too long, and the path lost what no link dropped. Not in
    /// the late file; [`Lab::wire_lateness`](crate::harness::Lab::wire_lateness) reads it from
    /// the devices' counters.
    pub queue_dropped: u64,
}

impl Lateness {
    /// Read a late file: `late stalled`. A missing file reads as nothing late.
    pub fn read(path: &std::path::Path) -> Lateness {
        let s = std::fs::read_to_string(path).unwrap_or_default();
        let v: Vec<u64> = s
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        match v[..] {
            [late, stalled] => Lateness {
                late,
                stalled,
                queue_dropped: 0,
            },
            _ => Lateness::default(),
        }
    }

    /// The packets late between `before` and this reading.
    pub fn since(self, before: Lateness) -> Lateness {
        Lateness {
            late: self.late.saturating_sub(before.late),
            stalled: self.stalled.saturating_sub(before.stalled),
            queue_dropped: self.queue_dropped.saturating_sub(before.queue_dropped),
        }
    }
}

#[derive(Default)]
struct LateCounts {
    late: AtomicU64,
    stalled: AtomicU64,
}

/// Create the devices and forward through them until killed.
#[allow(clippy::disallowed_methods)] // the emulator works on the wall clock
pub fn run(links: &[Link]) -> Result<()> {
    let mut threads = Vec::new();
    // every link's handovers count from this moment
    let start = (
        Instant::now(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default(),
    );
    for link in links {
        let dev = tun_rs::DeviceBuilder::new()
            .name(&link.device)
            .mtu(9000)
            .packet_information(false)
            .build_sync()
            .with_context(|| format!("creating TUN device {}", link.device))?;
        let dev = Arc::new(dev);
        let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
        let down = Arc::new(AtomicBool::new(false));
        if let Some(flag) = link.outage_flag.clone() {
            let down = down.clone();
            std::thread::spawn(move || loop {
                down.store(flag.exists(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            });
        }
        let reader = {
            let dev = dev.clone();
            let link = link.clone();
            std::thread::spawn(move || read_loop(&dev, &link, &down, start, tx))
        };
        let counts = Arc::new(LateCounts::default());
        if let Some(file) = link.late_file.clone() {
            let counts = counts.clone();
            std::thread::spawn(move || report_late(&file, &counts));
        }
        let writer = std::thread::spawn(move || write_loop(&dev, rx, &counts));
        threads.push(reader);
        threads.push(writer);
    }
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("an emulator thread panicked"))??;
    }
    Ok(())
}

#[allow(clippy::disallowed_methods)] // the emulator works on the wall clock
fn read_loop(
    dev: &tun_rs::SyncDevice,
    link: &Link,
    down: &AtomicBool,
    (start, unix): (Instant, Duration),
    tx: mpsc::Sender<(Instant, Vec<u8>)>,
) -> Result<()> {
    // the state (not a seed) the emulator always started from: the same draws as before
    let mut rng = Rng::from_state(link.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut buf = vec![0u8; 65536];
    let mut last = Instant::now();
    // When the serial link finishes sending what it has queued.
    let mut tx_end = Instant::now();
    let imp = link.impair;
    let queue_ms = if imp.queue_ms > 0.0 {
        imp.queue_ms
    } else {
        300.0
    };
    let queue = Duration::from_secs_f64(queue_ms / 1000.0);
    let mut handovers = imp
        .handover
        .map(|h| mpt_core::handover::Handovers::new(h.spec(unix), link.path_seed));
    loop {
        let n = dev
            .recv(&mut buf)
            .with_context(|| format!("reading {}", link.device))?;
        let now = Instant::now();
        if down.load(Ordering::Relaxed) || (imp.loss_pct > 0.0 && rng.unit() * 100.0 < imp.loss_pct)
        {
            continue;
        }
        let mut sent = now;
        if let Some(rate) = imp.rate_bps {
            let start = tx_end.max(now);
            if start - now > queue {
                continue; // tail drop: the queue is full
            }
            let bits = (n + FRAMING) as u64 * 8;
            tx_end = start + Duration::from_nanos(bits * 1_000_000_000 / rate.max(1));
            sent = tx_end;
        }
        let jitter = if imp.jitter_ms > 0.0 {
            (rng.unit() * 2.0 - 1.0) * imp.jitter_ms
        } else {
            0.0
        };
        // a satellite link: lost while dark, else its delay now
        let base_ms = match &mut handovers {
            Some(h) => match h.at(sent.saturating_duration_since(start)) {
                Some(d) => d.as_secs_f64() * 1000.0,
                None => continue,
            },
            None => imp.delay_ms,
        };
        let delay = Duration::from_secs_f64(((base_ms + jitter).max(0.0)) / 1000.0);
        let release = (sent + delay).max(last);
        last = release;
        if tx.send((release, buf[..n].to_vec())).is_err() {
            return Ok(());
        }
    }
}

#[allow(clippy::disallowed_methods)]
fn write_loop(
    dev: &tun_rs::SyncDevice,
    rx: mpsc::Receiver<(Instant, Vec<u8>)>,
    counts: &LateCounts,
) -> Result<()> {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    loop {
        if queue.is_empty() {
            match rx.recv() {
                Ok(p) => queue.push_back(p),
                Err(_) => return Ok(()),
            }
        }
        while let Ok(p) = rx.try_recv() {
            queue.push_back(p);
        }
        let Some(release) = queue.front().map(|(t, _)| *t) else {
            continue;
        };
        let now = Instant::now();
        if release > now {
            // Sleep until the head is due, but wake for new packets only through the channel
            // timeout so that the queue keeps its order.
            match rx.recv_timeout(release - now) {
                Ok(p) => {
                    queue.push_back(p);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
        let now = Instant::now();
        while queue.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((due, p)) = queue.pop_front() {
                let late = now - due;
                if late >= LATE {
                    counts.late.fetch_add(1, Ordering::Relaxed);
                    if late >= STALL {
                        counts.stalled.fetch_add(1, Ordering::Relaxed);
                    }
                }
                // A full device queue or a vanished route only loses this packet.
                let _ = dev.send(&p);
            }
        }
    }
}

/// Keep `file` up to date with the writer's counts (written whole, then renamed into place,
/// so that a reader never sees half of it).
fn report_late(file: &std::path::Path, counts: &LateCounts) {
    let tmp = file.with_extension("tmp");
    let mut shown = None;
    loop {
        let now = [&counts.late, &counts.stalled].map(|c| c.load(Ordering::Relaxed));
        if shown != Some(now)
            && std::fs::write(&tmp, format!("{} {}\n", now[0], now[1])).is_ok()
            && std::fs::rename(&tmp, file).is_ok()
        {
            shown = Some(now);
        }
        std::thread::sleep(LATE_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starlink_handovers_fall_at_12_27_42_and_57_s_of_the_wall_clock_minute() {
        let h = Handover::starlink();
        for (unix_s, first_s) in [
            (60.0, 12.0),
            (100.0, 2.0),
            (73.0, 14.0),
            (132.5, 14.5),
            (129.0, 3.0),
        ] {
            let spec = h.spec(Duration::from_secs_f64(unix_s));
            assert!(
                (spec.first.as_secs_f64() - first_s).abs() < 1e-6,
                "a link started at {unix_s} s hands over first {:?} later",
                spec.first
            );
            assert_eq!(spec.period, Duration::from_secs(15));
        }
    }
}
