//! The lab's upper layer: the experiments, each built on [`crate::harness`].
//!
//! * [`scenario`]: experiment descriptions (the paper's setups as TOML suites);
//! * [`runs`]: sampling, the paths alone, FTP downloads and UDP streams through the tunnel;
//! * [`paper`]: the runners for the MPT paper's tables (`paper_summary`: their Summary rows);
//! * [`adaptive`]: the adaptive scheduler with nothing configured, on the paper's setups;
//! * [`bench`]: throughput, latency and build-against-build benchmarks;
//! * [`peers`]: one server and many emulated sites; [`soak`]: the same for an hour, with churn;
//! * [`floor`]: the minimal blocking tunnel that sets the machine's latency floor;
//! * [`demo`]: the README's main job;
//! * [`insider`]: a site with valid keys that misbehaves (the hostile-site e2e test);
//! * [`tcp`]: one TCP or MPTCP transfer at a time, and kernel MPTCP over the lab's paths;
//! * [`realworld`]: bonding on real-looking links against kernel MPTCP (`trace`: its
//!   `--trace` samples; `pings`: light traffic beside its transfers).

pub mod adaptive;
pub mod bench;
pub mod demo;
pub mod floor;
pub mod insider;
mod lookups;
mod mixes;
pub mod paper;
mod paper_summary;
pub mod peers;
pub mod pings;
pub mod realworld;
pub mod runs;
pub mod satellite;
pub mod scenario;
pub mod soak;
pub mod tcp;
mod trace;
