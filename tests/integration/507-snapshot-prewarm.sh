#!/bin/sh
# Issue 22, point 3: warm pools from snapshots through prewarm.
# POST /v1/pool/prewarm {"policy", "count", "from"} prepares sandboxes
# from that snapshot beside the policy's own pool (launcher.pool, here
# from no snapshot): a claim with "from" takes one of them (warm: true)
# with the snapshot's tree, a claim without "from" never does (it gets the
# base tree), the cold path once they are used up gives the same tree;
# two snapshots prewarmed at once keep apart; the snapshot is pinned
# (refused by delete) while its pool holds any and free again once it is
# empty; an unknown snapshot is a 404. Own range 10.207/16, prefix t507-,
# table airlock_t507; in a mount namespace of its own.
if [ -z "${SNAP507_NS:-}" ]; then
	command -v unshare >/dev/null 2>&1 || { echo "SKIP: no unshare" >&2; exit 77; }
	[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
	SNAP507_NS=1 exec unshare --mount --propagation private "${SHELL:-/bin/sh}" "$0" "$@"
fi
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=507
. "$top_srcdir/tests/integration/contain-lib.sh"
CT_NET=10.207
. "$top_srcdir/tests/integration/snap-lib.sh"
snap_rootfs
CT_LAUNCHER_EXTRA="  rootfs: $ROOTFS
  snapshots: {max_bytes: 64MiB}"
CT_POOL='{warm: 0, max: 8}'
ct_start
wait_admin

H0=
A=$(claim) || exit 1
H0=$(in_sbx "$A" "$TREE") || fail "tree of a base sandbox"
in_sbx "$A" 'echo one >/data/v.txt; rm /data/base.txt' || fail "write v1"
H1=$(in_sbx "$A" "$TREE") || fail "tree v1"
ctl snapshot create "$A" --name v1 >/dev/null || fail "snapshot v1"
in_sbx "$A" 'echo two >/data/v.txt' || fail "write v2"
H2=$(in_sbx "$A" "$TREE") || fail "tree v2"
ctl snapshot create "$A" --name v2 >/dev/null || fail "snapshot v2"
ctl sandbox delete "$A" >/dev/null || fail "delete $A"
[ "$H1" != "$H0" ] && [ "$H2" != "$H1" ] || fail "trees not distinct"

# --- errors: an unknown snapshot, a bad name
api POST /v1/pool/prewarm '{"count": 1, "from": "nosuch"}' >"$T/e.out"
grep -q '^404 ' "$T/e.out" || fail "prewarm from nosuch: $(cat "$T/e.out")"
api POST /v1/pool/prewarm '{"count": 1, "from": "../x"}' >"$T/e.out"
grep -q '^4[0-9][0-9] ' "$T/e.out" || fail "prewarm from ../x: $(cat "$T/e.out")"
ok "prewarm from an unknown or bad snapshot refused (404/4xx)"

# --- two pools from two snapshots, filled at once
api POST /v1/pool/prewarm '{"count": 2, "from": "v1"}' >"$T/p.out"
grep -q '^202 .*"from": "v1".*"scheduled": 2' "$T/p.out" || fail "prewarm v1: $(cat "$T/p.out")"
api POST /v1/pool/prewarm '{"count": 1, "from": "v2"}' >"$T/p.out"
grep -q '^202 .*"scheduled": 1' "$T/p.out" || fail "prewarm v2: $(cat "$T/p.out")"
warm_n() { ctl --json sandbox list | "$PYTHON" -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)["sandboxes"] if s["state"] == "warm"))'; }
i=0
while [ "$(warm_n)" -lt 3 ]; do
	i=$((i + 1)); [ $i -le 300 ] || fail "prewarmed pools did not fill: $(warm_n) warm"; sleep 0.1
done
# v2 is a leaf (v1 is its parent): only the pool's pin keeps it
ctl snapshot delete v2 >"$T/d.out" 2>&1 && fail "deleted v2 while its pool holds one"
grep -q "in use" "$T/d.out" || fail "delete v2: $(cat "$T/d.out")"
ok "prewarm from v1 (2) and v2 (1): three warm, v2 pinned against delete"

# a claim with no "from" is the policy's own pool: never a v1/v2 one
B=$(claim) || exit 1
[ "$(claim_warm)" = False ] || fail "a plain claim took a prewarmed snapshot sandbox"
[ "$(in_sbx "$B" "$TREE")" = "$H0" ] || fail "plain claim: not the base tree"
[ "$(warm_n)" = 3 ] || fail "plain claim used a warm one: $(warm_n) warm"
ok "a claim without from leaves the snapshot pools alone (cold, base tree)"

W1=$(claim v1) || exit 1
[ "$(claim_warm)" = True ] || fail "claim v1 not warm: $(cat "$T/claim.out")"
[ "$(in_sbx "$W1" "$TREE")" = "$H1" ] || fail "warm v1: not v1's tree"
W2=$(claim v2) || exit 1
[ "$(claim_warm)" = True ] || fail "claim v2 not warm: $(cat "$T/claim.out")"
[ "$(in_sbx "$W2" "$TREE")" = "$H2" ] || fail "warm v2: not v2's tree"
C2=$(claim v2) || exit 1
[ "$(claim_warm)" = False ] || fail "second v2 claim warm (only one prewarmed)"
[ "$(in_sbx "$C2" "$TREE")" = "$H2" ] || fail "cold v2: not v2's tree"
ok "claims from v1 and v2 warm with their trees; v2's cold path the same tree"

W1b=$(claim v1) || exit 1
[ "$(claim_warm)" = True ] || fail "second v1 claim not warm"
[ "$(in_sbx "$W1b" "$TREE")" = "$H1" ] || fail "warm v1 (2): not v1's tree"
for s in "$B" "$W1" "$W2" "$C2" "$W1b"; do ctl sandbox delete "$s" >/dev/null || fail "delete $s"; done
# their pools empty, both are unpinned within a pool tick or two
for v in v2 v1; do
	i=0
	until ctl snapshot delete $v >"$T/d.out" 2>&1; do
		i=$((i + 1)); [ $i -le 50 ] || fail "$v still pinned with its pool empty: $(cat "$T/d.out")"; sleep 0.1
	done
done
ok "snapshots unpinned once their prewarmed pools are empty"

ct_stop
grep -q 'AddressSanitizer\|runtime error' "$T/airlockd.log" && fail "sanitizer report"
ok "airlockd stopped cleanly"
