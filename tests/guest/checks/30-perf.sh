#!/bin/sh
# rdma-direct perf on the guest's rxe device: a short write_lat and write_bw (with and
# without a post list of 32), client and server QPs in one process (--loopback on rxe0).
# The tables are printed for the log; the check fails when a run fails or its row is
# missing. Kept short: the whole check must stay under 60 s in the TCG guest.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE,
# RDMA_DIRECT_GID_INDEX.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:?RDMA_DIRECT_GID_INDEX is not set}
tmp=$(mktemp -d)
fail=0

# run NAME ROW_REGEX ARGS...: run `rdma-direct perf ARGS`; it must exit 0 and print a row
# matching ROW_REGEX.
run() {
    name=$1 want=$2
    shift 2
    t0=$(cut -d' ' -f1 /proc/uptime)
    timeout 50 "$bin" perf "$@" -d "$dev" -x "$gid" --loopback >"$tmp/out" 2>&1
    rc=$?
    echo "--- rdma-direct perf $* -d $dev -x $gid --loopback (exit $rc):"
    cat "$tmp/out"
    if [ "$rc" != 0 ]; then
        echo "FAIL $name: exit $rc"
        fail=1
    elif ! grep -Eq "$want" "$tmp/out"; then
        echo "FAIL $name: no row matching /$want/"
        fail=1
    else
        echo "ok $name ($(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }') s)"
    fi
}

num='[0-9]+\.[0-9]+'
run write_lat "^ 2 +1000 +$num +$num +$num" write_lat -s 2 -n 1000
run write_bw "^ 64 +2000 +$num +$num +$num" write_bw -s 64 -n 2000
run write_bw_l32 "^ 64 +2000 +$num +$num +$num" write_bw -s 64 -n 2000 -l 32
rm -rf "$tmp"
exit "$fail"
