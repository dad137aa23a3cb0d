#!/usr/bin/env bash
# The main job: build mptd, build a 4-path lab in network namespaces, run mptd on both
# ends, push iperf3 traffic through the tunnel, print per-path shares, aggregate and
# efficiency, tear down. Needs root.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/deps.sh
cargo build --release --bins
exec target/release/mpt-lab demo "$@"
