#!/bin/sh
# Fault suite, upstream side: an upstream (fault_upstream.py) that stalls
# before its head (→ 504 upstream_timeout) or mid-body, resets before its
# head (→ 502) or mid-body, sends a truncated chunked body or a body
# shorter than its Content-Length and closes, or answers garbage (→ 502).
# Over plain HTTP and over intercepted HTTPS, what the client sees is
# clean: the SPEC's status and JSON error while no response head went out;
# once it did, the connection is cut so that the message is visibly
# incomplete (never a body that looks complete); HTTP/1.0 clients, whose
# body ends at the close, see a reset instead of a FIN. Each case leaves
# one audit record with its status and reason, and the gateway keeps
# serving (a good request after each fault, and the upstream's open
# connections all gone at the end).
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"

start_py_upstream plain fault_upstream.py
PLAIN_PORT=$PY_PORT
start_py_upstream tls fault_upstream.py -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT PLAIN_PORT TLS_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits:
  upstream_timeout: 1s
  idle_timeout: 2s
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$PLAIN_PORT, $TLS_PORT]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
export AIRLOCK_PID

"$PYTHON" - <<'PY' || fail "upstream fault checks"
import os, socket, time, itlib, tlslib, faultlib
from faultlib import slurp, parse, json_body
ap, pp, tp = (itlib.env_int(k) for k in ("AIRLOCK_PORT", "PLAIN_PORT",
                                         "TLS_PORT"))
pid = itlib.env_int("AIRLOCK_PID")
T = os.environ["T"]
AUDIT = T + "/audit.jsonl"
AUTH = "a:tok-a"
t = itlib.Checks()
ctx = tlslib.context(T + "/state/ca/a/ca.crt")
FD0 = faultlib.fd_count(pid)

# (path, before the head: (status, code) | after it: None, reason words)
CASES = [
    ("/stall-head", (504, "upstream_timeout"), "did not answer"),
    ("/reset-head", (502, "upstream_unreachable"), "before answering"),
    ("/garbage", (502, "upstream_unreachable"), ""),
    ("/stall-body", None, "stalled"),
    ("/reset-body", None, "mid-response"),
    ("/trunc-chunked", None, "mid-response"),
    ("/short-cl", None, "mid-response"),
]

def fetch(proto, path, version="HTTP/1.1"):
    """(parsed, how, seconds) for one request on a fresh connection."""
    if proto == "http":
        s = itlib.connect(ap)
        s.sendall(itlib.req("GET", "http://api.test:%d%s" % (pp, path),
                            headers=["Connection: close"], auth=AUTH,
                            version=version))
        got, how, el = slurp(s, 10)
        s.close()
    else:
        # a session that ends without close_notify is not taken for EOF
        raw, _ = tlslib.proxy_connect(ap, "api.test:%d" % tp, AUTH)
        c = ctx.wrap_socket(raw, server_hostname="api.test",
                            suppress_ragged_eofs=False)
        c.sendall(b"GET %s %s\r\nHost: api.test:%d\r\n"
                  b"Connection: close\r\n\r\n" % (
                      path.encode(), version.encode(), tp))
        got, how, el = slurp(c, 10)
        c.close()
    return parse(got), how, el

def still_serving(proto, what):
    p, how, _ = fetch(proto, "/ok")
    t.ok(p["status"] == 200 and p["body"] == b"ok" and p["complete"],
         "%s: served after %s" % (proto, what), repr(p)[:200])

for proto in os.environ.get("PROTOS", "http https").split():
    for path, early, words in CASES:
        name = "%s %s" % (proto, path)
        p, how, el = fetch(proto, path)
        rid = p["headers"].get("x-airlock-request-id")
        if early is not None:
            st, code = early
            j = json_body(p)
            t.ok(p["status"] == st and j is not None and
                 j.get("error") == code and j.get("request_id") == rid,
                 "%s: %d %s with the JSON error" % (name, st, code),
                 "%r %r" % (p["status"], p["body"][:200]))
        else:
            t.ok(p["status"] == 200 and rid is not None,
                 "%s: the upstream's head reached the client" % name,
                 repr(p)[:200])
            t.ok(not p["complete"] and how != "timeout",
                 "%s: cut, the message visibly incomplete (%d body bytes, "
                 "%s)" % (name, len(p["body"]), how),
                 "complete=%r how=%r framing=%r" % (p["complete"], how,
                                                    p["framing"]))
        rec = itlib.audit_wait(AUDIT, lambda r: r.get("id") == rid, 10) \
            if rid else None
        want = early[0] if early else 200
        t.ok(rec is not None and rec.get("status") == want and
             words in (rec.get("reason") or "") and
             rec.get("proto") == proto,
             "%s: audited, status %d, reason names it" % (name, want),
             repr(rec))
        still_serving(proto, path)

    # an HTTP/1.0 client reads the body to the close: a cut must not look
    # like the end, so it is a reset (RST or, over TLS, no close_notify)
    p, how, el = fetch(proto, "/chunked-ok", "HTTP/1.0")
    t.ok(p["status"] == 200 and p["framing"] == "eof" and
         len(p["body"]) == 200 and how == "eof",
         "%s, HTTP/1.0 client: a whole chunked body ends in a clean close"
         % proto, "framing=%r %d bytes how=%r" % (p["framing"],
                                                   len(p["body"]), how))
    for path in ("/trunc-chunked", "/reset-body", "/stall-body"):
        p, how, el = fetch(proto, path, "HTTP/1.0")
        t.ok(p["status"] == 200 and (not p["complete"] or how == "reset"),
             "%s %s, HTTP/1.0 client: the cut is no clean end" % (
                 proto, path),
             "framing=%r complete=%r how=%r" % (p["framing"],
                                                 p["complete"], how))

# a stall on a pooled upstream connection is the same stall: the pool's
# own idle timer must not survive into the request (it once did, and cut
# the response as "upstream closed" at idle_timeout)
def keepalive_stall(proto):
    if proto == "http":
        s = itlib.connect(ap)
        send = lambda path, close: s.sendall(itlib.req(
            "GET", "http://api.test:%d%s" % (pp, path), auth=AUTH,
            headers=["Connection: close"] if close else []))
        rd = itlib.Reader(s)
    else:
        c = tlslib.TLSConn(ap, "api.test:%d" % tp, ctx, "api.test", AUTH)
        s, rd = c.tls, c.rd
        send = lambda path, close: s.sendall(
            b"GET %s HTTP/1.1\r\nHost: api.test:%d\r\n%s\r\n" % (
                path.encode(), tp, b"Connection: close\r\n" if close
                else b""))
    # two answers on one client connection: the second request takes the
    # upstream connection the first one left in the pool
    send("/ok", False)
    r = itlib.read_response(rd)
    time.sleep(0.5)
    send("/stall-body", True)
    got, how, el = slurp(s, 10)
    s.close()
    p = parse(rd.buf + got)
    rid = p["headers"].get("x-airlock-request-id")
    rec = itlib.audit_wait(AUDIT, lambda x: x.get("id") == rid, 10) \
        if rid else None
    t.ok(r.status == 200 and p["status"] == 200 and not p["complete"] and
         rec is not None and rec.get("upstream") and
         "stalled" in (rec.get("reason") or "") and el >= 1.8,
         "%s: a stall on a pooled upstream connection is cut at "
         "idle_timeout as a stall (%.1fs)" % (proto, el), repr(rec))
for proto in os.environ.get("PROTOS", "http https").split():
    keepalive_stall(proto)

# the upstream connections of the faults are all gone (pooled ones retire
# after idle_timeout): airlockd is back to the descriptors it had before
# the first request
still_serving("http", "everything")
n = faultlib.wait_for(lambda: faultlib.fd_count(pid) <= FD0, 10)
t.ok(faultlib.fd_count(pid) <= FD0, "no descriptor left behind "
     "(%d open, %d before the first request)" % (faultlib.fd_count(pid), FD0))
t.done()
PY
stop_airlockd
