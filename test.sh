#!/usr/bin/env bash
# The whole test suite: unit and property tests of every crate, then the end-to-end tests
# over real network namespaces (need root; they fail under CI=true without it, and skip
# loudly otherwise). One test at a time: the network tests measure throughput.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/deps.sh
cargo build --release --bins
cargo test --release --workspace -- --test-threads=1
