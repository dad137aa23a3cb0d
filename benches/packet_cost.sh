#!/bin/sh
# Instructions per packet from the last run of the callgrind benchmark
#
#   cargo install gungraun-runner --version 0.18.2 --locked   # once (the lib's version)
#   cargo bench -p mpt-benches --bench packet_cost
#   benches/packet_cost.sh          # the tables
#   benches/packet_cost.sh --top    # and the costliest functions of the tunnel's own work
#
# gungraun counts a whole batch of 64 packets; this divides by 64. "AEAD" is the same
# batch's bodies sealed (opened) alone (`aead_*_batch_of_64`, same id), "own" the rest: the
# tunnel's own work, as a share of the AEAD's. No system call is counted anywhere (the engine
# is sans-IO): the sockets, the TUN device and the locks are mptd's, and come on top.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${GUNGRAUN_HOME:-$root/target/gungraun}/mpt-benches/packet_cost
BATCH=64

# the callgrind profile of benchmark `$2` (function) `$3` (id) in group `$1`
profile() {
    f="$dir/$1/$2.$3/callgrind.$2.$3.out"
    if [ ! -f "$f" ]; then
        echo "no $f: run cargo bench -p mpt-benches --bench packet_cost" >&2
        exit 1
    fi
    echo "$f"
}

# its instructions (Ir)
ir() {
    awk '/^summary:/ { print $2; exit }' "$(profile "$@")"
}

row() { # direction id
    case $1 in
    send) fn=send_batch_of_64 aead=aead_seal_batch_of_64 ;;
    receive) fn=receive_batch_of_64 aead=aead_open_batch_of_64 ;;
    esac
    total=$(ir tunnel "$fn" "$2")
    a=$(ir aead "$aead" "${2%_by_socket}")
    echo "$1 $2 $total $a" | awk -v n=$BATCH '{
        t = $3 / n; a = $4 / n; own = t - a
        printf "| %-7s | %-26s | %8.0f | %8.0f | %7.0f | %5.1f %% |\n", $1, $2, t, a, own, 100 * own / a
    }'
}

ids="tcp1400_chacha tcp1400_aes tcp100_chacha tcp100_aes udp1400_chacha udp1400_aes
tcp1400_chacha_nocompress tcp1400_aes_nocompress tcp100_chacha_nocompress tcp100_aes_nocompress"

# the tables go between BEGIN-BLOCK and END-BLOCK, which `mpt-lab results --log` writes into
# docs/results.md, with the Summary's row as a headline
echo "BEGIN-BLOCK packet cost"
echo "Instructions per packet (batch of $BATCH; own = total - AEAD, as % of the AEAD)"
echo
echo "| end     | case                       |    total |     AEAD |     own | own/AEAD |"
echo "|---------|----------------------------|---------:|---------:|--------:|---------:|"
for d in send receive; do
    for id in $ids; do
        row $d "$id"
    done
done
row receive tcp1400_chacha_by_socket

echo
echo "AEAD alone, per body (instructions)"
echo
echo "| cipher | body | seal | open |"
echo "|--------|-----:|-----:|-----:|"
for c in chacha aes; do
    for b in 1400 1361 100; do
        s=$(ir aead aead_seal_64_of_one_size "${c}_$b")
        o=$(ir aead aead_open_64_of_one_size "${c}_$b")
        echo "| $c | $b | $((s / BATCH)) | $((o / BATCH)) |"
    done
done

echo
echo "Compressed TCP headers, per 1400-byte packet (instructions, compress on - off)"
echo
for c in chacha aes; do
    for d in send receive; do
        case $d in
        send) fn=send_batch_of_64 aead=aead_seal_batch_of_64 ;;
        receive) fn=receive_batch_of_64 aead=aead_open_batch_of_64 ;;
        esac
        on=$(ir tunnel $fn "tcp1400_$c")
        off=$(ir tunnel $fn "tcp1400_${c}_nocompress")
        aon=$(ir aead $aead "tcp1400_$c")
        aoff=$(ir aead $aead "tcp1400_${c}_nocompress")
        echo "$c $d $on $off $aon $aoff" | awk -v n=$BATCH '{
            printf "- %s %s: total %+.0f, own work %+.0f (AEAD %+.0f: 39 bytes fewer to seal)\n",
                $1, $2, ($3 - $4) / n, (($3 - $5) - ($4 - $6)) / n, ($5 - $6) / n
        }'
    done
done

# the results page's Summary row
s=$(ir tunnel send_batch_of_64 tcp1400_chacha) sa=$(ir aead aead_seal_batch_of_64 tcp1400_chacha)
r=$(ir tunnel receive_batch_of_64 tcp1400_chacha) ra=$(ir aead aead_open_batch_of_64 tcp1400_chacha)
aes=$(ir aead aead_seal_batch_of_64 tcp1400_aes)
echo
echo "$s $sa $r $ra $aes" | awk -v n=$BATCH '{
    printf "<!-- headline packet-cost | what a 1400-byte TCP packet costs, in instructions (`cargo bench -p mpt-benches --bench packet_cost`; `benches/packet_cost.sh`) | sender **%.0f** (ChaCha20-Poly1305 %.0f, the tunnel'"'"'s own work %.0f: **%.1f %%** of the AEAD), receiver **%.0f** (%.0f + %.0f: **%.1f %%**); with AES-256-GCM the AEAD is %.0f -->\n",
        $1 / n, $2 / n, ($1 - $2) / n, 100 * ($1 - $2) / $2, $3 / n, $4 / n, ($3 - $4) / n, 100 * ($3 - $4) / $4, $5 / n
}'
echo "END-BLOCK"

[ "${1:-}" = "--top" ] || exit 0

# The functions that cost most, by symbol (code inlined into a function counts as its own),
# per packet: self cost without the AEAD's, and inclusive cost of the functions whose
# subtree holds no AEAD work (the benchmark's frames and the AEAD's own left out).
aead_re='ring::|ring_core|chacha20|poly1305|poly_hash|aes_|aesni|gcm|gfmul|SealKey|Opener::open'
frame_re='__run|main|lang_start|backtrace|gungraun|packet_cost::send$|packet_cost::receive$|^[?][?][?]|below main|^0x'
top() { # file inclusive(yes|no)
    callgrind_annotate --inclusive="$2" --threshold=100 --auto=no --show=Ir "$1" 2>/dev/null |
        awk -v n=$BATCH -v incl="$2" -v aead="$aead_re" -v frame="$frame_re" '
            /file:function/ { on = 1; next }
            on && $1 ~ /^[0-9,]+$/ {
                ir = $1; gsub(",", "", ir)
                line = $0
                sub(/^ *[0-9,]+ +\([^)]*\) +/, "", line)
                sub(/ \[[^]]*\]$/, "", line)
                fn = substr(line, index(line, ":") + 1)
                if (fn ~ aead || fn ~ frame) next
                # self: code inlined from other files comes in rows of its own, disjoint;
                # inclusive: the row of the function itself holds them all
                ir += 0
                if (incl == "yes") { if (ir > sum[fn]) sum[fn] = ir } else sum[fn] += ir
            }
            END { for (f in sum) printf "%9.0f  %s\n", sum[f] / n, f }' |
        sort -rn | head -15
}
for d in send receive; do
    f=$(profile tunnel ${d}_batch_of_64 tcp1400_chacha)
    echo
    echo "$d, 1400-byte TCP, ChaCha20-Poly1305: top 15 by self instructions per packet (AEAD left out)"
    top "$f" no
    echo
    echo "$d, 1400-byte TCP, ChaCha20-Poly1305: top 15 by inclusive instructions per packet (AEAD left out)"
    top "$f" yes
done
