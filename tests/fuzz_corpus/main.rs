//! The committed fuzz corpora, replayed on stable (`cargo test -p mpt-tests --test
//! fuzz_corpus`, part of `./test.sh`): every file under `fuzz/corpus/<target>/` is fed
//! through the driver its cargo-fuzz target runs (`fuzz/fuzz_targets/<target>.rs`), so what
//! the fuzzers reached (and what they once found) stays covered without a nightly toolchain.

#![allow(clippy::unwrap_used)] // a test: a corpus it cannot read is a failure
#![allow(clippy::disallowed_methods)] // it times the replay, for the log

use std::path::PathBuf;
use std::time::Instant;

/// Feed every file of `fuzz/corpus/<target>/` to `driver`; panics (naming the file) if the
/// driver does, or if the corpus is missing or empty.
fn replay(target: &str, driver: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: an empty corpus", dir.display());
    let start = Instant::now();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if std::panic::catch_unwind(|| driver(&data)).is_err() {
            panic!("{target}: the driver panicked on {}", f.display());
        }
    }
    eprintln!(
        "{target}: {} files replayed in {:.2} s",
        files.len(),
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn datagram() {
    replay("datagram", mpt_core::seal::fuzz::datagram);
}

#[test]
fn reseq_ops() {
    replay("reseq_ops", mpt_reseq::fuzz::run_ops);
}

#[test]
fn hc() {
    replay("hc", mpt_core::hc::fuzz::hc);
}

#[test]
fn handshake() {
    replay("handshake", mpt_tunnel::fuzz::handshake);
}

#[test]
fn control_datagrams() {
    replay("control_datagrams", mpt_tunnel::fuzz::control_datagrams);
}

#[test]
fn connection() {
    replay("connection", mpt_tunnel::fuzz::connection);
}

#[test]
fn config() {
    replay("config", mptd::fuzz::config);
}

#[test]
fn control_socket() {
    replay("control_socket", mptd::fuzz::control_socket);
}
