#!/bin/sh
# rdma-direct selftest on the guest's rxe device: the verbs provider climbs the ladder (the
# mlx5-only rungs read n/a), every rung that applies must pass; then the same as JSON.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE, RDMA_DIRECT_GID_INDEX.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
gid=${RDMA_DIRECT_GID_INDEX:?RDMA_DIRECT_GID_INDEX is not set}
tmp=$(mktemp -d)
fail=0

"$bin" selftest -d "$dev" -x "$gid" >"$tmp/out" 2>&1
rc=$?
echo "--- rdma-direct selftest -d $dev -x $gid (exit $rc):"
cat "$tmp/out"
if [ "$rc" != 0 ]; then
    echo "FAIL selftest: exit $rc on $dev"
    fail=1
fi
for want in 'provider verbs (auto: ' '\[ 7\] n/a  thread and parent domain' \
    '\[15\] ok   atomics' '^selftest: no rung failed: [0-9]* passed, [0-9]* not applicable (of 19)'; do
    if ! grep -q "$want" "$tmp/out"; then
        echo "FAIL selftest: output does not match /$want/"
        fail=1
    fi
done

"$bin" selftest -d "$dev" -x "$gid" --json >"$tmp/json" 2>&1
rc=$?
echo "--- rdma-direct selftest -d $dev -x $gid --json (exit $rc):"
cat "$tmp/json"
if [ "$rc" != 0 ] || ! grep -q '"stopped_at":null' "$tmp/json"; then
    echo "FAIL selftest --json: exit $rc or stopped"
    fail=1
fi
rm -rf "$tmp"
exit "$fail"
