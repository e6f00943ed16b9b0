#!/bin/sh
# Client compatibility (issue 15, point 8): curl options that change how it
# talks to a proxy, against compat_upstream.py (plain and TLS):
#   -0 http://            HTTP/1.0 through the proxy (absolute-form)
#   -0 https://           HTTP/1.0 over intercepted TLS: curl offers ALPN
#                         http/1.0 (issue 15 point 7)
#   -p http://            proxytunnel: CONNECT, then plain HTTP inside
#                         (issue 15 point 3), and inside such a tunnel a
#                         Host naming another server → 403
#   --proxy-anyauth       credentials only after the 407, http:// and
#                         https://; and on the authenticated listener of a
#                         config whose other listener has a default sandbox
#                         (issue 15 point 5)
# Each: curl's status and body, what the upstream saw, the audit record.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_pki
start_compat_up up
HTTP_PORT=$PY_PORT
start_compat_up ups -C "$T/pki/compat.crt" -K "$T/pki/compat.key"
HTTPS_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
AIRLOCK_PORT2=$(free_port)
export T HTTP_PORT HTTPS_PORT

policies()
{
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$HTTP_PORT, $HTTPS_PORT]}
      # allowed on its own: inside a tunnel to api.test it must still be 403
      - {host: "other.test", ports: [$HTTP_PORT, $HTTPS_PORT]}
  - name: localp
    rules:
      - {host: "other.test", ports: [$HTTP_PORT, $HTTPS_PORT]}
sandboxes:
  - {id: n, policy: p, token: "literal:tok-n"}
  - {id: local, policy: localp}
YAML
}
COMPAT_CONFIG=$T/a.yaml
{ config_common "$AIRLOCK_PORT"; policies; } >"$COMPAT_CONFIG"
start_airlockd "$COMPAT_CONFIG"
CA=$T/state/ca/n/ca.crt
PROXY=http://n:tok-n@127.0.0.1:$AIRLOCK_PORT

# curl_case NAME WANT-STATUS CURL-ARGS...: run curl; sets CODE, REC (the
# audit record of X-Airlock-Request-Id, "" if none).
curl_case()
{
	_n=$1
	_want=$2
	shift 2
	CODE=$(curl -sS -m 15 -D "$T/$_n.h" -o "$T/$_n.b" -w '%{http_code}' \
	    "$@" 2>"$T/$_n.err") || CODE="curl exit $? ($(head -c 200 "$T/$_n.err"))"
	[ "$CODE" = "$_want" ] && ok "$_n: curl got $_want" ||
	    check_fail "$_n: curl got $CODE, want $_want"
	_rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/$_n.h" |
	    tail -n 1 | tr -d '\r')
	REC=
	[ -n "$_rid" ] && REC=$(audit_wait_id "$_rid" 2>/dev/null)
	[ -n "$REC" ] || check_fail "$_n: no audit record for the answer (id '$_rid')"
}

# upstream_saw NAME LOG TARGET [VERSION]: the upstream got exactly one
# request for TARGET, without Proxy-Authorization (and with VERSION).
upstream_saw()
{
	"$PYTHON" - "$@" <<'PY'
import json, sys, time
name, log, target = sys.argv[1:4]
version = sys.argv[4] if len(sys.argv) > 4 else None
end = time.time() + 3
while True:
    with open(log) as f:
        ev = [json.loads(x) for x in f if x.strip()]
    reqs = [e for e in ev if e["ev"] == "request" and e["target"] == target]
    if reqs or time.time() > end:
        break
    time.sleep(0.1)
bad = []
if len(reqs) != 1:
    bad.append("%d requests for %s" % (len(reqs), target))
for r in reqs:
    if "proxy-authorization" in r["head"].lower():
        bad.append("Proxy-Authorization upstream")
    if version and r["version"] != version:
        bad.append("version %s, want %s" % (r["version"], version))
if bad:
    print("not ok - %s: upstream: %s" % (name, "; ".join(bad)))
    sys.exit(1)
print("ok - %s: the upstream got %s" % (name, target))
PY
}

body_target()
{
	json_field "$(cat "$T/$1.b")" target 2>/dev/null
}

# --- -0 over plain HTTP and intercepted TLS
curl_case http10 200 -0 -x "$PROXY" "http://api.test:$HTTP_PORT/c0/plain"
[ "$(body_target http10)" = /c0/plain ] && ok "http10: the upstream's body" ||
    check_fail "http10: body $(cat "$T/http10.b")"
upstream_saw http10 "$T/up.jsonl" /c0/plain || check_fail "http10: upstream"
[ -z "$REC" ] || check_audit "$REC" http10 status=200 decision=allow \
    sandbox=n proto=http path=/c0/plain
curl_case https10 200 -0 -x "$PROXY" --cacert "$CA" \
    "https://api.test:$HTTPS_PORT/c0/tls"
[ "$(body_target https10)" = /c0/tls ] && ok "https10: the upstream's body" ||
    check_fail "https10: body $(cat "$T/https10.b")"
upstream_saw https10 "$T/ups.jsonl" /c0/tls || check_fail "https10: upstream"
[ -z "$REC" ] || check_audit "$REC" https10 status=200 decision=allow \
    sandbox=n proto=https tls=intercept path=/c0/tls
daemon_check "curl -0"

# --- -p: plain HTTP inside a CONNECT tunnel
curl_case tunnel 200 -p -x "$PROXY" "http://api.test:$HTTP_PORT/cp/plain"
[ "$(body_target tunnel)" = /cp/plain ] && ok "tunnel: the upstream's body" ||
    check_fail "tunnel: body $(cat "$T/tunnel.b")"
upstream_saw tunnel "$T/up.jsonl" /cp/plain || check_fail "tunnel: upstream"
[ -z "$REC" ] || check_audit "$REC" tunnel status=200 decision=allow \
    sandbox=n host=api.test port="$HTTP_PORT" method=GET path=/cp/plain
# the CONNECT's authority is the only one allowed inside, even when the
# other name is allowed by itself (as it is, directly)
curl_case other-direct 200 -x "$PROXY" "http://other.test:$HTTP_PORT/cp/direct"
curl_case tunnel-host 403 -p -x "$PROXY" -H "Host: other.test:$HTTP_PORT" \
    "http://api.test:$HTTP_PORT/cp/otherhost"
[ "$(json_field "$(cat "$T/tunnel-host.b")" error 2>/dev/null)" = denied ] &&
    ok "tunnel-host: the JSON 403 denied" ||
    check_fail "tunnel-host: body $(head -c 300 "$T/tunnel-host.b")"
grep -q /cp/otherhost "$T/up.jsonl" &&
    check_fail "tunnel-host: the request reached the upstream"
[ -z "$REC" ] || check_audit "$REC" tunnel-host status=403 decision=deny \
    sandbox=n
daemon_check "curl -p"

# --- --proxy-anyauth: no credentials first, then Basic after the 407
curl_case anyauth-http 200 --proxy-anyauth -U n:tok-n \
    -x "http://127.0.0.1:$AIRLOCK_PORT" "http://api.test:$HTTP_PORT/ca/plain"
upstream_saw anyauth-http "$T/up.jsonl" /ca/plain ||
    check_fail "anyauth-http: upstream"
[ -z "$REC" ] || check_audit "$REC" anyauth-http status=200 decision=allow \
    sandbox=n path=/ca/plain
grep -q '^HTTP/1.1 407' "$T/anyauth-http.h" &&
    ok "anyauth-http: curl saw the 407 first" ||
    check_fail "anyauth-http: no 407 before the answer: $(cat "$T/anyauth-http.h")"
curl_case anyauth-https 200 --proxy-anyauth -U n:tok-n --cacert "$CA" \
    -x "http://127.0.0.1:$AIRLOCK_PORT" "https://api.test:$HTTPS_PORT/ca/tls"
upstream_saw anyauth-https "$T/ups.jsonl" /ca/tls ||
    check_fail "anyauth-https: upstream"
[ -z "$REC" ] || check_audit "$REC" anyauth-https status=200 decision=allow \
    sandbox=n proto=https path=/ca/tls
daemon_check "curl --proxy-anyauth"
stop_airlockd

# --- B: --proxy-anyauth on an authenticated listener beside a default one
COMPAT_CONFIG=$T/b.yaml
{
	echo "listen:"
	echo "  proxy: [\"127.0.0.1:$AIRLOCK_PORT\", {address: \"127.0.0.1:$AIRLOCK_PORT2\", default_sandbox: null}]"
	echo "  default_sandbox: local"
	echo "state_dir: $T/state"
	echo "workers: 2"
	echo "audit: {file: $T/audit.jsonl}"
	policies
} >"$COMPAT_CONFIG"
if ! "$AIRLOCKD" -c "$COMPAT_CONFIG" -t >"$T/b-check.out" 2>&1; then
	check_fail "B: a listener map {address, default_sandbox} is refused (issue 15 point 5): $(head -n 1 "$T/b-check.out")"
	finish
fi
start_airlockd "$COMPAT_CONFIG" "$AIRLOCK_PORT"
wait_port "$AIRLOCK_PORT2" 10 || check_fail "B: nothing listens on $AIRLOCK_PORT2"
curl_case anyauth-b 200 --proxy-anyauth -U n:tok-n --cacert "$CA" \
    -x "http://127.0.0.1:$AIRLOCK_PORT2" "https://api.test:$HTTPS_PORT/ca/b"
[ -z "$REC" ] || check_audit "$REC" anyauth-b status=200 decision=allow \
    sandbox=n proto=https path=/ca/b
upstream_saw anyauth-b "$T/ups.jsonl" /ca/b || check_fail "anyauth-b: upstream"
stop_airlockd
finish
