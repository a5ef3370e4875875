#!/bin/sh
# Peer restart mid-stream: examples/reconnect (the project's own reconnecting order stream)
# between the guests over rxe0, receiver on a (its progress in a state file), gateway on b
# streaming $N numbered 64-byte orders as RDMA WRITE WITH IMMEDIATE (ConnectOpts timeout 16 =
# 268 ms, retry_cnt 2: three tries, a retry budget of 0.81 s; a liveness probe every 200 ms
# while nothing is in flight, so a vanished peer is found from a completion even when the
# gateway only waits for credit).
#
# 1. Once the receiver has 1000 orders, a kill -9s it (the kernel destroys its QP) and starts
#    it again on the same state file 1 s later. The gateway must end every request it had
#    outstanding: its first error RETRY_EXC_ERR, every other outstanding request (sends and
#    its credit receives) flushed, none missing, the first error at most 3 s after its last
#    good completion (the budget 0.81 s + 0.2 s heartbeat, plus slack for a loaded TCG guest);
#    then reconnect to the restarted receiver, which resumes from its state file.
# 2. Once the gateway has 3000 confirmed, b kill -9s the gateway and starts it again (it
#    resumes where the receiver says). The receiver must see its peer's connection close,
#    move its QP to ERR and account for its outstanding requests (its receives flushed, none
#    missing), then take the new gateway.
# Both must exit 0: the receiver checked every order byte for byte in sequence; the
# receiver's checksum over everything it received (kept across its restart) must equal the
# gateway's checksum of the whole stream, and each side's lost-in-flight count is printed.
. "$PAIRLIB"
set -u
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
ex=${RDMA_DIRECT_EXAMPLES:-$(dirname "$RDMA_DIRECT_BIN")}/reconnect
N=${RESTART_ORDERS:-8000}
port=18720
tmp=$(mktemp -d)
fail=0
[ -x "$ex" ] || { echo "FAIL: no reconnect example at $ex"; exit 1; }

# wait_line FILE REGEX SECONDS PID: until FILE has a line matching REGEX (status 0), PID
# ends or SECONDS pass (status 1).
wait_line() {
    wl_n=$(($3 * 10))
    until grep -Eq "$2" "$1" 2>/dev/null; do
        wl_n=$((wl_n - 1))
        { [ "$wl_n" -le 0 ] || ! kill -0 "$4" 2>/dev/null; } && return 1
        usleep 100000
    done
}

# field NAME LINE: the value of NAME=VALUE in LINE.
field() { printf '%s\n' "$2" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

# drain_adds_up WHO LINE WANT: the fault LINE's drain counts every outstanding request: its
# first error WANT (a regex), the rest flushed or done, none missing.
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
    st=$tmp/state
    timeout 300 "$ex" -d "$dev" -x "$gid" -p "$port" --state "$st" >"$tmp/r1" 2>&1 &
    r=$!
    wait_listen "$port" 60 && put listen 1 || put listen 0
    if wait_line "$tmp/r1" '^receiver: 1000 received' 120 "$r"; then
        kill -9 "$r"
        wait "$r" 2>/dev/null
        echo "guest a: receiver killed (kill -9) at: $(grep -c 'received$' "$tmp/r1")000 received or more"
        sleep 1
        timeout 300 "$ex" -d "$dev" -x "$gid" -p "$port" --state "$st" >"$tmp/r2" 2>&1 &
        r=$!
        wait "$r"
        rc=$?
    else
        echo "FAIL restart: the receiver never reached 1000 orders"
        fail=1
        kill "$r" 2>/dev/null
        wait "$r"
        rc=1
        : >"$tmp/r2"
    fi
    echo "--- receiver, first incarnation (killed):"
    cat "$tmp/r1"
    echo "--- receiver, restarted (exit $rc):"
    cat "$tmp/r2"
    sum=$(sed -n 's/^receiver: done: .*checksum \(0x[0-9a-f]*\)$/\1/p' "$tmp/r2")
    put sum "${sum:-none}"
    [ "$rc" = 0 ] || { echo "FAIL restart: the restarted receiver exited $rc"; fail=1; }
    l=$(grep '^receiver: fault 1: ' "$tmp/r2")
    if [ -z "$l" ]; then
        echo "FAIL restart: the receiver reported no fault when the gateway was killed"
        fail=1
    else
        drain_adds_up "receiver, gateway killed" "$l" '[A-Za-z]+' || fail=1
    fi
    grep -q '^receiver: resumed from the state file' "$tmp/r2" \
        || { echo "FAIL restart: the restarted receiver did not resume from its state file"; fail=1; }
    v=$(get verdict 120)
    [ "$v" = ok ] || fail=1
else
    [ "$(get listen 90)" = 1 ] || { echo "FAIL restart: the receiver never listened"; exit 1; }
    timeout 300 "$ex" -d "$dev" -x "$gid" -p "$port" -n "$N" "$PEER_IP" >"$tmp/g1" 2>&1 &
    g=$!
    if wait_line "$tmp/g1" '^gateway: 3000 confirmed' 240 "$g"; then
        kill -9 "$g"
        wait "$g" 2>/dev/null
        echo "guest b: gateway killed (kill -9) after 3000 confirmed"
        sleep 1
        timeout 300 "$ex" -d "$dev" -x "$gid" -p "$port" -n "$N" "$PEER_IP" >"$tmp/g2" 2>&1
        rc=$?
    else
        wait "$g"
        rc=$?
        echo "FAIL restart: the gateway never reached 3000 confirmed (exit $rc)"
        fail=1
        : >"$tmp/g2"
    fi
    echo "--- gateway, first incarnation (killed):"
    cat "$tmp/g1"
    echo "--- gateway, restarted (exit $rc):"
    cat "$tmp/g2"
    [ "$rc" = 0 ] || { echo "FAIL restart: the restarted gateway exited $rc"; fail=1; }
    l=$(grep '^gateway: fault 1: failed status' "$tmp/g1")
    q=$(sed -n 's/^gateway: fault 1: the first error came \([0-9.]*\) s after.*/\1/p' "$tmp/g1")
    if [ -z "$l" ]; then
        echo "FAIL restart: the gateway reported no fault when the receiver was killed"
        fail=1
    else
        drain_adds_up "gateway, receiver killed" "$l" RetryExcErr || fail=1
        if awk -v q="$q" 'BEGIN { exit !(q != "" && q <= 3) }'; then
            echo "ok gateway, receiver killed: the first error $q s after the last good completion (limit 3 s)"
        else
            echo "FAIL restart: the first error came ${q:-?} s after the last good completion (limit 3 s)"
            fail=1
        fi
        grep -q '^gateway: reconnected after' "$tmp/g1" \
            || { echo "FAIL restart: the gateway did not reconnect to the restarted receiver"; fail=1; }
        grep '^gateway: of the ' "$tmp/g1"
    fi
    gsum=$(sed -n 's/^gateway: done: .*checksum \(0x[0-9a-f]*\)$/\1/p' "$tmp/g2")
    rsum=$(get sum 150)
    if [ -n "$gsum" ] && [ "$gsum" = "$rsum" ]; then
        echo "ok restart: $N orders delivered byte for byte across both restarts (checksum $gsum on both ends)"
    else
        echo "FAIL restart: checksums differ: gateway ${gsum:-none}, receiver ${rsum:-none}"
        fail=1
    fi
    [ "$fail" = 0 ] && put verdict ok || put verdict fail
fi
echo "rxe0 counters on $ROLE: $(counters)"
barrier restart-end 120
rm -rf "$tmp"
exit "$fail"
