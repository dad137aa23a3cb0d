//! `mpt-lab`: the experiments, the demo and the link emulator.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Reruns the MPT paper's experiments with mptd on this machine"
)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The README's demo: a 4-path lab, mptd on both ends, iperf3 through tun0.
    Demo,
    /// Internal: run the link emulator (started by the lab inside its middle namespace).
    #[command(hide = true)]
    Emulate { spec: String },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let r = match args.command {
        Cmd::Demo => mpt_lab::demo::run(),
        Cmd::Emulate { spec } => serde_json::from_str(&spec)
            .map_err(anyhow::Error::from)
            .and_then(|links: Vec<mpt_lab::emulator::Link>| mpt_lab::emulator::run(&links)),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpt-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}
