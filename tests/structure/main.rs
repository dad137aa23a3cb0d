//! The code's structure, checked so that it lasts (`cargo test -p mpt-tests --test structure`,
//! part of `./test.sh`). It reads the crates' sources and fails when:
//!
//! - a crate's top-level modules import each other in a cycle (a module and its own
//!   submodules count as one; `crate::X` resolves through the crate root's `pub use`s);
//! - `impl Connection` appears outside the connection's orchestration files
//!   ([`CONNECTION_FILES`]);
//! - a production file has more than [`MAX_CODE_LINES`] code lines before its tests;
//! - a function of the engine or the daemon is longer than [`MAX_FN_LINES`] lines;
//! - anything allows `clippy::too_many_arguments`.
//!
//! What is still owed is listed in [`OWED`], each entry by name: a new breach fails, and so
//! does an entry that no longer applies, so the list only shrinks.

#![allow(clippy::unwrap_used)] // a test: a file it cannot read is a failure

mod rules;

use std::path::{Path, PathBuf};

use rules::{Breach, Source};

/// The files of `mpt-tunnel` where `impl Connection` may be: the connection's orchestration.
/// Features are types of their own that the connection passes what they need.
const CONNECTION_FILES: &[&str] = &[
    "connection.rs",
    "send.rs",
    "recv.rs",
    "timers.rs",
    "handshake.rs",
];

/// Code lines (neither blank nor comment) a production file may have before its tests.
const MAX_CODE_LINES: usize = 400;

/// Lines a function of the engine (`mpt-tunnel`) or the daemon (`mptd`) may span.
const MAX_FN_LINES: usize = 100;

/// Breaches still owed, each as [`Breach::key`] prints it. Fix one, then delete its line.
const OWED: &[&str] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Every breach in the workspace's crates.
fn breaches() -> Vec<Breach> {
    let root = root();
    let mut out = Vec::new();
    for src in crates() {
        let name = src
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let crate_ = Source::read(&src);
        out.extend(rules::cycles(&name, &crate_));
        for (file, text) in &crate_.files {
            let rel = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.extend(rules::long_file(&rel, text, MAX_CODE_LINES));
            out.extend(rules::too_many_arguments(&rel, text));
            if name == "mpt-tunnel" {
                let local = file.strip_prefix(&src).unwrap().to_string_lossy();
                if !CONNECTION_FILES.contains(&local.as_ref()) {
                    out.extend(rules::impl_connection(&rel, text));
                }
            }
            if name == "mpt-tunnel" || name == "mptd" {
                out.extend(rules::long_functions(&rel, text, MAX_FN_LINES));
                out.extend(rules::tuple_parameters(&rel, text));
            }
        }
    }
    out
}

#[test]
fn the_structure_holds() {
    let found = breaches();
    let keys: Vec<String> = found.iter().map(Breach::key).collect();
    let new: Vec<&Breach> = found
        .iter()
        .filter(|b| !OWED.contains(&b.key().as_str()))
        .collect();
    let stale: Vec<&&str> = OWED
        .iter()
        .filter(|o| !keys.iter().any(|k| k == *o))
        .collect();
    for b in &new {
        eprintln!("breach: {b}");
    }
    for s in &stale {
        eprintln!("owed but no longer found (delete it from OWED): {s}");
    }
    eprintln!(
        "structure: {} breaches, {} of them owed (tests/structure/main.rs OWED)",
        found.len(),
        found.len() - new.len()
    );
    assert!(
        new.is_empty() && stale.is_empty(),
        "{} new breaches, {} stale entries in OWED",
        new.len(),
        stale.len()
    );
}
