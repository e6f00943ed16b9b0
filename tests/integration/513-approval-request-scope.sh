#!/bin/sh
# Approval holds, the gaps of issue 21.1: an approval kept to the held
# request (airlockctl approve ID --scope sandbox --match request) leaves a
# runtime rule for that method and exact path only: the same request
# passes without a hold, another path or method of the host is held again;
# the rule says so in `rules` and survives a restart. A client that leaves
# while held is noticed at once: its pending entry goes away long before
# ask.timeout and its audit record says it left; the origin never sees it.
. "$top_srcdir/tests/integration/lib.sh"

CTL=$top_builddir/src/airlockctl
[ -x "$CTL" ] || hard_error "$CTL not built"
start_origin
AIRLOCK_PORT=$(free_port)
cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
ask: {timeout: 20s}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: gate
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], action: ask}
sandboxes:
  - {id: a, policy: gate, token: "literal:tok-a"}
YAML
start_airlockd "$T/airlock.yaml"
wait_admin
export AIRLOCK_PORT ORIGIN_PORT CTL T

phase()
{
	PYTHONPATH=$top_srcdir/tests/integration "$PYTHON" - "$1" <<'PY'
import json, os, socket, subprocess, sys, threading, time
import itlib

phase = sys.argv[1]
P = int(os.environ["AIRLOCK_PORT"]); O = int(os.environ["ORIGIN_PORT"])
T = os.environ["T"]; CTL = os.environ["CTL"]
ck = itlib.Checks()

def ctl(*args):
    p = subprocess.run([CTL, "-c", T + "/airlock.yaml"] + list(args),
                       capture_output=True, text=True, timeout=30)
    if "runtime error:" in p.stderr or "Sanitizer" in p.stderr:
        ck.ok(False, "airlockctl sanitizer report", p.stderr[:300])
    return p

def pending():
    p = ctl("--json", "pending")
    return json.loads(p.stdout)["pending"] if p.returncode == 0 else None

def origin_paths():
    try:
        return [l.split()[1] for l in open(T + "/origin.log")
                if l.startswith(("GET ", "POST "))]
    except FileNotFoundError:
        return []

class Req(threading.Thread):
    def __init__(self, method, path):
        super().__init__(daemon=True)
        self.data = itlib.req(method, "http://api.test:%d%s" % (O, path),
                              auth="a:tok-a")
        self.method = method
        self.r = None
        self.start()
    def run(self):
        self.r = itlib.roundtrip(P, self.data, timeout=25, method=self.method)
    def result(self):
        self.join(30)
        return self.r

def wait_pending(pred, what, limit=5.0):
    end = time.time() + limit
    while time.time() < end:
        pl = pending() or []
        m = [e for e in pl if pred(e)]
        if m:
            return m
        time.sleep(0.05)
    ck.ok(False, "held: " + what, str(pending()))
    return []

def still_held(path, secs=0.6):
    time.sleep(secs)
    return any(e["path"] == path for e in pending() or [])

if phase == "live":
    q = Req("GET", "/v1/items")
    e = wait_pending(lambda e: e["path"] == "/v1/items", "first request")
    if e:
        p = ctl("approve", e[0]["id"], "--scope", "sandbox",
                "--match", "request")
        ck.ok(p.returncode == 0 and "rule" in p.stdout,
              "approve --match request", p.stdout + p.stderr)
    r = q.result()
    ck.ok(r is not None and r.header("Server") == "airlock-origin", "approved request completes (the origin answers)", repr(r))
    rules = json.loads(ctl("--json", "rules").stdout)["rules"]
    ck.ok(len(rules) == 1 and rules[0].get("match") == "request" and
          rules[0].get("method") == "GET" and
          rules[0].get("path") == "/v1/items", "rule kept to the request",
          str(rules))
    p = ctl("rules")
    ck.ok("GET /v1/items" in p.stdout, "rules lists method and path",
          p.stdout)
    p = ctl("approve", "1", "--match", "everything")
    ck.ok(p.returncode != 0, "--match checked")

if phase in ("live", "kept"):
    # the same request: no hold
    r = itlib.roundtrip(P, itlib.req("GET", "http://api.test:%d/v1/items" % O,
                                     auth="a:tok-a"), timeout=10)
    ck.ok(r is not None and r.header("Server") == "airlock-origin", phase + ": same request passes", repr(r))
    # another path, another method: held again (denied here)
    for m, path in (("GET", "/v1/other"), ("POST", "/v1/items")):
        q = Req(m, path)
        e = wait_pending(lambda e: e["path"] == path and e["method"] == m,
                         phase + ": %s %s held" % (m, path))
        if e:
            ctl("deny", e[0]["id"])
        ck.error(q.result(), 403, "approval_denied",
                 phase + ": %s %s asks again" % (m, path))

if phase == "live":
    # a client that leaves while held: noticed at once
    s = socket.create_connection(("127.0.0.1", P))
    s.sendall(itlib.req("GET", "http://api.test:%d/v1/gone" % O,
                        auth="a:tok-a"))
    e = wait_pending(lambda e: e["path"] == "/v1/gone", "leaving client")
    t0 = time.time()
    s.close()
    gone = False
    while time.time() - t0 < 3:
        if not any(x["path"] == "/v1/gone" for x in pending() or []):
            gone = True
            break
        time.sleep(0.05)
    ck.ok(gone, "the hold of a client that left is gone within 3 s "
          "(ask.timeout 20 s)", str(pending()))
    rec = itlib.audit_wait(T + "/audit.jsonl",
                           lambda r: r.get("path") == "/v1/gone", 5)
    ck.ok(rec is not None and "client left while held" in
          rec.get("reason", ""), "audit: the client left", str(rec))
    ck.ok("/v1/gone" not in origin_paths(), "origin never saw it")
    ck.ok(origin_paths().count("/v1/items") == 2, "origin saw the approved "
          "request and its repeat once each", str(origin_paths()))
ck.done()
PY
}

phase live || check_fail "live checks"
stop_airlockd
start_airlockd "$T/airlock.yaml"
wait_admin
phase kept || check_fail "after restart"
stop_airlockd
finish
