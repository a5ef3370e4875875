#!/bin/sh
# `rdma-direct perf` across the link, against perftest on the other guest, both roles, once
# the tool has a two-process (server/client) mode; until then this check says it is skipped
# (exit 77: reported as skipped, never as passed).
. "$PAIRLIB"
set -u
bin=$RDMA_DIRECT_BIN
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
help=$("$bin" perf --help 2>&1)
# A two-process mode needs a peer address and a TCP port for the endpoint exchange.
if ! printf '%s\n' "$help" | grep -Eq -- '--port|HOST|--server'; then
    echo "skipped: perf two-process mode not available (rdma-direct perf --help shows no --port, HOST or --server)"
    exit 77
fi
port=18800
fail=0
# perftest's own command line: the server without an address, the client with one.
# Both roles of ours per test: our server on a with perftest's client on b, perftest's
# server on b with our client on a (the other two placements with RDMA_DIRECT_GUEST_FULL=1).
for t in write_lat send_lat write_bw; do
    for s in a b; do
        port=$((port + 1))
        if [ "$s" = a ] || [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ]; then
            cross "rdma-direct perf $t server on $s, ib_$t client" "$s" "$port" 90 \
                "$bin perf $t -d $dev -x $gid -s 64 -n 50 -p $port" "ib_$t -d $dev -x $gid -F -s 64 -n 50 -p $port" \
                || { echo "FAIL rdma-direct perf $t server on $s"; fail=1; }
        fi
        port=$((port + 1))
        if [ "$s" = b ] || [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ]; then
            cross "ib_$t server on $s, rdma-direct perf $t client" "$s" "$port" 90 \
                "ib_$t -d $dev -x $gid -F -s 64 -n 50 -p $port" "$bin perf $t -d $dev -x $gid -s 64 -n 50 -p $port" \
                || { echo "FAIL rdma-direct perf $t client, server on $s"; fail=1; }
        fi
    done
done
exit "$fail"
