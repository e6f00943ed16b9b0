#!/bin/sh
# build-guest.sh OUTDIR: the guest image of launcher.backend qemu.
#
# Writes OUTDIR/vmlinuz (Debian's newest linux-image-6.1.*-amd64, fetched
# with apt-get download into a cache, never installed), OUTDIR/vmlinux (its
# unpacked PVH ELF, which microvm boots faster) and OUTDIR/initramfs.cpio
# and .cpio.gz: busybox-static, the virtio modules the image
# needs, guest/init, the agent and the host programs in $GUEST_PROGRAMS
# (default "curl") with their shared libraries.
#
# The agent binary is taken from $AIRLOCK_GUEST_AGENT, else
# OUTDIR/airlock-guest (make guest-image builds it there).
# $AIRLOCK_GUEST_CACHE (default /var/cache/airlock-guest, or ~/.cache/
# airlock-guest when that is not writable) keeps the kernel package; $AIRLOCK_GUEST_KERNEL names one (e.g. linux-image-6.1.0-57-amd64)
# instead of the newest. A second run with unchanged inputs does nothing.
# See docs/guest-image.md.
set -eu

[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
OUT=$1
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
CACHE=${AIRLOCK_GUEST_CACHE:-/var/cache/airlock-guest}
GUEST_PROGRAMS=${GUEST_PROGRAMS-curl}
BUSYBOX=${BUSYBOX:-/bin/busybox}
# virtio_mmio finds the devices of qemu's microvm (via ACPI); virtio_net
# and virtio_console drive eth0 and the control port; qemu_fw_cfg shows
# the CA bundle under /sys/firmware. Dependencies are added from modules.dep.
MODULES="virtio_mmio virtio_net virtio_console qemu_fw_cfg"

die()
{
	echo "build-guest: $*" >&2
	exit 1
}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
AGENT=${AIRLOCK_GUEST_AGENT:-$OUT/airlock-guest}
[ -x "$AGENT" ] || die "agent binary $AGENT missing (make guest-image)"
[ -x "$BUSYBOX" ] || die "$BUSYBOX missing (apt-get install busybox-static)"
for t in dpkg-deb depmod modprobe cpio gzip xz ldd; do
	command -v "$t" >/dev/null 2>&1 || die "$t not found"
done
command -v file >/dev/null 2>&1 &&
    file "$BUSYBOX" | grep -q "dynamically linked" &&
    die "$BUSYBOX is not static (install busybox-static)"

# The kernel package: the newest generic one, unless named.
if ! { mkdir -p "$CACHE" 2>/dev/null && [ -w "$CACHE" ]; }; then
	[ -z "${AIRLOCK_GUEST_CACHE:-}" ] || die "cannot write $CACHE"
	CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/airlock-guest	# not root
	mkdir -p "$CACHE"
fi
pkg=${AIRLOCK_GUEST_KERNEL:-}
if [ -z "$pkg" ]; then
	pkg=$(apt-cache search --names-only '^linux-image-6\.1\.[0-9.-]*-amd64$' \
	    2>/dev/null | sed 's/ .*//' | sort -V | tail -n 1)
	if [ -z "$pkg" ]; then
		# no package lists (apt-get update never ran): use the cache
		deb=$(ls "$CACHE"/linux-image-6.1.*-amd64_*.deb 2>/dev/null |
		    grep -v -e -cloud- -e -rt- -e -dbg -e -unsigned |
		    sort -V | tail -n 1) || true
		[ -n "$deb" ] ||
		    die "no linux-image-6.1.*-amd64 package known (apt-get update?)"
		pkg=$(basename "$deb" | sed 's/_.*//')
	fi
fi
kver=${pkg#linux-image-}
deb=$(ls "$CACHE/${pkg}"_*.deb 2>/dev/null | sort -V | tail -n 1) || true
if [ -z "$deb" ]; then
	echo "build-guest: fetching $pkg into $CACHE"
	(cd "$CACHE" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
	    (cd "$CACHE" && apt-get download "$pkg") ||
	    die "apt-get download $pkg failed"
	deb=$(ls "$CACHE/${pkg}"_*.deb | sort -V | tail -n 1)
fi

# Skip the work when nothing that goes into the image changed.
progs=""
for p in $GUEST_PROGRAMS; do
	path=$(command -v "$p") || die "guest program $p not found on this host"
	progs="$progs $path"
done
# shellcheck disable=SC2086 # $progs: one path per word
stamp=$(cat "$0" "$SRC/guest/init" "$AGENT" "$BUSYBOX" $progs |
    cksum | cut -d' ' -f1)
stamp="$stamp $(basename "$deb") $GUEST_PROGRAMS"
if [ -f "$OUT/vmlinux" ] && [ -f "$OUT/initramfs.cpio" ] &&
    [ "$(cat "$OUT/.guest-stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "build-guest: $OUT is up to date"
	exit 0
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/airlock-guest.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
K=$TMP/kernel
R=$TMP/root
dpkg-deb -x "$deb" "$K"
[ -f "$K/boot/vmlinuz-$kver" ] || die "$deb has no /boot/vmlinuz-$kver"
depmod -b "$K" "$kver"

mkdir -p "$R"
for d in bin sbin usr/bin usr/sbin lib/modules/airlock etc/airlock \
    etc/ssl/certs dev proc sys run root home/sandbox; do
	mkdir -p "$R/$d"
done
mkdir -m 1777 "$R/tmp"
chmod 0700 "$R/root"

# busybox and its applets, as symlinks (what busybox --install -s does)
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list-full); do
	[ "$a" = bin/busybox ] && continue
	mkdir -p "$R/$(dirname "$a")"
	ln -sf /bin/busybox "$R/$a"
done

# modules with their dependencies, in load order; the 6.1 package ships
# plain .ko, later ones may compress them
: >"$TMP/order"
for m in $MODULES; do
	modprobe -d "$K" -S "$kver" --show-depends "$m" >"$TMP/deps" ||
	    die "module $m not in $pkg"
	sed -n 's/^insmod \([^ ]*\).*/\1/p' "$TMP/deps" >>"$TMP/order"
done
awk '!seen[$0]++' "$TMP/order" | while read -r ko; do
	base=$(basename "$ko")
	case $base in
	*.ko.xz) xz -dc "$ko" >"$R/lib/modules/airlock/${base%.xz}"
		base=${base%.xz} ;;
	*.ko.zst) zstd -qdc "$ko" >"$R/lib/modules/airlock/${base%.zst}"
		base=${base%.zst} ;;
	*.ko) cp "$ko" "$R/lib/modules/airlock/$base" ;;
	*) die "unexpected module file $ko" ;;
	esac
	echo "$base" >>"$R/lib/modules/airlock/load.order"
done

# host programs and the shared libraries ldd finds for them
copy_file()
{
	mkdir -p "$R$(dirname "$1")"
	rm -f "$R$1"
	cp -L "$1" "$R$1"
}
for p in $progs; do
	copy_file "$p"
	ldd "$p" 2>/dev/null | awk '
	    $2 == "=>" && $3 ~ /^\// { print $3 }
	    $1 ~ /^\// { print $1 }' | while read -r lib; do
		copy_file "$lib"
	done
done

cp "$SRC/guest/init" "$R/init"
cp "$AGENT" "$R/sbin/airlock-guest"
chmod 0755 "$R/init" "$R/sbin/airlock-guest"

# defaults; /init rewrites passwd, group, hosts with the boot parameters
printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:65534:65534:sandbox:/home/sandbox:/bin/sh\n' \
    >"$R/etc/passwd"
printf 'root:x:0:\nsandbox:x:65534:\n' >"$R/etc/group"
printf '127.0.0.1\tlocalhost\n' >"$R/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$R/etc/nsswitch.conf"
: >"$R/etc/resolv.conf"
echo /bin/sh >"$R/etc/shells"

# a sorted archive with fixed owners and times: the same inputs give the
# same bytes
find "$R" -exec touch -h -d @0 {} +
(cd "$R" && find . | LC_ALL=C sort |
    cpio --quiet -o -H newc -R 0:0 --reproducible) >"$TMP/initramfs.cpio"
gzip -n -6 <"$TMP/initramfs.cpio" >"$TMP/initramfs.cpio.gz"

# The bzImage's payload is an xz'd ELF with a PVH entry note: qemu's
# microvm boots that directly, which saves the guest some seconds of
# decompression under TCG.
cp "$K/boot/vmlinuz-$kver" "$TMP/vmlinuz"
off=$(LC_ALL=C grep -abo "$(printf '\3757zXZ')" "$TMP/vmlinuz" |
    head -n 1 | cut -d: -f1)
[ -n "$off" ] || die "no xz payload in vmlinuz-$kver"
tail -c +$((off + 1)) "$TMP/vmlinuz" | xz -dc --single-stream \
    >"$TMP/vmlinux" 2>/dev/null || die "cannot unpack vmlinuz-$kver"
[ "$(head -c 4 "$TMP/vmlinux" | tail -c 3)" = ELF ] ||
    die "vmlinuz-$kver does not hold an ELF kernel"
for f in vmlinuz vmlinux initramfs.cpio initramfs.cpio.gz; do
	mv "$TMP/$f" "$OUT/$f"
done
echo "$stamp" >"$OUT/.guest-stamp"
echo "build-guest: $OUT/vmlinux ($kver), $OUT/initramfs.cpio" \
    "($(wc -c <"$OUT/initramfs.cpio") bytes)"
