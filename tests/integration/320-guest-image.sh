#!/bin/sh
# The guest image of launcher.backend qemu (make guest-image; make check
# builds it first): boots it under TCG as the launcher will (guest/
# INTERFACE.md) and drives the agent with tests/integration/guestlib.py:
# AIRLOCK-READY, the workload user, stdout/stderr apart, exit codes (3,
# 127, 126, 128+N after K), stdin and its EOF, the exact environment,
# sessions on new connections, disconnect mid-run kills the workload,
# malformed frames, curl and the CA bundle from fw_cfg; with a tap in a
# network namespace of its own: eth0's /32, one default route via the
# gateway, IPv6 off, and a TCP server on the gateway address reached from
# the guest. A second VM, booted alongside, has no network device and
# another uid:gid. Packets stay on the tap inside that namespace.
. "$top_srcdir/tests/integration/lib.sh"

IMAGE=$top_builddir/guest

command -v qemu-system-x86_64 >/dev/null 2>&1 ||
    skip "qemu-system-x86_64 not installed (scripts/install-deps.sh)"
for f in vmlinux initramfs.cpio; do
	[ -f "$IMAGE/$f" ] ||
	    hard_error "$IMAGE/$f missing: make guest-image failed?"
done

net=0
NS=airlock-gt$$
if [ "$(id -u)" = 0 ] && [ -c /dev/net/tun ] && command -v ip >/dev/null &&
    ip netns add "$NS" 2>/dev/null; then
	net=1
	# whatever still runs in our namespace is ours (a qemu left behind)
	trap 'rc0=$?; for p in $(ip netns pids "$NS" 2>/dev/null); do
		kill -9 "$p"; done; ip netns del "$NS" 2>/dev/null
		(exit $rc0); _it_cleanup' EXIT
else
	note "no network namespace here (needs root, iproute2, /dev/net/tun):" \
	    "network checks left out"
fi

run()
{
	if [ "$net" = 1 ]; then
		ip netns exec "$NS" "$@"
	else
		"$@"
	fi
}

start=$(date +%s)
run "$PYTHON" "$IT_DIR/guestcheck.py" "$IMAGE" "$T" "$net" >"$T/check.out" \
    2>&1
rc=$?
cat "$T/check.out"
note "guest checks took $(( $(date +%s) - start )) s"
[ "$rc" = 0 ] || fail "guest checks failed (see above)"
exit 0
