#!/bin/sh
# A link that goes down for good, mid-run: perftest's ib_write_bw through the RDMA CM with a
# bounded transport retry count (--retry_count 1; rxe never gives up at 7, the value
# ibv_rc_pingpong and rping use), requester (client) on guest b, responder (server) on a.
# a takes its own eth0 down 2 s after the client's QP reached RTS: b's writes go unanswered,
# and b's requester must end with status 12 (IBV_WC_RETRY_EXC_ERR) within 60 s, not hang.
# The link is brought up again afterwards (this check runs last all the same). The
# server end is stopped once the client is done: its TCP end-of-run exchange has no peer.
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

down_case "responder's link down" a 'status 12|retry counter exceeded|RETRY_EXC'
rm -rf "$tmp"
exit "$fail"
