#!/usr/bin/env bash
# Does `rdma-direct bench post` time the post, not the clock? Its ns/op against callgrind's
# instruction count converted to ns, on this machine (plain memory, not hardware).
#
#   benches/bench_check.sh        ROUNDS=11 (default) rounds
#
# For each shape (one inline 8-byte WRITE per doorbell, -l 1; 32 per doorbell, -l 32):
#  1. Ir/op: callgrind counts the instructions of `bench post`'s timed function
#     (`post_sample`; the clock reads are outside it) over 64000 posts.
#  2. Instructions per ns of that same loop on this machine: `bench post --per-sample 512`
#     (t_typical; a clock read per 512 posts, under 2% of the time), Ir/op / ns/op.
#  3. predicted ns/op of the default bench = Ir/op / (instructions per ns); measured =
#     `bench post` t_typical with its default samples (at least 64 posts each). The ratio
#     measured / predicted within 0.8..1.2 for both shapes is the pass: the clock read does
#     not dominate a 64-post sample.
#  4. For context, the same for the C writer of benches/c (single / batch32, 1000 posts per
#     clock read, median of 101 runs): its instructions per ns. A loop's instructions per ns
#     depend on its mix (the C writer is all stores; ours also reads the request array), so
#     the C figure is a machine reference, not the predictor.
# The runs alternate, ROUNDS times, so all see the same machine load; the best round of each
# (the figures of one round are medians).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-11}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for tool in gcc valgrind; do
    command -v "$tool" >/dev/null || { echo "bench_check.sh: $tool not found" >&2; exit 2; }
done
gcc -O2 -Wall -o "$OUT/ref_writer" benches/c/ref_writer.c
cargo build --release --bin rdma-direct 2>/dev/null
B=target/release/rdma-direct

ir() { # file: Ir summary
    sed -n 's/^summary: *//p' "$1"
}
field() { # json-file key: the value of the last line
    tail -1 "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"
}

# Instructions per post.
cir() { # shape
    valgrind --tool=callgrind --callgrind-out-file="$OUT/c.$1" --toggle-collect="cg_$1" \
        "$OUT/ref_writer" "$1" 4000 >/dev/null 2>&1
    awk -v i="$(ir "$OUT/c.$1")" 'BEGIN { printf "%.2f", i / 4000 }'
}
rir() { # batch
    valgrind --tool=callgrind --callgrind-out-file="$OUT/r.$1" --toggle-collect='*post_sample*' \
        "$B" bench post -n 64000 -l "$1" >/dev/null 2>&1
    awk -v i="$(ir "$OUT/r.$1")" 'BEGIN { printf "%.2f", i / 64000 }'
}
c1=$(cir single)
c32=$(cir batch32)
r1=$(rir 1)
r32=$(rir 32)

# Wall time, alternating.
for f in c1 c32 r1 r32 p1 p32; do : >"$OUT/t.$f"; done
for _ in $(seq "$ROUNDS"); do
    "$OUT/ref_writer" time single 1000 101 >>"$OUT/t.c1"
    "$OUT/ref_writer" time batch32 1000 101 >>"$OUT/t.c32"
    for l in 1 32; do
        rm -f "$OUT/j"
        "$B" bench post -n 204800 -l "$l" --json "$OUT/j" >/dev/null
        field "$OUT/j" t_typical_ns >>"$OUT/t.r$l"
        "$B" bench post -n 204800 -l "$l" --per-sample 512 --json "$OUT/j" >/dev/null
        field "$OUT/j" t_typical_ns >>"$OUT/t.p$l"
    done
done
# The best round of each: another program on the sibling CPU (2 shared vCPUs here) only
# ever slows a run down, by up to half, and not the same runs.
for f in c1 c32 r1 r32 p1 p32; do eval "t_$f=$(sort -g "$OUT/t.$f" | head -1)"; done
printf '%-6s %10s %13s %9s %10s %11s %7s %12s\n' shape "Rust Ir/op" "per-512 ns/op" "Ir per ns" \
    predicted "bench ns/op" ratio "C Ir per ns"
fail=0
for l in 1 32; do
    eval "ri=\$r$l tr=\$t_r$l tp=\$t_p$l ci=\$c$l tc=\$t_c$l"
    read -r ipn pred ratio cipn < <(awk -v ri="$ri" -v a="$tr" -v b="$tp" -v ci="$ci" -v tc="$tc" \
        'BEGIN { k = ri / b; p = ri / k; printf "%.1f %.2f %.2f %.1f\n", k, p, a / p, ci / tc }')
    printf '%-6s %10s %13s %9s %10s %11s %7s %12s\n' "-l $l" "$ri" "$tp" "$ipn" "$pred" "$tr" \
        "$ratio" "$cipn"
    awk -v r="$ratio" 'BEGIN { exit !(r >= 0.8 && r <= 1.2) }' || fail=1
done
echo "# C writer: single $c1 Ir/op in $t_c1 ns, batch32 $c32 Ir/op in $t_c32 ns."
echo "# predicted = Rust Ir/op / (Ir per ns of the same loop); ratio = bench ns/op / predicted."
echo "# Plain memory, not hardware; best of $ROUNDS rounds (each a median)."
if [ "$fail" = 1 ]; then
    echo "bench_check.sh: bench post and callgrind disagree by more than 20%" >&2
    exit 1
fi
