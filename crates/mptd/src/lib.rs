//! The mptd daemon: the I/O around the protocol engine (`mpt-tunnel`): the TUN device, one
//! UDP socket per path or listening address, the clock, and the tasks that move packets
//! between them.
//!
//! * [`tunnel`], [`peer`], [`routes`]: the state the tasks share (the sockets, the TUN
//!   device, I/O counters, and the peers, each with its endpoint behind its own lock), and
//!   which peer a packet goes to.
//! * [`datapath`]: the tx and rx tasks and the TUN writer; [`fit`]: what the TUN reads cut
//!   TCP super-packets to, which the tunnel's state holds for them.
//! * [`config`]: the TOML configuration, validated, with errors naming file, key and what
//!   was expected.
//! * [`net`], [`batch`]: creating the sockets and the device; batched UDP I/O.
//! * [`fulltunnel`]: a peer allowed the default prefixes takes the host's default route.
//! * [`uplinks`]: what the paths' interfaces are (present, link up, index); the tunnel
//!   watches them come and go and tells the connections.
//! * [`control`], [`status`]: the unix socket `mptctl` talks to, and what it answers;
//!   [`metrics`] and [`web`]: the same served over HTTP to Prometheus and as a status page.
//! * [`clock`], [`log`], [`random`]: the one place the clock is read; rate-limited logging;
//!   randomness without a system call under the lock.

pub mod batch;
pub mod budget;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod datapath;
pub mod families;
pub mod fit;
pub mod fulltunnel;
/// Drivers for the cargo-fuzz targets (`fuzz/`), also run on their corpora by the suite.
#[doc(hidden)]
pub mod fuzz;
pub mod hooks;
pub mod hostcheck;
mod http;
pub mod log;
pub mod metrics;
pub mod net;
pub mod peer;
pub mod random;
pub mod routes;
pub mod standby;
pub mod status;
pub mod stream;
pub mod tunnel;
pub mod uplinks;
pub mod web;

/// The commit this build is of (`git describe`, `-dirty` when the tree had changes).
pub const COMMIT: &str = env!("MPTD_COMMIT");

/// `mptd --version` and `mptctl --version`: the crate version, the commit it was built from, and
/// the protocol versions it speaks (`mpt_core::wire::VERSION` first, down to `MIN_VERSION`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("MPTD_COMMIT"),
    "), protocol versions 7 to 5"
);

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_names_the_protocol_versions_spoken() {
        let (v, min) = (mpt_core::wire::VERSION, mpt_core::wire::MIN_VERSION);
        assert!(super::VERSION.ends_with(&format!("protocol versions {v} to {min}")));
    }
}
