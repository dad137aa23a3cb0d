#!/usr/bin/env bash
# The core crates' and the engine's tests, built for the routers' architectures and run here
# under qemu-user-static (.cargo/config.toml names qemu as each target's runner):
# aarch64-unknown-linux-musl (what the OpenWrt and arm64 packages ship) and
# armv7-unknown-linux-gnueabihf (Raspberry Pi OS 32-bit). The engine is sans-IO: its
# simulator tests need no root and no network. `scripts/foreign-tests.sh aarch64` runs one.
# Built with the `foreign-test` profile (Cargo.toml): optimised enough that the simulator tests
# are quick under emulation.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/cross-deps.sh
[ $# -gt 0 ] || set -- aarch64 armv7
targets=()
for a in "$@"; do
  case $a in
    aarch64) targets+=(aarch64-unknown-linux-musl) ;;
    armv7) targets+=(armv7-unknown-linux-gnueabihf) ;;
    *) echo "foreign-tests.sh: unknown architecture $a (aarch64, armv7)" >&2; exit 2 ;;
  esac
done
for t in "${targets[@]}"; do
  echo "== tests for $t, under qemu-user"
  cargo test --profile foreign-test --target "$t" -p mpt-core -p mpt-sched -p mpt-reseq -p mpt-tunnel \
    --no-fail-fast
done
