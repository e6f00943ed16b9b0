#!/bin/sh
# Fair slots (issue 14 point 9): a connection counts against its sandbox
# only once a head identified it, so before that it is bounded per source
# address (limits.unidentified_per_source) and gateway-wide
# (limits.unidentified_share of max_connections), and must identify within
# limits.identify_timeout. One source holding many unfinished heads gets
# 503 overloaded (JSON, audited) past its share and 408 when its time is
# up, while a client from another source address is served all along.
# Before, the hog took every max_connections slot and the other got 503.
. "$top_srcdir/tests/integration/lib.sh"

"$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0))' \
    2>/dev/null || skip "cannot bind 127.0.0.2"
start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits:
  max_connections: 20
  max_connections_per_sandbox: 10
  unidentified_per_source: 8
  unidentified_share: 50%
  identify_timeout: 3s
  header_timeout: 30s
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: hog, policy: p, token: "literal:hog-token"}
  - {id: good, policy: p, token: "literal:good-token"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "fair slot checks"
import os, socket, time, itlib
from itlib import req, Reader, read_response
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
t = itlib.Checks()
U = "http://api.test:%d" % op
PARTIAL = b"GET " + U.encode() + b"/size/1 HTTP/1.1\r\nHost: api.test\r\n"

def conn_from(src, timeout=10.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", ap))
    return s

def answer_now(s, wait=1.0):
    """The response already sent on <s> (None: nothing within <wait>)."""
    s.settimeout(wait)
    try:
        return read_response(Reader(s))
    except (socket.timeout, itlib.Closed, OSError):
        return None

def served_from(src, auth):
    try:
        s = conn_from(src)
        s.sendall(req("GET", U + "/size/2", auth=auth))
        r = read_response(Reader(s))
        s.close()
        return r
    except (OSError, itlib.Closed) as e:
        return e

# --- the hog: 30 unfinished heads from 127.0.0.1
held, refused = [], []
for i in range(30):
    s = conn_from("127.0.0.1")
    s.sendall(PARTIAL)
    r = answer_now(s, 0.3)
    if r is None:
        held.append(s)
    else:
        refused.append(r)
        s.close()
t.ok(len(held) == 8, "the hog holds unidentified_per_source (8) "
     "connections", "held %d" % len(held))
t.ok(len(refused) == 22 and all(itlib.check_error(r, 503, "overloaded")
                                is None for r in refused),
     "the hog's other 22 connections: 503 overloaded (JSON)",
     repr([(r.status, r.body[:120]) for r in refused[:2]]))
t.ok(refused and b"unidentified_per_source" in refused[0].body,
     "the reason names limits.unidentified_per_source",
     repr(refused and refused[0].body))
rid = refused and refused[0].json()["request_id"]
a = itlib.audit_wait(T + "/audit.jsonl", lambda r: r.get("id") == rid)
t.ok(a is not None and a.get("status") == 503 and
     "not identified yet" in a.get("reason", ""),
     "the refusal is audited", repr(a))

# --- another client, another source address: served while the hog holds
r = served_from("127.0.0.2", "good:good-token")
t.ok(isinstance(r, itlib.Response) and r.status == 200,
     "a client from 127.0.0.2 is served while the hog holds its slots",
     repr(r))
a = itlib.audit_wait(T + "/audit.jsonl", lambda x: x.get("sandbox") == "good"
                     and x.get("status") == 200)
t.ok(a is not None, "its request is audited as sandbox good", repr(a))

# --- a second source fills the gateway-wide share (50% of 20 = 10)
held2, refused2 = [], []
for i in range(6):
    s = conn_from("127.0.0.3")
    s.sendall(PARTIAL)
    r = answer_now(s, 0.3)
    if r is None:
        held2.append(s)
    else:
        refused2.append(r)
        s.close()
t.ok(len(held2) == 2 and len(refused2) == 4 and
     all(itlib.check_error(r, 503, "overloaded") is None and
         b"unidentified_share" in r.body for r in refused2),
     "past the share of max_connections: 503 overloaded naming "
     "limits.unidentified_share", "held %d, %r" % (
         len(held2), [(r.status, r.body[:100]) for r in refused2[:1]]))
# identified connections are not in the share: a kept connection of good
# opened before keeps working
# --- identify_timeout: the unfinished heads are answered 408 and closed
t0 = time.time()
answers = []
for s in held + held2:
    r = answer_now(s, 12.0)
    answers.append(r)
    s.close()
el = time.time() - t0
t.ok(all(r is not None and itlib.check_error(r, 408, "request_timeout")
         is None for r in answers),
     "every unfinished head got 408 within identify_timeout",
     repr([r and r.status for r in answers]))
t.ok(el < 10, "they were cut by identify_timeout (3s), not header_timeout "
     "(30s)", "%.1fs" % el)
ids = set(r.json()["request_id"] for r in answers if r is not None and
          r.status == 408)
time.sleep(0.5)
a408 = [r for r in itlib.audit_records(T + "/audit.jsonl")
        if r.get("id") in ids]
t.ok(len(ids) == 10 and len(a408) == 10 and
     all(r.get("status") == 408 and r.get("decision") == "deny"
         for r in a408), "each 408 is audited (%d)" % len(a408),
     repr(a408[:1]))
# the slots came back
time.sleep(0.3)
for src in ("127.0.0.1", "127.0.0.3"):
    r = served_from(src, "hog:hog-token")
    t.ok(isinstance(r, itlib.Response) and r.status == 200,
         "%s served again once its slots are free" % src, repr(r))
t.done()
PY
stop_airlockd
