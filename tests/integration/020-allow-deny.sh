#!/bin/sh
# Policy: allow/deny by host, suffix, port, method and path; the network
# guard (loopback, private ranges, odd-radix and mapped IP literals); path
# normalisation; methods airlock will not relay; origin-form requests.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
DEAD_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT DEAD_PORT T

{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts:
    "api.test": "127.0.0.1"
    "a.api.test": "127.0.0.1"
    "b.c.api.test": "127.0.0.1"
    "xapi.test": "127.0.0.1"
    "other.test": "127.0.0.1"
    "loop2.test": "127.0.0.2"
    "private.test": "10.11.12.13"
policies:
  - name: p
    rules:
      - host: "api.test"
        ports: [$ORIGIN_PORT, $DEAD_PORT]
        methods: [GET, POST, HEAD]
        paths: ["/v1/*", "/echo", "/size/*"]
      - host: "*.api.test"
        ports: [$ORIGIN_PORT]
        methods: [GET]
      - host: "127.0.0.1"
        ports: [$ORIGIN_PORT]
        paths: ["/echo"]
  - name: wide
    rules:
      - host: "*"
        ports: [$ORIGIN_PORT, 80, 443]
sandboxes:
  - {id: local, policy: p, token: "literal:local-token-1"}
  - {id: wide, policy: wide, token: "literal:wide-token-2"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$ORIGIN_PORT

# curl: allowed request.
out=$(curl -sS -x "$PROXY" -D "$T/h1" "$U/echo") || fail "curl allowed request failed"
grep -q '^HTTP/1.1 200' "$T/h1" || fail "allowed GET: $(cat "$T/h1")"
echo "$out" | grep -q '^GET /echo HTTP/1.1' ||
    fail "origin did not see origin-form GET /echo: $out"
ok "curl allowed GET"

# curl: denied path, JSON body and request id header.
code=$(curl -sS -x "$PROXY" -o "$T/b2" -D "$T/h2" -w '%{http_code}' "$U/forbidden-path-marker")
[ "$code" = 403 ] || fail "denied path: status $code"
body=$(cat "$T/b2")
[ "$(json_field "$body" error)" = denied ] || fail "denied path: body $body"
rid=$(json_field "$body" request_id)
hrid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *\([^ \r]*\).*/\1/p' "$T/h2" | tr -d '\r')
[ -n "$rid" ] && [ "$rid" = "$hrid" ] ||
    fail "request_id '$rid' != X-Airlock-Request-Id '$hrid'"
json_field "$body" reason | grep -q 'forbidden-path-marker' ||
    fail "reason does not name the path: $body"
ok "curl denied path: 403 JSON, ids agree"

# curl: --proxy-user selects another sandbox (and its policy).
code=$(curl -sS -x "$PROXY" -U wide:wide-token-2 -o /dev/null -w '%{http_code}' \
    "http://other.test:$ORIGIN_PORT/echo")
[ "$code" = 200 ] || fail "wide sandbox to other.test: $code"
ok "curl with --proxy-user uses the sandbox's policy"

# python urllib through the proxy.
"$PYTHON" - <<'PY' || fail "urllib checks"
import json, os, urllib.error, urllib.request
ap, op = int(os.environ["AIRLOCK_PORT"]), int(os.environ["ORIGIN_PORT"])
opener = urllib.request.build_opener(urllib.request.ProxyHandler(
    {"http": "http://127.0.0.1:%d" % ap}))
with opener.open("http://api.test:%d/echo" % op, timeout=10) as r:
    body = r.read()
    assert r.status == 200, r.status
    assert body.startswith(b"GET /echo HTTP/1.1\r\n"), body
with opener.open(urllib.request.Request("http://api.test:%d/echo" % op,
                 data=b"hello=1", method="POST"), timeout=10) as r:
    assert r.status == 200 and r.headers["X-Body-Bytes"] == "7", r.headers
try:
    opener.open("http://api.test:%d/echo" % op + "x", timeout=10)
    raise SystemExit("urllib: denied path was allowed")
except urllib.error.HTTPError as e:
    assert e.code == 403, e.code
    j = json.loads(e.read())
    assert j["error"] == "denied" and j["request_id"] == \
        e.headers["X-Airlock-Request-Id"], j
print("ok - urllib allowed GET/POST, denied path")
PY

# Raw-socket cases.
"$PYTHON" - <<'PY' || fail "policy checks"
import os, re, itlib
from itlib import req, roundtrip, exchange
ap, op, dead = (itlib.env_int(k) for k in
                ("AIRLOCK_PORT", "ORIGIN_PORT", "DEAD_PORT"))
olog = os.environ["T"] + "/origin.log"
t = itlib.Checks()
U = "http://api.test:%d" % op

def seen(marker):
    return any(marker.encode() in r for r in itlib.origin_records(olog))

def reason(r):
    try:
        return r.json()["reason"]
    except Exception:
        return ""

def denied(r, what, marker, msg):
    """403 denied whose reason matches the regex <what>."""
    if t.error(r, 403, "denied", msg):
        t.ok(re.search(what, reason(r), re.I),
             msg + ": reason names " + what, repr(reason(r)))
    t.ok(not seen(marker), msg + ": never reached the origin")

# host
r = roundtrip(ap, req("GET", "http://other.test:%d/echo?m=host1" % op))
denied(r, r"other\.test", "m=host1", "denied host")
r = roundtrip(ap, req("GET", "http://xapi.test:%d/echo?m=host2" % op))
denied(r, r"xapi\.test", "m=host2", "*.api.test does not cover xapi.test")
# port (allowed elsewhere in the policy's rules, not for this host)
r = roundtrip(ap, req("GET", "http://a.api.test:%d/echo?m=port1" % dead))
denied(r, r"port\W+%d\b" % dead, "m=port1", "denied port")
r = roundtrip(ap, req("GET", "http://api.test:1/echo?m=port2"))
denied(r, r"port\W+1\b", "m=port2", "denied port 1")
# method
r = roundtrip(ap, req("DELETE", U + "/echo?m=method1"))
denied(r, r"\bDELETE\b", "m=method1", "denied method")
r = roundtrip(ap, req("POST", "http://a.api.test:%d/echo?m=method2" % op,
                      body=b"x"))
denied(r, r"\bPOST\b", "m=method2", "denied method under suffix rule")
# path (case-sensitive, without the query)
r = roundtrip(ap, req("GET", U + "/V1/x?m=path1"))
denied(r, r"/V1/x\b", "m=path1", "path match is case-sensitive")
r = roundtrip(ap, req("GET", U + "/secret?q=/v1/x&m=path2"))
denied(r, r"/secret\b", "m=path2", "the query does not take part in matching")

# allowed, including suffix rule at several depths
for h in ("api.test", "a.api.test", "b.c.api.test"):
    r = roundtrip(ap, req("GET", "http://%s:%d/echo" % (h, op)))
    t.ok(r is not None and r.status == 200 and
         r.body.startswith(b"GET /echo HTTP/1.1\r\n") and
         r.header("X-Airlock-Request-Id"),
         "allowed %s" % h, repr(r))

# path normalisation: what is matched is what is sent
for target, want in (("/a/../v1/x?m=n1", b"GET /v1/x?m=n1 HTTP/1.1\r\n"),
                     ("/v1/./y?m=n2", b"GET /v1/y?m=n2 HTTP/1.1\r\n"),
                     ("/%76%31/z?m=n3", b"GET /v1/z?m=n3 HTTP/1.1\r\n"),
                     ("/v1//w/../q?m=n4", None)):
    r = roundtrip(ap, req("GET", U + target))
    # the origin answers 404 for /v1/*: its own JSON, not the gateway's
    t.ok(r is not None and r.status == 404 and
         r.header("Server") == "airlock-origin",
         "normalised %s allowed" % target, repr(r))
    if want is not None:
        t.ok(any(x.startswith(want) for x in itlib.origin_records(olog)),
             "origin saw %r" % want)
# an encoded slash is data, and goes upstream as the client wrote it
for target, m in (("/v1/a%2Fb", "e1"), ("/v1/a%2fb", "e2")):
    r = roundtrip(ap, req("GET", U + target + "?m=" + m))
    t.ok(r is not None and r.status == 404 and
         r.header("Server") == "airlock-origin",
         "path %s allowed" % target, repr(r))
    t.ok(any(x.startswith(b"GET %s?m=%s HTTP/1.1\r\n" % (
        target.encode(), m.encode())) for x in itlib.origin_records(olog)),
         "origin saw %s byte for byte" % target)
for target, m in (("/v1/..%2Fecho", "s1"), ("/v1/x%2F..%2F..%2Fecho", "s2"),
                  ("/v1/a%5Cb", "s3"), ("/v1/a%00b", "s4"),
                  ("/../v1/x", "s5"), ("/v1/../../v1/x", "s6")):
    r = roundtrip(ap, req("GET", U + target + "?m=" + m))
    t.error(r, 400, "bad_request", "path %s → 400" % target)
    t.ok(not seen("m=" + m), "path %s never reached the origin" % target)

# TRACE and friends airlock will not relay
r = roundtrip(ap, req("TRACE", U + "/echo?m=trace"))
t.error(r, 501, "not_implemented", "TRACE → 501")
t.ok(not seen("m=trace"), "TRACE never reached the origin")

# origin-form request sent straight to the proxy
r = roundtrip(ap, b"GET /echo?m=originform HTTP/1.1\r\nHost: api.test:%d\r\n\r\n" % op)
t.error(r, 400, "bad_request", "origin-form request → 400")
t.ok(not seen("m=originform"), "origin-form never reached the origin")

# network guard: the default deny list with only 127.0.0.1/32 allowed
W = "wide:wide-token-2"
for url, m in (("http://127.0.0.2:%d/echo" % op, "g1"),
               ("http://loop2.test:%d/echo" % op, "g2"),
               ("http://0x7f000002:%d/echo" % op, "g3"),
               ("http://[::1]:%d/echo" % op, "g4"),
               ("http://[::ffff:127.0.0.2]:%d/echo" % op, "g5"),
               ("http://169.254.169.254/latest/meta-data", "g6"),
               ("http://private.test/", "g7"),
               ("http://10.1.2.3/", "g8"),
               ("http://0.0.0.0:%d/echo" % op, "g9"),
               ("http://[::ffff:10.0.0.1]/", "g10")):
    r = roundtrip(ap, req("GET", url + ("&" if "?" in url else "?") +
                          "m=" + m, auth=W), timeout=20)
    if t.error(r, 403, "denied", "network guard denies %s" % url):
        rs = reason(r)
        t.ok(any(k in rs for k in ("network", "127.", "10.", "169.254",
                                   "::", "0.0.0.0", "loopback", "private",
                                   "link-local")),
             "reason for %s names the denied network" % url, repr(rs))
    t.ok(not seen("m=" + m), "%s never reached the origin" % url)

# odd-radix literals for 127.0.0.1: judged (and matched by rule #2) as it
for h in ("2130706433", "0x7f000001", "0177.0.0.1", "0x7f.0.0.1", "127.1",
          "0x7F.1"):
    r = roundtrip(ap, req("GET", "http://%s:%d/echo" % (h, op)))
    t.ok(r is not None and r.status == 200 and
         r.body.startswith(b"GET /echo HTTP/1.1\r\n"),
         "odd-radix %s is 127.0.0.1 (rule for 127.0.0.1 applies)" % h,
         repr(r))
# ... and in the audit as 127.0.0.1
rec = itlib.audit_wait(os.environ["T"] + "/audit.jsonl",
                       lambda a: a.get("host") == "127.0.0.1" and
                       a.get("decision") == "allow", 5)
t.ok(rec is not None, "audit shows the normalised host 127.0.0.1")
# 2130706433 under the wide policy reaches the origin too
r = roundtrip(ap, req("GET", "http://2130706433:%d/echo" % op, auth=W))
t.ok(r is not None and r.status == 200, "odd-radix allowed via allow_networks",
     repr(r))
t.done()
PY
stop_airlockd

# Without allow_networks, loopback is refused even when a rule allows the
# name; the reason names the network.
AIRLOCK_PORT=$(free_port)
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
upstream:
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "*", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock2.yaml"
start_airlockd "$T/airlock2.yaml"
n0=$(origin_count)
for u in "http://api.test:$ORIGIN_PORT/echo?m=nolo1" "http://127.0.0.1:$ORIGIN_PORT/echo?m=nolo2" \
    "http://2130706433:$ORIGIN_PORT/echo?m=nolo3" "http://[::ffff:7f00:1]:$ORIGIN_PORT/echo?m=nolo4"; do
	code=$(curl -sS -g -x "http://127.0.0.1:$AIRLOCK_PORT" -o "$T/b" -w '%{http_code}' "$u")
	[ "$code" = 403 ] || fail "$u without allow_networks: status $code"
	body=$(cat "$T/b")
	[ "$(json_field "$body" error)" = denied ] || fail "$u: $body"
	json_field "$body" reason | grep -Eq '127\.0\.0\.0/8|loopback' ||
	    fail "$u: reason does not name the denied network: $body"
done
[ "$(origin_count)" = "$n0" ] || fail "a loopback request reached the origin"
ok "loopback refused without allow_networks, reason names 127.0.0.0/8"
stop_airlockd
