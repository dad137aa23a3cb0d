//! The mptd daemon: TUN device, one UDP socket per path, and the tasks that move packets
//! between them through the scheduler (`mpt-sched`) and the resequencer (`mpt-reseq`).
//!
//! All I/O, the clock, tokio and signals live here; the protocol logic lives in the core
//! crates. `mptctl` talks to the daemon over the unix control socket ([`control`]).

pub mod batch;
pub mod clock;
pub mod control;
pub mod daemon;
pub mod net;
pub mod status;
