#!/bin/sh
# airlockctl policy replay: real traffic through a real airlockd gives a
# hash-chained audit, rotated once (two files); candidate configs replayed
# over it give the exact expected diff. A rule removed: its requests are
# listed allow -> deny (sandbox, host, rule, count, the request ids), exit 1.
# A rule added: the request it would allow is deny -> allow, exit 0. A
# sandbox dropped: "no such sandbox". --json parsed and checked; lines the
# audit cannot re-judge (unidentified, denied by the destination guard
# after the allowlist) are listed as not judged; usage errors exit 2.
. "$top_srcdir/tests/integration/lib.sh"

AIRLOCKCTL=$top_builddir/src/airlockctl
[ -x "$AIRLOCKCTL" ] || hard_error "$AIRLOCKCTL not built"

start_origin
AIRLOCK_PORT=$(free_port)
PROXY=http://127.0.0.1:$AIRLOCK_PORT

# policies PART: the policies and sandboxes of a config; PART picks the
# candidate (current, no-files, admin, no-beta)
config()
{
	cat <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl, hash_chain: true}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "files.test": "127.0.0.1",
          "guard.test": "127.0.0.2"}
policies:
  - name: pol
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], methods: [GET], paths: ["/v1/*"]}
YAML
	[ "$1" = no-files ] ||
	    echo "      - {host: \"files.test\", ports: [$ORIGIN_PORT], methods: [GET, PUT]}"
	echo "      - {host: \"guard.test\", ports: [$ORIGIN_PORT]}"
	[ "$1" = admin ] &&
	    echo "      - {host: \"api.test\", ports: [$ORIGIN_PORT], methods: [GET], paths: [\"/admin\"]}"
	cat <<YAML
  - name: other
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: alpha, policy: pol, token: "literal:tok-alpha"}
YAML
	[ "$1" = no-beta ] ||
	    echo '  - {id: beta, policy: other, token: "literal:tok-beta"}'
}
config current >"$T/airlock.yaml"
for c in no-files admin no-beta; do
	config $c >"$T/new-$c.yaml"
done
for c in "$T/airlock.yaml" "$T"/new-*.yaml; do
	"$AIRLOCKD" -t -c "$c" >"$T/t.out" 2>&1 ||
	    hard_error "$c does not pass airlockd -t: $(cat "$T/t.out")"
done

# req CRED METHOD URL WANT NAME: one request; its id goes to $T/id.NAME.
# The origin answers 404 to these paths: 404 is "allowed, reached it".
req()
{
	_code=$(curl -sS -x "$PROXY" -U "$1" -X "$2" -D "$T/h.$5" -o /dev/null \
	    -w '%{http_code}' "$3") || fail "curl $2 $3"
	[ "$_code" = "$4" ] || fail "$2 $3: status $_code, want $4"
	tr -d '\r' <"$T/h.$5" | sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: //p' \
	    >"$T/id.$5"
	[ -s "$T/id.$5" ] || fail "$2 $3: no X-Airlock-Request-Id"
}

# wait_lines FILE N: until FILE has N lines (the writer is asynchronous)
wait_lines()
{
	_i=0
	while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ] && [ $_i -lt 200 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	[ "$(wc -l <"$1")" -eq "$2" ] ||
	    fail "$1: $(wc -l <"$1") lines, want $2"
}

start_airlockd "$T/airlock.yaml"
A=alpha:tok-alpha
B=beta:tok-beta
API=http://api.test:$ORIGIN_PORT
FILES=http://files.test:$ORIGIN_PORT
req $A GET "$API/v1/a" 404 a1
req $A GET "$API/v1/b/c?token=q" 404 a2
req $A GET "$API/admin" 403 admin
req $A POST "$API/v1/x" 403 post
req $A GET "$FILES/f1" 404 f1
# rotation: the first file is complete, the writer reopens on SIGUSR1
wait_lines "$T/audit.jsonl" 5
mv "$T/audit.jsonl" "$T/audit.jsonl.1"
kill -USR1 "$AIRLOCK_PID"
sleep 0.3
req $A PUT "$FILES/f2" 404 f2
req $A GET "http://unknown.test:$ORIGIN_PORT/" 403 unknown
req $B GET "$API/anything" 404 b1
req $A GET "http://guard.test:$ORIGIN_PORT/" 403 guard
req alpha:wrong GET "$API/v1/a" 407 noauth
stop_airlockd
wait_lines "$T/audit.jsonl.1" 5
wait_lines "$T/audit.jsonl" 5
"$AIRLOCKCTL" audit verify "$T/audit.jsonl.1" "$T/audit.jsonl" >/dev/null 2>&1 ||
    fail "the recorded audit does not verify"
ok "10 requests recorded in two hash-chained files"
AUD="$T/audit.jsonl.1 $T/audit.jsonl"

# replay NAME WANT-EXIT [--json]: output in $T/rp.NAME
replay()
{
	_n=$1
	_w=$2
	shift 2
	# shellcheck disable=SC2086
	"$AIRLOCKCTL" policy replay --config "$T/$_n.yaml" "$@" $AUD \
	    >"$T/rp.$_n" 2>"$T/rp.$_n.err"
	_st=$?
	[ "$_st" -eq "$_w" ] ||
	    fail "replay $_n: exit $_st, want $_w: $(cat "$T/rp.$_n" "$T/rp.$_n.err")"
}

# Unchanged config: nothing changes; the unjudgeable lines are named.
replay airlock 0
grep -q '^10 records: 8 unchanged, 0 allow -> deny, 0 deny -> allow, 2 not judged$' \
    "$T/rp.airlock" || fail "same config: $(cat "$T/rp.airlock")"
grep -q '^not judged: 2$' "$T/rp.airlock" || fail "no not judged: $(cat "$T/rp.airlock")"
ok "the running config replays with no change, exit 0"

# A rule removed: both files.test requests, one per file, allow -> deny.
replay new-no-files 1
want="  2  sandbox alpha  host files.test  rule pol#1"
grep -qx "$want" "$T/rp.new-no-files" ||
    fail "no \"$want\" in: $(cat "$T/rp.new-no-files")"
grep -q "e.g. $(cat "$T/id.f1") $(cat "$T/id.f2")" "$T/rp.new-no-files" ||
    fail "examples are not the two request ids: $(cat "$T/rp.new-no-files")"
grep -q "now: host files.test is not allowed" "$T/rp.new-no-files" ||
    fail "no new reason: $(cat "$T/rp.new-no-files")"
ok "rule removed: allow -> deny listed with ids, exit 1"

replay new-no-files 1 --json
"$PYTHON" - "$T/rp.new-no-files" "$(cat "$T/id.f1")" "$(cat "$T/id.f2")" \
    "$(cat "$T/id.noauth")" <<'PY' || fail "--json: $(cat "$T/rp.new-no-files")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["records"] == 10, r
assert r["unchanged"] == 6, r
assert r["deny_to_allow"] == [], r
ad = r["allow_to_deny"]
assert len(ad) == 1, ad
g = ad[0]
assert (g["sandbox"], g["host"], g["rule"], g["count"]) == \
    ("alpha", "files.test", "pol#1", 2), g
assert g["examples"] == [sys.argv[2], sys.argv[3]], g
assert g["reason"] == "host files.test is not allowed", g
nj = {x["reason"]: x for x in r["not_judged"]}
assert sum(x["count"] for x in r["not_judged"]) == 2, nj
guard = [x for k, x in nj.items() if k.startswith("allowed by the allowlist")]
assert len(guard) == 1 and guard[0]["count"] == 1, nj
assert guard[0]["lines"][0].endswith("audit.jsonl:4"), guard
noid = [x for k, x in nj.items() if k.startswith("no sandbox")]
assert len(noid) == 1 and noid[0]["lines"][0].endswith("audit.jsonl:5"), nj
print("ok")
PY
ok "--json: the same diff, parsed"

# A rule added: the denied /admin request would be allowed, exit 0.
replay new-admin 0
want="  1  sandbox alpha  host api.test  rule pol#3"
grep -qx "$want" "$T/rp.new-admin" ||
    fail "no \"$want\" in: $(cat "$T/rp.new-admin")"
grep -q "e.g. $(cat "$T/id.admin")\$" "$T/rp.new-admin" ||
    fail "example is not the /admin request: $(cat "$T/rp.new-admin")"
grep -q '^10 records: 7 unchanged, 0 allow -> deny, 1 deny -> allow, 2 not judged$' \
    "$T/rp.new-admin" || fail "rule added: $(cat "$T/rp.new-admin")"
ok "rule added: deny -> allow, exit 0"

# A sandbox dropped: what it was allowed would be denied.
replay new-no-beta 1 --json
"$PYTHON" - "$T/rp.new-no-beta" "$(cat "$T/id.b1")" <<'PY' || fail "no-beta: $(cat "$T/rp.new-no-beta")"
import json, sys
r = json.load(open(sys.argv[1]))
ad = r["allow_to_deny"]
assert len(ad) == 1, ad
assert (ad[0]["sandbox"], ad[0]["rule"], ad[0]["examples"]) == \
    ("beta", "other#0", [sys.argv[2]]), ad
assert ad[0]["reason"] == "no such sandbox beta in the new config", ad
PY
ok "sandbox absent from the new config: would deny, no such sandbox"

# Chained files are checked on the way: a continuous chain says nothing,
# an altered line gets a warning (and is replayed anyway).
grep -q 'warning' "$T/rp.airlock.err" && fail "warning on intact files: $(cat "$T/rp.airlock.err")"
sed '2s/"status":404/"status":200/' "$T/audit.jsonl.1" >"$T/tampered.jsonl"
cmp -s "$T/tampered.jsonl" "$T/audit.jsonl.1" && hard_error "the tampering did not change line 2"
"$AIRLOCKCTL" policy replay --config "$T/airlock.yaml" "$T/tampered.jsonl" "$T/audit.jsonl" \
    >"$T/rp.t" 2>"$T/rp.t.err" || fail "replay of a tampered file: exit $?"
grep -q "warning: .*tampered.jsonl:2: hash chain broken" "$T/rp.t.err" ||
    fail "no chain warning: $(cat "$T/rp.t.err")"
"$AIRLOCKCTL" policy replay --config "$T/airlock.yaml" "$T/audit.jsonl" \
    >/dev/null 2>"$T/rp.t2.err" || fail "replay of the second file alone: exit $?"
grep -q 'warning' "$T/rp.t2.err" && fail "warning for a file continuing an earlier one: $(cat "$T/rp.t2.err")"
ok "a broken hash chain is warned about; a chain continuing an earlier file is not"

# A line that is not a record is named, not skipped silently.
printf 'not json\n\n{"id":"x","decision":"allow"}\n' >"$T/odd.jsonl"
"$AIRLOCKCTL" policy replay --config "$T/airlock.yaml" "$T/odd.jsonl" \
    >"$T/rp.odd" 2>&1 || fail "replay of odd lines: exit $?"
grep -q "not a JSON object" "$T/rp.odd" && grep -q "odd.jsonl:1\$" "$T/rp.odd" &&
    grep -q "odd.jsonl:3\$" "$T/rp.odd" &&
    grep -q '^2 records: 0 unchanged, 0 allow -> deny, 0 deny -> allow, 2 not judged$' \
    "$T/rp.odd" || fail "odd lines: $(cat "$T/rp.odd")"
ok "lines that are not records are listed as not judged, with FILE:LINE"

# Usage errors: exit 2.
"$AIRLOCKCTL" policy replay "$T/audit.jsonl" >/dev/null 2>&1
[ $? -eq 2 ] || fail "replay without --config: not exit 2"
printf 'policies: [\n' >"$T/bad.yaml"
"$AIRLOCKCTL" policy replay --config "$T/bad.yaml" "$T/audit.jsonl" \
    >/dev/null 2>"$T/bad.err"
[ $? -eq 2 ] || fail "replay with a broken config: not exit 2"
grep -q "bad.yaml:" "$T/bad.err" || fail "config error not shown: $(cat "$T/bad.err")"
"$AIRLOCKCTL" policy replay --config "$T/airlock.yaml" "$T/nonexistent" \
    >/dev/null 2>&1
[ $? -eq 2 ] || fail "replay of a missing file: not exit 2"
"$AIRLOCKCTL" policy replay --config "$T/airlock.yaml" >/dev/null 2>&1
[ $? -eq 2 ] || fail "replay without files: not exit 2"
ok "usage errors exit 2"

finish
