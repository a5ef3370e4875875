#!/bin/sh
# The fixture scenarios (fixtures/scenarios/*.scn) across the link: the requester side of
# each on guest a, the responder side on guest b, two processes in lockstep (the scenario
# runner's two-process mode, src/scenario/split.rs, driven by the ignored test
# split_scenarios_across_hosts of tests/scenarios.rs). Each side checks its own completions
# (status, opcode, length, immediate, order, nothing lost or extra) and every byte of its own
# buffers. Scenarios that cannot split are listed with the reason (for example a UD QP,
# whose address handles name a QP of the same device).
#
# Env: SCENARIOS_BIN (default /guest/bin/scenarios-test, carried by tests/guest/run).
. "$PAIRLIB"
set -u
tbin=${SCENARIOS_BIN:-/guest/bin/scenarios-test}
tmp=$(mktemp -d)
port=18950
fail=0
if [ ! -x "$tbin" ]; then
    echo "FAIL: no scenario test binary at $tbin"
    exit 1
fi
export RDMA_DIRECT_SCENARIO_PORT=$port
if [ "$ROLE" = b ]; then
    RDMA_DIRECT_SCENARIO_SIDE=b timeout 150 "$tbin" --ignored --exact split_scenarios_across_hosts \
        --nocapture --test-threads 1 >"$tmp/out" 2>&1 &
    pid=$!
    wait_listen "$port" 30
    put listen 1
    wait "$pid"
    st=$?
else
    get listen 60 >/dev/null
    RDMA_DIRECT_SCENARIO_SIDE=a RDMA_DIRECT_SCENARIO_PEER=$PEER_IP timeout 150 "$tbin" --ignored \
        --exact split_scenarios_across_hosts --nocapture --test-threads 1 >"$tmp/out" 2>&1
    st=$?
fi
cat "$tmp/out"
# (libtest prints the test's name on the line of the first scenario.)
grep -o 'scenario [A-Za-z0-9_]* *PASS across hosts' "$tmp/out" | awk '{ print $2 }' >"$tmp/passed"
passed=$(wc -l <"$tmp/passed")
put passed "$passed"
peer=$(get passed 200)
if [ "$st" != 0 ]; then
    echo "FAIL scenarios across the link: the test exited $st on guest $ROLE"
    fail=1
elif [ "$passed" = 0 ] || [ "$passed" != "$peer" ]; then
    echo "FAIL scenarios across the link: $passed passed on guest $ROLE, $peer on the other"
    fail=1
else
    echo "ok scenarios across the link, side $ROLE: $passed passed ($(tr '\n' ' ' <"$tmp/passed")); cannot split: $(grep -o 'scenario [A-Za-z0-9_]* *CANNOT SPLIT: .*' "$tmp/out" | sed 's/^scenario //; s/ *CANNOT SPLIT: /: /' | tr '\n' ';')"
fi
rm -rf "$tmp"
exit "$fail"
