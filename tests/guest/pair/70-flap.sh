#!/bin/sh
# Link flap mid-stream: examples/reconnect between the guests over rxe0 (receiver on a,
# gateway on b, $N orders; the options and the retry budget of 60-restart.sh). Once the
# gateway has 1000 orders confirmed, a takes its eth0 down for 3 s (longer than the gateway's
# retry budget of 0.81 s) and brings it back. The gateway must end every request it had
# outstanding (first error RETRY_EXC_ERR, the rest flushed, none missing), reconnect once the
# link is back, and finish; the receiver, whose connection failed too, must account for its
# outstanding requests the same way (first error or flushes after the gateway's connection
# closed, none missing) and take the new connection. Both exit 0; the receiver checked every
# order byte for byte in sequence, and the two checksums of the stream are equal.
. "$PAIRLIB"
set -u
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
ex=${RDMA_DIRECT_EXAMPLES:-$(dirname "$RDMA_DIRECT_BIN")}/reconnect
N=${FLAP_ORDERS:-4800}
port=18730
tmp=$(mktemp -d)
fail=0
[ -x "$ex" ] || { echo "FAIL: no reconnect example at $ex"; exit 1; }

wait_line() {
    wl_n=$(($3 * 10))
    until grep -Eq "$2" "$1" 2>/dev/null; do
        wl_n=$((wl_n - 1))
        { [ "$wl_n" -le 0 ] || ! kill -0 "$4" 2>/dev/null; } && return 1
        usleep 100000
    done
}
field() { printf '%s\n' "$2" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
drain_adds_up() {
    o=$(field outstanding "$2") e=$(field first_error "$2") f=$(field flushed "$2") x=$(field other "$2") m=$(field missing "$2")
    if ! printf '%s\n' "$2" | grep -Eq "failed status ($3) "; then
        echo "FAIL $1: the first error is not /$3/: $2"
        return 1
    fi
    if [ -z "$o" ] || [ "$m" != 0 ] || [ $((e + f + x)) != "$o" ]; then
        echo "FAIL $1: the drain does not add up (outstanding=$o: first_error=$e + flushed=$f + other=$x, missing=$m)"
        return 1
    fi
    echo "ok $1: $(printf '%s\n' "$2" | sed 's/.*failed status/failed status/')"
}

if [ "$ROLE" = a ]; then
    timeout 300 "$ex" -d "$dev" -x "$gid" -p "$port" >"$tmp/r" 2>&1 &
    r=$!
    wait_listen "$port" 60 && put listen 1 || put listen 0
    if [ "$(get flap 240)" = 1 ]; then
        echo "guest a: ip link set $NETDEV down for 3 s"
        timeout 10 /usr/bin/ip link set "$NETDEV" down
        sleep 3
        timeout 10 /usr/bin/ip link set "$NETDEV" up
        echo "guest a: link up"
        put up 1
    fi
    wait "$r"
    rc=$?
    echo "--- receiver (exit $rc):"
    cat "$tmp/r"
    sum=$(sed -n 's/^receiver: done: .*checksum \(0x[0-9a-f]*\)$/\1/p' "$tmp/r")
    put sum "${sum:-none}"
    [ "$rc" = 0 ] || { echo "FAIL flap: the receiver exited $rc"; fail=1; }
    l=$(grep '^receiver: fault 1: ' "$tmp/r")
    if [ -z "$l" ]; then
        echo "FAIL flap: the receiver reported no fault"
        fail=1
    else
        drain_adds_up "receiver, link flap" "$l" '[A-Za-z]+' || fail=1
    fi
    [ "$(get verdict 120)" = ok ] || fail=1
else
    [ "$(get listen 90)" = 1 ] || { echo "FAIL flap: the receiver never listened"; exit 1; }
    timeout 300 "$ex" -d "$dev" -x "$gid" -p "$port" -n "$N" "$PEER_IP" >"$tmp/g" 2>&1 &
    g=$!
    if wait_line "$tmp/g" '^gateway: 1000 confirmed' 240 "$g"; then
        put flap 1
        get up 60 >/dev/null
    else
        put flap 0
        echo "FAIL flap: the gateway never reached 1000 confirmed"
        fail=1
    fi
    wait "$g"
    rc=$?
    echo "--- gateway (exit $rc):"
    cat "$tmp/g"
    [ "$rc" = 0 ] || { echo "FAIL flap: the gateway exited $rc"; fail=1; }
    l=$(grep '^gateway: fault 1: failed status' "$tmp/g")
    if [ -z "$l" ]; then
        echo "FAIL flap: the gateway reported no fault across a 3 s link down"
        fail=1
    else
        drain_adds_up "gateway, link flap" "$l" RetryExcErr || fail=1
        grep -q '^gateway: reconnected after' "$tmp/g" \
            || { echo "FAIL flap: the gateway did not reconnect"; fail=1; }
        grep '^gateway: of the \|^gateway: fault 1: the first' "$tmp/g"
    fi
    gsum=$(sed -n 's/^gateway: done: .*checksum \(0x[0-9a-f]*\)$/\1/p' "$tmp/g")
    rsum=$(get sum 200)
    if [ -n "$gsum" ] && [ "$gsum" = "$rsum" ]; then
        echo "ok flap: $N orders delivered byte for byte across the flap (checksum $gsum on both ends)"
    else
        echo "FAIL flap: checksums differ: gateway ${gsum:-none}, receiver ${rsum:-none}"
        fail=1
    fi
    [ "$fail" = 0 ] && put verdict ok || put verdict fail
fi
echo "rxe0 counters on $ROLE: $(counters)"
barrier flap-end 120
rm -rf "$tmp"
exit "$fail"
