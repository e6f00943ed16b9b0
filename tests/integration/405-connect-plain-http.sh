#!/bin/sh
# Plain HTTP inside a CONNECT tunnel (issue 15 point 3): python
# websocket-client tunnels ws:// so, https-proxy-agent http://, curl -p.
# The first bytes after the 200 are a request, not a ClientHello: they go
# through the HTTP pipeline with the CONNECT target as the only authority.
# Each request is judged as proto http for that host:port (methods, paths),
# keep-alive and pipelining work, WebSocket upgrades work; a Host or
# absolute URI naming anything else → 403 with the JSON body, audited; a
# 400 closes the connection; bytes that are neither TLS nor HTTP → closed
# with an audit reason that says so. A spliced (intercept: false) rule
# serves plain HTTP the same way. Real clients: curl -p, python
# websocket-client (the system python's python3-websocket).
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
rm -f "$T/ws.port"
"$PYTHON" "$IT_DIR/wsecho.py" "$T/ws.port" "$T/ws.log" 2>"$T/ws.err" &
track_pid $!
_i=0
while [ ! -s "$T/ws.port" ]; do
	_i=$((_i + 1))
	[ "$_i" -le 200 ] || hard_error "wsecho.py did not start: $(cat "$T/ws.err")"
	sleep 0.05
done
WP=$(cat "$T/ws.port")
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT WP T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1", "splice.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$WP], methods: [GET, POST], paths: ["/echo*", "/ws"]}
      - {host: "other.test", ports: [$WP]}
      - {host: "splice.test", ports: [$WP], intercept: false}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://a:tok-a@127.0.0.1:$AIRLOCK_PORT

# --- curl -p: CONNECT, then plain HTTP inside
code=$(curl -sS -v -p -x "$PROXY" -o "$T/c1" -w '%{http_code}' \
    "http://api.test:$WP/echo?m=curl1" 2>"$T/e1")
if [ "$code" = 200 ] && grep -q "^GET /echo?m=curl1 HTTP/1.1" "$T/c1" &&
    grep -q "CONNECT api.test:$WP" "$T/e1"; then
	ok "curl -p http://: CONNECT, then the request served (200)"
else
	check_fail "curl -p: status '$code' $(head -c 300 "$T/c1") $(grep -E 'curl:|CONNECT' "$T/e1")"
fi
code=$(curl -sS -p -x "$PROXY" -o "$T/c2" -w '%{http_code}' \
    "http://api.test:$WP/admin?m=curl2" 2>"$T/e2")
rc=$?
if [ "$rc" = 0 ] && [ "$code" = 403 ] &&
    grep -q '"reason":"path /admin is not allowed' "$T/c2"; then
	ok "curl -p to a denied path: exit 0, the JSON 403 with its reason"
else
	check_fail "curl -p denied path: exit $rc status '$code' $(cat "$T/c2")"
fi

# --- python websocket-client: ws:// through the proxy (a CONNECT tunnel)
if "$SYS_PYTHON" -c 'import websocket' 2>/dev/null; then
	"$SYS_PYTHON" - <<'PY' || check_fail "websocket-client checks"
import os, sys, websocket
sys.path.insert(0, os.environ["top_srcdir"] + "/tests/integration")
import itlib
ap, wp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("WP")
t = itlib.Checks()
ws = websocket.create_connection(
    "ws://api.test:%d/ws" % wp, timeout=10, http_proxy_host="127.0.0.1",
    http_proxy_port=ap, http_proxy_auth=("a", "tok-a"), proxy_type="http")
ws.send("hello through the tunnel")
t.ok(ws.recv() == "hello through the tunnel", "websocket-client: text echoed")
blob = os.urandom(100000)
ws.send_binary(blob)
t.ok(ws.recv() == blob, "websocket-client: 100 kB binary echoed")
ws.close()
rec = itlib.audit_wait(os.environ["T"] + "/audit.jsonl",
                       lambda a: a.get("path") == "/ws")
t.ok(rec is not None and rec.get("status") == 101 and
     rec.get("proto") == "http" and rec.get("decision") == "allow" and
     rec.get("host") == "api.test" and rec.get("port") == wp,
     "websocket-client upgrade audited: proto http, 101, allow", rec)
t.done()
PY
else
	note "$SYS_PYTHON has no websocket module (python3-websocket): websocket-client part not run"
fi

# --- raw clients: authority, policy, keep-alive, 400, junk
"$PYTHON" - <<'PY' || check_fail "plain HTTP in tunnel checks"
import base64, hashlib, os, struct, time, itlib, tlslib
from itlib import Reader, read_response
ap, wp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("WP")
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
A = "api.test:%d" % wp


def seen(marker):
    try:
        return marker in open(T + "/ws.log").read()
    except OSError:
        return False


def tunnel(target=A):
    s, r = tlslib.proxy_connect(ap, target, "a:tok-a")
    return s, Reader(s)


def ask(s, rd, head, method="GET"):
    s.sendall(head)
    return read_response(rd, method)


# keep-alive: origin-form, absolute-form, then refusals on one connection
s, rd = tunnel()
cl = tlslib.client_addr(s)
r = ask(s, rd, b"GET /echo?m=ka1 HTTP/1.1\r\nHost: %s\r\n\r\n" % A.encode())
t.ok(r.status == 200 and r.body.startswith(b"GET /echo?m=ka1 HTTP/1.1\r\n"),
     "origin-form request in the tunnel → 200 from the upstream", repr(r))
t.ok(b"proxy-authorization" not in r.body.lower(),
     "no credentials needed or forwarded inside the tunnel", r.body)
r = ask(s, rd, b"GET http://%s/echo?m=ka2 HTTP/1.1\r\nHost: %s\r\n\r\n" %
        (A.encode(), A.encode()))
t.ok(r.status == 200 and b"m=ka2" in r.body,
     "absolute-form for the CONNECT target, same connection → 200", repr(r))
refusals = (
    ("Host naming another host", b"GET /echo?m=bad1 HTTP/1.1\r\n"
     b"Host: other.test:%d\r\n\r\n" % wp),
    ("Host naming another port", b"GET /echo?m=bad2 HTTP/1.1\r\n"
     b"Host: api.test:1\r\n\r\n"),
    ("absolute URI naming another host", b"GET http://other.test:%d/echo?"
     b"m=bad4 HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % (wp, wp)),
    ("absolute URI naming another port", b"GET http://api.test:1/echo?"
     b"m=bad5 HTTP/1.1\r\nHost: %s\r\n\r\n" % A.encode()),
    ("absolute URI without a port (80)", b"GET http://api.test/echo?"
     b"m=bad3 HTTP/1.1\r\nHost: %s\r\n\r\n" % A.encode()),
)
for what, head in refusals:
    r = ask(s, rd, head)
    if t.error(r, 403, "denied", "%s → 403 denied" % what):
        t.ok("api.test:%d" % wp in r.json()["reason"],
             "%s: the reason names the CONNECT target" % what, r.json())
r = ask(s, rd, b"GET /admin?m=bad6 HTTP/1.1\r\nHost: %s\r\n\r\n" % A.encode())
if t.error(r, 403, "denied", "a path no rule allows → 403 (judged as http)"):
    t.ok(r.json()["reason"].startswith("path /admin is not allowed"),
         "path refusal reason", r.json())
r = ask(s, rd, b"DELETE /echo?m=bad7 HTTP/1.1\r\nHost: %s\r\n\r\n" %
        A.encode(), "DELETE")
t.error(r, 403, "denied", "a method the rule does not list → 403")
r = ask(s, rd, b"GET /echo?m=ka3 HTTP/1.1\r\nHost: %s\r\n\r\n" % A.encode())
t.ok(r.status == 200 and b"m=ka3" in r.body,
     "still served on the same connection after the 403s", repr(r))
s.close()
for i in range(1, 8):
    t.ok(not seen("m=bad%d" % i), "refused request m=bad%d never reached "
         "the upstream" % i)

rec = tlslib.audit_client(audit, cl, lambda a: (a.get("path") == "/echo" and
                                                a.get("status") == 200))
if t.ok(rec is not None, "tunnel request audited", rec):
    t.ok(rec.get("proto") == "http" and rec.get("mode") == "explicit" and
         rec.get("tls") == "none" and rec.get("method") == "GET" and
         rec.get("host") == "api.test" and rec.get("port") == wp and
         rec.get("decision") == "allow" and rec.get("sandbox") == "a" and
         rec.get("rule") == "p#0" and
         rec.get("upstream") == "127.0.0.1:%d" % wp,
         "audit: proto http, explicit, tls none, GET api.test:port, allow, "
         "rule p#0", rec)
rec = tlslib.audit_client(audit, cl, lambda a: a.get("status") == 403 and
                          "Host header" in (a.get("reason") or ""))
t.ok(rec is not None and rec.get("decision") == "deny" and
     rec.get("host") == "api.test" and rec.get("port") == wp and
     rec.get("proto") == "http", "Host mismatch audited: deny, the CONNECT "
     "target's host and port", rec)
# the last exchange's record may land just after its answer was read
def n_of_client():
    return len([a for a in itlib.audit_records(audit)
                if a.get("client") == cl])
deadline = time.time() + 10
while n_of_client() < 10 and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.3)   # then nothing more: no record for the CONNECT itself
n = n_of_client()
t.ok(n == 10, "one audit record per request in the tunnel (10), none for "
     "the CONNECT itself", n)

# the request sent with the CONNECT (no wait for the 200)
s = itlib.connect(ap)
auth = base64.b64encode(b"a:tok-a")
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic "
          b"%s\r\n\r\nGET /echo?m=pipe HTTP/1.1\r\nHost: %s\r\n\r\n" %
          (A.encode(), A.encode(), auth, A.encode()))
rd = Reader(s)
r1 = read_response(rd, "CONNECT")
r2 = read_response(rd)
t.ok(r1.status == 200 and r2.status == 200 and b"m=pipe" in r2.body,
     "request pipelined behind the CONNECT → 200, 200", (r1, r2))
s.close()

# a 400 inside the tunnel closes the connection
for what, head in (
        ("Content-Length with Transfer-Encoding", b"POST /echo?m=bad8 "
         b"HTTP/1.1\r\nHost: %s\r\nContent-Length: 3\r\nTransfer-Encoding: "
         b"chunked\r\n\r\n0\r\n\r\n" % A.encode()),
        ("no Host header", b"GET /echo?m=bad9 HTTP/1.1\r\n\r\n")):
    s, rd = tunnel()
    r = ask(s, rd, head)
    t.error(r, 400, "bad_request", "%s in the tunnel → 400" % what)
    t.ok(rd.closed_after(3), "%s: connection closed after the 400" % what)
    s.close()
t.ok(not seen("m=bad8") and not seen("m=bad9"), "400s never reached the "
     "upstream")

# neither TLS nor HTTP: closed, audited as such
s, rd = tunnel()
cl = tlslib.client_addr(s)
s.sendall(b"\x05\x01\x00 SOCKS-like bytes\r\n")
t.ok(rd.closed_after(3) and not rd.buf, "neither TLS nor HTTP → closed, "
     "nothing answered", rd.buf)
s.close()
rec = tlslib.audit_client(audit, cl)
t.ok(rec is not None and rec.get("method") == "CONNECT" and
     rec.get("decision") == "deny" and
     rec.get("reason") == "the tunnel carried neither TLS nor HTTP",
     "audited: the tunnel carried neither TLS nor HTTP", rec)

# a WebSocket upgrade inside the tunnel (raw)
s, rd = tunnel()
key = base64.b64encode(os.urandom(16))
r = ask(s, rd, b"GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n" % (A.encode(), key))
acc = base64.b64encode(hashlib.sha1(
    key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()
if t.ok(r.status == 101 and r.header("Sec-WebSocket-Accept") == acc,
        "WebSocket upgrade inside the tunnel → 101", repr(r)):
    mask, msg = os.urandom(4), b"raw frame"
    s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask +
              bytes(c ^ mask[i % 4] for i, c in enumerate(msg)))
    got = rd.read(2 + len(msg))
    t.ok(got == bytes([0x81, len(msg)]) + msg, "frame echoed", got)
s.close()

# a spliced rule: plain HTTP is served the same way
s, rd = tunnel("splice.test:%d" % wp)
r = ask(s, rd, b"GET /anything?m=splice HTTP/1.1\r\nHost: splice.test:%d"
        b"\r\n\r\n" % wp)
t.ok(r.status == 200 and b"m=splice" in r.body,
     "intercept: false rule: plain HTTP in its tunnel served", repr(r))
r = ask(s, rd, b"GET /x?m=bad10 HTTP/1.1\r\nHost: api.test:%d\r\n\r\n" % wp)
t.error(r, 403, "denied", "intercept: false rule: another Host → 403")
s.close()
t.ok(not seen("m=bad10"), "never reached the upstream")
t.done()
PY

stop_airlockd
finish
