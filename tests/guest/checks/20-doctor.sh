#!/bin/sh
# rdma-direct doctor on the guest's rxe device: shows the whole walk (link, MTU, caps,
# memlock, NUMA, PCIe) and requires exit 0 (no FAIL), link ACTIVE, and NUMA/PCIe skipped for
# the virtual device; then the same as JSON.
#
# Env (set by the guest's /init): RDMA_DIRECT_BIN, RDMA_DIRECT_DEVICE.
set -u
bin=${RDMA_DIRECT_BIN:?RDMA_DIRECT_BIN is not set}
dev=${RDMA_DIRECT_DEVICE:?RDMA_DIRECT_DEVICE is not set}
tmp=$(mktemp -d)
fail=0

"$bin" doctor -d "$dev" >"$tmp/out" 2>&1
rc=$?
echo "--- rdma-direct doctor -d $dev (exit $rc):"
cat "$tmp/out"
if [ "$rc" != 0 ]; then
    echo "FAIL doctor: exit $rc on $dev"
    fail=1
fi
for want in '\[ ok \] link  *PORT_ACTIVE, phys LINK_UP' '\[skip\] numa ' '\[skip\] pcie ' \
    '^doctor: 0 FAIL'; do
    if ! grep -q "$want" "$tmp/out"; then
        echo "FAIL doctor: output does not match /$want/"
        fail=1
    fi
done

"$bin" doctor -d "$dev" --peer-mtu 1024 --json >"$tmp/json" 2>&1
rc=$?
echo "--- rdma-direct doctor -d $dev --peer-mtu 1024 --json (exit $rc):"
cat "$tmp/json"
if [ "$rc" != 0 ] || ! grep -q '"check":"peer mtu"' "$tmp/json"; then
    echo "FAIL doctor --json: exit $rc or no peer mtu check"
    fail=1
fi

rm -rf "$tmp"
[ "$fail" = 0 ] && echo "ok doctor"
exit "$fail"
