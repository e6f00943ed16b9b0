#!/bin/sh
# The privileged launcher and its netns backend (tests/harness/lnctest.c):
# host setup (nftables table, blackhole route, gateway address bindable
# before any sandbox), a sandbox's view from inside (eth0 + lo, one route,
# IPv6 off, resolv.conf, CA bundle, private root with the config, state and
# secret paths masked, 65534 without capabilities and with NO_NEW_PRIVS),
# its network (everything TCP to the transparent listener with the original
# destination, DNS to the stub, nothing else; spoofed sources dropped),
# concurrent RPCs, 200 create/delete cycles without leaks and their
# latency, cleanup on TEARDOWN_HOST, on close and when the gateway dies,
# and launcher.rootfs.
#
# Root only. Its own interface prefixes (lt1-, lt2-), gateway interface
# (lt1gw), nft table (airlock_lt1) and network (10.231.0.0/16), so a real
# gateway on this host is never touched; packets go only over loopback and
# its own veths.
. "$top_srcdir/tests/integration/lib.sh"

LNCTEST=$top_builddir/tests/harness/lnctest
NET=10.231.0.0/16

[ "$(id -u)" = 0 ] || skip "needs root"
command -v nft >/dev/null 2>&1 || skip "nft not installed (nftables)"
command -v ip >/dev/null 2>&1 || skip "ip not installed (iproute2)"
nft list tables >/dev/null 2>&1 || skip "nftables does not work here"
unshare --net --mount --pid --fork true 2>/dev/null ||
    skip "cannot create namespaces here"
[ -x "$LNCTEST" ] || hard_error "$LNCTEST not built"

# One at a time on this host (two build trees running make check): the
# names below are fixed.
if command -v flock >/dev/null 2>&1; then
	exec 9>"${TMPDIR:-/tmp}/airlock-lnctest.lock"
	flock -w 300 9 || skip "another 300-launcher run holds the lock"
fi

# Leftovers of an interrupted run, by our own names only.
leftovers()
{
	for l in $(ip -o link show 2>/dev/null |
	    sed -n 's/^[0-9]*: \(lt[12]-[0-9]*\)[@:].*/\1/p'); do
		ip link del "$l" 2>/dev/null
	done
	ip link del lt1gw 2>/dev/null
	nft delete table inet airlock_lt1 2>/dev/null
	ip route del blackhole "$NET" 2>/dev/null
	for d in /sys/fs/cgroup/lnctest /sys/fs/cgroup/unified/lnctest; do
		[ -d "$d" ] && rmdir "$d"/* "$d" 2>/dev/null
	done
	rm -rf /etc/airlock-lnctest.* /etc/airlock-lnctest2.* \
	    /tmp/airlock-lnctest-* 2>/dev/null
	return 0
}
leftovers
trap 'rc0=$?; leftovers; (exit $rc0); _it_cleanup' EXIT

# The create latency is reported, not asserted: a timed check fails on a
# loaded machine (CI's two cores), and performance is measured by bench/
# (docs/benchmarks.md, "Sandbox claims").
limit=0
start=$(date +%s)
"$LNCTEST" -c 200 -j 4 -L "$limit" >"$T/lnctest.out" 2>"$T/lnctest.err"
rc=$?
end=$(date +%s)
cat "$T/lnctest.out"
grep '^#' "$T/lnctest.out" | sed 's/^# /# launcher: /' >&2
case $rc in
0) ;;
77) skip "$(tail -n 1 "$T/lnctest.out")" ;;
1)	cat "$T/lnctest.err" >&2
	fail "$(grep -c '^not ok' "$T/lnctest.out") check(s) failed" ;;
*)	cat "$T/lnctest.err" >&2
	hard_error "lnctest exited $rc" ;;
esac

# And from outside: nothing of ours is left on the host.
ip -o link show | grep -q ' lt[12]-[0-9]*[@:]' && check_fail "links left"
ip -o link show lt1gw >/dev/null 2>&1 && check_fail "gateway interface left"
nft list table inet airlock_lt1 >/dev/null 2>&1 && check_fail "nft table left"
[ -n "$(ip route show "$NET" 2>/dev/null)" ] && check_fail "route left"
ls -d /etc/airlock-lnctest.* >/dev/null 2>&1 && check_fail "fixtures left"
note "lnctest took $((end - start)) s"
finish
