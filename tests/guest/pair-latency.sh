#!/bin/sh
# Round trip across the two-guest link under each bed variant: the socket netdev's UDP or
# TCP form, the guests' idle loop (idle=poll or halting), one or two vCPUs per guest. For
# each, boots the pair (`run --hosts 2 --cmd`) and measures, client on guest b, server on a:
# ibv_rc_pingpong 64 B x 500 (µs per iteration), rdma-direct pingpong 64 B x 500, and
# ib_write_lat 64 B x 500 (t_typical, µs). Prints one table row per variant.
#
#   tests/guest/pair-latency.sh [VARIANT...]   VARIANT = NET/IDLE/SMP, e.g. udp/poll/1
#                                              (default: udp/poll/1 tcp/poll/1 udp/halt/1 udp/poll/2)
set -u
here=$(cd "$(dirname "$0")" && pwd)
target=${CARGO_TARGET_DIR:-$here/../../target}
[ $# -gt 0 ] || set -- udp/poll/1 tcp/poll/1 udp/halt/1 udp/poll/2
# shellcheck disable=SC2016 # expanded in the guests
cmd='. "$PAIRLIB"
g=$RDMA_DIRECT_GID_INDEX
cross rc a 18515 200 "ibv_rc_pingpong -d rxe0 -g $g -n 500 -s 64 -p 18515" "ibv_rc_pingpong -d rxe0 -g $g -n 500 -s 64 -p 18515"
cross ours a 18516 200 "$RDMA_DIRECT_BIN pingpong -d rxe0 -g $g -n 500 -s 64 -p 18516" "$RDMA_DIRECT_BIN pingpong -d rxe0 -g $g -n 500 -s 64 -p 18516"
cross lat a 18517 200 "ib_write_lat -d rxe0 -x $g -F -s 64 -n 500 -p 18517" "ib_write_lat -d rxe0 -x $g -F -s 64 -n 500 -p 18517"
true'
printf '%-14s %16s %18s %18s\n' variant rc_pingpong_us rdma-direct_pp_us write_lat_typ_us
for v in "$@"; do
    net=${v%%/*} rest=${v#*/}
    idle=${rest%%/*} smp=${rest#*/}
    RDMA_DIRECT_GUEST_NET=$net RDMA_DIRECT_GUEST_IDLE=$idle RDMA_DIRECT_GUEST_SMP=$smp \
        "$here/run" --hosts 2 --no-build --timeout 900 --cmd "$cmd" >"$target/guest/latency-$net-$idle-$smp.log" 2>&1
    log=$target/guest/serial-b.log
    rc=$(sed -n '/^--- rc: client/,/^---/p' "$log" | sed -n 's/.*= \([0-9.]*\) usec\/iter.*/\1/p' | head -n 1)
    ours=$(sed -n '/^--- ours: client/,/^---/p' "$log" | sed -n 's/.*= \([0-9.]*\) usec\/iter.*/\1/p' | head -n 1)
    # ib_write_lat row: #bytes #iterations t_min t_max t_typical ...
    lat=$(awk '$1 == 64 && $2 == 500 { print $5; exit }' "$log")
    printf '%-14s %16s %18s %18s\n' "$v" "${rc:-?}" "${ours:-?}" "${lat:-?}"
done
