#!/usr/bin/env bash
# The whole test suite: unit and property tests of every crate, then the end-to-end tests
# over real network namespaces (need root; they fail under CI=true without it, and skip
# loudly otherwise). One test at a time: the network tests measure throughput. Then the core
# crates' and the engine's tests for aarch64 and armv7, under qemu-user.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/deps.sh
# cross compilers, qemu-user-static, shellcheck, rustup's targets, nfpm: the packages' and
# the foreign architectures' tests
. scripts/cross-deps.sh
cargo build --release --bins
# the log stays for `mpt-lab results --log target/suite.log` (docs/results.md)
mkdir -p target
log=target/suite.log
: > "$log"
cargo test --release --workspace --no-fail-fast -- --test-threads=1 --nocapture 2>&1 | tee "$log"
bash scripts/foreign-tests.sh 2>&1 | tee -a "$log"
echo
echo "== measured by the end-to-end tests"
grep -E '^RESULT|RESULT ' "$log" | sed 's/^.*RESULT/RESULT/' || true
grep -q 'SKIPPED' "$log" && echo "!! some tests were SKIPPED (see above)"
echo "== this run's log: $log (target/release/mpt-lab results --log $log writes docs/results.md)"
# One closing line for the whole run.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;?$/) p += $(i-1); if ($(i) ~ /^failed;?$/) f += $(i-1) } }
     END { printf "all crates: %d passed, %d failed\n", p, f }' "$log"
