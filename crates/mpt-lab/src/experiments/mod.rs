//! The lab's upper layer: the experiments, each built on [`crate::harness`].
//!
//! * [`scenario`]: experiment descriptions and the runners for the MPT paper's tables;
//! * [`adaptive`]: the adaptive scheduler with nothing configured, on the paper's setups;
//! * [`bench`]: throughput, latency and build-against-build benchmarks;
//! * [`floor`]: the minimal blocking tunnel that sets the machine's latency floor;
//! * [`demo`]: the README's main job.

pub mod adaptive;
pub mod bench;
pub mod demo;
pub mod floor;
pub mod scenario;
