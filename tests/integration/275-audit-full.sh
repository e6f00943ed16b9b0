#!/bin/sh
# Fail-closed audit. The audit file on a small tmpfs that fills up, then in
# a directory removed while the daemon runs: new requests get 503
# audit_unavailable, the daemon stays up, and once writing works again
# (filler removed, directory back) requests pass with no restart. Every
# request made has its record, the 503 ones included, and the chain
# verifies. Needs root for mount(8); CI runs as root, so this never skips.
# Its tmpfs lives in a mount namespace of its own, so that tests running at
# the same time (make -j check) never see it in the host's mount table.
if [ -z "${AIRLOCK_275_MNTNS:-}" ] && [ "$(id -u)" -eq 0 ] &&
    unshare --mount --propagation private true 2>/dev/null; then
	AIRLOCK_275_MNTNS=1 exec unshare --mount --propagation private \
	    "${SHELL:-/bin/sh}" "$0" "$@"
fi
. "$top_srcdir/tests/integration/lib.sh"

AIRLOCKCTL=$top_builddir/src/airlockctl
[ -x "$AIRLOCKCTL" ] || hard_error "$AIRLOCKCTL not built"
[ "$(id -u)" -eq 0 ] ||
    fail "must run as root to mount a small tmpfs (CI runs as root)"
MNT=$T/mnt
mkdir "$MNT" || hard_error "mkdir $MNT"
mount -t tmpfs -o size=256k,mode=0700 airlock-audit-test "$MNT" ||
    fail "cannot mount a 256k tmpfs on $MNT"
_full_cleanup()
{
	_frc=$?
	# keep the audit file for the failure report, then drop the mount
	# (lazily: the daemon may still hold the file open)
	cp "$MNT/audit.jsonl" "$T/audit-tmpfs.jsonl" 2>/dev/null
	umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	(exit "$_frc")
	_it_cleanup
}
trap _full_cleanup EXIT

start_origin
AIRLOCK_PORT=$(free_port)
export T

# write_cfg AUDIT-FILE
write_cfg()
{
	cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", default_sandbox: local}
state_dir: $T/state
workers: 2
audit: {file: "$1", hash_chain: true}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: pol
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/size/*"]}
sandboxes:
  - {id: local, policy: pol}
YAML
}

# req PATH: one request; sets STATUS and RID; "RID STATUS" goes to $T/ids
req()
{
	STATUS=$(curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -D "$T/hdr" \
	    -o "$T/body" -w '%{http_code}' "http://api.test:$ORIGIN_PORT$1") ||
	    fail "curl $1 (is the daemon still up?)"
	RID=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/hdr" |
	    tr -d '\r')
	[ -n "$RID" ] || fail "no X-Airlock-Request-Id on $1 (status $STATUS)"
	echo "$RID $STATUS" >>"$T/ids"
}

# req_until STATUS PATH: repeat req until it answers STATUS (3 s at most)
req_until()
{
	_n=0
	while :; do
		req "$2"
		[ "$STATUS" = "$1" ] && return 0
		_n=$((_n + 1))
		[ $_n -lt 30 ] || return 1
		sleep 0.1
	done
}

# check_503: the last answer is the gateway's audit_unavailable error
check_503()
{
	[ "$STATUS" = 503 ] || { check_fail "status $STATUS, want 503"; return; }
	"$PYTHON" - "$T/body" "$RID" <<'PY' ||
import json, sys
b = json.load(open(sys.argv[1]))
assert b.get("error") == "audit_unavailable", b
assert b.get("request_id") == sys.argv[2], (b, sys.argv[2])
assert b.get("reason"), b
PY
	    check_fail "503 body: $(cat "$T/body")"
}

# check_records FILE IDS PREV: every id of IDS has exactly one record in
# FILE with the status the client saw, FILE holds nothing else, and its
# chain holds from PREV (recomputed here, and by airlockctl)
check_records()
{
	"$PYTHON" - "$1" "$2" "$3" <<'PY' || check_fail "records in $1"
import hashlib, json, re, sys, itlib
t = itlib.Checks()
path, idfile, prev = sys.argv[1], sys.argv[2], sys.argv[3].encode()
want = [l.split() for l in open(idfile) if l.strip()]
raw = [l for l in open(path, "rb").read().split(b"\n") if l]
recs = [json.loads(l) for l in raw]
t.ok(len(recs) == len(want), "%s: one record per request (%d requests)" %
     (path, len(want)), len(recs))
by_id = {}
for r in recs:
    by_id.setdefault(r.get("id"), []).append(r)
bad = [(rid, st, by_id.get(rid)) for rid, st in want
       if len(by_id.get(rid, [])) != 1 or
       str(by_id[rid][0].get("status")) != st]
t.ok(not bad, "%s: each request has one record with the status the client "
     "saw (%d refused with 503)" % (path, sum(st == "503" for _, st in want)),
     bad)
end = re.compile(rb',"prev":"([0-9a-f]{64})","hash":"([0-9a-f]{64})"\}$')
broken = None
for n, l in enumerate(raw):
    m = end.search(l)
    if not m or m.group(1) != prev or hashlib.sha256(
            l.replace(b',"hash":"' + m.group(2) + b'"', b"", 1)
            ).hexdigest().encode() != m.group(2):
        broken = (n + 1, l[-160:])
        break
    prev = m.group(2)
t.ok(broken is None, "%s: the chain holds (recomputed)" % path, broken)
t.done()
PY
	if "$AIRLOCKCTL" audit verify --prev "$3" "$1" >"$T/verify.out" 2>&1; then
		ok "airlockctl audit verify: $(cat "$T/verify.out")"
	else
		check_fail "airlockctl audit verify: $(cat "$T/verify.out")"
	fi
}

# wait_ids FILE IDS: until every id of IDS is in FILE (10 s at most)
wait_ids()
{
	_i=0
	while [ $_i -lt 200 ]; do
		_missing=0
		while read -r _id _st; do
			grep -q "\"id\":\"$_id\"" "$1" 2>/dev/null || {
				_missing=1
				break
			}
		done <"$2"
		[ $_missing -eq 0 ] && return 0
		sleep 0.05
		_i=$((_i + 1))
	done
	check_fail "not every request of $2 has a record in $1"
}

ZEROS=$(printf '%064d' 0)

# --- 1. a full filesystem ---------------------------------------------------
AUDIT=$MNT/audit.jsonl
write_cfg "$AUDIT"
: >"$T/ids"
start_airlockd "$T/airlock.yaml"
for i in 1 2 3; do
	req "/size/$i"
	[ "$STATUS" = 200 ] || fail "/size/$i: status $STATUS before the disk filled"
done
wait_ids "$AUDIT" "$T/ids"
# fill it; a record or two may still fit in the last page of the file
dd if=/dev/zero of="$MNT/filler" bs=4k 2>/dev/null
[ -s "$MNT/filler" ] || hard_error "could not fill $MNT"
req_until 503 /size/4 || fail "no 503 with the audit filesystem full"
check_503
ok "full filesystem: 503 audit_unavailable"
for i in 1 2 3 4 5; do
	req "/size/x$i"
	check_503
done
# the daemon stays up and answers on its other listener too
kill -0 "$AIRLOCK_PID" 2>/dev/null || fail "airlockd died with a full disk"
code=$(curl -sS -o /dev/null -w '%{http_code}' \
    --unix-socket "$T/state/admin.sock" http://airlock/healthz) ||
    check_fail "admin API does not answer while the audit is unavailable"
ok "admin API answers ($code) while the audit is unavailable"
grep -q 'audit: cannot write' "$T/airlockd.log" ||
    check_fail "no log line saying the audit cannot be written"

rm -f "$MNT/filler"
req_until 200 /size/5 ||
    fail "requests still refused 3 s after the filesystem had room again"
ok "room again: requests pass without a restart"
for i in 6 7 8; do
	req "/size/$i"
	[ "$STATUS" = 200 ] || check_fail "/size/$i: status $STATUS after recovery"
done
wait_ids "$AUDIT" "$T/ids"
grep -q 'audit: writing again' "$T/airlockd.log" ||
    check_fail "no log line saying the audit is written again"
stop_airlockd
check_records "$AUDIT" "$T/ids" "$ZEROS"
n503=$(grep -c ' 503$' "$T/ids")
[ "$n503" -ge 6 ] || check_fail "only $n503 requests were refused"
ok "full filesystem: $(wc -l <"$T/ids") requests, $n503 refused, all audited"

# --- 2. the audit directory removed -----------------------------------------
ADIR=$T/adir
mkdir "$ADIR" || hard_error "mkdir $ADIR"
AUDIT=$ADIR/audit.jsonl
write_cfg "$AUDIT"
: >"$T/ids"
start_airlockd "$T/airlock.yaml"
for i in 1 2 3; do
	req "/size/$i"
	[ "$STATUS" = 200 ] || fail "/size/$i: status $STATUS"
done
wait_ids "$AUDIT" "$T/ids"
cp "$AUDIT" "$T/adir-before.jsonl"
mv "$T/ids" "$T/ids-before"
: >"$T/ids"
last=$(tail -n 1 "$T/adir-before.jsonl" |
    sed 's/.*,"hash":"\([0-9a-f]*\)"}$/\1/')
rm -rf "$ADIR"
req_until 503 /size/4 || fail "no 503 with the audit directory removed"
check_503
ok "directory removed: 503 audit_unavailable"
for i in 1 2 3; do
	req "/size/y$i"
	check_503
done
kill -0 "$AIRLOCK_PID" 2>/dev/null || fail "airlockd died without its audit directory"
mkdir "$ADIR"
req_until 200 /size/5 ||
    fail "requests still refused 3 s after the directory came back"
ok "directory back: requests pass without a restart"
req /size/6
[ "$STATUS" = 200 ] || check_fail "/size/6: status $STATUS after recovery"
wait_ids "$AUDIT" "$T/ids"
stop_airlockd
check_records "$T/adir-before.jsonl" "$T/ids-before" "$ZEROS"
check_records "$AUDIT" "$T/ids" "$last"
grep -q 'LOST' "$T/airlockd.log" && check_fail "records were dropped"
finish
