#!/bin/sh
# Self-test of the guest harness: that it passes what passes, fails what fails (and shows the
# failing output), reports a check that exits 77 as skipped (with its reason, counted apart,
# never as passed), hands back a command's exit status, honours the host timeout and reuses
# its cached image, and runs a directory of scenarios with --scenarios. Boots the guest six times (about 40-60 s under TCG): the clean run
# takes the sanity check only (RDMA_DIRECT_GUEST_CHECKS), the others none of the project's.
#
#   tests/guest/selftest.sh
set -u

here=$(cd "$(dirname "$0")" && pwd)
run="$here/run"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

ok() { echo "selftest: ok   $*"; passed=$((passed + 1)); }
bad() { echo "selftest: FAIL $*"; failed=$((failed + 1)); }

# expect NAME STATUS OUTFILE: the last command's status must be STATUS.
expect() {
    if [ "$2" = "$3" ]; then ok "$1 (exit $3)"; else bad "$1: exit $3, expected $2"; tail -n 30 "$4"; fi
}

# 1. A clean run of the bed's own checks (project tests left out, so that a failing project
#    test does not read as a harness failure): passes, and the sanity tools really ran.
RDMA_DIRECT_GUEST_CHECKS=00-sanity.sh "$run" --only-checks >"$tmp/pass" 2>&1
expect "clean run passes" 0 $? "$tmp/pass"
if tail -n 1 "$tmp/pass" | grep -Eq '^guest: [1-9][0-9]* passed, 0 failed, 0 skipped$'; then
    ok "clean run closes with 'guest: N passed, 0 failed, 0 skipped'"
else
    bad "clean run closing line: $(tail -n 1 "$tmp/pass")"
fi
serial=${CARGO_TARGET_DIR:-$here/../../target}/guest/serial.log
if grep -q '^ok ibv_rc_pingpong' "$serial" && grep -q '^ok ib_write_lat' "$serial"; then
    ok "ibv_rc_pingpong and ib_write_lat ran on rxe0"
else
    bad "sanity tools did not report ok in $serial"
fi

# 2. A failing check, a skipped one (exit 77) and a passing one: the run fails and shows
#    the failing output; the skipped check is reported with its reason and counted apart
#    (not as passed, not as failed, its output not shown as a failure).
mkdir -p "$tmp/checks"
printf '#!/bin/sh\necho "selftest marker: failing on purpose"\nexit 7\n' >"$tmp/checks/fail.sh"
# shellcheck disable=SC2016 # expanded in the guest
printf '#!/bin/sh\ntest "$RDMA_DIRECT_DEVICE" = rxe0 && test -c /dev/infiniband/uverbs0\n' >"$tmp/checks/pass.sh"
printf '#!/bin/sh\necho "some output"\necho "skipped: selftest marker, skipping on purpose"\nexit 77\n' >"$tmp/checks/skip.sh"
RDMA_DIRECT_GUEST_CHECKS=none "$run" --no-build --only-checks --checks-dir "$tmp/checks" >"$tmp/fail" 2>&1
expect "failing check fails the run" 1 $? "$tmp/fail"
if grep -q '^selftest marker: failing on purpose' "$tmp/fail" \
    && grep -q '^@@@ END check zz-extra-fail.sh status=7 ' "$tmp/fail" \
    && tail -n 1 "$tmp/fail" | grep -Eq '^guest: 1 passed, 1 failed, 1 skipped$'; then
    ok "failing check's output and count are reported"
else
    bad "failing check not reported as expected"
    tail -n 30 "$tmp/fail"
fi
if grep -q '^@@@ END check zz-extra-skip.sh status=77 passed=0 failed=0 skipped=1 ' "$tmp/fail" \
    && grep -q '^skipped: zz-extra-skip.sh: selftest marker, skipping on purpose$' "$tmp/fail" \
    && grep -q 'checks: 1 passed, 1 failed, 1 skipped' "$tmp/fail" \
    && ! grep -q 'zz-extra-skip.sh' "${CARGO_TARGET_DIR:-$here/../../target}/guest/failures.log"; then
    ok "a check exiting 77 is reported as skipped, with its reason, counted apart"
else
    bad "skipped check not reported as expected"
    tail -n 30 "$tmp/fail"
fi

# 3. --cmd hands back the command's status; the guest environment is as documented.
# shellcheck disable=SC2016 # expanded in the guest
"$run" --no-build --cmd 'test "$RDMA_DIRECT_DEVICE" = rxe0 && test -n "$RDMA_DIRECT_GID_INDEX" &&
    test "$(cat /sys/class/infiniband/rxe0/ports/1/gids/$RDMA_DIRECT_GID_INDEX)" = 0000:0000:0000:0000:0000:ffff:7f00:0001 &&
    test "$(ulimit -l)" = unlimited && test -x "$RDMA_DIRECT_BIN" && test "$PWD" = "$CARGO_MANIFEST_DIR" && exit 5' \
    >"$tmp/cmd" 2>&1
expect "--cmd returns the command's status (guest env checked)" 5 $? "$tmp/cmd"

# 3b. --scenarios: a directory of .scn files carried in and run on rxe0; one failing
#     scenario fails the run with its FILE:LINE, RDMA_DIRECT_SCENARIO selects the other.
mkdir -p "$tmp/scn"
good='version 2
desc selftest send
buf src 64 fill=seq
buf dst 64
qp a rc
qp b rc
connect a b
post_recv b wr=1 sge=dst:64
ring_recv b
post a send wr=2 sge=src:16 signaled
ring a
expect wr=2 SUCCESS SEND
expect wr=1 SUCCESS RECV len=16
final dst:16 copy=src:16'
printf '%s\n' "$good" >"$tmp/scn/good.scn"
printf '%s\n' "$good" | sed 's/^final dst:16 copy=src:16$/final dst:16 fill=byte:7/' >"$tmp/scn/bad.scn"
"$run" --no-build --scenarios "$tmp/scn" >"$tmp/scn.out" 2>&1
expect "--scenarios with a failing scenario fails the run" 1 $? "$tmp/scn.out"
if grep -q '^PASS good ' "$tmp/scn.out" && grep -q '^FAIL bad ' "$tmp/scn.out" \
    && grep -q "bad.scn:14 (final buffers)" "$tmp/scn.out"; then
    ok "--scenarios reports each scenario and the mismatch's FILE:LINE"
else
    bad "--scenarios output not as expected"
    tail -n 30 "$tmp/scn.out"
fi
RDMA_DIRECT_SCENARIO=good "$run" --no-build --scenarios "$tmp/scn" >"$tmp/scn1.out" 2>&1
expect "--scenarios with RDMA_DIRECT_SCENARIO=good passes" 0 $? "$tmp/scn1.out"

# 4. A guest that never reports: the host timeout ends it and the run fails.
# (The command ignores SIGTERM, so the guest-side `timeout` cannot end it first.)
"$run" --no-build --timeout 25 --cmd 'trap "" TERM; sleep 600' >"$tmp/hang" 2>&1
st=$?
if [ "$st" != 0 ] && grep -q 'no result marker' "$tmp/hang"; then
    ok "host timeout fails the run (exit $st)"
else
    bad "host timeout: exit $st"
    tail -n 20 "$tmp/hang"
fi

# 5. The image is cached.
if sh "$here/build-image.sh" 2>&1 | grep -q '^build-image: cached:'; then
    ok "second image build is a cache hit"
else
    bad "image was rebuilt"
fi

echo "selftest: $passed passed, $failed failed"
[ "$failed" = 0 ]
