//! What this process owns by name: the namespace tag prefix, and removing every namespace
//! (and the processes in it) that carries it, also on SIGINT or SIGTERM.

use std::process::Command;

use anyhow::Result;

/// The prefix of every namespace this process creates.
pub fn tag_prefix() -> String {
    format!("mpt{}x", std::process::id())
}

/// Remove every namespace this process created and stop the processes running in them (they
/// are ours: we started them there). For a signal handler: `Drop` does not run on SIGTERM.
pub fn cleanup_own_namespaces() {
    let prefix = tag_prefix();
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &name]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: kill(2) with a pid listed in a namespace this process created.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
    }
}

/// On SIGINT or SIGTERM: clean up this process's namespaces and exit with 130.
///
/// The signals are caught by a handler (signal-hook), not blocked: a blocked signal would be
/// inherited, blocked, by every process the lab starts (mptd would then ignore the SIGTERM
/// that stops it).
pub fn cleanup_on_signal() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            eprintln!("signal {sig}: removing the lab");
            cleanup_own_namespaces();
            std::process::exit(130);
        }
    });
    Ok(())
}
