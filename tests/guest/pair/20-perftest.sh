#!/bin/sh
# perftest across the link, both roles: ib_write_lat, ib_read_lat and ib_write_bw (and
# ib_send_lat, ib_send_bw with RDMA_DIRECT_GUEST_FULL=1) with the server on guest a and the
# client on guest b, and the reverse. Both ends must exit 0 and the client must print its result row. This is rdma-core
# against rdma-core (the reference the project's own numbers across the link compare with).
. "$PAIRLIB"
set -u
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
port=18700
fail=0
passed=0
num='[0-9]+(\.[0-9]+)?'

# one TOOL ROW_REGEX ARGS: server on a then on b.
one() {
    tool=$1 want=$2
    shift 2
    for s in a b; do
        port=$((port + 1))
        cross "$tool $* (server on $s)" "$s" "$port" 90 "$tool -d $dev -x $gid -F -p $port $*" \
            "$tool -d $dev -x $gid -F -p $port $*"
        rc=$?
        if [ "$rc" != 0 ]; then
            echo "FAIL $tool $* server on $s (guest $ROLE: exit $rc)"
            fail=1
        elif [ "$ROLE" != "$s" ] && ! grep -Eq "$want" "$CROSS_OUT"; then
            echo "FAIL $tool $* server on $s: no result row on the client"
            fail=1
        else
            passed=$((passed + 1))
        fi
    done
}

one ib_write_lat "^ *64 +50 +$num" -s 64 -n 50
one ib_read_lat "^ *64 +50 +$num" -s 64 -n 50
one ib_write_bw "^ *4096 +100 +$num" -s 4096 -n 100
# send_lat and send_bw against perftest run in 25-perf.sh (ours on one side); here only
# with RDMA_DIRECT_GUEST_FULL=1.
if [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ]; then
    one ib_send_lat "^ *64 +50 +$num" -s 64 -n 50
    one ib_send_bw "^ *4096 +100 +$num" -s 4096 -n 100
fi
echo "perftest across the link (guest $ROLE): $passed passed, fail=$fail; rxe0 counters: $(counters)"
exit "$fail"
