#!/bin/sh
# Encoded slashes, path tricks and strict framing through the real daemon
# (issues 15.2, 15.6, 14.10), with the exact hostile bytes. The origin logs
# every request it receives, so the test sees that:
#   * paths with %2F (npm "/@scope%2fname", GitLab "group%2Fproject") are
#     allowed by "/@scope/*" and by "/*" and reach the upstream byte for
#     byte as the client wrote them;
#   * paths that read two ways ("..%2F", a dot segment popping an encoded
#     slash), Tomcat's "..;" and ".;x", double encoding under a rule with
#     paths, %5C, %00 and climbing above "/" are 400 and never arrive;
#   * method-override headers are judged against the rule's methods, and
#     X-Original-URL / X-Rewrite-URL are stripped on rules with paths;
#   * request-line whitespace, Host userinfo, Connection naming framing
#     fields, leading empty lines, long chunk lines and CONNECT with a body
#     are 400; an upstream 101 nobody asked for is 502 and no tunnel;
#   * every 400/403 audit record carries the host, port, path and rule
#     known when it was refused.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
PY_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT PY_PORT T
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"registry.test": "127.0.0.1", "npm.test": "127.0.0.1",
          "gl.test": "127.0.0.1", "api.test": "127.0.0.1",
          "open.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "registry.test", ports: [$ORIGIN_PORT], paths: ["/@scope/*"]}
      - {host: "npm.test", ports: [$ORIGIN_PORT], paths: ["/*"]}
      - {host: "gl.test", ports: [$ORIGIN_PORT], methods: [GET],
         paths: ["/api/v4/projects/*"]}
      - {host: "api.test", ports: [$ORIGIN_PORT], methods: [GET, POST],
         paths: ["/v1/*"]}
      - {host: "open.test", ports: [$ORIGIN_PORT, $PY_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

# curl as a real client: it sends "%2f" as written.
out=$(curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -o /dev/null \
    -w '%{http_code}' "http://registry.test:$ORIGIN_PORT/@scope%2fcurlpkg?m=curl") ||
    fail "curl through the proxy failed"
[ "$out" = 404 ] || fail "curl /@scope%2fcurlpkg: status $out, want the origin's 404"
grep -q '^GET /@scope%2fcurlpkg?m=curl HTTP/1.1' "$T/origin.log" ||
    fail "origin did not see /@scope%2fcurlpkg byte for byte"
ok "curl: /@scope%2fcurlpkg allowed by /@scope/* and sent as written"

"$PYTHON" - <<'PY' || fail "path and framing checks"
import os, socket, threading, time, itlib
from itlib import req, roundtrip, exchange
ap, op, pp = (itlib.env_int(k) for k in
              ("AIRLOCK_PORT", "ORIGIN_PORT", "PY_PORT"))
T = os.environ["T"]
olog, alog = T + "/origin.log", T + "/audit.jsonl"
t = itlib.Checks()

def records(marker):
    return [r for r in itlib.origin_records(olog) if marker.encode() in r]

def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    if rid is None:
        return None
    return itlib.audit_wait(alog, lambda a: a.get("id") == rid)

def facts(a, host, port, path, rule=None, status=None):
    """The audit record names what was known; None or what differs."""
    if a is None:
        return "no audit record"
    want = {"host": host, "port": port, "path": path}
    if rule is not None:
        want["rule"] = rule
    if status is not None:
        want["status"] = status
    bad = {k: (a.get(k), v) for k, v in want.items() if a.get(k) != v}
    if rule is None and "rule" in a and a.get("decision") == "deny":
        bad["rule"] = (a["rule"], None)
    return bad or None

# --- allowed: %2F kept as data, sent byte for byte -------------------
allowed = (
    ("registry.test", "/@scope%2fname", "a1", "p#0"),
    ("registry.test", "/@scope%2Fname", "a2", "p#0"),
    ("npm.test", "/@scope%2fname", "a3", "p#1"),
    ("npm.test", "/@scope%2Fname", "a4", "p#1"),
    ("gl.test", "/api/v4/projects/group%2Fproject/issues", "a5", "p#2"),
    ("registry.test", "/@scope/name/-/name-1.0.0.tgz", "a6", "p#0"),
    ("open.test", "/x/%252e%252e/y", "a8", "p#4"),
)
for host, path, m, rule in allowed:
    r = roundtrip(ap, req("GET", "http://%s:%d%s?m=%s" % (host, op, path, m)))
    t.ok(r is not None and r.status == 404 and
         r.header("Server") == "airlock-origin",
         "%s%s allowed (%s)" % (host, path, rule), repr(r))
    line = b"GET %s?m=%s HTTP/1.1\r\n" % (path.encode(), m.encode())
    t.ok(any(x.startswith(line) for x in itlib.origin_records(olog)),
         "origin saw %s byte for byte" % path)
    why = facts(audit_of(r), host, op, path, rule, 404)
    t.ok(why is None, "audit of %s%s: host, port, path, rule" % (host, path),
         repr(why))

# a dot segment elsewhere is resolved; the encoded slash stays as written
r = roundtrip(ap, req("GET", "http://registry.test:%d/@scope/x/./y%%2fz?m=a7"
                      % op))
t.ok(r is not None and r.status == 404, "/@scope/x/./y%2fz allowed", repr(r))
t.ok(any(x.startswith(b"GET /@scope/x/y%2fz?m=a7 HTTP/1.1\r\n")
         for x in itlib.origin_records(olog)),
     "origin saw /@scope/x/y%2fz (dots resolved, %2f as written)")

# --- refused: 400, never at the origin, audited with what was known --
refused = (
    ("registry.test", "/@scope/..%2F..%2Fadmin", "b1", 400, None),
    ("api.test", "/v1/..;/admin", "b2", 400, None),
    ("api.test", "/v1/.;x/admin", "b3", 400, None),
    ("api.test", "/v1/%252e%252e/admin", "b4", 400, "p#3"),
    ("api.test", "/v1/a%5Cb", "b5", 400, None),
    ("api.test", "/v1/a%00b", "b6", 400, None),
    ("api.test", "/../v1/x", "b7", 400, None),
    ("api.test", "/v1/x%2Fy/../z", "b8", 400, None),
    ("registry.test", "/@other%2Fname", "b9", 403, None),
    ("npm.test", "/%2F..%2Fetc", "b10", 400, None),
)
for host, path, m, status, rule in refused:
    r = roundtrip(ap, req("GET", "http://%s:%d%s?m=%s" % (host, op, path, m)))
    t.error(r, status, "bad_request" if status == 400 else "denied",
            "%s%s → %d" % (host, path, status))
    t.ok(not records("m=%s " % m), "%s never reached the origin" % path)
    why = facts(audit_of(r), host, op, path, rule, status)
    t.ok(why is None, "audit of refused %s: host, port, path%s" %
         (path, ", rule" if rule else ""), repr(why))

# --- method overrides: judged against the rule's methods -------------
U = "http://api.test:%d/v1/x" % op
r = roundtrip(ap, req("POST", U + "?m=c1", ["X-HTTP-Method-Override: DELETE",
                                            "Content-Length: 0"]))
t.error(r, 403, "denied", "POST with X-HTTP-Method-Override: DELETE → 403")
t.ok(r is not None and "method-override" in r.json().get("reason", ""),
     "the reason names the override", repr(r))
t.ok(not records("m=c1 "), "the overridden request never reached the origin")
r = roundtrip(ap, req("POST", U + "?m=c2", ["X-HTTP-Method: get",
                                            "Content-Length: 0"]))
t.ok(r is not None and r.status == 404, "override naming an allowed method "
     "passes", repr(r))
t.ok(any(b"X-HTTP-Method: get" in x for x in records("m=c2 ")),
     "a judged override is forwarded unchanged")
r = roundtrip(ap, req("POST", U + "?m=c3", ["X-HTTP-Method-Override: GET",
                                            "X-Method-Override: DELETE",
                                            "Content-Length: 0"]))
t.error(r, 400, "bad_request", "two different override methods → 400")
t.ok(not records("m=c3 "), "conflicting overrides never reached the origin")
r = roundtrip(ap, req("POST", "http://open.test:%d/x?m=c4" % op,
                      ["X-HTTP-Method-Override: DELETE",
                       "Content-Length: 0"]))
t.ok(r is not None and r.status == 404, "override on a rule without methods "
     "passes", repr(r))
r = roundtrip(ap, req("GET", "http://gl.test:%d/api/v4/projects/1?m=c5" % op,
                      ["X-HTTP-Method-Override: DELETE"]))
t.error(r, 403, "denied", "GET overridden to DELETE on a GET-only rule → 403")

# --- path-override headers stripped on rules with paths or methods ---
hdrs = ["X-Original-URL: /admin", "X-Rewrite-URL: /admin",
        "X-Original-URI: /admin"]
r = roundtrip(ap, req("GET", U + "?m=d1", hdrs))
t.ok(r is not None and r.status == 404, "request with X-Original-URL "
     "allowed", repr(r))
rec = records("m=d1 ")
t.ok(rec and not any(h in rec[0].lower() for h in
                     (b"x-original-url", b"x-rewrite-url",
                      b"x-original-uri")),
     "X-Original-URL and X-Rewrite-URL stripped under a rule with paths",
     repr(rec[:1]))
r = roundtrip(ap, req("GET", "http://open.test:%d/x?m=d2" % op, hdrs))
rec = records("m=d2 ")
t.ok(rec and b"X-Original-URL: /admin" in rec[0],
     "kept on a rule without paths or methods (nothing to bypass)",
     repr(rec[:1]))

# --- strict framing: the exact bytes, each 400 and never upstream ----
O = b"open.test:%d" % op
H = b"Host: " + O + b"\r\n"
framing = (
    ("e1", b"GET  http://" + O + b"/e1 HTTP/1.1\r\n" + H + b"\r\n", "/e1"),
    ("e2", b"GET http://" + O + b"/e2 HTTP/1.1 \r\n" + H + b"\r\n", "/e2"),
    ("e3", b"GET http://" + O + b"/e3 HTTP/1.1\r\nHost: u:p@" + O +
     b"\r\n\r\n", "/e3"),
    ("e4", b"POST http://" + O + b"/e4 HTTP/1.1\r\n" + H +
     b"Connection: Content-Length\r\nContent-Length: 5\r\n\r\nhello", "/e4"),
    ("e5", b"POST http://" + O + b"/e5 HTTP/1.1\r\n" + H +
     b"Connection: keep-alive, Transfer-Encoding\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "/e5"),
    ("e6", b"GET http://" + O + b"/e6 HTTP/1.1\r\n" + H +
     b"Connection: Host\r\n\r\n", "/e6"),
    ("e7", b"\r\n\r\n\r\nGET http://" + O + b"/e7 HTTP/1.1\r\n" + H +
     b"\r\n", "/e7"),
    ("e8", b"CONNECT " + O + b" HTTP/1.1\r\n" + H +
     b"Content-Length: 5\r\n\r\nhello", None),
    ("e9", b"CONNECT " + O + b" HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", None),
)
for m, data, path in framing:
    r = roundtrip(ap, data)
    t.error(r, 400, "bad_request", "%s: %r → 400" % (m, data[:60]))
    t.ok(not records("/%s " % m), "%s never reached the origin" % m)
    if path is not None:
        why = facts(audit_of(r), "open.test", op, path)
        t.ok(why is None, "%s audited with host, port, path" % m, repr(why))
    elif m in ("e8", "e9"):
        a = audit_of(r)
        t.ok(a is not None and a.get("host") == "open.test" and
             a.get("port") == op, "%s audited with host and port" % m,
             repr(a))

# two empty lines are tolerated (RFC 9112 2.2)
r = roundtrip(ap, b"\r\n\r\nGET http://" + O + b"/e10 HTTP/1.1\r\n" + H +
              b"\r\n")
t.ok(r is not None and r.status == 404, "two empty lines before the request "
     "line are tolerated", repr(r))

# chunk lines: 4 KiB of extension passes, more is 400 (the head may have
# gone out already; no complete request does)
for m, ext, want in (("e11", 4000, 404), ("e12", 5000, 400),
                     ("e13", 0, 400)):
    line = (b"5;" + b"x" * (ext - 1)) if ext else (b"0" * 5000 + b"5")
    r = roundtrip(ap, b"POST http://" + O + b"/" + m.encode() +
                  b" HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n"
                  b"\r\n" + line + b"\r\nhello\r\n0\r\n\r\n")
    if want == 404:
        t.ok(r is not None and r.status == 404,
             "%s: %d-byte chunk extension passes" % (m, ext), repr(r))
    else:
        t.error(r, 400, "bad_request", "%s: chunk line over 4 KiB → 400" % m)
        time.sleep(0.3)
        t.ok(all(b"--- error" in x for x in records("/%s " % m)),
             "%s: no complete request reached the origin" % m,
             repr(records("/%s " % m)[:1]))

# --- an upstream 101 nobody asked for: 502, no tunnel ----------------
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", pp))
srv.listen(8)

def serve():
    while True:
        try:
            c, _ = srv.accept()
        except OSError:
            return
        c.settimeout(10)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                break
            buf += d
        try:
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: "
                      b"websocket\r\nConnection: Upgrade\r\n\r\n"
                      b"TUNNEL-BYTES-FROM-UPSTREAM")
            time.sleep(0.5)
        except OSError:
            pass
        c.close()

threading.Thread(target=serve, daemon=True).start()
s = itlib.connect(ap, 10)
s.sendall(req("GET", "http://open.test:%d/f1" % pp))
got = b""
s.settimeout(5)
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
except OSError:
    pass
s.close()
t.ok(got.startswith(b"HTTP/1.1 502 "), "unrequested 101 → 502",
     repr(got[:200]))
t.ok(b"101" not in got.split(b"\r\n")[0] and
     b"TUNNEL-BYTES" not in got, "no 101 and no tunnel bytes reach the "
     "client", repr(got[:300]))
rid = None
for ln in got.split(b"\r\n"):
    if ln.lower().startswith(b"x-airlock-request-id:"):
        rid = ln.split(b":", 1)[1].strip().decode()
a = itlib.audit_wait(alog, lambda x: x.get("id") == rid) if rid else None
t.ok(a is not None and a.get("status") == 502 and
     a.get("host") == "open.test", "the 502 is audited", repr(a))
# the same socket still works for everyone else
r = roundtrip(ap, req("GET", "http://npm.test:%d/after?m=z" % op))
t.ok(r is not None and r.status == 404, "the gateway keeps serving", repr(r))
srv.close()
t.done()
PY
stop_airlockd
finish
