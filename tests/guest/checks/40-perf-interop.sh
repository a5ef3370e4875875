#!/bin/sh
# rdma-direct perf as two processes, against perftest 4.5's ib_* tools and against itself,
# on rxe0 over 127.0.0.1: for each test and option set, (1) perftest's server with our
# client, (2) our server with perftest's client, (3) our server with our client. Both
# processes must exit 0; the client must print a table row of the size (and, where perftest
# does, the server too). Every output is printed for the log; the last line counts the pairs.
#
# Usage: 40-perf-interop.sh [TEST] (default write_lat; 41..45 run the other five tests).
# Each pair prints its time.
#
# perftest's own rows may read inf/nan in the TCG guest: it derives its clock from a CPU
# frequency it measures, which fails there at times ("Correlation coefficient r^2 < 0.9");
# such a row still proves the exchange and the run.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE, RDMA_DIRECT_GID_INDEX.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:?RDMA_DIRECT_GID_INDEX is not set}
t=${1:-write_lat}
case $t in
    write_lat) port=18700 ;;
    send_lat) port=18720 ;;
    read_lat) port=18740 ;;
    write_bw) port=18760 ;;
    send_bw) port=18780 ;;
    read_bw) port=18800 ;;
    *) echo "unknown test '$t'"; exit 2 ;;
esac
tmp=$(mktemp -d)
fail=0
passed=0
t0=$(cut -d' ' -f1 /proc/uptime)

# Wait until something listens on TCP $port (v4 or v6); 15 s at most.
wait_listen() {
    hex=$(printf ':%04X ' "$port")
    n=0
    while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$hex.* 0A "; do
        n=$((n + 1))
        [ "$n" -gt 150 ] && return 1
        usleep 100000
    done
}

# pair NAME ROW_REGEX SERVER_PRINTS "SERVER CMD" "CLIENT CMD": each gets "-p PORT"; the
# client also 127.0.0.1. SERVER_PRINTS=1: the server's output must show the row as well.
pair() {
    name=$1 want=$2 sprints=$3 scmd=$4 ccmd=$5
    port=$((port + 1))
    p0=$(cut -d' ' -f1 /proc/uptime)
    # shellcheck disable=SC2086
    timeout 100 $scmd -p "$port" >"$tmp/server" 2>&1 &
    spid=$!
    if ! wait_listen; then
        echo "FAIL $name: server never listened on port $port"
        cat "$tmp/server"
        kill "$spid" 2>/dev/null
        wait "$spid" 2>/dev/null
        fail=1
        return
    fi
    # shellcheck disable=SC2086
    timeout 100 $ccmd -p "$port" 127.0.0.1 >"$tmp/client" 2>&1
    crc=$?
    wait "$spid"
    src=$?
    echo "=== $name ($(awk -v a="$p0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }') s)"
    echo "--- server: $scmd -p $port (exit $src)"
    cat "$tmp/server"
    echo "--- client: $ccmd -p $port 127.0.0.1 (exit $crc)"
    cat "$tmp/client"
    if [ "$src" != 0 ] || [ "$crc" != 0 ]; then
        echo "FAIL $name: server exit $src, client exit $crc"
        fail=1
    elif ! grep -Eq "$want" "$tmp/client"; then
        echo "FAIL $name: no client row matching /$want/"
        fail=1
    elif [ "$sprints" = 1 ] && ! grep -Eq "$want" "$tmp/server"; then
        echo "FAIL $name: no server row matching /$want/"
        fail=1
    else
        echo "ok $name"
        passed=$((passed + 1))
    fi
}

num='([0-9]+\.[0-9]+|inf|-?nan)'
# row SIZE ITERS: a table row of that size and iteration count.
row() { echo "^ *$1 +$2 +$num +$num"; }

# run_set TEST SERVER_PRINTS ROW OPTS...: the three pairs of one test and option set.
run_set() {
    sp=$2 want=$3
    shift 3
    opts="$*"
    ours="$bin perf $t -d $dev -x $gid $opts"
    theirs="ib_$t -d $dev -x $gid -F $opts"
    pair "$t [$opts]: ib_$t server, rdma-direct client" "$want" "$sp" "$theirs" "$ours"
    pair "$t [$opts]: rdma-direct server, ib_$t client" "$want" "$sp" "$ours" "$theirs"
    pair "$t [$opts]: rdma-direct server, rdma-direct client" "$want" "$sp" "$ours" "$ours"
}

# mixed_set TEST SERVER_PRINTS ROW OPTS...: both roles against perftest (no self pair).
mixed_set() {
    sp=$2 want=$3
    shift 3
    opts="$*"
    ours="$bin perf $t -d $dev -x $gid $opts"
    theirs="ib_$t -d $dev -x $gid -F $opts"
    pair "$t [$opts]: ib_$t server, rdma-direct client" "$want" "$sp" "$theirs" "$ours"
    pair "$t [$opts]: rdma-direct server, ib_$t client" "$want" "$sp" "$ours" "$theirs"
}

# reference SERVER_PRINTS ROW [OPTS...]: perftest against itself, for comparison.
reference() {
    sp=$1 want=$2
    shift 2
    pair "$t [$*]: ib_$t server, ib_$t client (reference)" "$want" "$sp" \
        "ib_$t -d $dev -x $gid -F $*" "ib_$t -d $dev -x $gid -F $*"
}

# The matrix is cut to what each pair proves, so that the six checks together stay short
# under TCG (a process start costs 1-2 s there, rxe moves about 30 MB/s, and perftest's
# latency tests take 15-50 s for an -a sweep):
#   - defaults (no -s; -n 200 for bandwidth, where perftest's default would move 64-320 MB,
#     and for send_lat): both roles, and our server with our client (perftest against
#     itself, for comparison, only with RDMA_DIRECT_GUEST_FULL=1);
#   - bandwidth: the -a sweep (every size 2 .. 8 MiB: per-size handshakes, the server's
#     report of the last size) with 5 iterations, the fewest perftest accepts, both roles:
#     send_bw (whose server posts receives and handshakes per size, and once more after each
#     size with -a); write_bw and read_bw too with RDMA_DIRECT_GUEST_FULL=1;
#   - latency: one multi-packet size (1 MiB, 256 packets at the 4096 B MTU of lo), 5
#     iterations, both roles; the -a sweep (per-size handshakes of send_lat) only with
#     RDMA_DIRECT_GUEST_FULL=1 (tests/guest/run passes it into the guest);
#   - inline (-I; write and send): both roles.
# Our server with our client runs once per test (defaults): the same pair runs across the
# two-guest link (pair/25-perf.sh) and in the device tests.
case $t in
    *_lat)
        # write_lat and send_lat print on both sides, read_lat on the client only.
        sp=1
        [ "$t" = read_lat ] && sp=0
        if [ "$t" = send_lat ]; then
            # send_lat's round trips fall into 4 ms scheduler steps in the guest (perftest
            # against itself too): 1000 of them cost 4-8 s per pair.
            run_set "$t" "$sp" "$(row 2 200)" -n 200
            [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ] && reference "$sp" "$(row 2 200)" -n 200
        else
            run_set "$t" "$sp" "$(row 2 1000)"
            [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ] && reference "$sp" "$(row 2 1000)"
        fi
        mixed_set "$t" "$sp" "$(row 1048576 5)" -s 1048576 -n 5
        [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ] && mixed_set "$t" "$sp" "$(row 8388608 5)" -a -n 5
        [ "$t" != read_lat ] && mixed_set "$t" "$sp" "$(row 64 100)" -s 64 -n 100 -I 64
        ;;
    *)
        # The server of write_bw/read_bw prints the client's report (with -a: of the last
        # size), send_bw's server its own receive rate per size.
        run_set "$t" 1 "$(row 65536 200)" -n 200
        [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ] && reference 1 "$(row 65536 200)" -n 200
        if [ "$t" = send_bw ] || [ -n "${RDMA_DIRECT_GUEST_FULL:-}" ]; then
            mixed_set "$t" 1 "$(row 8388608 5)" -a -n 5
        fi
        [ "$t" != read_bw ] && mixed_set "$t" 1 "$(row 32 200)" -s 32 -n 200 -I 32
        ;;
esac
rm -rf "$tmp"
echo "perf interop $t: $passed passed, fail=$fail ($(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f", b - a }') s)"
exit "$fail"
