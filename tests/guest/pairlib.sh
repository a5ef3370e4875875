# Helpers for the two-guest checks (tests/guest/pair/*.sh), sourced by the guest's /init and
# by each check (`. "$PAIRLIB"`). POSIX sh (busybox).
#
# Each pair check runs on both guests at the same time, once per guest, with:
#   ROLE       a or b (this guest);  PEER_ROLE  the other one
#   SELF_IP    169.254.0.1 (a) or 169.254.0.2 (b);  PEER_IP  the other guest's address
#   NETDEV     eth0, the link;  RDMA_DIRECT_DEVICE=rxe0 on it
#   RDMA_DIRECT_GID_INDEX  index of this guest's ::ffff:SELF_IP GID (RoCE v2)
#   PAIR_DIR   a directory of this check on the host's share, seen by both guests (9p,
#              cache=none: a file one guest renames into place is visible to the other)
# The guests talk RDMA and TCP (endpoint exchange) over the link; synchronisation and small
# values go through PAIR_DIR, never over the link, so a check may break the link on purpose.

# Seconds since boot, with hundredths.
pl_now() { cut -d' ' -f1 /proc/uptime; }

# put KEY VALUE: publish VALUE under KEY for the peer (atomic: written, then renamed).
put() {
    printf '%s\n' "$2" >"$PAIR_DIR/.$1.$ROLE.tmp" && mv "$PAIR_DIR/.$1.$ROLE.tmp" "$PAIR_DIR/$1.$ROLE"
}

# get KEY [SECONDS]: wait (default 120 s) for the peer's KEY and print it; status 1 on timeout.
get() {
    pl_n=$((${2:-120} * 10))
    while [ ! -f "$PAIR_DIR/$1.$PEER_ROLE" ]; do
        pl_n=$((pl_n - 1))
        [ "$pl_n" -le 0 ] && { echo "pairlib: timed out waiting for the peer's '$1'" >&2; return 1; }
        usleep 100000
    done
    cat "$PAIR_DIR/$1.$PEER_ROLE"
}

# barrier NAME [SECONDS]: return once both guests have reached NAME (default 120 s; status 1
# on timeout). Names must be unique within one check.
barrier() {
    put "barrier-$1" 1
    get "barrier-$1" "${2:-120}" >/dev/null
}

# wait_listen PORT [SECONDS]: until something listens on TCP PORT locally (default 30 s).
wait_listen() {
    pl_hex=$(printf ':%04X ' "$1")
    pl_n=$((${2:-30} * 10))
    while ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q "$pl_hex.* 0A "; do
        pl_n=$((pl_n - 1))
        [ "$pl_n" -le 0 ] && return 1
        usleep 100000
    done
}

# counters: rxe0's hw_counters as "name=value" words on one line (non-zero ones only).
counters() {
    for pl_f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
        pl_v=$(cat "$pl_f" 2>/dev/null) || continue
        [ "$pl_v" != 0 ] && printf '%s=%s ' "${pl_f##*/}" "$pl_v"
    done
    echo
}

# counter_snap FILE: all of rxe0's hw_counters, "name value" per line, into FILE.
counter_snap() {
    for pl_f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
        echo "${pl_f##*/} $(cat "$pl_f" 2>/dev/null)"
    done >"$1"
}

# counter_diff BEFORE AFTER: "name=+delta" for every counter that changed.
counter_diff() {
    awk 'NR == FNR { a[$1] = $2; next } ($2 - a[$1]) != 0 { printf "%s=+%d ", $1, $2 - a[$1] } END { print "" }' "$1" "$2"
}

# role_server: status 0 on the guest that runs servers in the default direction (a).
is_a() { [ "$ROLE" = a ]; }

# cross NAME SERVER_ROLE PORT SECONDS 'SERVER CMD' 'CLIENT CMD': run SERVER CMD on guest
# SERVER_ROLE and, once it listens on TCP PORT, CLIENT CMD followed by the peer's address on
# the other guest; both under `timeout SECONDS`. Prints this guest's command and output;
# sets CROSS_RC (this guest's exit status) and CROSS_OUT (a file with its output); returns
# CROSS_RC. Both halves must call it with the same arguments (NAME and PORT unique within
# the check).
cross() {
    cr_name=$1 cr_srole=$2 cr_port=$3 cr_secs=$4 cr_scmd=$5 cr_ccmd=$6
    CROSS_OUT=${TMPDIR:-/tmp}/cross.$cr_port.$ROLE
    if [ "$ROLE" = "$cr_srole" ]; then
        # shellcheck disable=SC2086 # the command is word-split on purpose
        timeout "$cr_secs" $cr_scmd >"$CROSS_OUT" 2>&1 &
        cr_pid=$!
        if wait_listen "$cr_port" 60; then put "listen-$cr_port" 1; else put "listen-$cr_port" 0; fi
        wait "$cr_pid"
        CROSS_RC=$?
        echo "--- $cr_name: server on guest $ROLE: $cr_scmd (exit $CROSS_RC)"
    else
        if [ "$(get "listen-$cr_port" 90)" = 1 ]; then
            # shellcheck disable=SC2086
            timeout "$cr_secs" $cr_ccmd "$PEER_IP" >"$CROSS_OUT" 2>&1
            CROSS_RC=$?
        else
            echo "server never listened on port $cr_port" >"$CROSS_OUT"
            CROSS_RC=99
        fi
        echo "--- $cr_name: client on guest $ROLE: $cr_ccmd $PEER_IP (exit $CROSS_RC)"
    fi
    cat "$CROSS_OUT"
    barrier "cross-$cr_port" $((cr_secs + 60))
    return "$CROSS_RC"
}

# wait_cm_listen PORT [SECONDS]: until an RDMA CM id listens on PORT on this guest (RDMA CM
# servers have no TCP port to watch); default 30 s. A listener on the wildcard
# address gets its per-device child a moment later, hence the grace period after.
wait_cm_listen() {
    pl_n=$((${2:-30} * 10))
    while ! /usr/bin/rdma res show cm_id 2>/dev/null | grep 'LISTEN' | grep -q ":$1\( \|\$\)"; do
        pl_n=$((pl_n - 1))
        [ "$pl_n" -le 0 ] && return 1
        usleep 100000
    done
    usleep 500000
}
