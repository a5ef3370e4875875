#!/bin/sh
# Build the rxe test-bed guest image from Debian packages only.
#
# Output (under $GUEST_DIR, default <target>/guest):
#   image-<key>/vmlinux    the kernel as an uncompressed ELF, booted through QEMU's PVH entry
#   image-<key>/base.cpio  uncompressed newc initramfs: merged-/usr root with rdma-core 44,
#                          perftest, iproute2, busybox and the rxe kernel modules
#   image -> image-<key>   symlink to the current image
#
# <key> is a hash of the kernel ABI, every package's candidate version and this script, so a
# second run with the same apt lists rebuilds nothing. Downloaded .debs are kept in
# $GUEST_DIR/cache/debs. Host tools (qemu-system-x86, cpio, xz-utils) are installed with
# apt-get when missing.
#
# Usage: build-image.sh        (prints the image directory on stdout as its last line)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
project=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$project/target}
GUEST_DIR=${GUEST_DIR:-$target/guest}

log() { echo "build-image: $*" >&2; }
die() { echo "build-image: error: $*" >&2; exit 1; }

APT_OPTS="-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3"

apt_updated=
apt_update() {
    [ -n "$apt_updated" ] && return 0
    log "apt-get update"
    # Retried: another apt-get may hold the lists lock for a while.
    for try in 1 2 3 4 5; do
        # shellcheck disable=SC2086
        apt-get $APT_OPTS update -qq >&2 && break
        [ "$try" = 5 ] && die "apt-get update failed"
        sleep 15
    done
    apt_updated=1
}

# --- host tools ---------------------------------------------------------------------------
need=
command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
command -v cpio >/dev/null 2>&1 || need="$need cpio"
command -v xz >/dev/null 2>&1 || need="$need xz-utils"
if [ -n "$need" ]; then
    [ "$(id -u)" = 0 ] || die "missing host packages:$need (run as root or install them)"
    log "installing host packages:$need"
    # shellcheck disable=SC2086
    if ! DEBIAN_FRONTEND=noninteractive apt-get $APT_OPTS install -y -qq --no-install-recommends $need >&2; then
        apt_update
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get $APT_OPTS install -y -qq --no-install-recommends $need >&2 \
            || die "apt-get install$need failed"
    fi
fi

# --- what to build from -------------------------------------------------------------------
kernel_abi() {
    apt-cache depends linux-image-amd64 2>/dev/null \
        | sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n 1
}
abi=$(kernel_abi)
if [ -z "$abi" ]; then
    apt_update
    abi=$(kernel_abi)
fi
[ -n "$abi" ] || die "cannot find the kernel ABI from 'apt-cache depends linux-image-amd64'"

USERLAND="busybox-static libc6 libgcc-s1 libibverbs1 ibverbs-providers ibverbs-utils librdmacm1
rdmacm-utils perftest libibumad3 libpci3 libudev1 libnl-3-200 libnl-route-3-200 iproute2 libmnl0
libbsd0 libmd0 libcap2 libbpf1 libelf1 zlib1g libxtables12"
kpkg="linux-image-$abi"

# "name=version" for each package: the candidate apt would install.
versions() {
    # shellcheck disable=SC2086
    apt-cache show --no-all-versions "$kpkg" $USERLAND 2>/dev/null \
        | awk '/^Package: /{p=$2} /^Version: /{print p "=" $2}'
}
# shellcheck disable=SC2086
expected=$(($(set -- $USERLAND; echo $#) + 1))
pins=$(versions)
count=$(echo "$pins" | grep -c . || true)
if [ "$count" -ne "$expected" ]; then
    apt_update
    pins=$(versions)
    count=$(echo "$pins" | grep -c . || true)
fi
[ "$count" -eq "$expected" ] || die "expected $expected packages from apt-cache, found $count:
$pins"

key=$( { echo "$abi"; echo "$pins"; cat "$0"; } | sha256sum | cut -c1-16)
image="$GUEST_DIR/image-$key"
if [ -f "$image/done" ]; then
    ln -sfn "image-$key" "$GUEST_DIR/image"
    log "cached: $image (kernel $abi)"
    echo "$image"
    exit 0
fi
log "building image $key (kernel $abi)"

# --- download ---------------------------------------------------------------------------
debs="$GUEST_DIR/cache/debs"
mkdir -p "$debs"
# The .deb file name uses the version with ':' encoded as '%3a'.
deb_file() {
    name=${1%%=*}
    ver=${1#*=}
    ver=$(echo "$ver" | sed 's/:/%3a/')
    # shellcheck disable=SC2012 # Debian file names: no spaces or newlines
    ls "$debs/${name}_${ver}_"*.deb 2>/dev/null | head -n 1
}
missing=
for p in $pins; do
    [ -n "$(deb_file "$p")" ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
    log "apt-get download$missing"
    # shellcheck disable=SC2086
    (cd "$debs" && apt-get $APT_OPTS -o APT::Sandbox::User=root download $missing >&2) \
        || { apt_update; (cd "$debs" && apt-get $APT_OPTS -o APT::Sandbox::User=root download $missing >&2); } \
        || die "apt-get download failed"
fi

# --- root file system -------------------------------------------------------------------
work="$GUEST_DIR/build-$key"
rm -rf "$work"
root="$work/root"
mkdir -p "$root"
for p in $pins; do
    case $p in linux-image-*) continue ;; esac
    f=$(deb_file "$p")
    [ -n "$f" ] || die "no .deb for $p in $debs"
    dpkg-deb -x "$f" "$root"
done

# Merged /usr: fold /bin, /sbin, /lib, /lib64 into /usr and leave symlinks.
for d in bin sbin lib lib64; do
    mkdir -p "$root/usr/$d"
    if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
        cp -a "$root/$d/." "$root/usr/$d/"
        rm -rf "${root:?}/$d"
    fi
    ln -sfn "usr/$d" "$root/$d"
done
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/locale" "$root/usr/share/lintian" \
    "$root/usr/share/bash-completion" "$root/usr/share/info"

# Kernel: only vmlinuz and the modules rxe needs; for the two-guest bed also virtio-net (with
# net_failover and failover), virtio-9p (the share) and sch_netem (faults on the wire).
kdeb=$(deb_file "$(echo "$pins" | grep "^$kpkg=")")
[ -n "$kdeb" ] || die "no .deb for $kpkg"
kroot="$work/kernel"
mkdir -p "$kroot"
mods="./lib/modules/$abi"
dpkg-deb --fsys-tarfile "$kdeb" | tar -x -C "$kroot" --wildcards \
    "./boot/vmlinuz-$abi" \
    "$mods/modules.order" "$mods/modules.builtin" "$mods/modules.builtin.modinfo" \
    "$mods/kernel/drivers/infiniband/core/*.ko*" \
    "$mods/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" \
    "$mods/kernel/net/ipv4/udp_tunnel.ko*" \
    "$mods/kernel/net/ipv6/ip6_udp_tunnel.ko*" \
    "$mods/kernel/net/ipv6/ipv6.ko*" \
    "$mods/kernel/drivers/net/veth.ko*" \
    "$mods/kernel/crypto/crc32_generic.ko*" \
    "$mods/kernel/lib/libcrc32c.ko*" \
    "$mods/kernel/fs/configfs/configfs.ko*" \
    "$mods/kernel/drivers/virtio/*.ko*" \
    "$mods/kernel/drivers/net/virtio_net.ko*" \
    "$mods/kernel/drivers/net/net_failover.ko*" \
    "$mods/kernel/net/core/failover.ko*" \
    "$mods/kernel/net/sched/sch_netem.ko*" \
    "$mods/kernel/fs/9p/*.ko*" \
    "$mods/kernel/net/9p/*.ko*" \
    "$mods/kernel/fs/netfs/*.ko*" \
    "$mods/kernel/fs/fscache/*.ko*" \
    2>/dev/null || true
[ -f "$kroot/boot/vmlinuz-$abi" ] || die "vmlinuz-$abi not found in $kdeb"
[ -f "$kroot/$mods/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko" ] \
    || ls "$kroot/$mods/kernel/drivers/infiniband/sw/rxe/" >/dev/null 2>&1 \
    || die "rdma_rxe module not found in $kdeb"
mkdir -p "$root/usr/lib/modules"
cp -a "$kroot/lib/modules/$abi" "$root/usr/lib/modules/"
"$root/usr/bin/busybox" depmod -b "$root" "$abi" \
    || die "busybox depmod failed"
grep -q 'rdma_rxe' "$root/usr/lib/modules/$abi/modules.dep" || die "depmod: rdma_rxe missing from modules.dep"

# Busybox applets as symlinks in a directory of their own, last in the guest's PATH, so
# Debian's own tools (ip, rdma, ...) win wherever both exist.
mkdir -p "$root/usr/libexec/busybox"
for a in $("$root/usr/bin/busybox" --list); do
    ln -s /usr/bin/busybox "$root/usr/libexec/busybox/$a"
done
# No dash in the image: /bin/sh is busybox, so `#!/bin/sh` scripts run.
ln -s busybox "$root/usr/bin/sh"
# The kernel's request_module() runs /sbin/modprobe (rdma_rxe asks the crypto API for crc32).
ln -s ../bin/busybox "$root/usr/sbin/modprobe"

# Shared-library cache for the guest root.
mkdir -p "$root/etc"
printf 'include /etc/ld.so.conf.d/*.conf\n' >"$root/etc/ld.so.conf"
ldconfig -r "$root" || die "ldconfig -r failed"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run" "$root/root" "$root/var/tmp"

# The kernel: unpack the XZ payload of the bzImage once here, so the guest boots the ELF
# vmlinux directly (PVH entry) instead of spending seconds decompressing under TCG.
vmlinuz="$kroot/boot/vmlinuz-$abi"
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1)
[ -n "$off" ] || die "no XZ payload in $vmlinuz"
tail -c +"$((off + 1))" "$vmlinuz" | xz -dc --single-stream >"$work/vmlinux" 2>/dev/null || true
[ "$(head -c 4 "$work/vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] \
    || die "unpacked kernel is not an ELF file"

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$work/base.cpio"

rm -rf "$image"
mkdir -p "$image"
mv "$work/vmlinux" "$work/base.cpio" "$image/"
echo "$abi" >"$image/kernel-abi"
echo "$pins" >"$image/packages"
touch "$image/done"
rm -rf "$work"
# Drop older images and the .debs of versions no longer current.
for old in "$GUEST_DIR"/image-*; do
    [ "$old" = "$image" ] || rm -rf "$old"
done
rm -rf "$GUEST_DIR"/build-*
keep=
for p in $pins; do keep="$keep $(deb_file "$p")"; done
for f in "$debs"/*.deb; do
    case " $keep " in *" $f "*) ;; *) rm -f "$f" ;; esac
done
ln -sfn "image-$key" "$GUEST_DIR/image"
log "image ready: $image ($(du -sh "$image/base.cpio" | cut -f1) root, kernel $abi)"
echo "$image"
