#!/bin/sh
# rdma-direct bench batching on the guest's rxe device: a short sweep (batches 1, 4, 16;
# one ibv_post_send per batch; signaled every WR and once per batch), client and server QPs
# in one process. The tables are printed for the log; the check fails when the run fails,
# the provider line or a row per batch is missing, or the JSON / SVG files are not written.
# Kept short: the whole check must stay under 60 s in the TCG guest.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE,
# RDMA_DIRECT_GID_INDEX.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:?RDMA_DIRECT_GID_INDEX is not set}
tmp=$(mktemp -d)
fail=0

t0=$(cut -d' ' -f1 /proc/uptime)
timeout 50 "$bin" bench batching -d "$dev" -x "$gid" -l 1,4,16 -Q 1,batch -r 3 -w 1 -n 512 \
    --explain --json "$tmp/b.json" --svg "$tmp/b.svg" >"$tmp/out" 2>&1
rc=$?
echo "--- rdma-direct bench batching -d $dev -x $gid -l 1,4,16 -Q 1,batch -r 3 -w 1 -n 512 (exit $rc):"
cat "$tmp/out"
if [ "$rc" != 0 ]; then
    echo "FAIL batching: exit $rc"
    fail=1
else
    num='[0-9]+\.[0-9]+'
    for want in "^ provider: verbs on $dev " \
        '^ doorbell: ibv_post_send \| signal every WR ' \
        '^ doorbell: ibv_post_send \| signal once per batch ' \
        "^ 1 +512 +$num +$num +$num +$num +$num +$num +$num" \
        "^ 4 +512 +$num +$num +$num +$num +$num +$num +$num" \
        "^ 16 +512 +$num +$num +$num +$num +$num +$num +$num" \
        'emulated device in the kernel'; do
        if ! grep -Eq "$want" "$tmp/out"; then
            echo "FAIL batching: no line matching /$want/"
            fail=1
        fi
    done
    # Two configurations x three batch sizes.
    rows=$(grep -Ec "^ (1|4|16) +512 +$num" "$tmp/out")
    if [ "$rows" != 6 ]; then
        echo "FAIL batching: $rows table rows, want 6"
        fail=1
    fi
    if ! grep -q '"provider":"verbs"' "$tmp/b.json" || ! grep -q '"hardware":true' "$tmp/b.json"; then
        echo "FAIL batching: the JSON file lacks provider verbs / hardware true"
        fail=1
    fi
    if ! grep -q '</svg>' "$tmp/b.svg"; then
        echo "FAIL batching: no SVG written"
        fail=1
    fi
    [ "$fail" = 0 ] && echo "ok batching ($(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }') s)"
fi
rm -rf "$tmp"
exit "$fail"
