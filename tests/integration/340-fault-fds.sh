#!/bin/sh
# Fault suite, file descriptors: airlockd runs with RLIMIT_NOFILE a few
# descriptors above what it uses idle (set on the running process), and a
# flood of idle clients takes the rest. Then accept() fails with EMFILE:
# the daemon neither spins (CPU time while exhausted is measured) nor
# crashes; waiting clients get 503 overloaded with the JSON error, audited;
# a client already connected is still served over its pooled upstream
# connection, and one whose request needs a new upstream socket gets 503
# overloaded (audited) instead of a 502. Once the flood goes away, new
# clients are served again without a restart. The admin API, asked while
# exhausted, pauses too (within the same CPU budget) and answers afterwards.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
start_origin origin2
ORIGIN2_PORT=$ORIGIN_PORT
ORIGIN_PORT=$(cat "$T/origin.port")
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT ORIGIN2_PORT T

{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits:
  header_timeout: 20s
  idle_timeout: 30s
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
      - {host: "other.test", ports: [$ORIGIN2_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
export AIRLOCK_PID

"$PYTHON" - <<'PY' || fail "fd exhaustion checks"
import os, resource, socket, time, itlib, faultlib
from itlib import req, connect, Reader, read_response
from faultlib import slurp, parse, json_body
ap, op, op2 = (itlib.env_int(k) for k in ("AIRLOCK_PORT", "ORIGIN_PORT",
                                          "ORIGIN2_PORT"))
pid = itlib.env_int("AIRLOCK_PID")
T = os.environ["T"]
AUDIT = T + "/audit.jsonl"
U = "http://api.test:%d" % op
t = itlib.Checks()
# our own side holds the flood: make room for it
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)),
                                             hard))

def cpu_s():
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")

def fresh(url=U + "/size/10", wait=5):
    """One request on a new connection: (parsed, how)."""
    s = socket.create_connection(("127.0.0.1", ap), timeout=wait)
    try:
        s.sendall(req("GET", url, headers=["Connection: close"]))
    except OSError:
        pass
    got, how, _ = slurp(s, wait)
    s.close()
    return parse(got), how

def keep(url):
    """A kept connection after one answered request."""
    s = connect(ap)
    rd = Reader(s)
    s.sendall(req("GET", url))
    return s, rd, read_response(rd)

def again(k, url):
    k[0].sendall(req("GET", url))
    return read_response(k[1])

# a client connected before the trouble, its upstream connection pooled
e1 = keep(U + "/size/5")
t.ok(e1[2].status == 200, "kept client served before the limit")
time.sleep(0.3)
base = faultlib.fd_count(pid)
LIMIT = base + 12
resource.prlimit(pid, resource.RLIMIT_NOFILE, (LIMIT, hard))
print("# airlockd: %d descriptors open, RLIMIT_NOFILE now %d" % (base, LIMIT))

# the flood: idle connections until airlockd has no descriptor left
flood = []
for i in range(60):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", ap))
    except BlockingIOError:
        pass
    flood.append(s)
exhausted = faultlib.wait_for(
    lambda: faultlib.fd_count(pid) >= LIMIT - 1, 10)
t.ok(exhausted, "the flood takes every descriptor (%d open, limit %d)"
     % (faultlib.fd_count(pid), LIMIT))

# the admin API is asked too, while it cannot accept
adm = socket.socket(socket.AF_UNIX)
adm.settimeout(15)
adm.connect(T + "/state/admin.sock")
adm.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")

# no busy loop on EMFILE: CPU time over two seconds of exhaustion
c0, w0 = cpu_s(), time.time()
time.sleep(2)
cpu = (cpu_s() - c0) / (time.time() - w0)
t.ok(cpu < 0.3, "no busy loop while accept() fails (%.0f%% of a core)"
     % (cpu * 100))

# the flood's waiting connections get 503 overloaded, one at a time
got503 = []
for s in flood:
    try:
        d = s.recv(4096)
    except (BlockingIOError, OSError):
        continue
    if d:
        got503.append(d)
t.ok(len(got503) >= 1, "waiting clients answered (%d of %d so far)"
     % (len(got503), len(flood)))
p = parse(got503[0] if got503 else b"")
j = json_body(p)
rid = p["headers"].get("x-airlock-request-id")
t.ok(p["status"] == 503 and j is not None and j.get("error") ==
     "overloaded" and j.get("request_id") == rid,
     "their answer: 503 overloaded with the JSON error", repr(p)[:300])
rec = itlib.audit_wait(AUDIT, lambda r: r.get("id") == rid, 10) \
    if rid else None
t.ok(rec is not None and rec.get("status") == 503 and
     "descriptor" in (rec.get("reason") or ""),
     "the 503 is audited with its reason", repr(rec))

# a new client now: a clean 503 or a wait, never a crash or a 502
p, how = fresh(wait=3)
t.ok(p["status"] in (None, 503) and (p["status"] is None or
     (json_body(p) or {}).get("error") == "overloaded"),
     "new client while exhausted: 503 overloaded or kept waiting",
     "%r %s" % (p["status"], how))

# the client connected before keeps being served (pooled upstream)
try:
    r = again(e1, U + "/size/7")
    t.ok(r.status == 200 and len(r.body) == 7,
         "kept client still served over its pooled upstream", repr(r))
except Exception as e:
    t.ok(False, "kept client still served over its pooled upstream", repr(e))

# ... and a request needing a new upstream socket gets 503, audited
try:
    r = again(e1, "http://other.test:%d/size/3" % op2)
    why = itlib.check_error(r, 503, "overloaded")
    rid = r.header("X-Airlock-Request-Id")
    rec = itlib.audit_wait(AUDIT, lambda x: x.get("id") == rid, 10)
    t.ok(why is None, "no socket for the upstream: 503 overloaded", why)
    t.ok(rec is not None and rec.get("status") == 503 and
         "descriptor" in (rec.get("reason") or "") and
         rec.get("host") == "other.test",
         "the upstream 503 is audited with its reason", repr(rec))
except Exception as e:
    t.ok(False, "no socket for the upstream: 503 overloaded", repr(e))
t.ok(faultlib.fd_count(pid) > 0, "airlockd alive while exhausted")

# the flood leaves: everything works again, no restart (airlockd first
# accepts and closes what the flood left in its accept queues)
for s in flood:
    s.close()
t.ok(faultlib.wait_for(lambda: faultlib.accept_queue(ap) == 0 and
                       faultlib.fd_count(pid) <= base + 2, 15, 0.1),
     "the flood's descriptors released (%d open, %d before the flood; %d "
     "waiting to be accepted)" % (faultlib.fd_count(pid), base,
                                  faultlib.accept_queue(ap)))
def served():
    p, how = fresh(wait=3)
    return p["status"] == 200 and p["complete"]
ok = faultlib.wait_for(served, 10, 0.2)
t.ok(ok, "served again once descriptors are free")
try:
    r = again(e1, "http://other.test:%d/size/3" % op2)
    t.ok(r.status == 200 and r.body == b"abc",
         "a new upstream connection works again", repr(r))
except Exception as e:
    t.ok(False, "a new upstream connection works again", repr(e))
e1[0].close()
got, how, _ = slurp(adm, 10)
adm.close()
p = parse(got)
t.ok(p["status"] == 200 and b"ok" in p["body"],
     "the admin API, asked while exhausted, answers afterwards",
     "%r %s" % (got[:200], how))
fresh_ok = sum(1 for i in range(20) if fresh()[0]["status"] == 200)
t.ok(fresh_ok == 20, "20 new clients in a row served (%d)" % fresh_ok)
with open(T + "/airlockd.log") as f:
    log = f.read()
import re
t.ok(re.search(r"worker \d: accept: Too many open files: new connections "
               r"get 503", log) and
     re.search(r"worker \d: accepting connections again", log),
     "the log says when accepting stopped, and when it resumed")
resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
t.done()
PY
stop_airlockd
