//! The emulated lab's paths: starting the userspace link emulator in the emulator namespace,
//! routing every path through it, and its per-path outage flags.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::*;

impl Lab {
    /// Start the link emulator in the emulator namespace and route every path through it:
    /// what arrives from a on `a<i>` goes into the TUN device `e<i>ab`, the emulator holds or
    /// drops it and writes it back, and the kernel forwards it to b on `b<i>` (and the other
    /// way through `e<i>ba`).
    pub(crate) fn start_emulator(&mut self) -> Result<()> {
        let r = self.ns_r();
        let links: Vec<crate::harness::emulator::Link> = self
            .paths
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                [
                    crate::harness::emulator::Link {
                        device: format!("e{i}ab"),
                        impair: p.ab,
                        seed: 2 * i as u64 + 1,
                        outage_flag: Some(self.outage_flag(i)),
                        late_file: Some(self.late_file(&format!("e{i}ab"))),
                        path_seed: i as u64 + 1,
                    },
                    crate::harness::emulator::Link {
                        device: format!("e{i}ba"),
                        impair: p.ba,
                        seed: 2 * i as u64 + 2,
                        outage_flag: Some(self.outage_flag(i)),
                        late_file: Some(self.late_file(&format!("e{i}ba"))),
                        path_seed: i as u64 + 1,
                    },
                ]
            })
            .collect();
        let spec = serde_json::to_string(&links)?;
        let bin = sibling_bin("mpt-lab")?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &r])
            .arg(&bin)
            .args(["emulate", &spec]);
        let pid = self.spawn(Side::A, "emulator", &mut cmd)?;
        let t0 = Instant::now();
        let last = format!("e{}ba", self.paths.len() - 1);
        while run(Command::new("ip").args(["-n", &r, "link", "show", &last])).is_err() {
            if self.exited(pid) || t0.elapsed() > Duration::from_secs(10) {
                bail!("the emulator did not start:\n{}", self.log("emulator"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut s = String::new();
        for i in 0..self.paths.len() {
            for (from, dev, table) in [
                (format!("a{i}"), format!("e{i}ab"), 100 + i),
                (format!("b{i}"), format!("e{i}ba"), 200 + i),
            ] {
                writeln!(
                    s,
                    "ip netns exec {r} sysctl -qw net.ipv4.conf.{dev}.rp_filter=0"
                )?;
                writeln!(s, "ip -n {r} link set {dev} up")?;
                writeln!(s, "ip -n {r} route add default dev {dev} table {table}")?;
                writeln!(s, "ip -n {r} rule add iif {from} table {table}")?;
            }
        }
        sh(&s)?;
        Ok(())
    }

    fn late_file(&self, device: &str) -> PathBuf {
        self.dir.join(format!("late-{device}"))
    }

    /// What the emulator's links counted of their own lateness so far, summed over every
    /// direction of every path: packets the machine held past their time, and so may have
    /// handed on after packets sent later on another path, and packets its devices dropped
    /// before it read them. All zero in a lab without the emulator.
    pub fn wire_lateness(&self) -> crate::harness::emulator::Lateness {
        let mut all = crate::harness::emulator::Lateness::default();
        if !self.emulated {
            return all;
        }
        all.queue_dropped = self.emulator_queue_drops();
        for i in 0..self.paths.len() {
            for d in ["ab", "ba"] {
                let l =
                    crate::harness::emulator::Lateness::read(&self.late_file(&format!("e{i}{d}")));
                all.late += l.late;
                all.stalled += l.stalled;
            }
        }
        all
    }

    /// Packets dropped so far in the emulator's devices' queues (the kernel counts a packet
    /// routed into a TUN device whose reader lags as a transmit drop). 0 if `ip` fails.
    fn emulator_queue_drops(&self) -> u64 {
        let Ok(out) = run(Command::new("ip").args(["-j", "-s", "-n", &self.ns_r(), "link"])) else {
            return 0;
        };
        let links: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        links
            .iter()
            .filter(|l| l["ifname"].as_str().is_some_and(|n| n.starts_with('e')))
            .filter_map(|l| l["stats64"]["tx"]["dropped"].as_u64())
            .sum()
    }

    pub(crate) fn outage_flag(&self, i: usize) -> PathBuf {
        self.dir.join(format!("outage-{i}"))
    }

    /// Make path `i` drop everything in both directions (`on`), or carry traffic again.
    /// Only in an emulated lab.
    pub fn set_outage(&self, i: usize, on: bool) -> Result<()> {
        if !self.emulated {
            bail!("outages need the emulator (a lab with impairments)");
        }
        if on {
            std::fs::write(self.outage_flag(i), b"")?;
        } else {
            let _ = std::fs::remove_file(self.outage_flag(i));
        }
        Ok(())
    }
}
