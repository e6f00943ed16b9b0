#!/bin/sh
# Identity: Proxy-Authorization Basic ID:TOKEN selects the sandbox; missing
# or wrong credentials get 407 with Proxy-Authenticate; token sources; the
# credentials never travel upstream; listen.default_sandbox.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T

printf 'tok-from-file-456\n' >"$T/s2.token"
chmod 600 "$T/s2.token"
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: s1, policy: p, token: "literal:tok-literal-123"}
  - {id: s2, policy: p, token: "file:$T/s2.token"}
  - {id: s3, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$ORIGIN_PORT

# curl with the right credentials, from a literal: and a file: source
for cred in s1:tok-literal-123 s2:tok-from-file-456; do
	code=$(curl -sS -x "$PROXY" -U "$cred" -o "$T/body" -w '%{http_code}' "$U/echo")
	[ "$code" = 200 ] || fail "curl -U ${cred%%:*}: status $code"
	grep -qi 'proxy-authorization' "$T/body" &&
	    fail "Proxy-Authorization reached the upstream: $(cat "$T/body")"
done
ok "curl --proxy-user with literal: and file: tokens"

# HTTPS_PROXY-style URL credentials
code=$(curl -sS -x "http://s1:tok-literal-123@127.0.0.1:$AIRLOCK_PORT" -o /dev/null \
    -w '%{http_code}' "$U/echo")
[ "$code" = 200 ] || fail "credentials in the proxy URL: status $code"
ok "credentials in the proxy URL"

# a sandbox without a token source gets a generated one in state_dir
tf=$T/state/tokens/s3
[ -s "$tf" ] || fail "no generated token in $tf"
mode=$(stat -c %a "$tf")
[ "$mode" = 600 ] || fail "generated token file mode $mode, want 600"
s3tok=$(cat "$tf")
code=$(curl -sS -x "$PROXY" -U "s3:$s3tok" -o /dev/null -w '%{http_code}' "$U/echo")
[ "$code" = 200 ] || fail "generated token for s3: status $code"
grep -q "$s3tok" "$T/airlockd.log" && fail "generated token was logged"
ok "generated token (0600) works"

S3TOK=$s3tok "$PYTHON" - <<'PY' || fail "auth checks"
import base64, os, itlib
from itlib import req, roundtrip, exchange
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
olog = os.environ["T"] + "/origin.log"
t = itlib.Checks()
U = "http://api.test:%d" % op

def seen(marker):
    return any(marker.encode() in r for r in itlib.origin_records(olog))

def want407(r, msg, marker):
    if t.error(r, 407, "proxy_auth_required", msg):
        t.ok(r.header("Proxy-Authenticate") == 'Basic realm="airlock"',
             msg + ": Proxy-Authenticate", repr(r.header("Proxy-Authenticate")))
    t.ok(not seen(marker), msg + ": never reached the origin")

def pa(s):
    return "Proxy-Authorization: Basic " + base64.b64encode(s).decode()

want407(roundtrip(ap, req("GET", U + "/echo?m=a1")), "no credentials", "m=a1")
for i, h in enumerate((pa(b"s1:wrong"), pa(b"s1:tok-literal-12"),
                       pa(b"s1:tok-literal-1234"), pa(b"s2:tok-literal-123"),
                       pa(b"nosuch:tok-literal-123"), pa(b"s1"),
                       pa(b":tok-literal-123"), pa(b"s1:"),
                       "Proxy-Authorization: Bearer tok-literal-123",
                       "Proxy-Authorization: Basic !!!notbase64",
                       "Proxy-Authorization: Basic",
                       "Proxy-Authorization: Digest username=s1")):
    want407(roundtrip(ap, req("GET", U + "/echo?m=b%d" % i, [h])),
            "bad credentials %r" % h, "m=b%d" % i)
# scheme name is case-insensitive
r = roundtrip(ap, req("GET", U + "/echo", [pa(b"s1:tok-literal-123").replace(
    "Basic", "basic")]))
t.ok(r is not None and r.status == 200, "lower-case 'basic' scheme", repr(r))
# CONNECT needs credentials too
r = roundtrip(ap, b"CONNECT api.test:%d HTTP/1.1\r\nHost: api.test:%d\r\n\r\n"
              % (op, op), method="CONNECT")
t.error(r, 407, "proxy_auth_required", "CONNECT without credentials")

# credentials are per request, not per connection
good = req("GET", U + "/echo?m=c1", [pa(b"s1:tok-literal-123")])
bad = req("GET", U + "/echo?m=c2")
rs, _ = exchange(ap, good + bad, 2)
t.ok(len(rs) >= 1 and rs[0].status == 200, "keep-alive: first request 200")
t.ok(len(rs) == 2 and itlib.check_error(rs[1], 407, "proxy_auth_required")
     is None, "keep-alive: second request without credentials → 407",
     repr(rs[1:]))
t.ok(not seen("m=c2"), "keep-alive: second request never reached the origin")

# Proxy-Authorization never goes upstream, whatever its case
tok = base64.b64encode(b"s1:tok-literal-123")
r = roundtrip(ap, req("POST", U + "/echo?m=d1",
                      ["pRoXy-AuThOrIzAtIoN: Basic " + tok.decode(),
                       "Content-Type: text/plain"], b"hello"))
t.ok(r is not None and r.status == 200 and b"m=d1" in r.body,
     "mixed-case header accepted", repr(r))
log = b"".join(itlib.origin_records(olog))
t.ok(b"proxy-authorization" not in log.lower(),
     "no Proxy-Authorization in the origin log")
t.ok(tok not in log, "no credentials in the origin log")
t.ok(b"tok-literal-123" not in log and b"tok-from-file-456" not in log and
     os.environ["S3TOK"].encode() not in log, "no token in the origin log")
t.done()
PY
stop_airlockd

# With default_sandbox: unauthenticated local clients get that sandbox,
# wrong credentials still get 407.
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT
sed -e "s/^listen: .*/listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\", default_sandbox: s2}/" \
    "$T/airlock.yaml" >"$T/airlock2.yaml"
start_airlockd "$T/airlock2.yaml"
curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -D "$T/h" -o /dev/null "$U/echo?m=default1" ||
    fail "curl via default sandbox"
grep -q '^HTTP/1.1 200' "$T/h" || fail "default sandbox: $(head -1 "$T/h")"
rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/h" | tr -d '\r')
[ -n "$rid" ] || fail "no X-Airlock-Request-Id"
rec=$(audit_wait_id "$rid") || fail "no audit record $rid"
[ "$(audit_field "$rec" sandbox)" = s2 ] || fail "audit sandbox is not the default: $rec"
ok "default_sandbox: 200, audited as s2"
code=$(curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -U s1:nope -o /dev/null \
    -w '%{http_code}' "$U/echo?m=default2")
[ "$code" = 407 ] || fail "wrong credentials with a default sandbox: $code, want 407"
grep -q 'm=default2' "$T/origin.log" && fail "m=default2 reached the origin"
code=$(curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -U s1:tok-literal-123 -D "$T/h" \
    -o /dev/null -w '%{http_code}' "$U/echo?m=default3")
[ "$code" = 200 ] || fail "s1 credentials with a default sandbox: $code"
rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/h" | tr -d '\r')
rec=$(audit_wait_id "$rid") || fail "no audit record $rid"
[ "$(audit_field "$rec" sandbox)" = s1 ] || fail "credentials did not select s1: $rec"
ok "default_sandbox: wrong credentials 407, right ones select their sandbox"
stop_airlockd
exit 0
