#!/usr/bin/env bash
# Instructions of one 8-byte RDMA WRITE round trip across two processes on the sim fabric
# (the fabric_floor bench's sim row, counted instead of timed): `rdma-direct perf write_lat
# -s 8 -n N` as server (native) and client (under valgrind callgrind), both in deterministic
# mode. Prints, per round trip of the client, the inclusive instructions of the functions
# above MIN (default 40), and how many engine passes ran.
#
#   benches/fabric_ir.sh [N]        round trips (default 3000)
#   MIN=20 TOP=80                   threshold (Ir per round trip) and rows
#
# A function that runs only when there is work (the WQE parse, the CQE write, the responder,
# the packet's send) has an exact count; the engine pass and the ring probe also run while the
# client spins for an answer, so theirs (and the total) grow with the passes, which depend on
# how fast the native server answers (the host's load): compare Ir per pass for them.
# callgrind_annotate runs outside the tree (inside it, it splits a function's code inlined
# from other files off its count). Sim, not hardware. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-3000}
command -v valgrind >/dev/null || { echo "fabric_ir.sh: valgrind not found" >&2; exit 2; }
cargo build --release -q --bin rdma-direct
B=target/release/rdma-direct
OUT=$(mktemp -d)
export RDMA_DIRECT_SIM_FABRIC="rdma-direct-fabric-ir-$$"
trap 'rm -rf "$OUT"; rm -f "/dev/shm/$RDMA_DIRECT_SIM_FABRIC"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B" perf write_lat -s 8 -n "$N" -p "$PORT" >"$OUT/server" 2>&1 &
SERVER=$!
sleep 0.5
valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" \
    "$B" perf write_lat -s 8 -n "$N" -p "$PORT" 127.0.0.1 >"$OUT/client" 2>&1 ||
    { cat "$OUT/client" >&2; exit 1; }
wait "$SERVER" || { cat "$OUT/server" >&2; exit 1; }
# Engine passes: the calls of SimDevice::process (one pass each), summed over its callers (the
# "<" lines above its own line in callgrind's caller tree).
passes=$( (cd "$OUT" && callgrind_annotate --tree=caller --threshold=100 cg 2>/dev/null) | awk '
    /^ *[0-9,]+ .*  < / { if (match($0, /\(([0-9,]+)x\)/)) { c = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", c); sum += c } next }
    /^ *[0-9,]+ .*  \* .*SimDevice::process \[/ { if (!done) print sum; done = 1 }
    { sum = 0 }')
awk -v p="${passes:-0}" -v n="$N" 'BEGIN { printf "fabric_ir: %d round trips, client side, sim; engine passes per round trip: %.1f\n", n, p / n }'
(cd "$OUT" && callgrind_annotate --inclusive=yes --threshold=100 cg 2>/dev/null) | grep -v "/rustc/" |
    awk -v n="$N" -v min="${MIN:-40}" '
    /PROGRAM TOTALS/ { gsub(",", "", $1); printf "%8d  total\n", $1 / n }
    /:[A-Za-z_<].*\[/ && $1 ~ /^[0-9,]+$/ {
        v = $1; gsub(",", "", v)
        if (v / n >= min) {
            sub(/^ *[0-9,]+ *\([^)]*\) */, ""); sub(/ \[.*/, ""); sub(/^[^:]*\.[a-zA-Z]+:/, "")
            k = split($0, part, "::"); if (k >= 2) $0 = part[k - 1] "::" part[k]
            printf "%8d  %s\n", v / n, substr($0, 1, 110)
        }
    }' | head -"${TOP:-60}"
