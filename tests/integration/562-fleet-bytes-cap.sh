#!/bin/sh
# Fleet mode (issue 18, point 2): the bytes caps hold across gateways.
# Three airlockd share one budget through Redis; a streaming exchange
# under a bytes cap moves bytes only within the byte grants Redis gives it
# (64 KiB chunks, leased like reservations), so:
#  - 12 concurrent chunked downloads of 400 kB spread over the three, under
#    bytes_in 1 MiB: what reached the clients and the shared counter never
#    pass the cap, and reach it (nobody is refused well under it: within
#    one chunk); no grant is left held; the next request is 402 everywhere;
#  - three concurrent spliced CONNECT tunnels (one per gateway), each
#    downloading 400 kB under bytes_in 512 KiB: the same, audited
#    budget_cut;
#  - bytes_out 1 MiB: three chunked uploads of 1 MiB at once (one per
#    gateway) are cut (402, nothing had come back) with the shared counter
#    at most the cap and within a chunk of it; an 8 MiB body declared by
#    Content-Length is refused at once (402, "(shared)");
#  - kill -9 of a gateway holding a grant (its client stalled): once the
#    lease ends the next script of the sandbox counts the grant as moved
#    and releases it;
#  - Redis killed mid-download (bytes_in 64 MiB): the stream is cut once
#    its grant is used (fail closed), reason budget_unavailable, far from
#    its 8 MB.
# Without the grants each gateway cut at its own count: ~3 x the cap.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin
start_redis
GW_PORT_1=$(free_port)
GW_PORT_2=$(free_port)
GW_PORT_3=$(free_port)
export ORIGIN_PORT TLS_PORT GW_PORT_1 GW_PORT_2 GW_PORT_3 REDIS_PORT T

for i in 1 2 3; do
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 2
audit: {file: $T/audit$i.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 1s, store_lease: 3s}
policies:
  - name: in1m
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
    caps: {bytes_in: 1MiB}
  - name: tun
    rules:
      - {host: "api.test", ports: [$TLS_PORT], intercept: false}
    caps: {bytes_in: 512KiB}
  - name: out1m
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
    caps: {bytes_out: 1MiB}
  - name: big
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
    caps: {bytes_in: 64MiB}
sandboxes:
  - {id: dl, policy: in1m, token: "literal:tok"}
  - {id: tu, policy: tun, token: "literal:tok"}
  - {id: up, policy: out1m, token: "literal:tok"}
  - {id: up2, policy: out1m, token: "literal:tok"}
  - {id: kg, policy: big, token: "literal:tok"}
  - {id: ra, policy: big, token: "literal:tok"}
YAML
	start_gateway $i "$T/gw$i.yaml"
done

cat >"$T/common.py" <<'PY'
import base64, json, os, socket, ssl, subprocess, threading, time
import itlib
from itlib import Reader, connect, read_response
op, tp = itlib.env_int("ORIGIN_PORT"), itlib.env_int("TLS_PORT")
GWS = [itlib.env_int("GW_PORT_%d" % i) for i in (1, 2, 3)]
T = os.environ["T"]
KiB, MiB = 1024, 1024 * 1024
CHUNK = 64 * KiB
t = itlib.Checks()


def rcli(*args):
    return subprocess.check_output(
        ["redis-cli", "-p", os.environ["REDIS_PORT"]] + list(args)
    ).decode().strip()


def counter(sb, field="in"):
    return int(rcli("HGET", "airlock:{%s}:w:0" % sb, field) or 0)


def auth(sb):
    return b"Proxy-Authorization: Basic " + \
        base64.b64encode(sb.encode() + b":tok") + b"\r\n"


def get(sb, path):
    return (b"GET http://api.test:%d%s HTTP/1.1\r\nHost: api.test:%d\r\n"
            b"Connection: close\r\n" % (op, path.encode(), op) + auth(sb) +
            b"\r\n")


def drain(sock, wait=15, pause=None):
    """Every byte until the gateway closes; <pause>: (after, fn) runs fn
    once <after> bytes came and reads on slowly."""
    data = b""
    sock.settimeout(wait)
    try:
        while True:
            d = sock.recv(65536)
            if not d:
                break
            data += d
            if pause is not None and len(data) >= pause[0]:
                pause[1]()
                pause = None
    except OSError:
        pass
    return data


def audits(sb):
    out = []
    for i in (1, 2, 3):
        p = "%s/audit%d.jsonl" % (T, i)
        if os.path.exists(p):
            out += [a for a in itlib.audit_records(p)
                    if a.get("sandbox") == sb]
    return out


def settled(sb, n, timeout=10):
    """Until <n> records of <sb> are audited and no grant is held."""
    end = time.time() + timeout
    while time.time() < end:
        if len(audits(sb)) >= n and \
                int(rcli("GET", "airlock:{%s}:gti" % sb) or 0) == 0:
            return True
        time.sleep(0.1)
    return False
PY

# --- 12 concurrent downloads over three gateways, bytes_in 1 MiB
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "downloads"
from common import *
N, SIZE = 12, 400000
got = [None] * N
go = threading.Barrier(N)


def one(k):
    s = connect(GWS[k % 3], 20)
    go.wait()		# all at once: admitted together, streaming together
    s.sendall(get("dl", "/chunked/%d" % SIZE))
    got[k] = drain(s, 20)
    s.close()


th = [threading.Thread(target=one, args=(k,)) for k in range(N)]
for x in th:
    x.start()
for x in th:
    x.join()
# what the admitted ones delivered (the others got a 402)
total = sum(len(g) for g in got if g.startswith(b"HTTP/1.1 200"))
ok200 = sum(1 for g in got if g.startswith(b"HTTP/1.1 200"))
t.ok(settled("dl", N), "all %d audited, no grant left held (gti %s)"
     % (N, rcli("GET", "airlock:{dl}:gti")))
shared = counter("dl")
t.ok(total <= MiB, "clients got %d bytes <= cap %d" % (total, MiB))
t.ok(shared <= MiB, "shared counter %d <= cap %d" % (shared, MiB))
t.ok(shared >= MiB - CHUNK, "the gateways moved %d bytes: not cut well "
     "under the cap" % shared)
t.ok(ok200 >= 9, "%d of %d downloads admitted together" % (ok200, N))
a = audits("dl")
moved = sum(x.get("bytes_in", 0) for x in a if x.get("status") == 200)
t.ok(moved <= MiB, "audited bytes_in of the admitted %d <= cap" % moved)
t.ok(moved == shared, "what they moved (%d) is the shared counter (%d)"
     % (moved, shared))
t.ok(any(x.get("reason") == "budget_cut" for x in a),
     "streams cut at the cap: %r" % sorted(set(str(x.get("reason"))
                                               for x in a)))
t.ok(all(x.get("reason") in ("budget_cut", None, "") or
         x.get("status") in (200, 402) for x in a),
     "only cuts and refusals: %r" % [(x.get("status"), x.get("reason"))
                                      for x in a])
for p in GWS:
    r = itlib.roundtrip(p, get("dl", "/size/10"))
    t.error(r, 402, "budget_exceeded", "the next request on %d" % p)
t.done()
PY
ok "12 concurrent downloads over three gateways keep bytes_in 1 MiB"

# --- three spliced tunnels at once, bytes_in 512 KiB
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "tunnels"
from common import *
CAP, SIZE = 512 * KiB, 400000
got = [b""] * 3


def one(k):
    s = connect(GWS[k], 20)
    ta = b"api.test:%d" % tp
    s.sendall(b"CONNECT " + ta + b" HTTP/1.1\r\nHost: " + ta + b"\r\n" +
              auth("tu") + b"\r\n")
    r = read_response(Reader(s), "CONNECT")
    if r.status != 200:
        return
    ctx = ssl.create_default_context(cafile=T + "/pki/ca.crt")
    ts = ctx.wrap_socket(s, server_hostname="api.test")
    ts.sendall(b"GET /size/%d HTTP/1.1\r\nHost: api.test\r\n\r\n" % SIZE)
    got[k] = drain(ts, 20)
    ts.close()


th = [threading.Thread(target=one, args=(k,)) for k in range(3)]
for x in th:
    x.start()
for x in th:
    x.join()
total = sum(len(g) for g in got)
t.ok(settled("tu", 3), "the three audited, no grant left held")
shared = counter("tu")
a = audits("tu")
t.ok(total < CAP, "decrypted bytes %d < cap %d" % (total, CAP))
t.ok(shared <= CAP, "shared counter %d <= cap %d" % (shared, CAP))
t.ok(shared >= CAP - CHUNK, "shared counter %d: not cut well under" %
     shared)
t.ok(sum(x.get("bytes_in", 0) for x in a) <= CAP,
     "audited bytes_in %d <= cap" % sum(x.get("bytes_in", 0) for x in a))
t.ok(all(x.get("proto") == "tunnel" for x in a), "tunnels: %r" %
     [x.get("proto") for x in a])
t.ok(any(x.get("reason") == "budget_cut" for x in a),
     "cut at the cap: %r" % [x.get("reason") for x in a])
t.done()
PY
ok "three concurrent tunnels over three gateways keep bytes_in 512 KiB"

# --- three chunked uploads at once, bytes_out 1 MiB; a declared one
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "uploads"
from common import *
st = [None] * 3
go = threading.Barrier(3)
piece = b"%x\r\n" % 65536 + b"z" * 65536 + b"\r\n"


def one(k):
    s = connect(GWS[k], 20)
    go.wait()
    s.sendall(b"POST http://api.test:%d/upload HTTP/1.1\r\nHost: api.test"
              b"\r\nTransfer-Encoding: chunked\r\n" % op + auth("up") +
              b"\r\n")
    def send():
        try:
            for _ in range(16):
                s.sendall(piece)
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass
    th = threading.Thread(target=send, daemon=True)
    th.start()
    try:
        st[k] = read_response(Reader(s)).status
    except (itlib.Closed, OSError, ValueError):
        st[k] = "closed"
    s.close()


th = [threading.Thread(target=one, args=(k,)) for k in range(3)]
for x in th:
    x.start()
for x in th:
    x.join()
t.ok(settled("up", 3) and int(rcli("GET", "airlock:{up}:gto") or 0) == 0,
     "the three audited, no grant left held")
out = counter("up", "out")
t.ok(out <= MiB, "shared bytes out %d <= cap %d" % (out, MiB))
t.ok(out >= MiB - CHUNK, "shared bytes out %d: not cut well under" % out)
t.ok(st.count(402) >= 2, "uploads refused mid-way: %r" % st)
s = connect(GWS[0], 20)
s.sendall(b"POST http://api.test:%d/upload HTTP/1.1\r\nHost: api.test\r\n"
          b"Content-Length: %d\r\n" % (op, 8 * MiB) + auth("up") + b"\r\n")
r = read_response(Reader(s))
t.error(r, 402, "budget_exceeded", "8 MiB declared → 402 at once")
s.close()
# 700 kB through gateway 2, then 500 kB declared on gateway 1 (its own
# count still 0): the fleet's room decides, before any of it goes
body = b"y" * 700000
r = itlib.roundtrip(GWS[1], b"POST http://api.test:%d/upload HTTP/1.1\r\n"
                    b"Host: api.test\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n" % (op, len(body)) +
                    auth("up2") + b"\r\n" + body)
t.ok(r is not None and r.status == 200, "700 kB upload served",
     getattr(r, "status", None))
s = connect(GWS[0], 20)
s.sendall(b"POST http://api.test:%d/upload?late HTTP/1.1\r\nHost: api.test"
          b"\r\nContent-Length: 500000\r\n" % op + auth("up2") + b"\r\n")
r = read_response(Reader(s))
t.error(r, 402, "budget_exceeded", "500 kB declared over the fleet's room")
t.ok(r is not None and "(shared)" in r.json().get("reason", ""),
     "refused by the shared window", r.json() if r else None)
s.close()
time.sleep(0.3)
t.ok(not any(b"/upload?late" in x for x in itlib.origin_records(
     T + "/origin.log")), "never forwarded")
t.ok(int(rcli("GET", "airlock:{up2}:gto") or 0) == 0 and
     int(rcli("ZCARD", "airlock:{up2}:res") or 0) == 0,
     "its grant and reservation given back")
t.done()
PY
ok "three concurrent uploads over three gateways keep bytes_out 1 MiB"

# --- kill -9 of gateway 3 holding a grant: counted as moved at its lease
GW_PID_3=$GW_PID_3 PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' ||
from common import *
import signal
s = connect(GWS[2], 20)
s.sendall(get("kg", "/chunked/%d" % (16 * MiB)))
s.recv(1000)		# then stalled: the gateway fills the socket and waits
held, last = -1, -2
for _ in range(50):
    time.sleep(0.2)
    last, held = held, int(rcli("GET", "airlock:{kg}:gti") or 0)
    if held == last and held > 0:
        break
t.ok(held > 0 and held == last, "a stalled stream holds a grant (%d)" % held)
os.kill(int(os.environ["GW_PID_3"]), signal.SIGKILL)
t.ok(counter("kg") == 0, "nothing settled at the kill")
time.sleep(3.5)		# past store_lease
r = itlib.roundtrip(GWS[0], get("kg", "/size/10"))
t.ok(r is not None and r.status == 200, "the sandbox is served elsewhere")
time.sleep(0.3)
t.ok(int(rcli("GET", "airlock:{kg}:gti") or 0) == 0, "the grant released")
t.ok(counter("kg") >= held, "counted as moved: in %d >= the grant %d" %
     (counter("kg"), held))
s.close()
t.done()
PY
    check_fail "a dead gateway's grant"
wait "$GW_PID_3" 2>/dev/null
untrack_pid "$GW_PID_3"
ok "a dead gateway's grant counts as moved once its lease ends"

# --- Redis killed mid-download: fail closed once the grant is used
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "redis away"
from common import *
SIZE = 8000000
s = connect(GWS[0], 20)
s.sendall(get("ra", "/chunked/%d" % SIZE))


def kill():
    subprocess.call(["redis-cli", "-p", os.environ["REDIS_PORT"],
                     "SHUTDOWN", "NOSAVE"], stderr=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL)
    time.sleep(0.3)


data = drain(s, 20, (100000, kill))
s.close()
t.ok(data.startswith(b"HTTP/1.1 200"), "the download began")
t.ok(len(data) < SIZE, "cut: %d of %d bytes" % (len(data), SIZE))
t.ok(not data.endswith(b"0\r\n\r\n"), "no last chunk")
a = itlib.audit_wait(T + "/audit1.jsonl",
                     lambda x: x.get("sandbox") == "ra", 10)
t.ok(a is not None and str(a.get("reason", "")).startswith(
     "budget_unavailable"), "audited budget_unavailable: %r" %
     (a.get("reason") if a else None))
r = itlib.roundtrip(GWS[1], get("ra", "/size/10"))
t.error(r, 503, "budget_unavailable", "a new request while Redis is away")
t.done()
PY
ok "Redis away mid-stream: cut, budget_unavailable"

stop_gateways 1 2
finish
