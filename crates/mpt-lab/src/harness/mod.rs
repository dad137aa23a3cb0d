//! The lab's lower layer: what every experiment and end-to-end test builds on.
//!
//! * [`netns`]: the topology (namespaces, shaped paths, the emulator namespace), torn down
//!   when the [`Lab`] drops;
//! * [`process`]: running programs in the lab's namespaces, stopped by pid;
//! * [`daemon`]: the daemons' configs (in mptd's own file schema), starting them, their status;
//! * [`tools`]: iperf3, bulk TCP, ping and FTP through the tunnel;
//! * [`stranger`]: a third host that sends hostile traffic to the path ports;
//! * [`sites`]: one server, many sites behind a NAT router (another topology);
//! * [`emulator`]: the userspace delay / jitter / loss element (this kernel has no netem).

mod counters;
pub mod daemon;
pub mod emulator;
pub mod netns;
pub mod process;
pub mod sites;
pub mod stranger;
pub mod tools;

pub use counters::*;
pub use daemon::*;
pub use netns::*;
pub use process::*;
pub use stranger::*;
pub use tools::*;
