#!/bin/sh
# Connecting by address through the RDMA CM in one guest, over an address of its own: the
# CM cannot route 127.0.0.1 (or another address on lo) over RoCE, so this check makes a veth
# pair, puts 192.0.2.1/24 on vth_c and an rxe device (rxe_cm) on it; both ends of each pair
# use rxe_cm and connect to 192.0.2.1 (rxe loops the frames back inside the device).
#
# (tests/cm_device.rs, the library's own device test, runs with the test binaries, on a bed
# of its own of the same kind.)
#   1. `rdma-direct pingpong -R` (rping's protocol) against itself, against `rping -s`
#      (ours the client) and `rping -c -V` (ours the server; rping verifies every byte);
#   2. `rdma-direct perf <test> -R` against perftest's `ib_<test> -R` in both roles, for
#      write_lat, send_lat, write_bw (perftest's whole exchange over the CM);
#   3. failures that must end cleanly naming the cause: a connect with no listener, an
#      address nobody answers, a server (rping) killed mid-run.
# rdma_ucm is loaded here and unloaded again at the end, as are the veth pair and rxe_cm.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=rxe_cm
addr=192.0.2.1
tmp=$(mktemp -d)
fail=0
passed=0
loaded_ucm=0

# shellcheck disable=SC2317 # called through the trap
cleanup() {
    timeout 10 /usr/bin/rdma link delete "$dev" 2>/dev/null
    timeout 10 /usr/bin/ip link delete vth_c 2>/dev/null
    [ "$loaded_ucm" = 1 ] && rmmod rdma_ucm 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

step() { "$@" || { echo "FAIL: $*"; exit 1; }; }

if [ ! -e /dev/infiniband/rdma_cm ]; then
    step timeout 30 modprobe rdma_ucm
    loaded_ucm=1
fi
step timeout 30 modprobe veth
step timeout 10 /usr/bin/ip link add vth_c type veth peer name vth_d
step timeout 10 /usr/bin/ip link set vth_c up
step timeout 10 /usr/bin/ip link set vth_d up
step timeout 10 /usr/bin/ip addr add "$addr/24" dev vth_c
step timeout 10 /usr/bin/rdma link add "$dev" type rxe netdev vth_c
n=0
until grep -qx '0000:0000:0000:0000:0000:ffff:c000:0201' /sys/class/infiniband/$dev/ports/1/gids/* 2>/dev/null; do
    n=$((n + 1))
    [ "$n" -gt 100 ] && { echo "FAIL: no GID ::ffff:$addr on $dev after 10 s"; exit 1; }
    usleep 100000
done
echo "$dev on vth_c, $addr: GID ::ffff:$addr present"

ok() { passed=$((passed + 1)); echo "ok $1"; }
bad() { fail=1; echo "FAIL $1"; }

# Wait until a CM id listens on port $1 (rdma's resource view); 20 s at most.
wait_cm_listen() {
    n=0
    until timeout 5 /usr/bin/rdma resource show cm_id 2>/dev/null | grep LISTEN | grep -q ":$1\( \|\$\)"; do
        n=$((n + 1))
        [ "$n" -gt 200 ] && return 1
        usleep 100000
    done
    usleep 500000
}

# run NAME SERVER_CMD CLIENT_CMD PORT: server in the background, client once it listens;
# both outputs printed; sets $src and $crc.
run() {
    name=$1 scmd=$2 ccmd=$3 port=$4
    # shellcheck disable=SC2086
    timeout 120 $scmd >"$tmp/server" 2>&1 &
    spid=$!
    wait_cm_listen "$port" || echo "(no CM listener seen on port $port)"
    # shellcheck disable=SC2086
    timeout 120 $ccmd >"$tmp/client" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    echo "=== $name"
    # rping -v lines carry the whole buffer: the start of each is enough for the log.
    echo "--- server: $scmd (exit $src)"
    cut -c1-100 "$tmp/server"
    echo "--- client: $ccmd (exit $crc)"
    cut -c1-100 "$tmp/client"
}


# --- 1. rping's protocol ---------------------------------------------------------------
pp="$bin pingpong -d $dev -R -s 2048"
run "pingpong -R: ours against ours" "$pp -p 7301" "$pp -n 6 -p 7301 $addr" 7301
if [ "$src" = 0 ] && [ "$crc" = 0 ] && grep -q "6 pings of 2048 bytes, every byte verified" "$tmp/client" \
    && grep -q "6 pings served, the client disconnected" "$tmp/server"; then
    ok "pingpong -R ours/ours"
else
    bad "pingpong -R ours/ours"
fi

run "pingpong -R client against rping -s" "rping -s -a $addr -p 7302 -S 2048 -v" "$pp -n 6 -p 7302 $addr" 7302
if [ "$crc" = 0 ] && grep -q "6 pings of 2048 bytes, every byte verified" "$tmp/client" \
    && [ "$(grep -c '^server ping data: rdma-ping-' "$tmp/server")" = 6 ]; then
    ok "pingpong -R client / rping server"
else
    bad "pingpong -R client / rping server"
fi

run "pingpong -R server against rping -c -V" "$pp -p 7303" "rping -c -a $addr -p 7303 -S 2048 -C 6 -V -v" 7303
# rping's client may exit 255 after its last verified ping (its CM thread reads the channel
# the main thread destroyed; see README.md): the six verified pings are the verdict.
if [ "$src" = 0 ] && [ "$(grep -c '^ping data: rdma-ping-' "$tmp/client")" = 6 ] \
    && ! grep -q "data mismatch" "$tmp/client" && grep -q "6 pings served" "$tmp/server"; then
    ok "pingpong -R server / rping client"
else
    bad "pingpong -R server / rping client"
fi

# --- 2. perftest -R --------------------------------------------------------------------
port=18900
for t in write_lat send_lat write_bw; do
    case $t in
        *_lat) row='^ *2 +200 ' ;;
        *) row='^ *65536 +200 ' ;;
    esac
    for srv in ours perftest; do
        port=$((port + 1))
        ours="$bin perf $t -d $dev -R -n 200 -p $port"
        theirs="ib_$t -d $dev -R -n 200 -F -p $port"
        if [ "$srv" = ours ]; then
            run "perf $t -R: ours the server, perftest the client" "$ours" "$theirs $addr" "$port"
        else
            run "perf $t -R: perftest the server, ours the client" "$theirs" "$ours $addr" "$port"
        fi
        if [ "$src" = 0 ] && [ "$crc" = 0 ] && grep -Eq "$row" "$tmp/client"; then
            ok "perf $t -R ($srv the server)"
        else
            bad "perf $t -R ($srv the server): server exit $src, client exit $crc, client row /$row/"
        fi
    done
done

# --- 3. failures that end cleanly --------------------------------------------------------
timeout 60 $bin pingpong -d $dev -R -p 7399 "$addr" >"$tmp/out" 2>&1
rc=$?
echo "=== no listener (exit $rc)"; cat "$tmp/out"
if [ "$rc" = 1 ] && grep -q "REJECTED: no listener" "$tmp/out"; then ok "rejected connect"; else bad "rejected connect"; fi

timeout 60 $bin pingpong -d $dev -R -p 7398 192.0.2.99 >"$tmp/out" 2>&1
rc=$?
echo "=== nobody at 192.0.2.99 (exit $rc)"; cat "$tmp/out"
if [ "$rc" = 1 ] && grep -q "rdma_cm connect to 192.0.2.99:7398" "$tmp/out"; then ok "unreachable address"; else bad "unreachable address"; fi

timeout 120 rping -s -a "$addr" -p 7397 -S 2048 >"$tmp/server" 2>&1 &
spid=$!
wait_cm_listen 7397
timeout 120 $bin pingpong -d $dev -R -s 2048 -n 100000 -p 7397 "$addr" >"$tmp/out" 2>&1 &
cpid=$!
sleep 3
kill -9 "$spid" 2>/dev/null
wait "$cpid"
rc=$?
wait "$spid" 2>/dev/null
echo "=== rping server killed mid-run (client exit $rc)"; cat "$tmp/out"
if [ "$rc" = 1 ] && grep -q "the server disconnected at ping" "$tmp/out"; then ok "peer disconnect mid-run"; else bad "peer disconnect mid-run"; fi

echo "60-cm: $passed passed, fail=$fail"
exit "$fail"
