#!/bin/sh
# Fault suite, an idle flood: 10,000 client connections that never send a
# byte. airlockd accepts them all (max_connections is 20,000), its
# resident memory grows by less than 200 MiB (VmRSS before and after,
# in the sanitizer build too), a normal request is served while they are held, and when they go away
# every descriptor is released.
. "$top_srcdir/tests/integration/lib.sh"

N=10000
# both airlockd and the client hold N descriptors
ulimit -n 12000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((N + 500)) ] ||
    skip "RLIMIT_NOFILE $(ulimit -n) is below $((N + 500)) and cannot be raised"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T N

{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits:
  header_timeout: 120s
  idle_timeout: 120s
  # every connection comes from 127.0.0.1 and never identifies: lift the
  # unidentified-connection bounds (416-fair-slots tests those)
  unidentified_per_source: 20000
  unidentified_share: 100%
  identify_timeout: 120s
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
MAX_MIB=200	# also under ASan (about +106 MiB there, +83 MiB in release)
export AIRLOCK_PID MAX_MIB

"$PYTHON" - <<'PY' || fail "idle flood checks"
import os, selectors, socket, time, itlib, faultlib
from itlib import req
ap, op, n = (itlib.env_int(k) for k in ("AIRLOCK_PORT", "ORIGIN_PORT", "N"))
pid = itlib.env_int("AIRLOCK_PID")
max_mib = itlib.env_int("MAX_MIB")
t = itlib.Checks()
U = "http://api.test:%d/size/10" % op

def get():
    t0 = time.time()
    r = itlib.roundtrip(ap, req("GET", U, headers=["Connection: close"]))
    return r, time.time() - t0

for i in range(20):
    r, _ = get()
t.ok(r is not None and r.status == 200, "served before the flood")
time.sleep(0.5)
fd0 = faultlib.fd_count(pid)
rss0 = faultlib.status_kb(pid, "VmRSS")

conns = []
t0 = time.time()
try:
    for i in range(n):
        s = socket.socket()
        s.settimeout(10)
        s.connect(("127.0.0.1", ap))
        conns.append(s)
except OSError as e:
    t.ok(False, "opened %d connections" % n, "after %d: %r" % (len(conns), e))
opened = time.time() - t0
held = faultlib.wait_for(lambda: faultlib.fd_count(pid) >= fd0 + n, 30, 0.2)
t.ok(held, "airlockd holds all %d (%d descriptors, %d before; opened in "
     "%.1f s)" % (n, faultlib.fd_count(pid), fd0, opened))
time.sleep(0.5)
rss1 = faultlib.status_kb(pid, "VmRSS")
grow = (rss1 - rss0) / 1024.0
print("# VmRSS %.1f MiB before, %.1f MiB with %d idle connections: "
      "+%.1f MiB, %.1f KiB each" % (rss0 / 1024.0, rss1 / 1024.0, n, grow,
                                    (rss1 - rss0) / float(n)))
t.ok(grow < max_mib, "memory for %d idle connections: +%.1f MiB < %d MiB"
     % (n, grow, max_mib))
r, el = get()
t.ok(r is not None and r.status == 200 and len(r.body) == 10,
     "a normal request served among them (%.1f ms)" % (el * 1000), repr(r))
sel = selectors.DefaultSelector()
for s in conns:
    sel.register(s, selectors.EVENT_READ)
ended = len(sel.select(0.2))
sel.close()
t.ok(ended == 0, "none of them was answered or closed (%d were)" % ended)
for s in conns:
    s.close()
back = faultlib.wait_for(lambda: faultlib.fd_count(pid) <= fd0, 30, 0.2)
t.ok(back, "all released when they go (%d descriptors, %d before)"
     % (faultlib.fd_count(pid), fd0))
r, _ = get()
t.ok(r is not None and r.status == 200, "served after the flood")
t.done()
PY
stop_airlockd
