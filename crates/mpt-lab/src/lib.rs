//! mpt-lab: build two-host topologies in network namespaces, run mptd on both ends, run
//! traffic and collect the applications' and mptd's figures. Two layers:
//!
//! * [`harness`]: topology, processes, mptd configs and daemons, tool wrappers, the stranger
//!   and the link emulator — what the experiments and the end-to-end tests build on;
//! * [`experiments`]: the paper's tables, the adaptive runs, the benchmarks and the demo;
//! * [`report`] and [`plot`]: the CSV files and plots they write; [`blocks`]: the lab's
//!   blocks in a document; [`summary`]: the results
//!   page's Summary and the README's table, from the headlines runs and tests state;
//!   [`suite`]: the suite's `RESULT` lines in the results page.
#![allow(clippy::disallowed_methods)] // the lab runs real processes on the wall clock

pub mod blocks;
pub mod docs;
pub mod experiments;
pub mod harness;
pub mod plot;
pub mod report;
pub mod suite;
pub mod summary;
