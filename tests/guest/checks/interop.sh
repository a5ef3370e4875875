#!/bin/sh
# Interoperability of `rdma-direct pingpong` with rdma-core's ibv_rc_pingpong and
# ibv_uc_pingpong, in both roles, over rxe0 on 127.0.0.1: for each of RC and UC and for
# several sizes, (1) rdma-core's tool as server with our client, (2) our server with
# rdma-core's client. Both processes must exit 0 and print rc_pingpong's "iters in" line.
# Every output is printed.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE, RDMA_DIRECT_GID_INDEX.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:?RDMA_DIRECT_GID_INDEX is not set}
port=18600
tmp=$(mktemp -d)
fail=0
passed=0

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

# pair NAME "SERVER CMD" "CLIENT CMD": each gets "-p PORT"; the client also 127.0.0.1.
pair() {
    name=$1 scmd=$2 ccmd=$3
    port=$((port + 1))
    # shellcheck disable=SC2086
    timeout 120 $scmd -p "$port" >"$tmp/server" 2>&1 &
    spid=$!
    if ! wait_listen; then
        echo "FAIL $name: server never listened on port $port"
        cat "$tmp/server"
        kill "$spid" 2>/dev/null
        fail=1
        return
    fi
    # shellcheck disable=SC2086
    timeout 120 $ccmd -p "$port" 127.0.0.1 >"$tmp/client" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    echo "=== $name"
    echo "--- server: $scmd -p $port (exit $src)"
    cat "$tmp/server"
    echo "--- client: $ccmd -p $port 127.0.0.1 (exit $crc)"
    cat "$tmp/client"
    if [ "$src" != 0 ] || [ "$crc" != 0 ]; then
        echo "FAIL $name: server exit $src, client exit $crc"
        fail=1
    elif ! grep -Eq 'iters in [0-9.]+ seconds' "$tmp/server" \
        || ! grep -Eq 'iters in [0-9.]+ seconds' "$tmp/client"; then
        echo "FAIL $name: an 'iters in' line is missing"
        fail=1
    else
        echo "ok $name"
        passed=$((passed + 1))
    fi
}

for conn in RC UC; do
    case $conn in
        RC) tool=ibv_rc_pingpong ;;
        UC) tool=ibv_uc_pingpong ;;
    esac
    for spec in 64:100 65536:20 1048576:5; do
        size=${spec%%:*} iters=${spec##*:}
        ours="$bin pingpong -d $dev -g $gid -c $conn -s $size -n $iters"
        theirs="$tool -d $dev -g $gid -s $size -n $iters"
        pair "$conn $size B x $iters: $tool server, rdma-direct client" "$theirs" "$ours"
        pair "$conn $size B x $iters: rdma-direct server, $tool client" "$ours" "$theirs"
    done
done
rm -rf "$tmp"
echo "interop: $passed passed, fail=$fail"
exit "$fail"
