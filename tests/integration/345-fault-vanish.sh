#!/bin/sh
# Fault suite, clients that vanish: in the middle of an upload, of a large
# download, of a streamed (SSE, chunked) response, inside an intercepted
# TLS session while downloading, and in the middle of the TLS handshake
# (half a ClientHello; a whole one, then gone before finishing), each
# with a FIN and with a RST (SO_LINGER 0). Every request that was under
# way is audited with a reason; afterwards airlockd holds exactly the
# descriptors it held before (pooled upstreams retire after idle_timeout),
# airlock_connections_active is 0 again, a normal request still works,
# and at exit (under the ASan build) LeakSanitizer finds nothing.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin tlsorigin -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT TLS_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits:
  idle_timeout: 2s
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT, $TLS_PORT]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_admin
export AIRLOCK_PID

"$PYTHON" - <<'PY' || fail "vanishing client checks"
import os, socket, ssl, struct, time, itlib, tlslib, faultlib
from itlib import req
ap, op, tp = (itlib.env_int(k) for k in ("AIRLOCK_PORT", "ORIGIN_PORT",
                                         "TLS_PORT"))
pid = itlib.env_int("AIRLOCK_PID")
T = os.environ["T"]
AUDIT = T + "/audit.jsonl"
AUTH = "a:tok-a"
U = "http://api.test:%d" % op
t = itlib.Checks()
ctx = tlslib.context(T + "/state/ca/a/ca.crt")

def metric():
    m = faultlib.metrics(T + "/state/admin.sock", T + "/state/admin.token")
    return m.get("airlock_connections_active")

FD0 = faultlib.fd_count(pid)
t.ok(metric() == 0, "no connection active at the start")

def vanish(s, how):
    if how == "rst":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
    s.close()

def recv_some(s, n):
    got = 0
    while got < n:
        d = s.recv(65536)
        if not d:
            return False
        got += len(d)
    return True

def upload(how):
    s = itlib.connect(ap)
    s.sendall(req("POST", U + "/upload", auth=AUTH,
                  headers=["Content-Length: 10000000"]))
    s.sendall(b"x" * 1000000)
    time.sleep(0.2)
    vanish(s, how)
    return "/upload"

def download(how):
    s = itlib.connect(ap)
    s.sendall(req("GET", U + "/size/1000000000", auth=AUTH))
    ok = recv_some(s, 2000000)
    vanish(s, how)
    return "/size/1000000000" if ok else None

def sse(how):
    s = itlib.connect(ap)
    s.sendall(req("GET", U + "/sse?n=100&ms=50", auth=AUTH))
    ok = recv_some(s, 100)
    vanish(s, how)
    return "/sse" if ok else None

def tls_download(how):
    c = tlslib.TLSConn(ap, "api.test:%d" % tp, ctx, "api.test", AUTH)
    c.send(b"GET /size/1000000000 HTTP/1.1\r\nHost: api.test:%d\r\n\r\n"
           % tp)
    ok = recv_some(c.tls, 2000000)
    vanish(c.tls, how)
    return "/size/1000000000" if ok else None

def hello():
    """The bytes of a real ClientHello for api.test."""
    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(i, o, server_hostname="api.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return o.read()

def half_hello(how):
    s, _ = tlslib.proxy_connect(ap, "api.test:%d" % tp, AUTH)
    h = hello()
    s.sendall(h[:len(h) // 2])
    time.sleep(0.1)
    vanish(s, how)
    return None

def whole_hello(how):
    s, _ = tlslib.proxy_connect(ap, "api.test:%d" % tp, AUTH)
    s.sendall(hello())
    ok = recv_some(s, 100)	# the ServerHello and more
    vanish(s, how)
    return None

done = []
for name, f in (("upload", upload), ("download", download), ("sse", sse),
                ("https download", tls_download),
                ("half ClientHello", half_hello),
                ("whole ClientHello", whole_hello)):
    for how in ("fin", "rst"):
        for i in range(3):
            try:
                path = f(how)
            except Exception as e:
                t.ok(False, "%s, %s: ran" % (name, how), repr(e))
                continue
            if path:
                done.append((name, how, path))
    print("# %s: vanished 3 times with FIN, 3 with RST" % name)

# every vanished request has its record, with a reason
time.sleep(0.5)
recs = itlib.audit_records(AUDIT)
for name in ("upload", "download", "sse", "https download"):
    want = [d for d in done if d[0] == name]
    proto = "https" if name.startswith("https") else "http"
    got = [r for r in recs if r.get("proto") == proto and
           r.get("path") == want[0][2] and r.get("reason")] if want else []
    t.ok(len(want) == 6 and len(got) == len(want),
         "%s: each vanished request audited with a reason (%d of %d)"
         % (name, len(got), len(want)),
         repr(got[:1]) + repr(set(r.get("reason") for r in got)))

# everything is released: descriptors, the connection gauge
n = faultlib.wait_for(lambda: faultlib.fd_count(pid) <= FD0, 15, 0.1)
t.ok(faultlib.fd_count(pid) <= FD0, "descriptors back to %d (now %d)"
     % (FD0, faultlib.fd_count(pid)))
t.ok(faultlib.wait_for(lambda: metric() == 0, 10, 0.1),
     "airlock_connections_active back to 0 (%r)" % metric())
r = itlib.roundtrip(ap, req("GET", U + "/size/10", auth=AUTH,
                            headers=["Connection: close"]))
t.ok(r is not None and r.status == 200 and len(r.body) == 10,
     "a normal request afterwards", repr(r))
t.done()
PY
stop_airlockd
