//! mpt-lab: build two-host topologies in network namespaces, run mptd on both ends, run
//! traffic and collect the applications' and mptd's figures. Two layers:
//!
//! * [`harness`]: topology, processes, mptd configs and daemons, tool wrappers, the stranger
//!   and the link emulator — what the experiments and the end-to-end tests build on;
//! * [`experiments`]: the paper's tables, the adaptive runs, the benchmarks and the demo;
//! * [`report`] and [`plot`]: the CSV files and plots they write.
#![allow(clippy::disallowed_methods)] // the lab runs real processes on the wall clock

pub mod docs;
pub mod experiments;
pub mod harness;
pub mod plot;
pub mod report;
