#!/bin/sh
# A link that goes down for good, mid-run: perftest's ib_write_bw through the RDMA CM with a
# bounded transport retry count (--retry_count 1; rxe never gives up at 7, the value
# ibv_rc_pingpong and rping use), requester (client) on guest b, responder (server) on a.
# a takes its own eth0 down 2 s after the client's QP reached RTS: b's writes go unanswered,
# and b's requester must end with status 12 (IBV_WC_RETRY_EXC_ERR) within 60 s, not hang.
# The link is brought up again afterwards (this check runs last all the same). The
# server end is stopped once the client is done: its TCP end-of-run exchange has no peer.
#
# Then the same with the project's own `rdma-direct pingpong` (RC, 4096 B, 8 receives
# posted, --retry-cnt 1 -u 14: two tries 67 ms apart), server on a, client on b, a's link
# down once both run. An end whose send is in flight ends in RETRY_EXC_ERR, and its QP then
# in the error state flushes everything else it had outstanding: its drain line must count
# every outstanding request, exactly 1 RETRY_EXC_ERR and n-1 WR_FLUSH_ERR, none missing,
# within 10 s of the link going down. At least one end must be such a requester (which one
# depends on where the ping-pong was); an end that had only receives outstanding has no
# timer of its own running (RC receives wait, they never time out) and is stopped once the
# other end is done.
. "$PAIRLIB"
set -u
dev=$RDMA_DIRECT_DEVICE
tmp=$(mktemp -d)
fail=0
cmport=7600
timeout 30 modprobe rdma_ucm || { echo "FAIL: modprobe rdma_ucm"; exit 1; }

# down_case NAME WHO_GOES_DOWN EXPECT_REGEX
down_case() {
    name=$1 who=$2 want=$3
    cmport=$((cmport + 1))
    args="-d $dev -R --retry_count=1 -F -s 4096 -D 30 -p $cmport"
    if [ "$ROLE" = a ]; then
        # shellcheck disable=SC2086
        timeout 120 ib_write_bw $args >"$tmp/out" 2>&1 &
        sp=$!
        wait_cm_listen "$cmport" 30
        put "cm-$cmport" 1
    else
        get "cm-$cmport" 60 >/dev/null
    fi
    # The link goes down once the client's QP is in RTS (it is writing; perftest's stdout is
    # buffered, so its output says nothing until it exits) and 2 s have passed. The server's
    # RDMA CM sometimes rejects the first connection request although its listener is up
    # (REJECTED, reason 8: no listener for the service ID); the client then tries again, at
    # most three times, before the link is touched.
    if [ "$ROLE" = b ]; then
        for try in 1 2 3; do
            t0=$(pl_now)
            # shellcheck disable=SC2086
            timeout 120 ib_write_bw $args "$PEER_IP" >"$tmp/out" 2>&1 &
            cp=$!
            n=0
            until /usr/bin/rdma res show qp 2>/dev/null | grep -q "type RC .*state RTS.*pid $cp "; do
                kill -0 "$cp" 2>/dev/null || break
                n=$((n + 1))
                [ "$n" -gt 600 ] && break
                usleep 100000
            done
            kill -0 "$cp" 2>/dev/null && break
            grep -q 'RDMA_CM_EVENT_REJECTED' "$tmp/out" || break
            wait "$cp"
            echo "connection attempt $try rejected by the server's RDMA CM: $(grep 'REJECTED' "$tmp/out")"
            sleep 1
        done
        sleep 2
        put "running-$cmport" 1
    else
        get "running-$cmport" 90 >/dev/null
    fi
    if [ "$ROLE" = "$who" ]; then
        echo "guest $ROLE: ip link set $NETDEV down"
        timeout 10 /usr/bin/ip link set "$NETDEV" down
    fi
    if [ "$ROLE" = b ]; then
        wait "$cp"
        st=$?
        took=$(awk -v a="$t0" -v b="$(pl_now)" 'BEGIN { printf "%.1f", b - a }')
        echo "--- requester (client) on b: exit $st after $took s:"
        cat "$tmp/out"
        put "done-$cmport" 1
        if [ "$st" = 0 ] || [ "$st" = 124 ] || [ "$st" = 143 ]; then
            echo "FAIL $name: the requester did not end in an error completion (exit $st)"
            fail=1
        elif ! grep -Eq "$want" "$tmp/out"; then
            echo "FAIL $name: no completion matching /$want/"
            fail=1
        else
            echo "ok $name: $(grep -E "$want" "$tmp/out" | head -n 1 | sed 's/^ *//') after $took s"
        fi
    else
        get "done-$cmport" 150 >/dev/null
        kill "$sp" 2>/dev/null
        wait "$sp"
        echo "--- responder (server) on a, stopped after the client ended:"
        cat "$tmp/out"
    fi
    if [ "$ROLE" = "$who" ]; then
        timeout 10 /usr/bin/ip link set "$NETDEV" up
        n=0
        until grep -q "$(printf '%s' "$SELF_IP" | awk -F. '{ printf "ffff:%02x%02x:%02x%02x", $1, $2, $3, $4 }')" \
            /sys/class/infiniband/"$dev"/ports/1/gids/* 2>/dev/null; do
            n=$((n + 1))
            [ "$n" -gt 100 ] && break
            usleep 100000
        done
    fi
    echo "rxe0 counters on $ROLE: $(counters)"
    barrier "down-$cmport" 200
}

# is_int WORD: WORD is a non-negative integer.
is_int() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }

# pp_down: rdma-direct pingpong with bounded retries; a's link goes down mid-run.
pp_down() {
    port=18990
    pp="$RDMA_DIRECT_BIN pingpong -d $dev -g $RDMA_DIRECT_GID_INDEX -s 4096 -n 1000000 -r 8 --retry-cnt 1 -u 14 -p $port"
    if [ "$ROLE" = a ]; then
        # shellcheck disable=SC2086
        timeout 120 $pp >"$tmp/pp" 2>&1 &
        pid=$!
        wait_listen "$port" 30
        put "pp-listen" 1
    else
        get "pp-listen" 60 >/dev/null
        # shellcheck disable=SC2086
        timeout 120 $pp "$PEER_IP" >"$tmp/pp" 2>&1 &
        pid=$!
    fi
    # Both ends print the remote address once connected; then 1 s of ping-pong.
    n=0
    until grep -q 'remote address' "$tmp/pp"; do
        n=$((n + 1))
        { [ "$n" -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; } && break
        usleep 100000
    done
    barrier pp-connected 60
    sleep 1
    if [ "$ROLE" = a ]; then
        echo "guest a: ip link set $NETDEV down"
        timeout 10 /usr/bin/ip link set "$NETDEV" down
    fi
    t0=$(pl_now)
    # Each end waits for itself up to 10 s, then for the other's verdict.
    n=0
    while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do
        n=$((n + 1))
        usleep 100000
    done
    took=$(awk -v a="$t0" -v b="$(pl_now)" 'BEGIN { printf "%.1f", b - a }')
    if kill -0 "$pid" 2>/dev/null; then
        put pp-end stalled
    else
        put pp-end exited
    fi
    peer=$(get pp-end 60)
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null
        wait "$pid"
        st=stopped
    else
        wait "$pid"
        st=$?
    fi
    echo "--- rdma-direct pingpong on $ROLE: ${st} (exit within $took s of the link going down; the other end: $peer):"
    cat "$tmp/pp"
    line=$(grep 'RETRY_EXC_ERR (12) for wr_id 2 .*drain: ' "$tmp/pp" | head -n 1)
    verdict=other
    if [ -n "$line" ]; then
        # drain: N outstanding at the first error (S sends, R receives): K1 ST1, K2 ST2, M without a completion (T s)
        d=$(printf '%s\n' "$line" | sed 's/.*drain: //')
        outst=$(printf '%s\n' "$d" | sed -n 's/^\([0-9]*\) outstanding.*/\1/p')
        tally=$(printf '%s\n' "$d" | sed 's/^[^:]*: //')
        retry=$(printf '%s\n' "$tally" | sed -n 's/^\([0-9]*\) RETRY_EXC_ERR, .*/\1/p')
        flush=$(printf '%s\n' "$tally" | sed -n 's/^[0-9]* RETRY_EXC_ERR, \([0-9]*\) WR_FLUSH_ERR, [0-9]* without.*/\1/p')
        missing=$(printf '%s\n' "$tally" | sed -n 's/.* \([0-9]*\) without a completion.*/\1/p')
        if is_int "$outst" && is_int "$retry" && is_int "$flush" && [ "$retry" = 1 ] \
            && [ "$flush" = $((outst - 1)) ] && [ "$missing" = 0 ] && [ "$outst" -ge 2 ] \
            && awk -v t="$took" 'BEGIN { exit !(t <= 10) }'; then
            verdict=requester
            echo "ok pingpong link down on $ROLE: RETRY_EXC_ERR, then all $outst outstanding accounted for: 1 RETRY_EXC_ERR + $flush WR_FLUSH_ERR, 0 missing; exit within $took s"
        else
            verdict=bad
            echo "FAIL pingpong link down on $ROLE: the drain does not add up to 1 RETRY_EXC_ERR + (n-1) WR_FLUSH_ERR within 10 s: $d (exit within $took s)"
            fail=1
        fi
    elif [ "$st" = 0 ] || [ "$st" = 124 ]; then
        echo "FAIL pingpong link down on $ROLE: exit $st (the run should have ended in an error completion)"
        verdict=bad
        fail=1
    else
        echo "pingpong on $ROLE: no request of its own outstanding (only receives), ${st}"
    fi
    put "pp-verdict" "$verdict"
    pv=$(get pp-verdict 60)
    if [ "$verdict" != requester ] && [ "$pv" != requester ]; then
        echo "FAIL pingpong link down: neither end ended as a requester with RETRY_EXC_ERR"
        fail=1
    fi
    if [ "$ROLE" = a ]; then
        timeout 10 /usr/bin/ip link set "$NETDEV" up
    fi
    barrier pp-down-done 60
}

down_case "responder's link down" a 'status 12|retry counter exceeded|RETRY_EXC'
# The link (and a's GID) is back: a second run across it.
[ "$ROLE" = a ] && ping -c 1 -W 10 "$PEER_IP" >/dev/null 2>&1
barrier pp-start 60
pp_down
rm -rf "$tmp"
exit "$fail"
