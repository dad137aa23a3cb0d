//! A stranger: a third namespace on the paths' side that sends hostile traffic to the path
//! ports.

use std::fmt::Write as _;

use anyhow::{bail, Result};

use super::*;

/// The stranger's address (see [`Lab::add_stranger`]).
pub const STRANGER_ADDR: &str = "198.18.200.2";

impl Lab {
    /// The stranger's namespace (see [`Lab::add_stranger`]).
    pub fn ns_x(&self) -> String {
        format!("{}x", self.tag)
    }

    /// A third host, "x", that can reach B's path addresses: a veth to A, which forwards.
    /// Its traffic arrives at B on the path links, from [`STRANGER_ADDR`]. Removed with the
    /// lab. Only for an unemulated lab.
    pub fn add_stranger(&mut self) -> Result<()> {
        if self.emulated {
            bail!("add_stranger: only in a lab without the emulator");
        }
        let (a, b, x) = (self.ns(Side::A), self.ns(Side::B), self.ns_x());
        let mut s = format!("ip netns add {x}\nip -n {x} link set lo up\n");
        writeln!(
            s,
            "ip link add x0 netns {x} type veth peer name xa netns {a}"
        )?;
        writeln!(
            s,
            "ip -n {x} addr add {STRANGER_ADDR}/24 dev x0\nip -n {x} link set x0 up"
        )?;
        writeln!(
            s,
            "ip -n {a} addr add 198.18.200.1/24 dev xa\nip -n {a} link set xa up"
        )?;
        writeln!(s, "ip -n {x} route add default via 198.18.200.1")?;
        writeln!(s, "ip netns exec {a} sysctl -qw net.ipv4.ip_forward=1")?;
        // B answers nothing to x, but must not drop its datagrams as spoofed.
        writeln!(s, "ip netns exec {b} sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0")?;
        for i in 0..self.paths.len() {
            let l = Self::link(i);
            writeln!(
                s,
                "ip netns exec {b} sysctl -qw net.ipv4.conf.{l}.rp_filter=0"
            )?;
        }
        writeln!(
            s,
            "ip -n {b} route add 198.18.200.0/24 via {} dev {}",
            self.path_addr(Side::A, 0),
            Self::link(0)
        )?;
        sh(&s)?;
        Ok(())
    }

    /// Run `f` on a thread inside the stranger's namespace.
    pub fn in_stranger<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        in_netns(&self.ns_x(), f)
    }
}
