#!/bin/sh
# airlockctl policy suggest: real traffic through a real airlockd; the
# policy suggested from its audit is exactly the expected YAML (sorted,
# paths generalised: /v1/* from three /v1/... paths; the allowlist's
# denials as commented candidates), deterministic, passes airlockd -t once
# spliced into a config, and replays over the same audit with no
# allow -> deny. With the candidates uncommented it still passes -t and
# turns exactly the denied requests into deny -> allow. Finally a real
# airlockd runs the suggested config and the same requests get the same
# answers (replay and gateway agree).
. "$top_srcdir/tests/integration/lib.sh"

AIRLOCKCTL=$top_builddir/src/airlockctl
[ -x "$AIRLOCKCTL" ] || hard_error "$AIRLOCKCTL not built"

start_origin
AIRLOCK_PORT=$(free_port)
PROXY=http://127.0.0.1:$AIRLOCK_PORT
P=$ORIGIN_PORT

# head AUDIT: the part of a config before "policies:"
head_cfg()
{
	cat <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 2
audit: {file: $1}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "files.test": "127.0.0.1"}
YAML
}
OTHER='  - name: other
    rules:
      - {host: "api.test", ports: ['$P']}'
SANDBOXES='sandboxes:
  - {id: alpha, policy: agent, token: "literal:tok-alpha"}
  - {id: beta, policy: other, token: "literal:tok-beta"}'
{
	head_cfg "$T/audit.jsonl"
	cat <<YAML
policies:
  - name: agent
    rules:
      - {host: "api.test", ports: [$P], methods: [GET, POST]}
      - {host: "files.test", ports: [$P]}
$OTHER
$SANDBOXES
YAML
} >"$T/airlock.yaml"

# traffic: METHOD URL STATUS lines through the gateway as CRED
traffic()
{
	while read -r _cred _m _u _want; do
		_code=$(curl -sS -x "$PROXY" -U "$_cred" -X "$_m" -o /dev/null \
		    -w '%{http_code}' "http://$_u") || fail "curl $_m $_u"
		[ "$_code" = "$_want" ] ||
		    fail "$1: $_m $_u as ${_cred%%:*}: status $_code, want $_want"
	done <<EOF2
alpha:tok-alpha GET api.test:$P/v1/models 404
alpha:tok-alpha POST api.test:$P/v1/chat/completions 404
alpha:tok-alpha GET api.test:$P/v1/embeddings/x?key=1 404
alpha:tok-alpha GET api.test:$P/health 404
alpha:tok-alpha GET api.test:$P/it's 404
alpha:tok-alpha DELETE api.test:$P/v1/models 403
alpha:tok-alpha GET files.test:$P/a/b 404
alpha:tok-alpha PUT files.test:$P/a/c 404
alpha:tok-alpha GET files.test:$P/readme 404
alpha:tok-alpha GET unknown.test:$P/x 403
beta:tok-beta GET api.test:$P/other 404
EOF2
}

start_airlockd "$T/airlock.yaml"
traffic "recording"
stop_airlockd
_i=0
while [ "$(wc -l <"$T/audit.jsonl")" -lt 11 ] && [ $_i -lt 100 ]; do
	sleep 0.05; _i=$((_i + 1))
done
[ "$(wc -l <"$T/audit.jsonl")" -eq 11 ] || fail "audit: $(wc -l <"$T/audit.jsonl") lines, want 11"
ok "11 requests recorded"

"$AIRLOCKCTL" policy suggest --sandbox alpha --policy agent "$T/audit.jsonl" \
    >"$T/suggest.yaml" 2>"$T/suggest.err" || fail "suggest: $(cat "$T/suggest.err")"
cat >"$T/want.yaml" <<EOF2
# airlockctl policy suggest: 10 requests of sandbox alpha
policies:
  - name: 'agent'
    rules:
      - host: 'api.test'   # 5 requests
        ports: [$P]
        methods: [GET, POST]
        paths: ['/health', '/it''s', '/v1/*']
      - host: 'files.test'   # 3 requests
        ports: [$P]
        methods: [GET, PUT]
        paths: ['/a/*', '/readme']
    # Denied by the allowlist; to allow, uncomment (remove "# "):
      # - host: 'api.test'   # 1 request
      #   ports: [$P]
      #   methods: [DELETE]
      #   paths: ['/v1/models']
      # - host: 'unknown.test'   # 1 request
      #   ports: [$P]
      #   methods: [GET]
      #   paths: ['/x']
EOF2
diff -u "$T/want.yaml" "$T/suggest.yaml" >"$T/diff" ||
    fail "suggest output differs: $(cat "$T/diff")"
"$AIRLOCKCTL" policy suggest --sandbox alpha --policy agent "$T/audit.jsonl" |
    cmp -s - "$T/suggest.yaml" || fail "suggest is not deterministic"
ok "suggest: the expected, sorted, generalised policy"

# splice SUGGESTION AUDIT >CONFIG
splice()
{
	head_cfg "$2"
	cat "$1"
	echo "$OTHER"
	echo "$SANDBOXES"
}
splice "$T/suggest.yaml" "$T/audit2.jsonl" >"$T/suggested.yaml"
"$AIRLOCKD" -t -c "$T/suggested.yaml" >"$T/t.out" 2>&1 ||
    fail "suggested config fails airlockd -t: $(cat "$T/t.out")"
"$AIRLOCKCTL" policy replay --config "$T/suggested.yaml" "$T/audit.jsonl" \
    >"$T/rp1" 2>&1 || fail "replay of the suggestion: exit $?: $(cat "$T/rp1")"
grep -qx '11 records: 11 unchanged, 0 allow -> deny, 0 deny -> allow, 0 not judged' \
    "$T/rp1" || fail "replay of the suggestion: $(cat "$T/rp1")"
ok "suggestion passes airlockd -t; replay: no allow -> deny"

# every candidate accepted
sed 's/^      # /      /' "$T/suggest.yaml" >"$T/accepted.part"
splice "$T/accepted.part" "$T/audit3.jsonl" >"$T/accepted.yaml"
"$AIRLOCKD" -t -c "$T/accepted.yaml" >"$T/t.out" 2>&1 ||
    fail "accepted suggestion fails airlockd -t: $(cat "$T/t.out")"
"$AIRLOCKCTL" policy replay --json --config "$T/accepted.yaml" "$T/audit.jsonl" \
    >"$T/rp2" 2>&1 || fail "replay of the accepted suggestion: exit $?: $(cat "$T/rp2")"
"$PYTHON" - "$T/rp2" <<'PY' || fail "accepted: $(cat "$T/rp2")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["allow_to_deny"] == [] and r["not_judged"] == [], r
got = sorted((g["host"], g["rule"], g["count"]) for g in r["deny_to_allow"])
assert got == [("api.test", "agent#2", 1), ("unknown.test", "agent#3", 1)], got
assert r["unchanged"] == 9, r
PY
ok "candidates accepted: passes -t, exactly the denials become deny -> allow"

# the real gateway under the suggestion answers as replay said
start_airlockd "$T/suggested.yaml"
traffic "under the suggestion"
stop_airlockd
ok "the gateway under the suggested policy allows and denies the same requests"

# Paths no glob can name as they are (a '#', raw non-ASCII) still end up
# allowed (cut before the byte, then '*'), and a double-encoded path
# allowed under a rule without paths gives a rule without paths (with
# paths it would be 400): records written by hand, as a raw client could
# cause them.
R='{"sandbox":"alpha","port":'$P',"method":"GET","decision":"allow","rule":"agent#0"'
printf '%s,"host":"api.test","path":"/a#b"}\n%s,"host":"api.test","path":"/\303\251"}\n%s,"host":"files.test","path":"/x/%%252e"}\n' \
    "$R" "$R" "$R" >"$T/odd.jsonl"
"$AIRLOCKCTL" policy suggest --policy agent "$T/odd.jsonl" >"$T/odd.yaml" ||
    fail "suggest of odd paths: exit $?"
grep -q "paths: \['/\*', '/a\*'\]" "$T/odd.yaml" || fail "odd paths: $(cat "$T/odd.yaml")"
splice "$T/odd.yaml" "$T/audit4.jsonl" >"$T/odd-config.yaml"
"$AIRLOCKD" -t -c "$T/odd-config.yaml" >"$T/t.out" 2>&1 ||
    fail "odd suggestion fails airlockd -t: $(cat "$T/t.out") $(cat "$T/odd.yaml")"
"$AIRLOCKCTL" policy replay --config "$T/odd-config.yaml" "$T/odd.jsonl" >"$T/rp3" 2>&1 ||
    fail "odd suggestion replays with exit $?: $(cat "$T/rp3")"
grep -qx '3 records: 3 unchanged, 0 allow -> deny, 0 deny -> allow, 0 not judged' \
    "$T/rp3" || fail "odd suggestion: $(cat "$T/rp3")"
ok "paths no glob names as they are: still allowed, passes -t, no allow -> deny"

# usage: no file
"$AIRLOCKCTL" policy suggest >/dev/null 2>&1
[ $? -eq 2 ] || fail "suggest without files: not exit 2"
"$AIRLOCKCTL" policy suggest "$T/nonexistent" >/dev/null 2>&1
[ $? -eq 2 ] || fail "suggest of a missing file: not exit 2"
ok "usage errors exit 2"

finish
