#!/bin/sh
# Issue 22, points 3, 5, 6: a warm pool built from a snapshot (pool.from)
# serves claims, warm and cold alike with that snapshot's tree (hash
# equal), and its snapshot is never deleted or pruned; the store's bound
# (launcher.snapshots.max_bytes) prunes the oldest unreferenced snapshot
# first and refuses, with a clear error, one that does not fit; a full disk
# during a snapshot leaves the previous ones intact; 50
# claim/snapshot/restore/delete cycles leave no mount (the daemon's mount
# namespace has the same mountinfo), layer, namespace or process behind.
# Runs in a mount namespace of its own (other tests on this host mount
# things), state_dir on a 6 MiB tmpfs. Own range 10.206/16, prefix t506-,
# table airlock_t506.
if [ -z "${SNAP506_NS:-}" ]; then
	command -v unshare >/dev/null 2>&1 || { echo "SKIP: no unshare" >&2; exit 77; }
	[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
	SNAP506_NS=1 exec unshare --mount --propagation private "${SHELL:-/bin/sh}" "$0" "$@"
fi
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=506
. "$top_srcdir/tests/integration/contain-lib.sh"
CT_NET=10.206
. "$top_srcdir/tests/integration/snap-lib.sh"
snap_rootfs
mkdir -p "$T/state"
mount -t tmpfs -o size=6m,mode=0700 tmpfs "$T/state" || fail "tmpfs state_dir"
CT_LAUNCHER_EXTRA="  rootfs: $ROOTFS
  snapshots: {max_bytes: 2MiB}"
CT_POOL='{warm: 0, max: 8}'
ct_start
wait_admin

# --- config errors name FILE:LINE:COL
sed 's/^  pool: .*/  pool: {warm: 1, from: "..bad"}/' "$T/airlock.yaml" >"$T/bad.yaml"
"$AIRLOCKD" -t -c "$T/bad.yaml" >"$T/bad.out" 2>&1 && fail "airlockd -t took pool.from ..bad"
grep -q "bad.yaml:[0-9]*:[0-9]*: \"from\" must be a snapshot name" "$T/bad.out" || fail "pool.from error: $(cat "$T/bad.out")"
sed 's/^  snapshots: .*/  snapshots: {max_bytes: 10}/' "$T/airlock.yaml" >"$T/bad.yaml"
"$AIRLOCKD" -t -c "$T/bad.yaml" >"$T/bad.out" 2>&1 && fail "airlockd -t took max_bytes 10"
grep -q "bad.yaml:[0-9]*:[0-9]*: .*max_bytes" "$T/bad.out" || fail "max_bytes error: $(cat "$T/bad.out")"
ok "pool.from and snapshots.max_bytes errors with FILE:LINE:COL"

# --- a base snapshot, then the gateway again with a pool from it
A=$(claim) || exit 1
in_sbx "$A" 'echo pooled >/data/pool.txt; rm /data/base.txt' || fail "write"
HB=$(in_sbx "$A" "$TREE") || fail "tree"
ctl snapshot create "$A" --name base >/dev/null || fail "snapshot base"
ct_stop
CT_POOL='{warm: 2, max: 3, from: base}'
ct_start
wait_admin
i=0
warm_n() { ctl --json sandbox list | "$PYTHON" -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)["sandboxes"] if s["state"] == "warm"))'; }
while [ "$(warm_n)" -lt 2 ]; do
	i=$((i + 1)); [ $i -le 200 ] || fail "the pool from base did not fill"; sleep 0.1
done
# each checked at once: past pool.max an idle claimed one is evicted
tree_is_base() { H=$(in_sbx "$1" "$TREE") || fail "tree in $1"; [ "$H" = "$HB" ] || fail "$1: tree $H, base's $HB"; }
W=$(claim) || exit 1
[ "$(claim_warm)" = True ] || fail "first claim not warm: $(cat "$T/claim.out")"
tree_is_base "$W"
cold=0
for i in 1 2 3 4 5 6; do	# until one is cold (the pool refills meanwhile)
	X=$(claim) || exit 1
	w=$(claim_warm)
	tree_is_base "$X"
	[ "$w" = False ] && { cold=1; break; }
done
[ $cold = 1 ] || fail "no cold claim in 7"
C2=$(claim base) || exit 1		# "from" naming the pool's own
[ "$(in_sbx "$C2" "$TREE")" = "$HB" ] || fail "from base: tree"
ctl snapshot delete base >"$T/db.out" 2>&1 && fail "deleted the pool's snapshot"
grep -q "in use" "$T/db.out" || fail "delete base: $(cat "$T/db.out")"
for s in $(ctl --json sandbox list | "$PYTHON" -c '
import json, sys
print(" ".join(s["id"] for s in json.load(sys.stdin)["sandboxes"] if s["state"] == "launched"))'); do
	ctl sandbox delete "$s" >/dev/null || fail "delete $s"
done
ok "pool from snapshot base: warm and cold claims give its tree; base kept"

# --- max_bytes: prune the oldest unreferenced; refuse what cannot fit
mk() { # NAME KiB: a sandbox from base with KiB of random data, snapshotted
	_s=$(claim base) || exit 1
	in_sbx "$_s" "dd if=/dev/urandom of=/data/$1 bs=1024 count=$2 2>/dev/null" || fail "dd $1"
	ctl snapshot create "$_s" --name "$1" >"$T/mk.out" 2>&1; _rc=$?
	ctl sandbox delete "$_s" >/dev/null
	return $_rc
}
mk s1 800 || fail "s1: $(cat "$T/mk.out")"
mk s2 800 || fail "s2: $(cat "$T/mk.out")"
mk s3 700 || fail "s3: $(cat "$T/mk.out")"
ctl snapshot list | cut -d' ' -f1 | tr '\n' ' ' >"$T/l.out"
[ "$(cat "$T/l.out")" = "base s2 s3 " ] || fail "after s3: $(cat "$T/l.out") (want s1 pruned)"
grep -q "snapshot s1 pruned" "$T/airlockd.log" || fail "no prune logged"
mk big 2500 && fail "a 2.5 MiB snapshot fit in max_bytes 2MiB"
grep -q "does not fit in launcher.snapshots.max_bytes" "$T/mk.out" || fail "big: $(cat "$T/mk.out")"
grep -q "HTTP 507" "$T/mk.out" || fail "big: not 507: $(cat "$T/mk.out")"
ok "max_bytes: oldest unreferenced pruned, one too big refused (507, clear reason)"

# --- a full disk during a snapshot: the previous ones intact
dd if=/dev/zero of="$T/state/filler" bs=1024 count=3500 2>/dev/null
mk full 1500 && fail "snapshot on a full disk succeeded"
grep -q "No space left" "$T/mk.out" || fail "full: $(cat "$T/mk.out")"
rm -f "$T/state/filler"
ctl snapshot list | cut -d' ' -f1 | tr '\n' ' ' >"$T/l.out"
[ "$(cat "$T/l.out")" = "base s2 s3 " ] || fail "after the full disk: $(cat "$T/l.out")"
R=$(claim s3) || exit 1
in_sbx "$R" 'wc -c </data/s3; cat /data/pool.txt' >"$T/s3.out" || fail "read s3"
[ "$(head -1 "$T/s3.out")" = 716800 ] && grep -q pooled "$T/s3.out" || fail "s3 after the full disk: $(cat "$T/s3.out")"
ctl sandbox delete "$R" >/dev/null
ls "$T/state/snapshots/tmp" | grep -q . && fail "tmp left: $(ls "$T/state/snapshots/tmp")"
ok "full disk during a snapshot: refused, s2 and s3 intact and restorable"

# --- 50 cycles: nothing left behind
ctl snapshot delete s2 >/dev/null && ctl snapshot delete s3 >/dev/null || fail "delete s2 s3"
M0=$(cat /proc/self/mountinfo | sort)
L0=$(ls "$T/state/snapshots/layers" | wc -l)
for i in $(seq 1 50); do
	X=$(claim base) || exit 1
	in_sbx "$X" "echo $i >/data/c" || fail "cycle $i write"
	ctl snapshot create "$X" --name "cy" >/dev/null || fail "cycle $i snapshot"
	Y=$(claim cy) || exit 1
	[ "$(in_sbx "$Y" 'cat /data/c')" = "$i" ] || fail "cycle $i restore"
	# (past pool.max the pool may have evicted the idle one already)
	ctl sandbox delete "$Y" >/dev/null 2>&1; ctl sandbox delete "$X" >/dev/null 2>&1
	ctl snapshot delete cy >/dev/null || fail "cycle $i snapshot delete"
done
# our launcher's inits: one per sandbox the gateway still has (warm or
# claimed), nothing else
our_inits() { for l in $(pgrep -P "$AIRLOCK_PID"); do pgrep -x -P "$l" airlock-init; done | wc -l; }
live_sbx() { ctl --json sandbox list | "$PYTHON" -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)["sandboxes"] if s["state"] in ("warm", "launched")))'; }
i=0
while [ "$(our_inits)" != "$(live_sbx)" ]; do
	i=$((i + 1)); [ $i -le 100 ] || fail "airlock-init: $(our_inits) for $(live_sbx) sandboxes"; sleep 0.1
done
[ "$(cat /proc/self/mountinfo | sort)" = "$M0" ] || fail "mountinfo changed: $(echo "$M0" >"$T/m0"; cat /proc/self/mountinfo | sort | diff "$T/m0" -)"
[ "$(ls "$T/state/snapshots/layers" | wc -l)" = "$L0" ] || fail "layers left: $(ls "$T/state/snapshots/layers")"
find "$T/state/snapshots/objects" -type f -links 1 | grep -q . && fail "unlinked objects left"
ls /sys/fs/cgroup/freezer | grep -q airlock-snap && fail "freezer cgroups left"
ok "50 claim/snapshot/restore/delete cycles: mountinfo, layers, objects, inits as before"

ct_stop
umount "$T/state"
finish
