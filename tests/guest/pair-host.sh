# The host side of the two-guest bed (`tests/guest/run --hosts 2`), sourced by `run` after the
# image and the overlay are built (uses its variables: image, GUEST_DIR, ov, accel, bios,
# host_timeout, verbose, mode, start; and its say/die).
#
# Two QEMU guests, one vCPU each, joined by a QEMU socket netdev: nothing else is on that
# link, and the host end of it is 127.0.0.1 only. The UDP form (default) has each guest send
# its frames as datagrams to the other's port; the TCP form (RDMA_DIRECT_GUEST_NET=tcp) has
# guest a listen and guest b connect. Each guest gets a virtio-net NIC (eth0 in the guest),
# the same initramfs plus a one-line role file, and the directory $GUEST_DIR/share through
# virtio-9p (mount tag "share") for barriers and small values between the two halves of a
# check (tests/guest/pairlib.sh). The guests' kernels run with idle=poll: an idle TCG vCPU
# that halts wakes up late (milliseconds) for a packet; one that polls does not.

share="$GUEST_DIR/share"
rm -rf "$share"
mkdir -p "$share"

# Two UDP (or one TCP) ports on 127.0.0.1 that nothing on the host uses right now: random
# in 20000-59999, checked against /proc/net/{udp,tcp}{,6}.
used_ports() {
    cat /proc/net/udp /proc/net/udp6 /proc/net/tcp /proc/net/tcp6 2>/dev/null \
        | awk 'NR > 0 && $2 ~ /:/ { split($2, a, ":"); print a[2] }'
}
free_port() {
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        p=$((20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000))
        hex=$(printf '%04X' "$p")
        if ! used_ports | grep -qx "$hex" && [ "$p" != "${1:-}" ]; then
            echo "$p"
            return 0
        fi
    done
    return 1
}
pa=$(free_port) || die "no free port on 127.0.0.1"
pb=$(free_port "$pa") || die "no free port on 127.0.0.1"

net=${RDMA_DIRECT_GUEST_NET:-udp}
smp=${RDMA_DIRECT_GUEST_SMP:-1}
idle=${RDMA_DIRECT_GUEST_IDLE:-poll}
case $net in udp | tcp) ;; *) die "RDMA_DIRECT_GUEST_NET must be udp or tcp" ;; esac
case $idle in poll) idle_arg=" idle=poll" ;; halt) idle_arg= ;; *) die "RDMA_DIRECT_GUEST_IDLE must be poll or halt" ;; esac

for r in a b; do
    rdir="$GUEST_DIR/role-$r"
    rm -rf "$rdir"
    mkdir -p "$rdir/guest"
    echo "ROLE=$r" >"$rdir/guest/role"
    (cd "$rdir" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$GUEST_DIR/role-$r.cpio"
    cat "$image/base.cpio" "$GUEST_DIR/overlay.cpio" "$GUEST_DIR/role-$r.cpio" >"$GUEST_DIR/initrd-$r.cpio"
done

# qemu_args ROLE: the command line of one guest.
qemu_args() {
    r=$1
    if [ "$r" = a ]; then mac=52:54:00:a9:fe:01; else mac=52:54:00:a9:fe:02; fi
    case $net/$r in
    udp/a) nd="socket,id=n0,udp=127.0.0.1:$pb,localaddr=127.0.0.1:$pa" ;;
    udp/b) nd="socket,id=n0,udp=127.0.0.1:$pa,localaddr=127.0.0.1:$pb" ;;
    tcp/a) nd="socket,id=n0,listen=127.0.0.1:$pa" ;;
    tcp/b) nd="socket,id=n0,connect=127.0.0.1:$pa" ;;
    esac
    # shellcheck disable=SC2086 # $bios is empty or two words
    echo qemu-system-x86_64 -accel "$accel" -machine pc -m 1G -smp "$smp" -nic none \
        -nographic -no-reboot $bios \
        -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
        -netdev "$nd" -device "virtio-net-pci,netdev=n0,mac=$mac" \
        -fsdev "local,id=fs0,path=$share,security_model=none" \
        -device "virtio-9p-pci,fsdev=fs0,mount_tag=share" \
        -kernel "$image/vmlinux" -initrd "$GUEST_DIR/initrd-$r.cpio" \
        -append "'console=ttyS0 panic=-1 loglevel=4 mitigations=off$idle_arg'"
}

# Progress filter, as for one guest, each line prefixed with the guest's role.
show_pair() {
    if [ -n "$verbose" ] || [ "$mode" = cmd ]; then
        sed -u "s/^/$1| /"
    else
        awk -v p="$1| " '/^@@@ BEGIN/ { inside = 1; next }
             /^@@@ END/ { inside = 0; print p $0; fflush(); next }
             !inside { print p $0; fflush() }'
    fi
}

boot=$(date +%s)
say "booting two guests ($accel, $smp vCPU each, $net socket link on 127.0.0.1:$pa/$pb, idle=$idle, kernel $(cat "$image/kernel-abi")); serial logs: $GUEST_DIR/serial-a.log, serial-b.log"
pids=
# QEMU's exit status is non-zero by design (isa-debug-exit): no errexit from here on.
set +e
for r in a b; do
    rm -f "$GUEST_DIR/qemu-$r.rc"
    if [ "$r" = b ] && [ "$net" = tcp ]; then
        # b connects: a must listen first.
        n=0
        until used_ports | grep -qx "$(printf '%04X' "$pa")"; do
            n=$((n + 1))
            [ "$n" -gt 100 ] && break
            sleep 0.1
        done
    fi
    eval "set -- $(qemu_args "$r")"
    {
        timeout "$host_timeout" "$@" -monitor none -serial stdio </dev/null 2>&1
        echo $? >"$GUEST_DIR/qemu-$r.rc"
    } | tr -d '\r' | tee "$GUEST_DIR/serial-$r.log" | show_pair "$r" &
    pids="$pids $!"
done
# shellcheck disable=SC2086
wait $pids
# `wait` covers the last command of each pipeline; QEMU's status file comes from the first.
for r in a b; do
    n=0
    while [ ! -s "$GUEST_DIR/qemu-$r.rc" ] && [ "$n" -lt 100 ]; do
        sleep 0.1
        n=$((n + 1))
    done
done
end=$(date +%s)

# --- verdict: both guests' markers, then every pair check's two halves -------------------
overall=0
for r in a b; do
    serial="$GUEST_DIR/serial-$r.log"
    qrc=$(cat "$GUEST_DIR/qemu-$r.rc" 2>/dev/null || echo 255)
    marker=$(grep -a '^RDMA-DIRECT-GUEST-RESULT ' "$serial" | tail -n 1 || true)
    if [ -z "$marker" ]; then
        [ "$qrc" = 124 ] && say "guest $r: QEMU killed after ${host_timeout}s (host timeout)"
        awk '/^@@@ BEGIN / { buf = $0 "\n"; inside = 1; next }
             /^@@@ END / { inside = 0; buf = ""; next }
             inside { buf = buf $0 "\n" }
             END { if (buf != "") printf "unfinished: %s", buf }' "$serial" >&2
        tail -n 40 "$serial" >&2
        say "guest $r: no result marker on the serial console (QEMU exit $qrc); full log: $serial"
        overall=2
        continue
    fi
    st=$(echo "$marker" | sed -n 's/.*status=\([0-9]*\).*/\1/p')
    byte=$st
    [ "$byte" -gt 127 ] && byte=127
    if [ "$qrc" != "$(((byte * 2 + 1) & 255))" ]; then
        say "guest $r reported status $st but QEMU exited $qrc; full log: $serial"
        overall=2
        continue
    fi
    eval "status_$r=$st"
    [ "$st" = 2 ] && { say "guest $r: the test bed itself failed ($marker)"; overall=2; }
done

if [ "$mode" = cmd ]; then
    say "command exited a=${status_a:-?} b=${status_b:-?} ($((end - boot)) s in the guests, $((end - start)) s total)"
    [ "$overall" = 2 ] && exit 2
    [ "${status_a:-1}" != 0 ] && exit "$status_a"
    exit "${status_b:-1}"
fi

# Failing halves in full, from both logs.
: >"$GUEST_DIR/failures.log"
for r in a b; do
    awk -v r="$r" '/^@@@ BEGIN / { buf = $0 "\n"; inside = 1; next }
         /^@@@ END / { if ($0 !~ / status=(0|77) /) printf "[guest %s] %s%s\n\n", r, buf, $0; inside = 0; next }
         inside { buf = buf $0 "\n" }' "$GUEST_DIR/serial-$r.log" >>"$GUEST_DIR/failures.log"
done
if [ -s "$GUEST_DIR/failures.log" ]; then
    echo "==================== failing guest pair checks (full output) ===================="
    cat "$GUEST_DIR/failures.log"
fi
# A pair check passes when both halves passed; it is skipped when a half exited 77 and the
# other passed or skipped too (its reason: that half's "skipped: " line).
sed -n 's/^@@@ END pair \([^ ]*\) status=\([0-9]*\) .*/\1 \2/p' "$GUEST_DIR/serial-a.log" "$GUEST_DIR/serial-b.log" \
    | awk '{ n[$1]++; if ($2 == 77) sk[$1] = 1; else if ($2 != 0) bad[$1] = 1 }
           END { for (c in n) { v = (n[c] != 2 || bad[c]) ? "FAIL" : sk[c] ? "skip" : "ok  "
                                if (v == "FAIL") f++; else if (v == "skip") s++; else p++
                                printf "%s %s\n", v, c > "/dev/stderr" }
                 print p + 0, f + 0, s + 0 }' >"$GUEST_DIR/pair-counts" 2>"$GUEST_DIR/pair-list"
LC_ALL=C sort -k2 "$GUEST_DIR/pair-list" | sed 's/^/guest-run: pair check /' >&2
read -r cp cf cs <"$GUEST_DIR/pair-counts"
[ "$overall" = 2 ] && cf=$((cf + 1))
sed -n 's/^guest: skipped \([^:]*\): /skipped: \1: /p' "$GUEST_DIR/serial-a.log" "$GUEST_DIR/serial-b.log" | LC_ALL=C sort -u
say "pair checks: $cp passed, $cf failed, $cs skipped ($((end - boot)) s in QEMU, $((end - start)) s total)"
echo "guest: $cp passed, $cf failed, $cs skipped"
[ "$overall" = 2 ] && exit 2
[ "$cf" = 0 ] && exit 0
exit 1
