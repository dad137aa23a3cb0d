//! The command lines of `mptd` and `mptctl` (clap), here so that the man pages and shell
//! completions are made from the very definitions the binaries parse (`mpt-lab docs`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Multipath UDP tunnel daemon.
#[derive(Debug, Parser)]
#[command(version = crate::VERSION, about, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Configuration file (TOML).
    #[arg(short, long, value_name = "FILE", required = true)]
    pub config: Option<PathBuf>,
    /// Check the configuration, its key files, and that this host can run it (capability,
    /// local addresses, interface MTUs, control socket), then exit: 0 ok (warnings printed),
    /// 2 a bad configuration, 3 a host that cannot run it as configured.
    #[arg(long)]
    pub check: bool,
    /// More logging: -v debug, -vv trace. RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How log lines look: "text" (colours only on a terminal) or "json" (one object a line,
    /// for log shippers).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a new private key (X25519, base64) for `[security] private_key_file`:
    /// `mptd genkey > /etc/mptd/host.key` (a file it is written to is made mode 0600).
    Genkey,
    /// Read a private key on standard input and print its public key, for the peers'
    /// `public_key`: `mptd pubkey < /etc/mptd/host.key`.
    Pubkey,
    /// Print a new random pre-shared key (base64) for a peer's `preshared_key_file` (optional;
    /// both ends name the same one).
    Genpsk,
}

/// Control a running mptd.
#[derive(Debug, Parser)]
#[command(name = "mptctl", version = crate::VERSION, about)]
pub struct CtlArgs {
    /// The daemon's control socket ([control] socket in its config), or the name of a
    /// systemd instance or tunnel: NAME is /run/mptd/NAME/control.sock (mptd@NAME.service) if
    /// that exists, else /run/mptd/NAME.sock.
    #[arg(short, long, value_name = "SOCKET|NAME", default_value = "mpt0")]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Per-path state, traffic, RTT, loss, jitter, delay and reordering, and tunnel totals.
    Status {
        /// Print the JSON document (stable, see docs/status.md).
        #[arg(long)]
        json: bool,
    },
    /// Per peer and path, as `wg show` has it: endpoint, state and why, last heard, RTT,
    /// loss, learned rate, and bytes each way.
    Show {
        /// Only this peer.
        peer: Option<String>,
    },
    /// A live view, refreshed every interval: per peer and path, the state and the throughput
    /// each way, drawn as bars.
    Watch {
        /// Seconds between refreshes.
        #[arg(long, default_value = "1")]
        interval: f64,
        /// Stop after this many refreshes (default: until interrupted).
        #[arg(long)]
        count: Option<u64>,
    },
    /// Print the configuration the daemon runs, as TOML (the file as it was read at start or
    /// at the last reload).
    Showconf,
    /// Read the configuration file again and apply it without taking the tunnel down (as
    /// SIGHUP does): paths and peers added, removed or changed, connection settings, hooks. A
    /// file that is invalid, or changes what only a restart applies, is refused (exit 1) and
    /// the running configuration kept; exit 3 when no daemon answers.
    Reload,
    /// Change a path at run time: set it down (it sends nothing until set up again, whatever
    /// its interface does) or up, make it a backup or a primary path, or set its weight or rate.
    Path {
        /// The `[[path]]`'s name.
        name: String,
        #[command(subcommand)]
        action: PathAction,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum PathAction {
    Up,
    Down,
    /// Used only while no primary path is up.
    Backup,
    /// A path like the others again.
    Primary,
    /// Its share for `wrr` (1 to 10000).
    Weight {
        weight: u32,
    },
    /// Its rate, as in the config ("20mbit"), for `rate` and `adaptive`.
    Rate {
        rate: String,
    },
    /// Its data budget (`budget`): `reset` starts its count again from 0 until the period's
    /// end, and puts the path back in its tier.
    Budget {
        #[command(subcommand)]
        action: BudgetAction,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum BudgetAction {
    /// Start the count again from 0.
    Reset,
}
