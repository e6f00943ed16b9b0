#!/bin/sh
# limits.max_connections and max_connections_per_sandbox: past them the
# gateway answers 503 overloaded (JSON) instead of serving; the slots come
# back when connections close.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits: {max_connections: 4, max_connections_per_sandbox: 2}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: local, policy: p}
  - {id: s2, policy: p, token: "literal:s2-token"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "limit checks"
import socket, time, itlib
from itlib import req, connect, Reader, read_response
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
t = itlib.Checks()
U = "http://api.test:%d" % op

def open_kept(auth=None):
    """A connection that made one request and stays open."""
    s = connect(ap)
    rd = Reader(s)
    s.sendall(req("GET", U + "/size/1", auth=auth))
    r = read_response(rd)
    return s, rd, r

def answer(auth=None):
    """Status of one request on a fresh connection, or None if refused."""
    try:
        s = connect(ap, 5)
        s.sendall(req("GET", U + "/size/2", auth=auth))
        r = read_response(Reader(s))
        s.close()
        return r
    except (OSError, itlib.Closed):
        return None

# per sandbox: two kept connections of "local", the third is refused
k1 = open_kept()
k2 = open_kept()
t.ok(k1[2].status == 200 and k2[2].status == 200, "two connections served")
r = answer()
if r is not None:
    t.error(r, 503, "overloaded", "third connection of one sandbox → 503")
else:
    t.ok(False, "third connection of one sandbox → 503", "closed without answer")
# another sandbox is not affected
r = answer("s2:s2-token")
t.ok(r is not None and r.status == 200, "another sandbox still served",
     repr(r))
# the slot comes back
k1[0].close()
time.sleep(0.3)
r = answer()
t.ok(r is not None and r.status == 200, "slot freed after a close", repr(r))

# global: four connections in all
k3 = open_kept("s2:s2-token")
k4 = open_kept("s2:s2-token")
t.ok(k3[2].status == 200 and k4[2].status == 200,
     "connections up to max_connections")
# 3 open now (k2, k3, k4); one more is fine, then the gateway is full
k5 = connect(ap)
time.sleep(0.2)
r = answer("s2:s2-token")
t.ok(r is None or itlib.check_error(r, 503, "overloaded") is None,
     "past max_connections: refused or 503 overloaded", repr(r))
for k in (k2, k3, k4):
    k[0].close()
k5.close()
time.sleep(0.3)
r = answer()
t.ok(r is not None and r.status == 200, "served again once below the limit",
     repr(r))
t.done()
PY
stop_airlockd
