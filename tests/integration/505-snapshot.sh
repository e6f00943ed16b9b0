#!/bin/sh
# Issue 22, points 1, 2, 5, 6: snapshots of a netns sandbox's writable
# layer (launcher.rootfs DIR, a static busybox tree), in gateway mode as
# root. create -> modify -> snapshot -> modify more -> restore gives the
# snapshot's files (a deleted base file stays deleted: the whiteout is
# kept), not the later changes, with the same tree hash every time; a chain
# of three versions; rollback of a running sandbox; list/show/delete (a parent is not deleted); the store
# is 0700 and holds no generated file (CA bundle, hostname) of the sandbox;
# deleting a snapshot whose layer holds a symlink and a bind mount to an
# outside directory leaves that directory untouched. Own range 10.205/16,
# prefix t505-, table airlock_t505.
# In a mount namespace of its own: the bind mount it plants never shows
# on the host, even when it fails.
if [ -z "${SNAP505_NS:-}" ]; then
	command -v unshare >/dev/null 2>&1 || { echo "SKIP: no unshare" >&2; exit 77; }
	[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
	SNAP505_NS=1 exec unshare --mount --propagation private "${SHELL:-/bin/sh}" "$0" "$@"
fi
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=505
. "$top_srcdir/tests/integration/contain-lib.sh"
CT_NET=10.205
. "$top_srcdir/tests/integration/snap-lib.sh"
snap_rootfs
CT_LAUNCHER_EXTRA="  rootfs: $ROOTFS
  snapshots: {max_bytes: 64MiB}"
CT_POOL='{warm: 0, max: 8}'
ct_start
wait_admin

# --- create -> modify -> snapshot -> modify more
A=$(claim) || exit 1
in_sbx "$A" 'echo v1 >/data/new.txt && rm /data/base.txt && mkdir /data/sub &&
    echo deep >/data/sub/f && ln -s '"$OUTSIDE"' /data/out' ||
    fail "modify in $A"
H1=$(in_sbx "$A" "$TREE") || fail "tree hash in $A"
ctl snapshot create "$A" --name v1 >"$T/c1.out" 2>&1 || fail "snapshot create: $(cat "$T/c1.out")"
grep -q "^v1 [0-9a-f]\{16\} - " "$T/c1.out" || fail "snapshot create output: $(cat "$T/c1.out")"
in_sbx "$A" 'echo later >/data/new.txt; echo later >/data/later.txt' || fail "modify after"
in_sbx "$A" 'cat /data/new.txt' | grep -q later || fail "sandbox $A did not keep running after the snapshot"
if [ -e /sys/fs/cgroup/freezer/cgroup.procs ]; then
	grep -q "snapshot v1 of $A: frozen by the cgroup freezer" "$T/airlockd.log" ||
	    fail "not frozen by the cgroup freezer: $(grep 'snapshot v1' "$T/airlockd.log")"
	[ -d /sys/fs/cgroup/freezer/airlock-snap-* ] 2>/dev/null && fail "freezer cgroup left"
else
	grep -q "snapshot v1 of $A: frozen by SIGSTOP" "$T/airlockd.log" || fail "not frozen"
fi
ok "snapshot v1 of a running sandbox (frozen, then thawed: it keeps running)"

# --- the store: 0700, no generated files of the sandbox
S=$T/state/snapshots
[ "$(stat -c %a "$S")" = 700 ] || fail "store mode $(stat -c %a "$S")"
[ "$(stat -c %u "$S")" = 0 ] || fail "store owner"
L1=$(snap_layer v1)
[ -d "$S/layers/$L1/data" ] || fail "no layer $L1"
for g in etc/hostname etc/hosts etc/resolv.conf etc/airlock/ca-bundle.pem; do
	[ -e "$S/layers/$L1/$g" ] && fail "generated $g in the snapshot"
done
[ -c "$S/layers/$L1/data/base.txt" ] || fail "the whiteout of base.txt is not kept"
grep -rl -- "$SECRET" "$S" && fail "a secret value in the store"
ok "store 0700 root, whiteout kept, no generated file or secret in it"

# --- restore: the snapshot's files, not the later changes, same hash
for i in 1 2 3; do
	B=$(claim v1) || exit 1
	in_sbx "$B" 'cat /data/new.txt; ls /data' >"$T/r$i.out" || fail "restore $i"
	grep -q '^v1$' "$T/r$i.out" || fail "restore $i: $(cat "$T/r$i.out")"
	grep -q 'later.txt\|base.txt' "$T/r$i.out" && fail "restore $i shows later or deleted files: $(cat "$T/r$i.out")"
	if [ $i = 1 ]; then	# its own identity, not the source's
		in_sbx "$B" 'cat /etc/hostname /etc/airlock/ca-bundle.pem' >"$T/id.out" || fail "identity"
		[ "$(head -1 "$T/id.out")" = "$B" ] || fail "restored hostname $(head -1 "$T/id.out"), not $B"
		ctl sandbox ca "$B" >"$T/caB.pem" && ctl sandbox ca "$A" >"$T/caA.pem" || fail "sandbox ca"
		grep -q "$(sed -n 2p "$T/caB.pem")" "$T/id.out" || fail "restored sandbox lacks its own CA"
		grep -q "$(sed -n 2p "$T/caA.pem")" "$T/id.out" && fail "restored sandbox trusts the source's CA"
	fi
	H=$(in_sbx "$B" "$TREE") || fail "tree hash $i"
	[ "$H" = "$H1" ] || fail "restore $i: tree hash $H, snapshot's $H1"
	ctl sandbox delete "$B" >/dev/null || fail "delete $B"
done
# the other two ways in: airlockctl run --from, POST /v1/sandboxes {"from"}
[ "$(ctl run --from v1 -- cat /data/new.txt)" = v1 ] || fail "run --from v1"
api POST /v1/sandboxes '{"policy": "default", "from": "v1"}' >"$T/post.out"
read -r st rest <"$T/post.out"
[ "$st" = 200 ] || fail "POST /v1/sandboxes from: $(cat "$T/post.out")"
P=$(printf '%s\n' "$rest" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
[ "$(in_sbx "$P" "$TREE")" = "$H1" ] || fail "POST /v1/sandboxes from v1: tree"
ctl sandbox delete "$P" >/dev/null || fail "delete $P"
api POST /v1/sandboxes/claim '{"from": "nosuch"}' | grep -q '^404 .*not_found' || fail "claim from a missing snapshot not 404"
ok "restored three times (claim from), by run --from and POST /v1/sandboxes from: the snapshot's tree (hash equal), not the later changes; its own hostname and CA"

# --- a chain of three versions
B=$(claim v1) || exit 1
in_sbx "$B" 'echo v2 >/data/v2.txt' || fail "v2 write"
ctl snapshot create "$B" --name v2 >/dev/null || fail "snapshot v2"
C=$(claim v2) || exit 1
in_sbx "$C" 'echo v3 >/data/v3.txt; rm /data/keep.txt' || fail "v3 write"
ctl snapshot create "$C" --name v3 >/dev/null || fail "snapshot v3"
D=$(claim v3) || exit 1
in_sbx "$D" 'cat /data/new.txt /data/v2.txt /data/v3.txt; ls /data' >"$T/v3.out" || fail "read v3"
[ "$(head -3 "$T/v3.out" | tr '\n' ' ')" = "v1 v2 v3 " ] || fail "chain: $(cat "$T/v3.out")"
grep -q keep.txt "$T/v3.out" && fail "chain: keep.txt not deleted in v3"
ctl --json snapshot show v3 | grep -q '"parent":"v2"' || fail "v3's parent"
ctl snapshot list >"$T/list.out"
[ "$(cut -d' ' -f1,3 "$T/list.out" | tr '\n' ' ')" = "v1 - v2 v1 v3 v2 " ] || fail "list: $(cat "$T/list.out")"
ok "three versions chained (v1 <- v2 <- v3)"

# --- rollback: the same sandbox (id, token) back on a snapshot
H3=$(in_sbx "$D" "$TREE") || fail "tree v3"
TOK=$(ctl --json sandbox show "$D" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["token"])')
in_sbx "$D" 'echo junk >/data/junk; rm /data/v2.txt; (sleep 300 </dev/null >/dev/null 2>&1 &)' || fail "junk"
in_sbx "$D" 'cat /proc/[0-9]*/comm' | grep -q '^sleep$' || fail "no sleeper before the rollback"
ctl snapshot rollback "$D" v3 >"$T/rb.out" 2>&1 || fail "rollback: $(cat "$T/rb.out")"
[ "$(in_sbx "$D" "$TREE")" = "$H3" ] || fail "after rollback: not v3's tree: $(in_sbx "$D" 'ls /data')"
in_sbx "$D" 'cat /proc/[0-9]*/comm' >"$T/procs.out" || fail "ps"
grep -q '^sleep$' "$T/procs.out" && fail "processes survived the rollback: $(cat "$T/procs.out")"
[ "$(ctl --json sandbox show "$D" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["token"])')" = "$TOK" ] ||
    fail "token changed by the rollback"
ctl snapshot rollback "$D" v1 >/dev/null || fail "rollback to v1"
[ "$(in_sbx "$D" "$TREE")" = "$H1" ] || fail "after rollback to v1: not v1's tree"
ctl snapshot rollback "$D" nosuch >"$T/rb2.out" 2>&1 && fail "rollback to a missing snapshot"
grep -q "404" "$T/rb2.out" || fail "rollback nosuch: $(cat "$T/rb2.out")"
ok "rollback: the same sandbox and token on v3's tree, its processes restarted; then v1"

# --- delete: a parent refused; the outside untouched
ctl snapshot delete v2 >"$T/d2.out" 2>&1 && fail "deleted v2, the parent of v3"
grep -q "in use" "$T/d2.out" || fail "delete v2: $(cat "$T/d2.out")"
L3=$(snap_layer v3)
mkdir "$S/layers/$L3/data/bind"
mount --bind "$OUTSIDE" "$S/layers/$L3/data/bind" || fail "bind mount"
ln -s "$OUTSIDE" "$S/layers/$L3/data/link"
for s in "$D" "$C" "$B" "$A"; do ctl sandbox delete "$s" >/dev/null || fail "delete $s"; done
ctl snapshot delete v3 >"$T/d3.out" 2>&1
[ -f "$OUTSIDE/precious" ] || fail "the outside file went: $(cat "$T/d3.out")"
grep -q "mount point\|cross-device\|left in place" "$T/d3.out" || fail "delete v3 did not say it left the mount: $(cat "$T/d3.out")"
umount "$S/layers/$L3/data/bind"
[ -f "$OUTSIDE/precious" ] && [ "$(cat "$OUTSIDE/precious")" = precious ] || fail "outside touched"
ctl snapshot delete v2 >/dev/null || fail "delete v2"
ctl snapshot delete v1 >/dev/null || fail "delete v1"
[ -z "$(ctl snapshot list)" ] || fail "left: $(ctl snapshot list)"
ok "delete: parent refused, bind mount and symlink to outside left untouched"

ct_stop
finish
