#!/bin/sh
# Link flaps mid-stream, as a soak: examples/reconnect between the guests over rxe0 (receiver
# on a, gateway on b, $N orders; the options and the retry budget of 60-restart.sh: three
# tries 268 ms apart, 0.81 s). Guest a takes its eth0 down $K times, each at a random point
# of the stream (300-1800 orders after the last flap's outcome showed) for a random time:
# half of the flaps short (50-250 ms: under the retry budget, and under one retransmission
# timeout, so retries can ride them out) and half long (1.2-2.4 s: past the budget and the
# 200 ms heartbeat, so the gateway must end in RETRY_EXC_ERR and reconnect), in a random
# order. A flap's outcome has shown once the receiver has 200 orders more after the link came
# back (a request of the gateway's that fails holds back every later one, and at most 64
# are unconfirmed): a flap "needed a recovery" when the receiver's connection failed in
# between, else it was "ridden out". A short flap needs one when the receiver (which sends
# the credits) posted a send while its link was down: rxe fails that at once
# (LOC_QP_OP_ERR), with no retry. Seeded: the seed is printed; RDMA_DIRECT_FLAP_SEED=N
# (tests/guest/run passes it in) replays a run's flaps: kinds, down times and points (these
# counted from the last outcome, so near the same orders). See tests/guest/README.md.
#
# Passes when: both ends exit 0; every fault's drain on either end adds up (the gateway's
# first error RETRY_EXC_ERR, the rest flushed; the receiver's first error anything, the rest
# flushed; 0 missing); the gateway reconnected once per fault; every long flap needed a
# recovery, no flap more than one, and the gateway counted as many faults as the receiver
# and as guest a's flaps needed; the receiver checked every order byte for byte in sequence
# (an order lost or delivered twice fails it) and the two checksums of the stream are equal.
# Printed: the seed, each flap (point, down time asked and taken, outcome) and the figures:
# orders, faults injected, faults that needed a recovery, recovery time (from the gateway's
# drain to its new connection up) p50 and max.
. "$PAIRLIB"
set -u
dev=$RDMA_DIRECT_DEVICE
gid=$RDMA_DIRECT_GID_INDEX
ex=${RDMA_DIRECT_EXAMPLES:-$(dirname "$RDMA_DIRECT_BIN")}/reconnect
K=${FLAP_FAULTS:-6}
N=${FLAP_ORDERS:-$((3000 * K + 2000))}
port=18730
tmp=$(mktemp -d)
fail=0
[ -x "$ex" ] || { echo "FAIL: no reconnect example at $ex"; exit 1; }

field() { printf '%s\n' "$2" | sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
drain_adds_up() {
    o=$(field outstanding "$2") e=$(field first_error "$2") f=$(field flushed "$2") x=$(field other "$2") m=$(field missing "$2")
    if ! printf '%s\n' "$2" | grep -Eq "failed status ($3) "; then
        echo "FAIL $1: the first error is not /$3/: $2"
        return 1
    fi
    if [ -z "$o" ] || [ "$m" != 0 ] || [ $((e + f + x)) != "$o" ]; then
        echo "FAIL $1: the drain does not add up (outstanding=$o: first_error=$e + flushed=$f + other=$x, missing=$m)"
        return 1
    fi
    echo "ok $1: $(printf '%s\n' "$2" | sed 's/.*failed status/failed status/')"
}
# every_drain WHO FILE PREFIX WANT: drain_adds_up for each of FILE's fault lines (fail=1
# when one does not add up); their count in ED_N.
every_drain() {
    ED_N=0
    grep "^$3: fault [0-9]*: failed status" "$2" >"$tmp/faults"
    while IFS= read -r ed_l; do
        ED_N=$((ED_N + 1))
        drain_adds_up "$1, fault $ED_N" "$ed_l" "$4" || fail=1
    done <"$tmp/faults"
}
# A linear congruential generator (31 bits): rnd N sets R to a number in 0..N-1.
rnd() {
    seed_x=$(((seed_x * 1103515245 + 12345) % 2147483648))
    R=$(((seed_x / 65536) % $1))
}
# recvs BASE: rxe0's receives consumed since BASE: on a, the orders delivered to the receiver
# (each WRITE WITH IMMEDIATE takes one; nothing else in this check does).
recvs() { read -r rv </sys/class/infiniband/rxe0/ports/1/hw_counters/rdma_recvs; echo $((rv - $1)); }
# wait_recvs N SECONDS: until N orders were delivered (status 0), the receiver ended or
# SECONDS passed (status 1).
wait_recvs() {
    wr_n=$(($2 * 10))
    until [ "$(recvs "$base")" -ge "$1" ]; do
        wr_n=$((wr_n - 1))
        { [ "$wr_n" -le 0 ] || ! kill -0 "$r" 2>/dev/null; } && return 1
        usleep 100000
    done
}
rfaults() { grep -c '^receiver: fault [0-9]*: ' "$tmp/r"; }

if [ "$ROLE" = a ]; then
    seed=${RDMA_DIRECT_FLAP_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
    seed_x=$((seed % 2147483648))
    echo "guest a: seed $seed (RDMA_DIRECT_FLAP_SEED=$seed replays it): $K flaps in $N orders"
    timeout 240 "$ex" -d "$dev" -x "$gid" -p "$port" >"$tmp/r" 2>&1 &
    r=$!
    # The receiver polls without pause on the guest's one vCPU: this shell and what it
    # starts from now on (the flaps' `ip`) run at a higher priority, so a flap's `ip` runs
    # the moment its next line comes (and the receiver keeps its own).
    renice -n -10 -p $$ >/dev/null
    if wait_listen "$port" 60; then
        put listen 1
    else
        put listen 0
        echo "FAIL flap: the receiver never listened"
        fail=1 K=0
    fi
    base=$(recvs 0)
    k=0 long=0 recovered=0 ridden=0 log= at=0
    while [ "$k" -lt "$K" ]; do
        k=$((k + 1))
        rnd 1501
        at=$((at + 300 + R))
        # Long with the odds that leave exactly K/2 long flaps at the end.
        rnd $((K - k + 1))
        if [ "$R" -lt $((K / 2 - long)) ]; then
            long=$((long + 1)) kind=long
            rnd 1201
            ms=$((1200 + R))
        else
            kind=short
            rnd 201
            ms=$((50 + R))
        fi
        before=$(rfaults)
        rm -f "$tmp/t0" "$tmp/t1"
        # One `ip` takes both commands as they come (starting /usr/bin/ip under TCG takes
        # about as long as a short flap): it starts while the stream runs to the point.
        {
            if wait_recvs "$at" 120; then
                pl_now >"$tmp/t0"
                recvs "$base" >"$tmp/n0"
                echo "link set $NETDEV down"
                usleep $((ms * 1000))
                echo "link set $NETDEV up"
                pl_now >"$tmp/t1"
            fi
        } | timeout 200 /usr/bin/ip -batch - || {
            echo "FAIL flap: ip -batch failed; the link brought up again"
            timeout 10 /usr/bin/ip link set "$NETDEV" up
            fail=1
        }
        if [ ! -f "$tmp/t1" ]; then
            echo "FAIL flap: the receiver never reached $at orders (flap $k of $K; it ran out, ended or hung)"
            fail=1
            break
        fi
        t0=$(cat "$tmp/t0") t1=$(cat "$tmp/t1") up=$(recvs "$base")
        # The flap's outcome has shown once the receiver has 200 orders more (more than the
        # gateway's window: a request of the gateway's that fails holds back all after it).
        wait_recvs $((up + 200)) 120
        at=$(recvs "$base")
        n=$(($(rfaults) - before))
        case $n in
        0) out="ridden out (no fault on either end)" ridden=$((ridden + 1)) ;;
        1) out="needed a recovery (receiver: $(grep '^receiver: fault [0-9]*: ' "$tmp/r" | tail -n 1 | sed 's/^receiver: fault [0-9]*: \(failed status [A-Za-z]*\).*/\1/'))" recovered=$((recovered + 1)) ;;
        *) out="FAIL: $n faults for one flap" fail=1 ;;
        esac
        [ "$kind" = long ] && [ "$n" = 0 ] && { out="FAIL: a long flap ridden out: $out"; fail=1; }
        l="flap $k: $kind, link down $ms ms asked, $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}') s taken, down at order $(cat "$tmp/n0"), up at $up: $out"
        echo "guest a: $l"
        log="$log$l
"
    done
    wait "$r"
    rc=$?
    echo "--- receiver (exit $rc):"
    cat "$tmp/r"
    sum=$(sed -n 's/^receiver: done: .*checksum \(0x[0-9a-f]*\)$/\1/p' "$tmp/r")
    put sum "${sum:-none}"
    [ "$rc" = 0 ] || { echo "FAIL flap: the receiver exited $rc"; fail=1; }
    every_drain receiver "$tmp/r" receiver '[A-Za-z]+'
    [ "$ED_N" = "$recovered" ] || { echo "FAIL flap: the receiver reported $ED_N faults, $recovered after the flaps"; fail=1; }
    put flaps "$seed $k $long $((k - long)) $ridden $recovered $fail"
    printf '%s' "$log" >"$tmp/log"
    put log "$(cat "$tmp/log")"
    [ "$(get verdict 120)" = ok ] || fail=1
else
    [ "$(get listen 90)" = 1 ] || { echo "FAIL flap: the receiver never listened"; put verdict fail; exit 1; }
    timeout 240 "$ex" -d "$dev" -x "$gid" -p "$port" -n "$N" "$PEER_IP" >"$tmp/g" 2>&1
    rc=$?
    echo "--- gateway (exit $rc):"
    cat "$tmp/g"
    [ "$rc" = 0 ] || { echo "FAIL flap: the gateway exited $rc"; fail=1; }
    # Every fault: RETRY_EXC_ERR + flushes, 0 missing; a reconnect after each.
    every_drain gateway "$tmp/g" gateway RetryExcErr
    nf=$ED_N
    nc=$(grep -c '^gateway: reconnected after' "$tmp/g")
    [ "$nc" = "$nf" ] || { echo "FAIL flap: $nf faults, $nc reconnects"; fail=1; }
    set -- $(get flaps 240)
    seed=${1:-?} k=${2:-0} long=${3:-0} short=${4:-0} ridden=${5:-0} recovered=${6:-x}
    echo "--- guest a's flaps (seed $seed):"
    get log 10
    [ "$k" = "$K" ] || { echo "FAIL flap: $k of $K flaps injected"; fail=1; }
    [ "$recovered" = "$nf" ] || { echo "FAIL flap: the gateway counted $nf faults, guest a's flaps $recovered"; fail=1; }
    gsum=$(sed -n 's/^gateway: done: .*checksum \(0x[0-9a-f]*\)$/\1/p' "$tmp/g")
    rsum=$(get sum 200)
    if [ -n "$gsum" ] && [ "$gsum" = "$rsum" ]; then
        echo "ok flap: $N orders delivered byte for byte, each once, in order, across the flaps (checksum $gsum on both ends)"
    else
        echo "FAIL flap: checksums differ: gateway ${gsum:-none}, receiver ${rsum:-none}"
        fail=1
    fi
    # p50 (the upper median, as tests/recover_soak.rs) and max of a column of seconds.
    p50max() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "p50 %.2f s max %.2f s", v[int(NR / 2) + 1], v[NR]; else printf "none" }'; }
    rec=$(sed -n 's/^gateway: reconnected after \([0-9.]*\) s.*/\1/p' "$tmp/g" | p50max)
    det=$(sed -n 's/^gateway: fault [0-9]*: the first error came \([0-9.]*\) s.*/\1/p' "$tmp/g" | p50max)
    echo "flap soak (seed $seed): $N orders, $k faults injected ($long long, $short short: $ridden ridden out), $nf needed a recovery; recovery time (drain to reconnected) $rec; first error after the last good completion $det"
    [ "$fail" = 0 ] && [ "${7:-1}" = 0 ] && put verdict ok || put verdict fail
fi
echo "rxe0 counters on $ROLE: $(counters)"
barrier flap-end 120
rm -rf "$tmp"
exit "$fail"
