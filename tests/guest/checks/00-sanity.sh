#!/bin/sh
# Sanity check of the test bed itself, before anyone blames the project's code: rdma-core's
# ibv_rc_pingpong and perftest's ib_write_lat, server and client as two processes on the same
# rxe device inside the guest (RoCE v2 over lo, GID index from the harness).
#
# Env (set by the guest's /init): RDMA_DIRECT_DEVICE, RDMA_DIRECT_GID_INDEX.
set -u
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:?RDMA_DIRECT_GID_INDEX is not set}
port=18515
tmp=$(mktemp -d)
fail=0

# Wait until something listens on TCP $port (v4 or v6); 10 s at most.
wait_listen() {
    hex=$(printf ':%04X ' "$port")
    n=0
    while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex.* 0A "; do
        n=$((n + 1))
        [ "$n" -gt 100 ] && return 1
        usleep 100000
    done
}

# pair NAME CHECK_REGEX SERVER_CMD...: run the command as server, then as client of
# 127.0.0.1; both must exit 0 and the client's output must match CHECK_REGEX.
pair() {
    name=$1 want=$2
    shift 2
    t0=$(cut -d' ' -f1 /proc/uptime)
    timeout 60 "$@" >"$tmp/server" 2>&1 &
    spid=$!
    if ! wait_listen; then
        echo "FAIL $name: server never listened on port $port"
        cat "$tmp/server"
        kill "$spid" 2>/dev/null
        fail=1
        return
    fi
    timeout 60 "$@" 127.0.0.1 >"$tmp/client" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    echo "--- $name server (exit $src):"
    cat "$tmp/server"
    echo "--- $name client (exit $crc):"
    cat "$tmp/client"
    if [ "$src" != 0 ] || [ "$crc" != 0 ]; then
        echo "FAIL $name: server exit $src, client exit $crc"
        fail=1
    elif ! grep -Eq "$want" "$tmp/client"; then
        echo "FAIL $name: client output does not match /$want/"
        fail=1
    else
        echo "ok $name ($(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }') s)"
    fi
}

pair ibv_rc_pingpong 'iters in [0-9.]+ seconds' \
    ibv_rc_pingpong -d "$dev" -g "$gid" -n 1000 -s 4096
# The row's figures may read inf in the TCG guest: perftest derives its clock from a CPU
# frequency it measures, which fails there when the host is busy ("Correlation coefficient
# r^2 < 0.9"); the row with its 1000 iterations still proves both ends ran.
pair ib_write_lat '^ *2 +1000 +([0-9.]+|inf) ' \
    ib_write_lat -d "$dev" -x "$gid" -s 2 -n 1000 -F
rm -rf "$tmp"
exit "$fail"
