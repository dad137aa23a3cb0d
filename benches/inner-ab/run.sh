#!/bin/sh
# A/B of the reads of inner packets (mpt_core::inner's choice): instructions per packet under
# callgrind for the classes' read (class_*) and the TCP header lookup of MSS clamping and
# segment cutting (tcp_*), hand-written vs etherparse's header slices (ep) and LaxSlicedPacket
# (lax) vs smoltcp's wire (smol) vs mpt_core::inner (own; own_lax: as class.rs reads). A crate
# of its own (its own lock file), not a workspace member: the workspace depends on neither
# library.
#
#   benches/inner-ab/run.sh
set -eu
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --quiet
bin="$CARGO_TARGET_DIR/release/inner-ab"
n=100000
out=$(mktemp -d)
for v in class_hand class_ep class_lax class_smol class_own class_own_lax \
    tcp_hand tcp_ep tcp_lax tcp_smol tcp_own; do
    valgrind --tool=callgrind --callgrind-out-file="$out/$v" \
        --toggle-collect="inner_ab::run_$v" "$bin" "$v" "$n" >/dev/null 2>&1
    # 5 packets a round
    awk -v v="$v" -v k=$((n * 5)) '/^summary:|^totals:/ { printf "%-14s %6.1f\n", v, $2 / k; exit }' "$out/$v"
done
rm -rf "$out"
