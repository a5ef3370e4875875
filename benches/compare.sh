#!/usr/bin/env bash
# Compare the Rust mlx5 hot path with the minimal C writer of benches/c/ref_writer.c:
# instructions (valgrind callgrind, counted inside the cg_* workload functions only; exact
# and repeatable) and wall time (noisy; plain memory, not hardware).
#
#   benches/compare.sh [n]      n posts / CQEs per workload (default 4000, max 4000)
#
# Needs gcc, the rdma-core headers (libibverbs-dev: infiniband/mlx5dv.h) and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4000}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

for tool in gcc valgrind; do
    command -v "$tool" >/dev/null || { echo "compare.sh: $tool not found" >&2; exit 2; }
done
[ -f /usr/include/infiniband/mlx5dv.h ] || {
    echo "compare.sh: /usr/include/infiniband/mlx5dv.h missing (apt-get install libibverbs-dev)" >&2
    exit 2
}

gcc -O2 -Wall -o "$OUT/ref_writer" benches/c/ref_writer.c
cargo bench --bench mlx5_hot --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*mlx5_hot[^"]*\)".*/\1/p' | tail -1 > "$OUT/bin"
RUST_BIN=$(cat "$OUT/bin")
[ -x "$RUST_BIN" ] || { echo "compare.sh: could not build the mlx5_hot bench" >&2; exit 2; }

# Ir inside functions matching $2 while running $3...
count() {
    local out=$1 pat=$2
    shift 2
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$pat" "$@" \
        >/dev/null 2>&1
    sed -n 's/^summary: *//p' "$out"
}

# Wall time of the whole process, best of 5 (ms), for a rough side-by-side.
walltime() {
    local best=
    for _ in 1 2 3 4 5; do
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        local ms=$(((t1 - t0) / 1000))
        if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
    done
    echo "$best"
}

printf '%-10s %8s %12s %12s %10s %12s %12s\n' workload n "C Ir/op" "Rust Ir/op" ratio "C wall[us]" "Rust wall[us]"
json=()
for w in single fast batch32 poll16; do
    # "fast" is our WRITE-inline fast path; the C side of it is the same single-post writer.
    cw_name=$w
    [ "$w" = fast ] && cw_name=single
    c=$(count "$OUT/c.$w" "cg_$cw_name" "$OUT/ref_writer" "$cw_name" "$N")
    r=$(count "$OUT/r.$w" "*cg_$w*" "$RUST_BIN" --callgrind "$w" "$N")
    cw=$(walltime "$OUT/ref_writer" "$cw_name" "$N")
    rw=$(walltime "$RUST_BIN" --callgrind "$w" "$N")
    read -r cper rper ratio < <(awk -v c="$c" -v r="$r" -v n="$N" \
        'BEGIN { printf "%.1f %.1f %.2f\n", c / n, r / n, (r / n) / (c / n) }')
    printf '%-10s %8s %12s %12s %10s %12s %12s\n' "$w" "$N" "$cper" "$rper" "${ratio}x" "$cw" "$rw"
    json+=("{\"workload\":\"$w\",\"n\":$N,\"c_ir_per_op\":$cper,\"rust_ir_per_op\":$rper,\"ratio\":$ratio,\"c_wall_us\":$cw,\"rust_wall_us\":$rw}")
done
echo "# single: one inline 8-byte RDMA WRITE post (generic SendQueue::post) + 8-byte doorbell;"
echo "# fast: the same through Mlx5Sq::post_write_inline; batch32: generic post, one doorbell"
echo "# per 32 (per WQE); poll16: per CQE at batch 16. Plain memory, not hardware."
echo "# Wall times are whole-process (set-up included) and noisy: instructions are the figure."
(IFS=,; echo "JSON {\"bench\":\"compare\",\"results\":[${json[*]}]}")
