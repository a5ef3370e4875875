#!/bin/sh
# Two rxe devices with packets really crossing a link: a veth pair inside the guest, one rxe
# per end, link-local (fe80) GIDs at index 0, IPv6 duplicate address detection off first (a
# tentative address would leave the GID unusable). rdma-core's ibv_rc_pingpong runs from one
# device to the other (endpoint exchange over TCP on 127.0.0.1), and the veth counters must
# show the RoCE traffic. Everything is removed again at the end, so later checks see only rxe0.
set -u
a=rxe_va b=rxe_vb
fail=0
tmp=$(mktemp -d)

# shellcheck disable=SC2317 # called through the trap
cleanup() {
    timeout 10 /usr/bin/rdma link delete "$a" 2>/dev/null
    timeout 10 /usr/bin/rdma link delete "$b" 2>/dev/null
    timeout 10 /usr/bin/ip link delete vth_a 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

step() { "$@" || { echo "FAIL: $*"; exit 1; }; }

step timeout 30 modprobe veth
for k in all default; do
    step sysctl -qw "net.ipv6.conf.$k.accept_dad=0"
done
step timeout 10 /usr/bin/ip link add vth_a type veth peer name vth_b
step timeout 10 /usr/bin/ip link set vth_a up
step timeout 10 /usr/bin/ip link set vth_b up
step timeout 10 /usr/bin/rdma link add "$a" type rxe netdev vth_a
step timeout 10 /usr/bin/rdma link add "$b" type rxe netdev vth_b

# Wait for a fe80 GID at index 0 on both devices (the table fills asynchronously).
for d in $a $b; do
    n=0
    until grep -q '^fe80:' "/sys/class/infiniband/$d/ports/1/gids/0" 2>/dev/null; do
        n=$((n + 1))
        [ "$n" -gt 100 ] && { echo "FAIL: no fe80 GID on $d"; exit 1; }
        usleep 100000
    done
    echo "$d: GID 0 $(cat "/sys/class/infiniband/$d/ports/1/gids/0") on $(cat "/sys/class/infiniband/$d/ports/1/gid_attrs/ndevs/0")"
done

tx0=$(cat /sys/class/net/vth_a/statistics/tx_packets)
rx0=$(cat /sys/class/net/vth_a/statistics/rx_packets)
iters=500
timeout 60 ibv_rc_pingpong -d "$a" -g 0 -n "$iters" -s 1024 >"$tmp/server" 2>&1 &
spid=$!
n=0
until cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ':4853 .* 0A '; do
    n=$((n + 1))
    [ "$n" -gt 100 ] && { echo "FAIL: ibv_rc_pingpong server never listened"; cat "$tmp/server"; exit 1; }
    usleep 100000
done
timeout 60 ibv_rc_pingpong -d "$b" -g 0 -n "$iters" -s 1024 127.0.0.1 >"$tmp/client" 2>&1
crc=$?
wait "$spid"
src=$?
echo "--- server on $a (exit $src):"
cat "$tmp/server"
echo "--- client on $b (exit $crc):"
cat "$tmp/client"
if [ "$src" != 0 ] || [ "$crc" != 0 ]; then
    echo "FAIL: ibv_rc_pingpong across the veth pair"
    fail=1
fi

tx=$(($(cat /sys/class/net/vth_a/statistics/tx_packets) - tx0))
rx=$(($(cat /sys/class/net/vth_a/statistics/rx_packets) - rx0))
echo "vth_a: $tx packets sent, $rx received during the ping-pong"
# Each side sends $iters messages; each is one packet at 1024 B (MTU 1024) plus acks.
if [ "$tx" -lt "$iters" ] || [ "$rx" -lt "$iters" ]; then
    echo "FAIL: fewer than $iters packets each way crossed the veth pair"
    fail=1
fi
[ "$fail" = 0 ] && echo "ok rc_pingpong across veth ($a <-> $b)"
exit "$fail"
