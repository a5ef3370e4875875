#!/usr/bin/env bash
# Compare the Rust mlx5 hot path with the minimal C writer of benches/c/ref_writer.c, side by
# side in one run: instructions (valgrind callgrind, counted inside the cg_* workload
# functions only; exact and repeatable) and wall time per post (median of RUNS runs of 1000
# posts measured inside each program around the same workload functions; noisy). Plain
# memory, not hardware.
#
#   benches/compare.sh [n]      n posts / CQEs per callgrind workload (default 4000, max 4000)
#   RUNS=301                    timed runs per measurement
#   ROWS="recv16 mixed16"       only these workloads (default: all)
#
# Needs gcc, the rdma-core headers (libibverbs-dev: infiniband/mlx5dv.h) and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-4000}
RUNS=${RUNS:-301}
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
    # A workload that fails (the C *_same ones exit 1 when they did fewer ops than asked)
    # stops the script: a count per op over fewer ops would mislead.
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$pat" "$@" \
        >/dev/null 2>&1 || { echo "compare.sh: workload failed: $*" >&2; return 1; }
    sed -n 's/^summary: *//p' "$out"
}

# Best (lowest) of 3 medians printed by "$@" (ns per post).
walltime() {
    local best="" t
    for _ in 1 2 3; do
        t=$("$@")
        if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$t
        fi
    done
    echo "$best"
}

printf '%-10s %6s %9s %11s %7s %9s %11s %7s\n' workload n "C Ir/op" "Rust Ir/op" ratio \
    "C ns/op" "Rust ns/op" ratio
json=()
for w in ${ROWS:-single single_wrs fast now batch32 poll16 poll1 one poll0 recv16 mixed16 poll16_one rt \
    ded_one ded_poll0 ded16_one ded_rt single_eq batch32_eq ded_one_eq one_eq cover16 every1 cover_one}; do
    # "fast" (our WRITE-inline fast path) and "single_wrs" (generic post of requests read
    # from an array) compare with the same single-post C writer. recv16 and mixed16 count
    # one poll per round of 16 CQEs (cg_round16 on both sides).
    cw_name=$w fn=$w
    if [ "$w" = fast ] || [ "$w" = single_wrs ] || [ "$w" = now ]; then cw_name=single fn=single; fi
    if [ "$w" = recv16 ] || [ "$w" = mixed16 ] || [ "$w" = poll16_one ]; then fn=round16; fi
    # one (Mlx5Cq::poll_one) compares with the C poller's one-per-call poll1.
    if [ "$w" = one ]; then cw_name=poll1 fn=poll1; fi
    # The dedicated pair's rows (ded_*) compare with the same C pollers as their plain rows.
    case $w in
        ded_one) cw_name=poll1 fn=poll1 ;;
        ded_poll0) cw_name=poll0 fn=poll0 ;;
        ded16_one) cw_name=poll16_one fn=round16 ;;
        ded_rt) cw_name=rt ;;
        # *_eq: the same Rust workload against C doing the same checks (the *_same
        # workloads of ref_writer.c): what the guarantees cost in C.
        single_eq) cw_name=single_same fn=single_same ;;
        batch32_eq) cw_name=batch32_same fn=batch32_same ;;
        ded_one_eq) cw_name=poll1_same fn=poll1_same ;;
        one_eq) cw_name=one_same fn=one_same ;;
    esac
    cfn=$fn
    if [ "$w" = single_wrs ] || [ "$w" = fast ] || [ "$w" = now ]; then cfn=single; fi
    # cover16 and every1 count their post and their poll (cg_<row>_post, cg_<row>_poll on both
    # sides), per WQE.
    if [ "$w" = cover16 ] || [ "$w" = every1 ]; then cfn="${w}_*"; fi
    if [ "$w" = rt ] || [ "$w" = ded_rt ]; then cfn='rt_*'; fi
    c=$(count "$OUT/c.$w" "cg_$cfn" "$OUT/ref_writer" "$cw_name" "$N") || exit 1
    rfn=$w
    if [ "$w" = recv16 ] || [ "$w" = mixed16 ] || [ "$w" = poll16_one ]; then rfn=round16; fi
    # rt (the order round trip) counts its post and its two polls (cg_rt_post, cg_rt_poll on
    # both sides), per round trip.
    if [ "$w" = rt ]; then rfn=rt_; fi
    if [ "$w" = ded_rt ]; then rfn=ded_rt_; fi
    rw_name=$w
    case $w in single_eq | batch32_eq | ded_one_eq | one_eq) rw_name=${w%_eq} rfn=${w%_eq} ;; esac
    r=$(count "$OUT/r.$w" "*cg_$rfn*" "$RUST_BIN" --callgrind "$rw_name" "$N") || exit 1
    read -r cper rper ratio < <(awk -v c="$c" -v r="$r" -v n="$N" \
        'BEGIN { printf "%.1f %.1f %.2f\n", c / n, r / n, (r / n) / (c / n) }')
    cw=null rw=null tratio=null
    if [ "$w" = single ] || [ "$w" = fast ] || [ "$w" = now ] || [ "$w" = batch32 ] || [ "$w" = one ] ||
        [ "$w" = ded_one ] || [ "$w" = single_eq ] || [ "$w" = batch32_eq ] ||
        [ "$w" = cover16 ] || [ "$w" = every1 ] || [ "$w" = cover_one ]; then
        # C and Rust alternate, so both see the same machine load.
        cw=$(walltime "$OUT/ref_writer" time "$cw_name" 1000 "$RUNS")
        rw=$(walltime "$RUST_BIN" --time "$rw_name" 1000 "$RUNS")
        tratio=$(awk -v c="$cw" -v r="$rw" 'BEGIN { printf "%.2f", r / c }')
    fi
    if [ "$cw" = null ]; then show=(- - -); else show=("$cw" "$rw" "${tratio}x"); fi
    printf '%-10s %6s %9s %11s %7s %9s %11s %7s\n' "$w" "$N" "$cper" "$rper" "${ratio}x" \
        "${show[@]}"
    json+=("{\"workload\":\"$w\",\"n\":$N,\"c_ir_per_op\":$cper,\"rust_ir_per_op\":$rper,\"ratio\":$ratio,\"c_ns_per_op\":$cw,\"rust_ns_per_op\":$rw,\"time_ratio\":$tratio}")
done
echo "# single: one inline 8-byte RDMA WRITE through the generic SendQueue::post + 8-byte"
echo "# doorbell, the request built in the loop (as the C writer gets its inputs as arguments);"
echo "# single_wrs: the same with requests read from an array; fast: Mlx5Sq::post_write_inline;"
echo "# now: the single request through SendQueue::post_and_ring (post and doorbell in one call);"
echo "# batch32: generic post, one doorbell per 32 (per WQE); poll16: per CQE at batch 16;"
echo "# poll1: per CQE, one per poll (a one-slot slice); one: the same through poll_one;"
echo "# poll0: per poll of an empty CQ (16 slots);"
echo "# recv16: receive CQEs (receive wr_id), 16 per poll;"
echo "# mixed16: send and receive CQEs alternating, 16 per poll;"
echo "# poll16_one: per poll of 16 slots that finds one requester CQE;"
echo "# rt: the order round trip, per trip: one inline 8-byte WRITE WITH IMMEDIATE posted (generic"
echo "# post) and rung, its requester CQE and the peer's receive CQE (RESP_WR_IMM) polled one per"
echo "# call (poll_one; the Rust bench re-posts the receive outside the count). C: benches/c."
echo "# ded_*: one, poll0, poll16_one and rt on a QP and the CQ it alone completes into, owned"
echo "# together (Mlx5Dedicated), against the same C rows."
echo "# single_eq, batch32_eq, ded_one_eq, one_eq: the Rust rows against C that keeps the same"
echo "# guarantees (budget compare, wr_id record, staged test; the pair's CQE checks, whole"
echo "# completion, retire and CQ accounting; one_eq also the shared CQ's polling flag, liveness,"
echo "# purge and the producer position from the QP's dbrec): what those cost in C, not a lower bound."
echo "# cover16: selective signaling, rounds of 32 inline 8-byte WRITEs (generic post), one signaled"
echo "# per 16, one doorbell, the round's 2 CQEs (each covering 15) polled 16 slots at a time:"
echo "# post + ring + poll per WQE; every1: the same rounds, every WQE signaled (32 CQEs);"
echo "# cover_one: per CQE, each covering 15 unsignaled SENDs, polled with poll_one. C: the same"
echo "# guarantees as the *_same workloads plus a per-slot running count (libmlx5's wqe_head)"
echo "# and the covered checks. ns for cover16 / every1: the post and poll sides timed per round."
echo "# ns/op: median of $RUNS runs of 1000 posts (CQEs for one, ded_one: C poll1) inside each"
echo "# program, best of 3; noisy on"
echo "# shared cores: instructions are the exact figure. Plain memory, not hardware."
(IFS=,; echo "JSON {\"bench\":\"compare\",\"results\":[${json[*]}]}")
