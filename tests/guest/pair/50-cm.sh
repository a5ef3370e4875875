#!/bin/sh
# Connecting by address through the RDMA CM across the link (rxe0 on eth0, 169.254.0.x):
#   - `rdma-direct pingpong -R` (rping's protocol) against itself, against `rping -s` and
#     against `rping -c -V` (rping compares every byte), server on a and on b;
#   - `rdma-direct perf <test> -R` against perftest's `ib_<test> -R` (its whole exchange over
#     the CM), ours the server and ours the client, for write_lat, send_lat, write_bw;
#   - a connect with no listener on the peer (rejected, reason named), an address on the link
#     that nobody has (ends before its deadline, naming the address), and an rping server
#     killed mid-run (our client names the disconnect).
. "$PAIRLIB"
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=$RDMA_DIRECT_DEVICE
fail=0
passed=0
timeout 30 modprobe rdma_ucm || { echo "FAIL: modprobe rdma_ucm"; exit 1; }

ok() { passed=$((passed + 1)); }
bad() { fail=1; echo "FAIL $1 (guest $ROLE)"; }

# cross_cm NAME SERVER_ROLE PORT SECONDS 'SERVER CMD' 'CLIENT CMD': `cross` for servers
# that listen on an RDMA CM port, not a TCP one. Sets CROSS_RC and CROSS_OUT.
cross_cm() {
    cc_name=$1 cc_srole=$2 cc_port=$3 cc_secs=$4 cc_scmd=$5 cc_ccmd=$6
    CROSS_OUT=${TMPDIR:-/tmp}/cross_cm.$cc_port.$ROLE
    if [ "$ROLE" = "$cc_srole" ]; then
        # shellcheck disable=SC2086
        timeout "$cc_secs" $cc_scmd >"$CROSS_OUT" 2>&1 &
        cc_pid=$!
        if wait_cm_listen "$cc_port" 60; then put "cm-listen-$cc_port" 1; else put "cm-listen-$cc_port" 0; fi
        wait "$cc_pid"
        CROSS_RC=$?
        echo "--- $cc_name: server on guest $ROLE: $cc_scmd (exit $CROSS_RC)"
    else
        if [ "$(get "cm-listen-$cc_port" 90)" = 1 ]; then
            # shellcheck disable=SC2086
            timeout "$cc_secs" $cc_ccmd "$PEER_IP" >"$CROSS_OUT" 2>&1
            CROSS_RC=$?
        else
            echo "server never listened on CM port $cc_port" >"$CROSS_OUT"
            CROSS_RC=99
        fi
        echo "--- $cc_name: client on guest $ROLE: $cc_ccmd $PEER_IP (exit $CROSS_RC)"
    fi
    # rping -v lines carry the whole buffer: the start of each is enough for the log.
    cut -c1-100 "$CROSS_OUT"
    barrier "cross-cm-$cc_port" $((cc_secs + 60))
    return "$CROSS_RC"
}

pp="$bin pingpong -d $dev -R -s 2048"
port=7400
for s in a b; do
    port=$((port + 1))
    cross_cm "pingpong -R ours/ours (server on $s)" "$s" "$port" 90 "$pp -p $port" "$pp -n 6 -p $port"
    if [ "$CROSS_RC" != 0 ]; then bad "pingpong -R ours/ours, server on $s: exit $CROSS_RC"
    elif [ "$ROLE" = "$s" ] && ! grep -q "6 pings served, the client disconnected" "$CROSS_OUT"; then bad "ours/ours server on $s: no served line"
    elif [ "$ROLE" != "$s" ] && ! grep -q "6 pings of 2048 bytes, every byte verified" "$CROSS_OUT"; then bad "ours/ours server on $s: no verified line"
    else ok; fi

    port=$((port + 1))
    cross_cm "rping -s / pingpong -R client (server on $s)" "$s" "$port" 90 \
        "rping -s -a 0.0.0.0 -p $port -S 2048 -v" "$pp -n 6 -p $port"
    if [ "$ROLE" != "$s" ]; then
        if [ "$CROSS_RC" = 0 ] && grep -q "6 pings of 2048 bytes, every byte verified" "$CROSS_OUT"; then ok
        else bad "our client against rping -s on $s: exit $CROSS_RC"; fi
    elif [ "$(grep -c '^server ping data: rdma-ping-' "$CROSS_OUT")" != 6 ]; then
        bad "rping -s on $s: not 6 pings served"
    else ok; fi

    port=$((port + 1))
    # rping -c ends its address with -a: the peer's address is appended by cross_cm, so
    # the client command ends in "-a".
    cross_cm "pingpong -R server / rping -c -V (server on $s)" "$s" "$port" 90 \
        "$pp -p $port" "rping -c -p $port -S 2048 -C 6 -V -v -a"
    if [ "$ROLE" = "$s" ]; then
        if [ "$CROSS_RC" = 0 ] && grep -q "6 pings served" "$CROSS_OUT"; then ok
        else bad "our server on $s against rping -c: exit $CROSS_RC"; fi
    elif [ "$(grep -c '^ping data: rdma-ping-' "$CROSS_OUT")" != 6 ] || grep -q "data mismatch" "$CROSS_OUT"; then
        # rping's client may exit 255 after its last verified ping (tests/guest/README.md):
        # the six verified pings are the verdict.
        bad "rping -c against our server on $s: not 6 verified pings"
    else ok; fi
done

port=18950
for t in write_lat send_lat write_bw; do
    case $t in
        *_lat) row='^ *2 +200 ' ;;
        *) row='^ *65536 +200 ' ;;
    esac
    ours="$bin perf $t -d $dev -R -n 200"
    theirs="ib_$t -d $dev -R -n 200 -F"
    # ours the server on a with perftest the client on b; then perftest the server on a.
    for srv in ours perftest; do
        port=$((port + 1))
        if [ "$srv" = ours ]; then scmd="$ours -p $port" ccmd="$theirs -p $port"
        else scmd="$theirs -p $port" ccmd="$ours -p $port"; fi
        cross_cm "perf $t -R ($srv the server, on a)" a "$port" 120 "$scmd" "$ccmd"
        if [ "$CROSS_RC" != 0 ]; then bad "perf $t -R, $srv the server: exit $CROSS_RC"
        elif [ "$ROLE" = b ] && ! grep -Eq "$row" "$CROSS_OUT"; then bad "perf $t -R, $srv the server: no client row /$row/"
        else ok; fi
    done
done

# Failures: on b only (a idles at the barrier).
if [ "$ROLE" = b ]; then
    timeout 60 $bin pingpong -d "$dev" -R -p 7499 "$PEER_IP" >/tmp/cm-rej 2>&1
    rc=$?
    echo "--- no listener on $PEER_IP:7499 (exit $rc)"; cat /tmp/cm-rej
    if [ "$rc" = 1 ] && grep -q "REJECTED: no listener" /tmp/cm-rej; then ok; else bad "rejected connect"; fi
    timeout 60 $bin pingpong -d "$dev" -R -p 7498 169.254.0.99 >/tmp/cm-unr 2>&1
    rc=$?
    echo "--- nobody at 169.254.0.99 (exit $rc)"; cat /tmp/cm-unr
    if [ "$rc" = 1 ] && grep -q "rdma_cm connect to 169.254.0.99:7498" /tmp/cm-unr; then ok; else bad "unreachable address"; fi
fi
barrier cm-failures 180

# An rping server on a killed 3 s into the run: our client on b names the disconnect.
if [ "$ROLE" = a ]; then
    timeout 120 rping -s -a 0.0.0.0 -p 7497 -S 2048 >/dev/null 2>&1 &
    rpid=$!
    wait_cm_listen 7497 60
    put rping-up 1
    get client-running 90 >/dev/null
    sleep 3
    kill -9 "$rpid" 2>/dev/null
    wait "$rpid" 2>/dev/null
else
    get rping-up 90 >/dev/null
    timeout 120 $bin pingpong -d "$dev" -R -s 2048 -n 1000000 -p 7497 "$PEER_IP" >/tmp/cm-kill 2>&1 &
    cpid=$!
    put client-running 1
    wait "$cpid"
    rc=$?
    echo "--- rping server on a killed mid-run (our client's exit $rc)"; cat /tmp/cm-kill
    if [ "$rc" = 1 ] && grep -q "the server disconnected at ping" /tmp/cm-kill; then ok; else bad "peer disconnect mid-run"; fi
fi
barrier cm-kill 200

echo "RDMA CM across the link (guest $ROLE): $passed passed, fail=$fail"
exit "$fail"
