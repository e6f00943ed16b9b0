#!/bin/sh
# Hop-by-hop headers (the fixed list and those named in Connection) are
# removed in both directions; end-to-end headers pass; Host is rewritten to
# the request URI's authority.
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
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT, $PY_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "header checks"
import os, socket, threading, itlib
from itlib import req, roundtrip
ap, op, pp = (itlib.env_int(k) for k in
              ("AIRLOCK_PORT", "ORIGIN_PORT", "PY_PORT"))
t = itlib.Checks()
U = "http://api.test:%d" % op

def fields(head):
    out = []
    for line in head.split(b"\r\n")[1:]:
        if b":" in line:
            k, _, v = line.partition(b":")
            out.append((k.strip().lower().decode(), v.strip().decode()))
    return out

r = roundtrip(ap, req("GET", U + "/echo", [
    "Connection: X-Foo, keep-alive, Upgrade",
    "Connection: X-Bar",
    "X-Foo: 1",
    "X-Bar: 2",
    "Keep-Alive: timeout=5",
    "Proxy-Connection: keep-alive",
    "TE: trailers",
    "Upgrade: h2c",
    "HTTP2-Settings: AAMAAABkAAQAAP__",
    "X-End: 2",
    "X-Dup: a",
    "X-Dup: b",
    "Accept: text/plain",
    "User-Agent: airlock-it/1"], host="wrong.example:1234"))
if t.ok(r is not None and r.status == 200, "request with hop-by-hop headers",
        repr(r)):
    f = fields(r.body)
    names = [k for k, _ in f]
    for h in ("connection", "x-foo", "x-bar", "keep-alive",
              "proxy-connection", "te", "upgrade"):
        t.ok(h not in names, "%s removed before the upstream" % h,
             repr(r.body))
    t.ok(("x-end", "2") in f and ("accept", "text/plain") in f and
         ("user-agent", "airlock-it/1") in f, "end-to-end headers pass",
         repr(r.body))
    t.ok([v for k, v in f if k == "x-dup"] == ["a", "b"],
         "repeated end-to-end header passes in order", repr(r.body))
    hosts = [v for k, v in f if k == "host"]
    t.ok(hosts == ["api.test:%d" % op], "Host is the URI authority",
         repr(hosts))
    t.ok(r.body.startswith(b"GET /echo HTTP/1.1\r\n"),
         "origin-form request line upstream", repr(r.body[:60]))

# No Host at all: either refused (RFC 9112 wants one from 1.1 clients) or
# supplied from the URI, never left out upstream.
r = roundtrip(ap, req("GET", U + "/echo?m=nohost", host=""))
if r is not None and r.status == 200:
    t.ok(b"\r\nHost: api.test:%d\r\n" % op in r.body,
         "missing Host is supplied from the URI", repr(r))
else:
    t.error(r, 400, "bad_request", "missing Host refused")

# Response hop-by-hop headers: a python upstream that sends some.
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
        c.sendall(b"HTTP/1.1 200 OK\r\n"
                  b"Content-Type: text/plain\r\n"
                  b"Connection: X-Resp-Hop\r\n"
                  b"X-Resp-Hop: 1\r\n"
                  b"Keep-Alive: timeout=5, max=100\r\n"
                  b"Proxy-Connection: keep-alive\r\n"
                  b"Upgrade: h2c\r\n"
                  b"X-Resp-End: yes\r\n"
                  b"Content-Length: 2\r\n\r\nok")
        c.close()

th = threading.Thread(target=serve, daemon=True)
th.start()
r = roundtrip(ap, req("GET", "http://api.test:%d/x" % pp))
if t.ok(r is not None and r.status == 200 and r.body == b"ok",
        "python upstream answered", repr(r)):
    names = [k.lower() for k, _ in r.headers]
    t.ok(r.header("X-Resp-End") == "yes", "end-to-end response header passes")
    for h in ("x-resp-hop", "keep-alive", "proxy-connection", "upgrade"):
        t.ok(h not in names, "response %s removed" % h, repr(r.headers))
    conn = " ".join(r.header_all("Connection")).lower()
    t.ok("x-resp-hop" not in conn, "upstream's Connection tokens not relayed",
         repr(conn))
srv.close()
t.done()
PY
stop_airlockd
