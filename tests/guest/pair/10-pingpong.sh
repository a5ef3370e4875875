#!/bin/sh
# `rdma-direct pingpong` across the link, both roles (server on guest a, client on guest b,
# and the reverse), RC and UC; and interop with rdma-core's ibv_rc_pingpong /
# ibv_uc_pingpong on the other guest, our tool as server and as client. Every run must exit 0
# on both guests and print rc_pingpong's "iters in" line; the per-iteration round trip is
# printed for the log.
. "$PAIRLIB"
set -u
bin=$RDMA_DIRECT_BIN
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
port=18600
fail=0
passed=0

# one NAME SERVER_ROLE 'SERVER CMD' 'CLIENT CMD'
one() {
    port=$((port + 1))
    cross "$1" "$2" "$port" 90 "$3 -p $port" "$4 -p $port"
    rc=$?
    if [ "$rc" != 0 ]; then
        echo "FAIL $1 (guest $ROLE: exit $rc)"
        fail=1
    elif ! grep -Eq 'iters in [0-9.]+ seconds' "$CROSS_OUT"; then
        echo "FAIL $1 (guest $ROLE: no 'iters in' line)"
        fail=1
    else
        echo "ok $1: guest $ROLE $(grep -E 'usec/iter' "$CROSS_OUT" | sed 's/.*= //')"
        passed=$((passed + 1))
    fi
}

for spec in RC:64:50 RC:65536:10 UC:64:50; do
    conn=${spec%%:*}
    rest=${spec#*:}
    size=${rest%%:*} iters=${rest#*:}
    case $conn in RC) tool=ibv_rc_pingpong ;; UC) tool=ibv_uc_pingpong ;; esac
    ours="$bin pingpong -d $dev -g $gid -c $conn -s $size -n $iters"
    theirs="$tool -d $dev -g $gid -s $size -n $iters"
    for s in a b; do
        c=$([ "$s" = a ] && echo b || echo a)
        one "$conn $size B x $iters: rdma-direct server on $s, rdma-direct client on $c" "$s" "$ours" "$ours"
        one "$conn $size B x $iters: $tool server on $s, rdma-direct client on $c" "$s" "$theirs" "$ours"
        one "$conn $size B x $iters: rdma-direct server on $s, $tool client on $c" "$s" "$ours" "$theirs"
    done
done
echo "pingpong across the link (guest $ROLE): $passed passed, fail=$fail; rxe0 counters: $(counters)"
exit "$fail"
