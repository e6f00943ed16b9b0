#!/bin/sh
# The gateway is never its own destination (issue 14 point 12): with
# allow_networks opening 127.0.0.1, a request to the proxy, transparent,
# DNS or admin listen address (IP:port, by name or literal, IPv4-mapped,
# CONNECT or absolute URI) is 403 denied with a reason naming the
# gateway's own listener, audited, and nothing is connected; a wildcard
# listen (0.0.0.0:P) covers every local address on P. Other ports of the
# same address stay reachable.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
ADMIN_PORT=$(free_port)
TRANS_PORT=$(free_port)
DNS_PORT=$(free_port)
WILD_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT ADMIN_PORT TRANS_PORT DNS_PORT WILD_PORT T
cat >"$T/airlock.yaml" <<YAML
listen:
  proxy: ["127.0.0.1:$AIRLOCK_PORT", "0.0.0.0:$WILD_PORT"]
  admin: "127.0.0.1:$ADMIN_PORT"
  transparent: "127.0.0.1:$TRANS_PORT"
  dns: "127.0.0.1:$DNS_PORT"
  default_sandbox: local
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
upstream:
  allow_networks: ["127.0.0.0/8", "0.0.0.0/32"]
  hosts: {"api.test": "127.0.0.1", "gw.test": "127.0.0.1",
          "other.test": "127.0.0.2"}
policies:
  - name: p
    rules:
      - {host: "*", ports: [$ORIGIN_PORT, $AIRLOCK_PORT, $ADMIN_PORT,
                            $TRANS_PORT, $DNS_PORT, $WILD_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "self-destination checks"
import os, socket, time, itlib, tlslib
from itlib import req, roundtrip, connect, Reader, read_response
ap = itlib.env_int("AIRLOCK_PORT")
op = itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
t = itlib.Checks()
ports = {"proxy": ap, "admin": itlib.env_int("ADMIN_PORT"),
         "transparent": itlib.env_int("TRANS_PORT"),
         "DNS": itlib.env_int("DNS_PORT")}
wild = itlib.env_int("WILD_PORT")
ctx = tlslib.context(T + "/state/ca/local/ca.crt")

def denied_self(r, what, label):
    if not t.error(r, 403, "denied", label + ": 403 denied"):
        return
    j = r.json()
    t.ok("gateway's own %s listener" % what in j["reason"],
         label + ": the reason says it is the gateway itself", j["reason"])
    a = itlib.audit_wait(T + "/audit.jsonl",
                         lambda x: x.get("id") == j["request_id"])
    t.ok(a is not None and a.get("decision") == "deny" and
         a.get("status") == 403 and
         "gateway's own" in (a.get("reason") or "") and
         not a.get("upstream"),
         label + ": audited as a denial, no upstream", repr(a))

before = len(itlib.origin_records(T + "/origin.log"))
for what, port in sorted(ports.items()):
    for host in ("127.0.0.1", "gw.test", "[::ffff:127.0.0.1]"):
        url = "http://%s:%d/" % (host, port)
        denied_self(roundtrip(ap, req("GET", url)), what, "GET " + url)
    # CONNECT to the same address: refused on the CONNECT, or (an
    # intercepted name) inside the TLS session
    target = "gw.test:%d" % port
    c, err, _ = tlslib.TLSConn.attempt(ap, target, ctx, "gw.test")
    if isinstance(err, tlslib.ProxyRefused):
        denied_self(err.resp, what, "CONNECT " + target)
    elif c is None:
        t.ok(False, "CONNECT %s: TLS inside" % target, repr(err))
    else:
        denied_self(c.get("/"), what, "CONNECT %s, GET inside" % target)
        c.close()

# a wildcard listener: every local address on its port
for host in ("127.0.0.1", "127.0.0.2", "127.9.9.9", "0.0.0.0"):
    url = "http://%s:%d/" % (host, wild)
    denied_self(roundtrip(ap, req("GET", url)), "proxy", "GET " + url)
# 0.0.0.0 as a destination reaches this host: denied for a specific
# listener too
denied_self(roundtrip(ap, req("GET", "http://0.0.0.0:%d/" % ap)), "proxy",
            "GET http://0.0.0.0:<proxy port>/")

# the admin API was not reached through the proxy: its /healthz would
# have answered 200 {"status":"ok"}
r = roundtrip(ap, req("GET", "http://127.0.0.1:%d/healthz" %
                      ports["admin"]))
t.ok(r is not None and r.status == 403 and b'"ok"' not in r.body,
     "admin /healthz not reachable through the proxy", repr(r and r.body))

# other ports of the same address are still upstreams
r = roundtrip(ap, req("GET", "http://127.0.0.1:%d/echo" % op))
t.ok(r is not None and r.status == 200, "the origin on 127.0.0.1 still "
     "reachable", repr(r and (r.status, r.body[:100])))
r = roundtrip(ap, req("GET", "http://api.test:%d/echo" % op))
t.ok(r is not None and r.status == 200, "the origin by name still "
     "reachable", repr(r and r.status))
t.done()
PY
stop_airlockd
