//! mpt-lab: build two-host topologies in network namespaces, run mptd on both ends, run
//! traffic and collect the applications' and mptd's figures.
//!
//! * [`netns`]: the lab itself (namespaces, shaped paths, processes, teardown on drop);
//! * [`emulator`]: the userspace delay / jitter / loss element (this kernel has no netem);
//! * [`scenario`]: experiment descriptions and the runners for the MPT paper's tables;
//! * [`demo`]: the README's main job.
#![allow(clippy::disallowed_methods)] // the lab runs real processes on the wall clock

pub mod adaptive;
pub mod bench;
pub mod demo;
pub mod emulator;
pub mod floor;
pub mod netns;
pub mod scenario;
