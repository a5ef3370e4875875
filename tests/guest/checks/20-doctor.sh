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

# A real link that doctor must judge: rxe on one end of a veth pair (netdev MTU 1500, so RoCE
# MTU 1024 of the port's 4096: warnings, exit 0), then MTU 9000 (all ok), then the peer end
# down (port DOWN: FAIL, exit 1). Removed again at the end.
d=rxe_doc
# shellcheck disable=SC2317 # called through the trap
cleanup() {
    timeout 10 /usr/bin/rdma link delete "$d" 2>/dev/null
    timeout 10 /usr/bin/ip link delete vth_dc 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# run_doctor WANT_EXIT REGEX...: doctor -d $d must exit WANT_EXIT and match every REGEX.
run_doctor() {
    want=$1
    shift
    "$bin" doctor -d "$d" >"$tmp/veth" 2>&1
    rc=$?
    echo "--- rdma-direct doctor -d $d, $(cat /sys/class/net/vth_dc/mtu 2>/dev/null) B netdev MTU (exit $rc):"
    cat "$tmp/veth"
    [ "$rc" = "$want" ] || { echo "FAIL doctor on $d: exit $rc, want $want"; fail=1; }
    for re in "$@"; do
        grep -q "$re" "$tmp/veth" || { echo "FAIL doctor on $d: no /$re/"; fail=1; }
    done
}

# wait_state STATE: until port 1 of $d reports STATE (the driver follows the netdev).
wait_state() {
    n=0
    until grep -q "$1" "/sys/class/infiniband/$d/ports/1/state" 2>/dev/null; do
        n=$((n + 1))
        [ "$n" -gt 100 ] && { echo "FAIL: $d port never reached $1"; fail=1; return 1; }
        usleep 100000
    done
}

if timeout 30 modprobe veth &&
    timeout 10 /usr/bin/ip link add vth_dc type veth peer name vth_dd &&
    timeout 10 /usr/bin/ip link set vth_dc up &&
    timeout 10 /usr/bin/ip link set vth_dd up &&
    timeout 10 /usr/bin/rdma link add "$d" type rxe netdev vth_dc &&
    wait_state ACTIVE; then
    run_doctor 0 '\[warn\] mtu  *active_mtu 1024 of max_mtu 4096' \
        '\[warn\] netdev mtu  *vth_dc mtu 1500: fits IB MTU 1024' '^doctor: 0 FAIL'
    timeout 10 /usr/bin/ip link set vth_dc mtu 9000
    timeout 10 /usr/bin/ip link set vth_dd mtu 9000
    usleep 500000
    run_doctor 0 '\[ ok \] mtu  *active_mtu 4096 of max_mtu 4096' \
        '\[ ok \] netdev mtu  *vth_dc mtu 9000: fits IB MTU 4096' '^doctor: 0 FAIL, 0 warn'
    timeout 10 /usr/bin/ip link set vth_dd down
    wait_state DOWN
    run_doctor 1 '\[FAIL\] link  *PORT_DOWN' 'check cable/switch port before tuning software'
else
    echo "FAIL: could not set up rxe on a veth pair"
    fail=1
fi

[ "$fail" = 0 ] && echo "ok doctor"
exit "$fail"
