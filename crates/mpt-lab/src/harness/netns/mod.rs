//! The lab's topology: two namespaces (`a` and `b`) joined by N paths, each shaped with `tbf`
//! at the sending side in both directions; the tunnel uses `198.19.0.1`/`.2` and
//! `2001:db8:19::1`/`::2`.
//!
//! * Without impairments a path is one veth pair: `198.18.(i+1).1` (a) — `198.18.(i+1).2` (b).
//! * When any path has a delay, jitter or loss, every path goes through a third namespace `r`
//!   that routes it through the userspace link emulator ([`super::emulator`]):
//!   `198.18.(i+1).1` (a) — r — `198.18.(101+i).2` (b).
//!
//! Everything the lab creates — the namespaces (and with them their links) and every process
//! it started — is removed when the [`Lab`] is dropped, also when a test fails. Processes are
//! stopped by their own pid only.

mod cleanup;
mod emulated;
mod shaping;

pub use cleanup::*;
pub use shaping::*;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};

use super::*;

/// Labs made by this process so far: part of each lab's unique tag.
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Which end of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn octet(self) -> u8 {
        match self {
            Side::A => 1,
            Side::B => 2,
        }
    }

    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Tunnel address of a side.
pub fn tunnel_addr(side: Side) -> String {
    format!("198.19.0.{}", side.octet())
}

/// Address of a side on path `i` (0-based) in a lab without impairments.
pub fn path_addr(side: Side, i: usize) -> String {
    format!("198.18.{}.{}", i + 1, side.octet())
}

/// Address of a side on path `i` in an emulated lab (a and b sit on different subnets, with
/// the emulator's namespace routing between them).
pub(crate) fn emulated_path_addr(side: Side, i: usize) -> String {
    match side {
        Side::A => format!("198.18.{}.1", i + 1),
        Side::B => format!("198.18.{}.2", 101 + i),
    }
}

/// One shaped path.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Egress rate in both directions, bits per second; `None` = unshaped.
    pub rate_bps: Option<u64>,
    /// Impairments from a to b.
    pub ab: Impair,
    /// Impairments from b to a.
    pub ba: Impair,
}

impl LinkSpec {
    /// A path shaped to `rate_bps` both ways, with no other impairment.
    pub fn shaped(rate_bps: u64) -> LinkSpec {
        LinkSpec {
            rate_bps: Some(rate_bps),
            ab: Impair::default(),
            ba: Impair::default(),
        }
    }

    /// A bare veth path: no shaping, no impairment.
    pub fn unshaped() -> LinkSpec {
        LinkSpec {
            rate_bps: None,
            ab: Impair::default(),
            ba: Impair::default(),
        }
    }

    /// The path's rate from a to b: `tbf`'s, or the emulator's serial link's.
    pub fn rate(&self) -> Option<u64> {
        self.rate_bps.or(self.ab.rate_bps)
    }

    fn impaired(&self) -> bool {
        self.ab != Impair::default() || self.ba != Impair::default()
    }
}

pub use crate::harness::emulator::Impair;

/// A two-namespace lab. Dropping it tears everything down.
#[derive(Debug)]
pub struct Lab {
    pub tag: String,
    pub paths: Vec<LinkSpec>,
    pub dir: PathBuf,
    pub(crate) children: Vec<(String, Child)>,
    pub(crate) mptd: Vec<(Side, u32)>,
    /// Paths go through the emulator namespace.
    pub emulated: bool,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            terminate(c);
        }
        for ns in [self.ns(Side::A), self.ns(Side::B), self.ns_r(), self.ns_x()] {
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        }
        if std::env::var_os("MPT_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Lab {
    /// Build the namespaces, links, addresses and shaping.
    pub fn new(paths: &[LinkSpec]) -> Result<Lab> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{n}", tag_prefix());
        let dir = std::env::temp_dir().join(&tag);
        std::fs::create_dir_all(&dir)?;
        let emulated = paths.iter().any(LinkSpec::impaired);
        let mut lab = Lab {
            tag,
            paths: paths.to_vec(),
            dir,
            children: Vec::new(),
            mptd: Vec::new(),
            emulated,
        };
        // Dropping `lab` removes whatever part was built if building fails.
        lab.build()
            .with_context(|| format!("building lab {}", lab.tag))?;
        if emulated {
            lab.start_emulator()
                .with_context(|| format!("starting the link emulator of lab {}", lab.tag))?;
        }
        Ok(lab)
    }

    pub fn ns(&self, side: Side) -> String {
        match side {
            Side::A => format!("{}a", self.tag),
            Side::B => format!("{}b", self.tag),
        }
    }

    /// The emulator's namespace (only in an emulated lab).
    pub fn ns_r(&self) -> String {
        format!("{}r", self.tag)
    }

    /// Address of `side` on path `i`.
    pub fn path_addr(&self, side: Side, i: usize) -> String {
        if self.emulated {
            emulated_path_addr(side, i)
        } else {
            path_addr(side, i)
        }
    }

    /// Name of path `i`'s link inside either namespace.
    pub fn link(i: usize) -> String {
        format!("p{i}")
    }

    /// Re-shape path `i`'s link from A to `rate_bps` mid-run (`tc qdisc change`), its bucket
    /// kept at what `was_bps` had: a smaller one can wedge the queue ([`tbf_with_burst`]).
    pub fn reshape(&self, i: usize, rate_bps: u64, was_bps: u64) -> Result<()> {
        self.sh(
            Side::A,
            &format!(
                "tc qdisc change dev {} root {}",
                Lab::link(i),
                super::tbf_with_burst(rate_bps, super::tbf_burst(was_bps))
            ),
        )?;
        Ok(())
    }

    pub(crate) fn build(&self) -> Result<()> {
        let (a, b, r) = (self.ns(Side::A), self.ns(Side::B), self.ns_r());
        let mut s = format!("ip netns add {a}\nip netns add {b}\n");
        if self.emulated {
            writeln!(s, "ip netns add {r}\nip -n {r} link set lo up")?;
            writeln!(s, "ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0")?;
        }
        for ns in [&a, &b] {
            writeln!(s, "ip -n {ns} link set lo up")?;
            // No IPv6 duplicate address detection delay on the test links.
            writeln!(s, "ip netns exec {ns} sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 || true")?;
            // Every TCP connection starts afresh: the kernel would otherwise start one with the
            // slow-start threshold the last connection to the same host ended with (a cubic
            // transfer after a BBR one then left slow start at a fraction of the paths).
            writeln!(
                s,
                "ip netns exec {ns} sysctl -qw net.ipv4.tcp_no_metrics_save=1"
            )?;
        }
        for (i, p) in self.paths.iter().enumerate() {
            let l = Self::link(i);
            if self.emulated {
                writeln!(
                    s,
                    "ip -n {r} link add a{i} type veth peer name {l} netns {a}"
                )?;
                writeln!(
                    s,
                    "ip -n {r} link add b{i} type veth peer name {l} netns {b}"
                )?;
                writeln!(s, "ip -n {r} addr add 198.18.{}.254/24 dev a{i}", i + 1)?;
                writeln!(s, "ip -n {r} addr add 198.18.{}.254/24 dev b{i}", 101 + i)?;
                writeln!(s, "ip -n {r} link set a{i} up\nip -n {r} link set b{i} up")?;
            } else {
                writeln!(
                    s,
                    "ip link add {l} netns {a} type veth peer name {l} netns {b}"
                )?;
            }
            for side in [Side::A, Side::B] {
                let ns = self.ns(side);
                writeln!(
                    s,
                    "ip -n {ns} addr add {}/24 dev {l}",
                    self.path_addr(side, i)
                )?;
                writeln!(s, "ip -n {ns} link set {l} up")?;
                if self.emulated {
                    let (gw, peer_net) = match side {
                        Side::A => (
                            format!("198.18.{}.254", i + 1),
                            format!("198.18.{}.0/24", 101 + i),
                        ),
                        Side::B => (
                            format!("198.18.{}.254", 101 + i),
                            format!("198.18.{}.0/24", i + 1),
                        ),
                    };
                    writeln!(s, "ip -n {ns} route add {peer_net} via {gw} dev {l}")?;
                }
                if let Some(rate) = p.rate_bps {
                    writeln!(s, "tc -n {ns} qdisc add dev {l} root {}", tbf(rate))?;
                }
            }
        }
        sh(&s)?;
        Ok(())
    }
}
