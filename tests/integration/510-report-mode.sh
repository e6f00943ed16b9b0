#!/bin/sh
# Report mode (mode: report): what the allowlist would deny is forwarded
# and audited decision allow with would_deny; airlock_would_deny_total
# counts it; the gateway warns at start and on reload. The destination
# guard, a secret's binding and a cap still refuse. The enforcing policy
# beside it answers 403 with a rule_hint (no header value echoed).
. "$top_srcdir/tests/integration/lib.sh"

curl --help all 2>/dev/null | grep -q -- --unix-socket ||
    hard_error "curl without --unix-socket"
start_origin
AIRLOCK_PORT=$(free_port)
PROXY=http://127.0.0.1:$AIRLOCK_PORT
R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
PH="airlock-ph-rep-$R"
VAL="sk-LEAK-rep-$R"
export VAL
cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1",
          "guard.test": "127.0.0.2"}
secrets:
  - {name: key, source: env:VAL, hosts: ["api.test"], allow_plaintext: true,
     placeholder: "$PH"}
policies:
  - name: watch
    mode: report
    caps: {requests: 4}
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], methods: [GET], paths: ["/v1/*"]}
  - name: strict
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], methods: [GET], paths: ["/v1/*"]}
sandboxes:
  - {id: rep, policy: watch, token: "literal:tok-rep"}
  - {id: enf, policy: strict, token: "literal:tok-enf"}
YAML
"$AIRLOCKD" -t -c "$T/airlock.yaml" >"$T/t.out" 2>&1 ||
    hard_error "config: $(cat "$T/t.out")"
start_airlockd "$T/airlock.yaml"
wait_admin
grep -q 'policy "watch" is in report mode' "$T/airlockd.log" &&
    ok "start: report-mode warning logged" ||
    check_fail "no report-mode warning at start: $(cat "$T/airlockd.log")"
grep -q 'policy "strict" is in report mode' "$T/airlockd.log" &&
    check_fail "warning for the enforcing policy"

# req CRED WANT NAME CURL-ARGS...: status WANT; body in $T/b.NAME, id in
# $T/id.NAME
req()
{
	_cred=$1 _want=$2 _n=$3
	shift 3
	_code=$(curl -sS -x "$PROXY" -U "$_cred" -D "$T/h.$_n" -o "$T/b.$_n" \
	    -w '%{http_code}' "$@") || fail "curl $*"
	[ "$_code" = "$_want" ] || check_fail "$_n: status $_code, want $_want: $(cat "$T/b.$_n")"
	tr -d '\r' <"$T/h.$_n" | sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: //p' \
	    >"$T/id.$_n"
}
n0=$(origin_count)
# allowed by its rule: no would_deny
req rep:tok-rep 404 allowed "http://api.test:$ORIGIN_PORT/v1/a"
# would be denied (method, path, host): forwarded
req rep:tok-rep 404 method -X DELETE "http://api.test:$ORIGIN_PORT/v1/a"
req rep:tok-rep 404 host "http://other.test:$ORIGIN_PORT/x"
n1=$(origin_count)
[ $((n1 - n0)) -eq 3 ] && ok "report mode: 3 requests reached the origin" ||
    check_fail "origin saw $((n1 - n0)) requests, want 3"
r=$(audit_wait_id "$(cat "$T/id.allowed")")
[ "$(audit_field "$r" decision)" = allow ] && [ -z "$(audit_field "$r" would_deny)" ] &&
    ok "allowed by a rule: no would_deny" || check_fail "allowed: $r"
r=$(audit_wait_id "$(cat "$T/id.method")")
[ "$(audit_field "$r" decision)" = allow ] &&
    audit_field "$r" would_deny | grep -q 'method DELETE is not allowed' &&
    ok "would-be denial (method): allow + would_deny" ||
    check_fail "method record: $r"
r=$(audit_wait_id "$(cat "$T/id.host")")
[ "$(audit_field "$r" decision)" = allow ] &&
    audit_field "$r" would_deny | grep -q 'host other.test is not allowed' &&
    ok "would-be denial (host): allow + would_deny" ||
    check_fail "host record: $r"

# never relaxed: the destination guard, the secret's binding, the cap
req rep:tok-rep 403 guard "http://guard.test:$ORIGIN_PORT/x"
grep -q 'denied network' "$T/b.guard" && ok "report mode: the destination guard still denies" ||
    check_fail "guard: $(cat "$T/b.guard")"
req rep:tok-rep 403 secret -H "X-Key: $PH" "http://other.test:$ORIGIN_PORT/x"
[ "$(json_field "$(cat "$T/b.secret")" error)" = secret_misuse ] &&
    ok "report mode: a placeholder towards an unbound host is still secret_misuse" ||
    check_fail "secret: $(cat "$T/b.secret")"
grep -q "$VAL" "$T/origin.log" && check_fail "the secret's value reached the origin"
n2=$(origin_count)
[ "$n2" -eq "$n1" ] && ok "guard and secret refusals reached nothing" ||
    check_fail "origin saw $((n2 - n1)) more"
# the cap (requests: 4): the 3 forwarded and the guard's (admitted
# before the name was resolved) spend it
req rep:tok-rep 402 cap2 "http://other.test:$ORIGIN_PORT/z"
[ "$(json_field "$(cat "$T/b.cap2")" error)" = budget_exceeded ] &&
    ok "report mode: the requests cap still refuses (402)" ||
    check_fail "cap: $(cat "$T/b.cap2")"

# metrics count would-be denials: method, host, and those the guard,
# the secret and the cap refused after the allowlist's verdict
SOCK=$T/state/admin.sock
curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$T/state/admin.token")" \
    -o "$T/m.txt" http://airlock/metrics || fail "metrics"
wd=$(sed -n 's/^airlock_would_deny_total //p' "$T/m.txt")
[ -n "$wd" ] && [ "$wd" -ge 3 ] && ok "airlock_would_deny_total $wd" ||
    check_fail "airlock_would_deny_total '$wd'"

# the enforcing policy: 403 denied with a rule_hint, no header value echoed
req enf:tok-enf 403 enf -X POST -H "X-Token: secret-header-$R" \
    "http://api.test:$ORIGIN_PORT/v2/items?q=secret-query-$R"
b=$(cat "$T/b.enf")
"$PYTHON" - "$b" "$(cat "$T/id.enf")" "$ORIGIN_PORT" <<'PY' &&
import json, sys
b = json.loads(sys.argv[1])
assert b["error"] == "denied" and b["request_id"] == sys.argv[2], b
assert "reason" in b, b
want = '{host: "api.test", ports: [%s], methods: [POST], paths: ["/v2/items"]}' % sys.argv[3]
assert b["rule_hint"] == want, (b["rule_hint"], want)
PY
    ok "denied: {error, reason, request_id, rule_hint} with the smallest rule" ||
    check_fail "deny body: $b"
case $b in *secret-header-*|*secret-query-*) check_fail "a request value echoed: $b";; esac
# the hint is a rule airlockd accepts, and it allows the request
cp "$T/airlock.yaml" "$T/hint.yaml"
"$PYTHON" - "$T/hint.yaml" "$(json_field "$b" rule_hint)" <<'PY' || fail "hint.yaml"
import sys
p, hint = sys.argv[1], sys.argv[2]
s = open(p).read().replace("  - name: strict\n    rules:\n",
    "  - name: strict\n    rules:\n      - " + hint + "\n", 1)
open(p, "w").write(s)
PY
"$AIRLOCKD" -t -c "$T/hint.yaml" >"$T/t2.out" 2>&1 &&
    ok "the rule_hint passes airlockd -t" || check_fail "hint config: $(cat "$T/t2.out")"
# a CONNECT the allowlist refuses: the request inside is answered, with
# the rule for it
code=$(curl -sS -o "$T/b.conn" -w '%{http_code}' -x "$PROXY" -U enf:tok-enf \
    -p "http://nowhere.test:81/" 2>/dev/null)
grep -q '"rule_hint":"{host: \\"nowhere.test\\", ports: \[81\], methods: \[GET\], paths: \[\\"/\\"\]}"' "$T/b.conn" &&
    ok "CONNECT denied: the hint for the request inside" ||
    check_fail "CONNECT deny ($code): $(cat "$T/b.conn")"
# a guard refusal came from no rule: no hint
grep -q rule_hint "$T/b.guard" && check_fail "guard refusal carries a rule_hint"

# reload (apply the hint): warned again, and the hinted request now passes
cp "$T/hint.yaml" "$T/airlock.yaml"
before=$(grep -c 'policy "watch" is in report mode' "$T/airlockd.log")
kill -HUP "$AIRLOCK_PID"
_i=0
while [ "$(grep -c 'reload done' "$T/airlockd.log")" -lt 1 ] && [ $_i -lt 100 ]; do
	sleep 0.05; _i=$((_i + 1))
done
after=$(grep -c 'policy "watch" is in report mode' "$T/airlockd.log")
[ "$after" -gt "$before" ] && ok "reload: report-mode warning logged again" ||
    check_fail "no warning on reload ($before -> $after)"
req enf:tok-enf 404 enf2 -X POST "http://api.test:$ORIGIN_PORT/v2/items"
stop_airlockd
finish
