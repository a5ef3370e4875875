#!/bin/sh
# The two-guest bed itself, before anything of the project runs across it: each guest's
# address and RoCE v2 GID on the link, ICMP both ways, and rdma-core's ibv_rc_pingpong with
# the server on guest a and the client on guest b (and the reverse), so a broken bed shows up
# here. Prints the per-iteration round trip across the link.
. "$PAIRLIB"
set -u
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
tmp=$(mktemp -d)
fail=0
echo "guest $ROLE: $SELF_IP on $NETDEV ($(cat /sys/class/net/"$NETDEV"/address), mtu $(cat /sys/class/net/"$NETDEV"/mtu)); $dev GID $gid = $(cat /sys/class/infiniband/"$dev"/ports/1/gids/"$gid"); active MTU $(ibv_devinfo -d "$dev" | sed -n 's/.*active_mtu:[[:space:]]*//p')"
if ping -c 3 -W 5 "$PEER_IP" >"$tmp/ping" 2>&1; then
    tail -n 1 "$tmp/ping"
else
    cat "$tmp/ping"
    echo "FAIL: no ICMP reply from $PEER_IP"
    fail=1
fi
put gid "$(cat /sys/class/infiniband/"$dev"/ports/1/gids/"$gid")"
echo "peer's GID: $(get gid)"

# rc DIRECTION SERVER_ROLE: ibv_rc_pingpong, server on SERVER_ROLE, client on the other.
rc() {
    port=$2
    if [ "$ROLE" = "$1" ]; then
        timeout 60 ibv_rc_pingpong -d "$dev" -g "$gid" -n 200 -s 64 -p "$port" >"$tmp/out" 2>&1 &
        spid=$!
        wait_listen "$port" && put "listen-$port" 1
        wait "$spid"
        st=$?
        echo "--- ibv_rc_pingpong server on $ROLE (exit $st):"
    else
        get "listen-$port" 60 >/dev/null
        timeout 60 ibv_rc_pingpong -d "$dev" -g "$gid" -n 200 -s 64 -p "$port" "$PEER_IP" >"$tmp/out" 2>&1
        st=$?
        echo "--- ibv_rc_pingpong client on $ROLE to $PEER_IP (exit $st):"
    fi
    cat "$tmp/out"
    if [ "$st" != 0 ] || ! grep -q 'iters in' "$tmp/out"; then
        echo "FAIL: ibv_rc_pingpong, server on guest $1"
        fail=1
    fi
    barrier "rc-$port"
}
rc a 18515
rc b 18516
echo "rxe0 counters: $(counters)"
rm -rf "$tmp"
[ "$fail" = 0 ] && echo "ok link ($SELF_IP <-> $PEER_IP)"
exit "$fail"
