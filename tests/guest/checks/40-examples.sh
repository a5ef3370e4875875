#!/bin/sh
# The examples over a real verbs device (rxe0 in the guest), each as its README shows it:
#   - order_gateway as server and client, two processes over rxe0 (TCP on 127.0.0.1 for the
#     endpoint exchange): both exit 0 (each checks every order it received, byte for byte in
#     its sequence number), the client prints the percentiles of every round;
#   - pingpong as server and client the same way: both exit 0, the client prints the median
#     and p99 of every iteration;
#   - batching (two QPs of one process, looped back on rxe0): exits 0 with one line per batch
#     size;
#   - fanout (one publisher, 4 subscribers, QPs of one process looped back on rxe0): exits 0
#     with every sequence checked and the percentiles printed.
# Any non-zero exit, a stall ("stalled", "no completion for"), any error line or a missing
# figure fails the check. Every output is printed, so the guest log keeps the figures.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE, RDMA_DIRECT_GID_INDEX.
# The example binaries are looked for in RDMA_DIRECT_EXAMPLES, else next to RDMA_DIRECT_BIN
# (the runner copies target/<profile>/examples/* there).
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:-1}
exdir=${RDMA_DIRECT_EXAMPLES:-$(dirname "$bin")}
rounds=500
tmp=$(mktemp -d)
fail=0

bad() {
    echo "FAIL $*"
    fail=1
}

for ex in order_gateway pingpong batching fanout; do
    [ -x "$exdir/$ex" ] || bad "$ex: no binary at $exdir/$ex (copy target/<profile>/examples/$ex there)"
done
[ "$fail" = 0 ] || exit 1

# Wait until something listens on TCP port $1 (v4 or v6); 10 s at most.
wait_listen() {
    hex=$(printf ':%04X ' "$1")
    n=0
    while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex.* 0A "; do
        n=$((n + 1))
        [ "$n" -gt 100 ] && return 1
        usleep 100000
    done
}

# Output of a run that must hold no error: the examples print errors as "NAME: ...", stalls
# as "stalled" (order_gateway) or "no completion for" (poll_wait).
clean() {
    ! grep -Eq "^$1: |stalled|no completion for|panicked" "$2"
}

# pair NAME PORT ARGS...: NAME as server, then as client on 127.0.0.1; outputs in
# $tmp/NAME.server and $tmp/NAME.client. Returns non-zero (and says why) on any failure.
pair() {
    name=$1 port=$2
    shift 2
    timeout 120 "$exdir/$name" -d "$dev" -x "$gid" -p "$port" "$@" >"$tmp/$name.server" 2>&1 &
    spid=$!
    if ! wait_listen "$port"; then
        kill "$spid" 2>/dev/null
        wait "$spid"
        echo "--- $name server"
        cat "$tmp/$name.server"
        bad "$name: the server never listened on port $port"
        return 1
    fi
    timeout 120 "$exdir/$name" -d "$dev" -x "$gid" -p "$port" "$@" 127.0.0.1 >"$tmp/$name.client" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    echo "--- $name server (exit $src)"
    cat "$tmp/$name.server"
    echo "--- $name client (exit $crc)"
    cat "$tmp/$name.client"
    if [ "$src" -ne 0 ] || [ "$crc" -ne 0 ]; then
        bad "$name: server exit $src, client exit $crc"
        return 1
    fi
    if ! clean "$name" "$tmp/$name.server" || ! clean "$name" "$tmp/$name.client"; then
        bad "$name: an error or a stall was printed"
        return 1
    fi
}

# order_gateway: 16-order batches WRITTEN WITH IMMEDIATE each way, every round completed.
if pair order_gateway 18700 -n "$rounds"; then
    if grep -Eq "^round trip of a 16-order batch, $rounds rounds: p50 [0-9.]+ us  p90 [0-9.]+ us  p99 [0-9.]+ us  max [0-9.]+ us$" \
        "$tmp/order_gateway.client"; then
        echo "PASS order_gateway on $dev: $rounds rounds, percentiles printed"
    else
        bad "order_gateway: the client printed no percentiles of $rounds rounds"
    fi
fi

# pingpong: one SEND each way per iteration.
if pair pingpong 18701 -n "$rounds"; then
    if grep -Eq "^$rounds iterations, 64-byte SEND: half round trip median [0-9.]+ us  p99 [0-9.]+ us$" \
        "$tmp/pingpong.client"; then
        echo "PASS pingpong on $dev: $rounds iterations, median and p99 printed"
    else
        bad "pingpong: the client printed no median/p99 of $rounds iterations"
    fi
fi

# batching: 256 WRITEs per batch size, one completion per batch.
timeout 120 "$exdir/batching" -d "$dev" -x "$gid" -n 256 >"$tmp/batching" 2>&1
rc=$?
echo "--- batching (exit $rc)"
cat "$tmp/batching"
if [ "$rc" -ne 0 ] || ! clean batching "$tmp/batching"; then
    bad "batching: exit $rc"
else
    ok=1
    for size in 1 2 4 8 16 32 64; do
        line=$(printf 'batch %2d:      256 writes, %7d doorbells, ' "$size" $((256 / size)))
        grep -q "^$line *[0-9.]* Mmsg/s$" "$tmp/batching" || {
            bad "batching: no line for batch size $size ('$line...')"
            ok=0
        }
    done
    [ "$ok" = 1 ] && echo "PASS batching on $dev: every batch size, one completion per batch"
fi

# fanout: every message WRITTEN WITH IMMEDIATE to 4 subscribers, each checking the sequence.
timeout 120 "$exdir/fanout" -d "$dev" -x "$gid" -n 2000 >"$tmp/fanout" 2>&1
rc=$?
echo "--- fanout (exit $rc)"
cat "$tmp/fanout"
if [ "$rc" -ne 0 ] || ! clean fanout "$tmp/fanout"; then
    bad "fanout: exit $rc"
elif grep -Eq "^4 subscribers, 2000 messages each, every sequence checked: one-way p50 [0-9.]+ us  p90 [0-9.]+ us  p99 [0-9.]+ us  max [0-9.]+ us  \([0-9.]+ Mmsg/s delivered\)$" \
    "$tmp/fanout"; then
    echo "PASS fanout on $dev: 4 subscribers, 2000 messages each, sequences checked"
else
    bad "fanout: no percentiles line for 4 subscribers and 2000 messages"
fi

rm -rf "$tmp"
exit "$fail"
