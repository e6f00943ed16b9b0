#!/bin/sh
# limits: header_timeout (also against a trickle), upstream_timeout → 504,
# connection refused → 502, connect_timeout → 504, idle keep-alive close.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
DEAD_PORT=$(free_port)
HANG_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT DEAD_PORT HANG_PORT T
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits:
  header_timeout: 1s
  idle_timeout: 2s
  upstream_timeout: 1s
  connect_timeout: 1s
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT, $DEAD_PORT, $HANG_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "timeout checks"
import socket, threading, time, itlib
from itlib import req, connect, Reader, read_response, roundtrip, Closed
ap, op, dead, hang = (itlib.env_int(k) for k in
                      ("AIRLOCK_PORT", "ORIGIN_PORT", "DEAD_PORT",
                       "HANG_PORT"))
t = itlib.Checks()
A = "api.test:%d" % op

def wait_end(s, limit):
    """Seconds until the gateway answers or closes <s>, and what it sent."""
    t0 = time.time()
    s.settimeout(limit)
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        return None, got
    except ConnectionResetError:
        pass
    return time.time() - t0, got

def timed_out_ok(got):
    """Closed silently, or a 408 with the JSON error shape."""
    if not got:
        return True
    rd = Reader(None)
    rd.buf, rd.eof = got, True
    try:
        r = read_response(rd)
    except Exception:
        return False
    return itlib.check_error(r, 408) is None

# header timeout: half a head, then nothing
s1 = connect(ap)
s1.sendall(b"GET http://" + A.encode() + b"/echo HTTP/1.1\r\nHost: api")
t0 = time.time()
# meanwhile another client is served at once
r = roundtrip(ap, req("GET", "http://" + A + "/size/10"))
t.ok(r is not None and r.status == 200 and time.time() - t0 < 1.5,
     "another client served during a slow head", repr(r))
el, got = wait_end(s1, 6)
el = time.time() - t0 if el is not None else None
t.ok(el is not None and 0.7 < el < 4.0,
     "half a head: connection ended after header_timeout (+ margin)",
     "after %s" % el)
t.ok(timed_out_ok(got), "half a head: closed or 408 JSON", repr(got[:200]))
s1.close()

# a trickle of header bytes does not extend the header timeout
import select
s2 = connect(ap)
s2.sendall(b"GET http://" + A.encode() + b"/echo HTTP/1.1\r\n")
t0 = time.time()
ended = None
for i in range(40):
    time.sleep(0.2)
    try:
        if select.select([s2], [], [], 0)[0]:
            s2.recv(65536)
            ended = time.time() - t0
            break
        s2.sendall(b"X-Slow-%d: 1\r\n" % i)
    except OSError:
        ended = time.time() - t0
        break
t.ok(ended is not None and ended < 4.0,
     "trickled head cut off at header_timeout", "after %s" % ended)
s2.close()

# upstream timeout
t0 = time.time()
r = roundtrip(ap, req("GET", "http://" + A + "/delay/3000"), timeout=10)
el = time.time() - t0
t.error(r, 504, "upstream_timeout", "slow upstream → 504")
t.ok(0.8 < el < 2.8, "504 after about upstream_timeout", "%.2fs" % el)
r = roundtrip(ap, req("GET", "http://" + A + "/delay/300"), timeout=10)
t.ok(r is not None and r.status == 200 and r.body == b"ok",
     "upstream just within the timeout", repr(r))

# connection refused
t0 = time.time()
r = roundtrip(ap, req("GET", "http://api.test:%d/" % dead), timeout=10)
t.error(r, 502, "upstream_unreachable", "refused → 502")
t.ok(time.time() - t0 < 1.0, "refused answered at once",
     "%.2fs" % (time.time() - t0))

# connect timeout: a listener that never accepts, its queue filled so
# further SYNs are dropped
srv = socket.socket()
srv.bind(("127.0.0.1", hang))
srv.listen(1)
fillers = []
for i in range(8):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(("127.0.0.1", hang))
    except BlockingIOError:
        pass
    fillers.append(c)
time.sleep(0.2)
probe = socket.socket()
probe.settimeout(0.7)
try:
    probe.connect(("127.0.0.1", hang))
    hangs = False
except socket.timeout:
    hangs = True
except OSError:
    hangs = False
probe.close()
if hangs:
    t0 = time.time()
    r = roundtrip(ap, req("GET", "http://api.test:%d/" % hang), timeout=10)
    el = time.time() - t0
    t.error(r, 504, "upstream_timeout", "connect timeout → 504")
    t.ok(0.8 < el < 3.0, "504 after about connect_timeout", "%.2fs" % el)
else:
    print("# SYNs to a full accept queue are not dropped on this kernel: "
          "connect-timeout case skipped")
for c in fillers:
    c.close()
srv.close()

# idle keep-alive client connection is closed after idle_timeout
s3 = connect(ap)
s3.sendall(req("GET", "http://" + A + "/size/5"))
rd = Reader(s3)
r = read_response(rd)
t.ok(r.status == 200, "request before idling")
t0 = time.time()
el, got = wait_end(s3, 8)
t.ok(el is not None and 1.5 < el < 5.0 and not got,
     "idle keep-alive connection closed after idle_timeout",
     "after %s, got %r" % (el, got[:100]))
s3.close()
# an idle connection with nothing sent at all is also closed (by the
# header or idle timeout, whichever the gateway applies)
s4 = connect(ap)
el, got = wait_end(s4, 8)
t.ok(el is not None and el < 4.5 and timed_out_ok(got),
     "silent new connection closed", "after %s" % el)
s4.close()
t.done()
PY
stop_airlockd
