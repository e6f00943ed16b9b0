#!/bin/sh
# Issue 22, point 5: launcher.snapshots.max_bytes lowered below what the
# store holds is applied to the store at once. A reload prunes the oldest
# snapshot nothing depends on (not an older one that is a parent) until
# the store fits; a restart with a lower bound still prunes what it can,
# and when the rest is in use (the pool's pool.from) logs an error naming
# the key, and new snapshots are refused (507, "does not fit"). Netns, no
# qemu. A mount namespace of its own, state_dir on a 16 MiB tmpfs. Own
# range 10.174/16, prefix t574-, table airlock_t574.
if [ -z "${SNAP574_NS:-}" ]; then
	command -v unshare >/dev/null 2>&1 || { echo "SKIP: no unshare" >&2; exit 77; }
	[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
	SNAP574_NS=1 exec unshare --mount --propagation private "${SHELL:-/bin/sh}" "$0" "$@"
fi
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=574
. "$top_srcdir/tests/integration/contain-lib.sh"
CT_NET=10.174
. "$top_srcdir/tests/integration/snap-lib.sh"
snap_rootfs
mkdir -p "$T/state"
mount -t tmpfs -o size=16m,mode=0700 tmpfs "$T/state" || fail "tmpfs state_dir"
CT_LAUNCHER_EXTRA="  rootfs: $ROOTFS
  snapshots: {max_bytes: 4MiB}"
CT_POOL='{warm: 0, max: 8}'
ct_start
wait_admin

mk() { # NAME KiB [FROM]: a sandbox (from FROM) with KiB of random data, snapshotted
	_s=$(claim "${3:-}") || exit 1
	in_sbx "$_s" "dd if=/dev/urandom of=/data/$1 bs=1024 count=$2 2>/dev/null" || fail "dd $1"
	ctl snapshot create "$_s" --name "$1" >"$T/mk.out" 2>&1; _rc=$?
	ctl sandbox delete "$_s" >/dev/null
	return $_rc
}
names() { ctl snapshot list | cut -d' ' -f1 | tr '\n' ' '; }
# s1 the oldest and biggest, s4 (the newest) its child: s1 is in use
mk s1 1200 || fail "s1: $(cat "$T/mk.out")"
mk s2 300 || fail "s2: $(cat "$T/mk.out")"
mk s3 300 || fail "s3: $(cat "$T/mk.out")"
mk s4 50 s1 || fail "s4: $(cat "$T/mk.out")"
[ "$(names)" = "s1 s2 s3 s4 " ] || fail "made: $(names)"

# --- a reload to 1700KiB: s2 goes (the oldest unreferenced), s1 stays
sed -i 's/^  snapshots: .*/  snapshots: {max_bytes: 1700KiB}/' "$T/airlock.yaml"
# a reload re-reads the secret file as the gateway user (root's 0600 is
# for the containment tests): the file becomes that user's
chown "$(awk '/^Uid:/ {print $3}' "/proc/$AIRLOCK_PID/status")" "$CT_ETC/key"
api POST /v1/reload >"$T/reload.out"
grep -q '^200 ' "$T/reload.out" || fail "reload: $(cat "$T/reload.out")"
[ "$(names)" = "s1 s3 s4 " ] || fail "after the reload: $(names) (want s2 pruned)"
grep -q "snapshot s2 pruned (launcher.snapshots.max_bytes)" "$T/airlockd.log" || fail "no prune of s2 logged"
grep -q "within launcher.snapshots.max_bytes (1740800)" "$T/airlockd.log" ||
    fail "reload: no 'within' line: $(grep max_bytes "$T/airlockd.log" | tail -3)"
R=$(claim s4) || exit 1
in_sbx "$R" 'wc -c </data/s1; wc -c </data/s4' >"$T/s4.out" || fail "read s4"
[ "$(tr '\n' ' ' <"$T/s4.out")" = "1228800 51200 " ] || fail "s4 after the reload: $(cat "$T/s4.out")"
ctl sandbox delete "$R" >/dev/null
ok "reload lowering max_bytes: oldest unreferenced (s2) pruned, the parent s1 and its child intact"

# --- a restart at 1MiB with a pool from s1: s3 and s4 go, s1 (1.2 MiB, in
# use) stays over: an error naming the key, new snapshots refused
ct_stop
CT_LAUNCHER_EXTRA="  rootfs: $ROOTFS
  snapshots: {max_bytes: 1MiB}"
CT_POOL='{warm: 0, max: 8, from: s1}'
ct_start
wait_admin
[ "$(names)" = "s1 " ] || fail "after the restart: $(names) (want s3, s4 pruned)"
grep -q "snapshot s3 pruned" "$T/airlockd.log" && grep -q "snapshot s4 pruned" "$T/airlockd.log" ||
    fail "no prune of s3, s4 logged"
grep -q "over launcher.snapshots.max_bytes (1048576) with every unreferenced snapshot pruned" "$T/airlockd.log" ||
    fail "no error naming the key: $(grep max_bytes "$T/airlockd.log" | tail -3)"
mk s5 10 && fail "a new snapshot fit a store already over max_bytes"
grep -q "does not fit in launcher.snapshots.max_bytes" "$T/mk.out" && grep -q "HTTP 507" "$T/mk.out" ||
    fail "s5: $(cat "$T/mk.out")"
[ "$(names)" = "s1 " ] || fail "after the refusal: $(names)"
ok "restart at 1MiB: s3 and s4 pruned, s1 (the pool's) kept, over: error logged, new snapshot refused (507)"
ct_stop
umount "$T/state"
finish
