#!/bin/sh
# Bytes caps hold in flight (issue 14, point 5). Bytes are charged as they
# flow, not when a request ends, and what would pass a cap is cut:
#  - bytes_out 1 MiB: an 8 MiB upload declared by Content-Length → 402 at
#    once, never forwarded; the same 8 MiB chunked (length unknown) → 402
#    budget_exceeded after about 1 MiB reached the origin (nothing had come
#    back yet), the origin sees an incomplete body; then the cap is spent;
#  - bytes_in 1 MiB: an 8 MiB chunked download → head sent, body cut near
#    1 MiB, no last chunk, audit reason budget_cut; an 8 MiB download with
#    Content-Length → 402 before any byte of it went back;
#  - a spliced CONNECT tunnel downloading 6 MiB under bytes_in 1 MiB: the
#    usage API shows its bytes while it is open, it is cut near the cap,
#    audited proto tunnel, reason budget_cut; uploading 6 MiB through a
#    tunnel under bytes_out 1 MiB: cut, the origin never gets the body;
#  - a WebSocket sending 1 MiB under bytes_out 256 KiB: cut, budget_cut.
# "Near" is within one charge batch (64 KiB) plus the request heads.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT TLS_PORT T

policy()
{
	cat <<YAML
  - name: $1
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
      - {host: "api.test", ports: [$TLS_PORT], intercept: false}
    caps: $2
YAML
}
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
YAML
	policy out1m "{bytes_out: 1MiB}"
	policy in1m "{bytes_in: 1MiB}"
	policy ws "{bytes_out: 256KiB}"
	policy in64m "{bytes_in: 64MiB}"
	cat <<YAML
sandboxes:
  - {id: cl, policy: out1m, token: "literal:tok"}
  - {id: chunk, policy: out1m, token: "literal:tok"}
  - {id: down, policy: in1m, token: "literal:tok"}
  - {id: down2, policy: in1m, token: "literal:tok"}
  - {id: tun, policy: in1m, token: "literal:tok"}
  - {id: tunup, policy: out1m, token: "literal:tok"}
  - {id: ws, policy: ws, token: "literal:tok"}
  - {id: tunopen, policy: in64m, token: "literal:tok"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_admin

cat >"$T/common.py" <<'PY'
import base64, hashlib, os, socket, ssl, threading, time
import adminlib, itlib
from itlib import Reader, connect, read_response
ap, op, tp = (itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT"),
              itlib.env_int("TLS_PORT"))
T = os.environ["T"]
AUDIT, OLOG, TLOG = T + "/audit.jsonl", T + "/origin.log", T + "/tls.log"
ADMIN = "unix:" + T + "/state/admin.sock"
TOKEN = adminlib.token(T + "/state")
MiB = 1024 * 1024
SLACK = 64 * 1024 + 4096	# one charge batch plus heads
t = itlib.Checks()


def auth(sb):
    return b"Proxy-Authorization: Basic " + \
        base64.b64encode(sb.encode() + b":tok") + b"\r\n"


def usage(sb):
    st, _, body = adminlib.call(ADMIN, "GET", "/v1/sandboxes/%s/usage" % sb,
                                token=TOKEN)
    return body if st == 200 else {}


def head(sb, method, path, extra=b""):
    return (b"%s http://api.test:%d%s HTTP/1.1\r\nHost: api.test:%d\r\n"
            % (method.encode(), op, path.encode(), op) + auth(sb) + extra)


def sender(sock, chunks):
    """Send <chunks> from a thread; stop quietly when the proxy hangs up."""
    def run():
        try:
            for c in chunks:
                sock.sendall(c)
        except OSError:
            pass
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def read_all(sock, rd, limit=20 * MiB, wait=15):
    """What is left of the stream until the proxy closes it."""
    data = rd.buf
    rd.buf = b""
    sock.settimeout(wait)
    try:
        while len(data) < limit:
            d = sock.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    return data


def tunnel(sb):
    """CONNECT to the TLS origin (spliced), TLS inside: (raw, tls, reader)."""
    s = connect(ap, 15)
    ta = b"api.test:%d" % tp
    s.sendall(b"CONNECT " + ta + b" HTTP/1.1\r\nHost: " + ta + b"\r\n" +
              auth(sb) + b"\r\n")
    rd = Reader(s)
    r = read_response(rd, "CONNECT")
    assert r.status == 200, repr(r)
    ctx = ssl.create_default_context(cafile=T + "/pki/ca.crt")
    ts = ctx.wrap_socket(s, server_hostname="api.test")
    return s, ts, Reader(ts)


def audit_of(sb, pred=lambda a: True, timeout=10):
    return itlib.audit_wait(AUDIT, lambda a: a.get("sandbox") == sb and
                            pred(a), timeout)
PY

# --- bytes_out: declared 8 MiB → 402 at once; chunked 8 MiB → 402 mid-way
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "bytes_out"
from common import *
s = connect(ap, 15)
s.sendall(head("cl", "POST", "/upload?cl", b"Content-Length: %d\r\n\r\n"
               % (8 * MiB)))
r = read_response(Reader(s))
t.error(r, 402, "budget_exceeded", "8 MiB declared over bytes_out 1 MiB "
        "→ 402 before any of it is read")
s.close()
time.sleep(0.3)
t.ok(not any(b"/upload?cl" in x for x in itlib.origin_records(OLOG)),
     "the declared upload never reached the origin")
t.ok(usage("cl").get("bytes_out", -1) < 4096, "nothing counted as sent",
     usage("cl"))

s = connect(ap, 15)
s.sendall(head("chunk", "POST", "/upload?chunked",
               b"Transfer-Encoding: chunked\r\n\r\n"))
piece = b"%x\r\n" % 65536 + b"z" * 65536 + b"\r\n"
th = sender(s, [piece] * 128 + [b"0\r\n\r\n"])	# 8 MiB
rd = Reader(s)
try:
    r = read_response(rd)
except (itlib.Closed, OSError) as e:
    r = None
t.error(r, 402, "budget_exceeded", "8 MiB chunked over bytes_out 1 MiB → "
        "402 once the cap is reached (nothing had come back)")
if r is not None:
    t.ok("bytes_out" in r.json().get("reason", ""), "the reason names "
         "bytes_out", r.json())
s.close()
time.sleep(0.5)
rec = [x for x in itlib.origin_records(OLOG) if b"/upload?chunked" in x]
t.ok(len(rec) == 1 and b"--- error" in rec[0], "the origin saw an "
     "incomplete upload, not a request", rec)
if rec:
    n = int(rec[0].split(b"--- body ")[1].split(b" ")[0])
    t.ok(n <= 1 * MiB, "the origin got at most the 1 MiB cap (%d bytes)" % n)
u = usage("chunk")
t.ok(1 * MiB - SLACK <= u.get("bytes_out", 0) <= 1 * MiB + SLACK,
     "bytes_out counted: about the cap", u)
a = audit_of("chunk", lambda a: a.get("status") == 402)
t.ok(a is not None and "bytes_out" in (a.get("reason") or ""),
     "audited as 402 with the bytes_out cap", a)
# spent: the next request is refused before it goes out
r = itlib.roundtrip(ap, head("chunk", "GET", "/size/10") + b"\r\n")
t.error(r, 402, "budget_exceeded", "then the cap is spent")
t.done()
PY

# --- bytes_in: chunked download cut mid-body; a declared one refused
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "bytes_in"
from common import *
s = connect(ap, 15)
s.sendall(head("down", "GET", "/chunked/8000000") + b"\r\n")
rd = Reader(s)
data = read_all(s, rd)
t.ok(data.startswith(b"HTTP/1.1 200"), "the head went out", data[:100])
t.ok(len(data) <= 1 * MiB + SLACK and len(data) >= 1 * MiB - SLACK,
     "the download stopped at about 1 MiB (%d bytes)" % len(data))
t.ok(not data.endswith(b"0\r\n\r\n"), "no last chunk: the client sees a "
     "cut, not a complete body")
a = audit_of("down", lambda a: a.get("path") == "/chunked/8000000")
t.ok(a is not None and a.get("reason") == "budget_cut",
     "audited with reason budget_cut", a)
t.ok(a is not None and a.get("bytes_in", 0) <= 1 * MiB + SLACK,
     "audit bytes_in about the cap", a)
s.close()

r = itlib.roundtrip(ap, head("down2", "GET", "/size/8000000") + b"\r\n")
t.error(r, 402, "budget_exceeded", "8 MiB with Content-Length over "
        "bytes_in 1 MiB → 402, nothing of it sent")
t.ok(usage("down2").get("bytes_in", 0) < 8192, "only the refusal counted",
     usage("down2"))
t.done()
PY

# --- tunnels: bytes visible while open, cut at the cap, both ways
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "tunnel"
from common import *
# open and held by backpressure (we stop reading): counted meanwhile
raw, ts, rd = tunnel("tunopen")
ts.sendall(b"GET /size/6000000 HTTP/1.1\r\nHost: api.test\r\n\r\n")
got = b""
ts.settimeout(15)
while len(got) < 200000:
    got += ts.recv(65536)
time.sleep(1.2)
u = usage("tunopen")
t.ok(u.get("bytes_in", 0) >= 200000 and u.get("bytes_out", 0) > 0,
     "the usage API shows an open tunnel's bytes", u)
t.ok(audit_of("tunopen", timeout=0.2) is None, "(the tunnel is still open: "
     "not audited yet)")
raw.close()
raw, ts, rd = tunnel("tun")
ts.sendall(b"GET /size/6000000 HTTP/1.1\r\nHost: api.test\r\n\r\n")
got = b""
ts.settimeout(15)
try:
    while len(got) < 300000:
        d = ts.recv(65536)
        if not d:
            break
        got += d
except OSError:
    pass
time.sleep(0.2)
u = usage("tun")
t.ok(u.get("bytes_in", 0) >= 300000, "the usage API shows the open "
     "tunnel's bytes (%r after %d read)" % (u.get("bytes_in"), len(got)))
try:
    while True:
        d = ts.recv(65536)
        if not d:
            break
        got += d
except (OSError, ssl.SSLError):
    pass
t.ok(len(got) < 1 * MiB + SLACK, "the tunnel was cut near bytes_in 1 MiB "
     "(%d of 6000000 bytes came through)" % len(got))
raw.close()
a = audit_of("tun", lambda a: a.get("proto") == "tunnel")
t.ok(a is not None and a.get("reason") == "budget_cut", "tunnel audited "
     "with reason budget_cut", a)
t.ok(a is not None and a.get("bytes_in", 0) <= 1 * MiB + SLACK,
     "audit bytes_in about the cap", a)
u = usage("tun")
t.ok(1 * MiB - SLACK <= u.get("bytes_in", 0) <= 1 * MiB + SLACK,
     "usage bytes_in about the cap after the cut", u)

raw, ts, rd = tunnel("tunup")
ts.sendall(b"POST /upload?tunnel HTTP/1.1\r\nHost: api.test\r\n"
           b"Content-Length: %d\r\n\r\n" % (6 * MiB))
th = sender(ts, [b"u" * 65536] * 96)
th.join(20)
time.sleep(0.3)
raw.close()
a = audit_of("tunup", lambda a: a.get("proto") == "tunnel")
t.ok(a is not None and a.get("reason") == "budget_cut", "upload tunnel "
     "audited with reason budget_cut", a)
t.ok(a is not None and a.get("bytes_out", 0) <= 1 * MiB + SLACK,
     "audit bytes_out about the cap", a)
time.sleep(0.3)
t.ok(not any(b"--- body 6291456 bytes" in x for x in
             itlib.origin_records(TLOG)),
     "the origin never got the whole upload")
t.done()
PY

# --- a WebSocket past bytes_out 256 KiB is cut
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "websocket"
from common import *
key = base64.b64encode(os.urandom(16))
s = connect(ap, 15)
s.sendall(head("ws", "GET", "/ws", b"Upgrade: websocket\r\nConnection: "
               b"Upgrade\r\nSec-WebSocket-Key: " + key +
               b"\r\nSec-WebSocket-Version: 13\r\n\r\n"))
rd = Reader(s)
r = read_response(rd)
if t.ok(r.status == 101, "WebSocket upgrade → 101", repr(r)):
    th = sender(s, [os.urandom(65536) for i in range(16)])	# 1 MiB
    back = read_all(s, rd, limit=2 * MiB)
    t.ok(len(back) <= 256 * 1024 + SLACK, "the echo stopped near the cap "
         "(%d bytes back)" % len(back))
s.close()
a = audit_of("ws", lambda a: a.get("path") == "/ws")
t.ok(a is not None and a.get("reason") == "budget_cut",
     "WebSocket audited with reason budget_cut", a)
t.ok(a is not None and a.get("bytes_out", 0) <= 256 * 1024 + SLACK,
     "audit bytes_out about the cap", a)
t.done()
PY

stop_airlockd
finish
