//! The command lines of `mptd` and `mptctl` (clap), here so that the man pages and shell
//! completions are made from the very definitions the binaries parse (`mpt-lab docs`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Multipath UDP tunnel daemon: one TUN interface spread over several paths.
///
/// mptd joins several network paths (uplinks) into one tunnel interface. Every IP packet sent
/// into the tunnel is sealed and sent over one of the paths by a scheduler, and the peer
/// resequences what arrives before it delivers it. One server takes many sites, from behind
/// NAT, with keys per host (Noise IK). It runs one tunnel, configured by the file given with
/// -c (mpt.toml(5)); mptctl(8) shows and controls it. The key commands (genkey, pubkey,
/// genpsk) make the keys a configuration names.
#[derive(Debug, Parser)]
#[command(version = crate::VERSION, subcommand_negates_reqs = true)]
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
    /// `sudo sh -c 'umask 077; mptd genkey > /etc/mptd/mpt0.key'` (a file it is written to
    /// is made mode 0600).
    Genkey,
    /// Read a private key on standard input and print its public key, for the peers'
    /// `public_key`: `sudo sh -c 'mptd pubkey < /etc/mptd/mpt0.key'` (the file is root's).
    Pubkey,
    /// Print a new random pre-shared key (base64) for a peer's `preshared_key_file` (optional;
    /// both ends name the same one).
    Genpsk,
}

/// Show and control a running mptd: its peers, paths and traffic.
///
/// mptctl asks the daemon at a control socket (-s) for its status, shows it, and changes its
/// paths at run time. Its exit code says how the tunnel is doing, for scripts and health
/// checks. The socket is root's under the shipped systemd unit: run mptctl with sudo.
#[derive(Debug, Parser)]
#[command(name = "mptctl", version = crate::VERSION)]
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
        /// Print the JSON document (stable: /usr/share/doc/mptd/docs/status.md).
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
    /// its interface does) or up, make it a backup or a primary path, set its weight or rate,
    /// or reset its data budget. The configuration file is not changed: a restart starts from
    /// what it says. Exit 0 when done, 1 when the daemon refuses (no such path, a bad value),
    /// 3 when no daemon answers.
    Path {
        /// The `[[path]]`'s name.
        name: String,
        #[command(subcommand)]
        action: PathAction,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum PathAction {
    /// Set the path up again after `down`: it rejoins as an uplink that came back does.
    Up,
    /// Set the path down: it sends nothing and is down at once, whatever its interface does,
    /// until it is set up again (its peers find it silent).
    Down,
    /// Make it a backup path: used only while no primary path is up.
    Backup,
    /// Make it a path like the others again (after `backup`).
    Primary,
    /// Set its share for the `wrr` scheduler (1 to 10000).
    Weight {
        /// The new weight, 1 to 10000.
        weight: u32,
    },
    /// Set its rate, for the `rate` and `adaptive` schedulers.
    Rate {
        /// The new rate, as in the config: "20mbit", "128kbit", "1gbit" or bits per second.
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
    /// Start the count again from 0, until the period's end, and put the path back in its
    /// tier.
    Reset,
}
