#!/bin/sh
# Approval holds (action: ask, on_unmatched: ask) with the real daemon and
# airlockctl: a held request reaches nothing until approved, then
# completes and the origin sees it once; deny gives 403 approval_denied,
# silence 403 approval_timeout; the webhook is told (no header value);
# scoped approvals become runtime rules (sandbox, policy) that survive a
# reload and a restart, are listed and revoked; a sandbox's holds are
# bounded (the oldest refused) and count against
# max_connections_per_sandbox.
. "$top_srcdir/tests/integration/lib.sh"

CTL=$top_builddir/src/airlockctl
[ -x "$CTL" ] || hard_error "$CTL not built"
start_origin
AIRLOCK_PORT=$(free_port)
HOOK_PORT=$(free_port)
cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
limits: {max_connections_per_sandbox: 3}
ask: {timeout: 3s, max_pending_per_sandbox: 2,
      webhook: "http://127.0.0.1:$HOOK_PORT/hook"}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "web.test": "127.0.0.1",
          "team.test": "127.0.0.1", "new.test": "127.0.0.1"}
policies:
  - name: gate
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/open/*"]}
      - {host: "api.test", ports: [$ORIGIN_PORT], action: ask}
      - {host: "web.test", ports: [$ORIGIN_PORT], action: ask}
      - {host: "team.test", ports: [$ORIGIN_PORT], action: ask}
  - name: asking
    on_unmatched: ask
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/open/*"]}
sandboxes:
  - {id: a, policy: gate, token: "literal:tok-a"}
  - {id: b, policy: gate, token: "literal:tok-b"}
  - {id: fl, policy: gate, token: "literal:tok-fl"}
  - {id: cl, policy: gate, token: "literal:tok-cl"}
  - {id: u, policy: asking, token: "literal:tok-u"}
YAML
"$AIRLOCKD" -t -c "$T/airlock.yaml" >"$T/t.out" 2>&1 ||
    hard_error "config: $(cat "$T/t.out")"
start_airlockd "$T/airlock.yaml"
wait_admin
export AIRLOCK_PORT ORIGIN_PORT HOOK_PORT CTL T

# phase NAME: the checks of tests/integration/511 below, by name
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

def origin_n():
    try:
        return open(T + "/origin.log").read().count("\n===\n") + \
            open(T + "/origin.log").read().startswith("===\n")
    except FileNotFoundError:
        return 0

class Req(threading.Thread):
    """One request through the proxy, in the background."""
    def __init__(self, sb, url, headers=()):
        super().__init__(daemon=True)
        self.data = itlib.req("GET", url, headers=headers,
                              auth="%s:tok-%s" % (sb, sb))
        self.r = None
        self.t0 = time.time()
        self.start()
    def run(self):
        self.r = itlib.roundtrip(P, self.data, timeout=20)
        self.dt = time.time() - self.t0
    def result(self):
        self.join(25)
        return self.r

def wait_pending(pred, what, limit=5.0):
    end = time.time() + limit
    while time.time() < end:
        pl = pending()
        if pl is not None:
            m = [e for e in pl if pred(e)]
            if m:
                return m
        time.sleep(0.05)
    ck.ok(False, "held: " + what, str(pending()))
    return []

def url(host, path="/x"):
    return "http://%s:%d%s" % (host, O, path)

if phase == "live":
    hooks = []
    hs = socket.socket(); hs.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hs.bind(("127.0.0.1", int(os.environ["HOOK_PORT"]))); hs.listen(16)
    def hook_srv():
        while True:
            c, _ = hs.accept()
            buf = b""
            c.settimeout(3)
            try:
                while b"\r\n\r\n" not in buf:
                    buf += c.recv(4096)
                head, body = buf.split(b"\r\n\r\n", 1)
                n = int([l for l in head.split(b"\r\n")
                         if l.lower().startswith(b"content-length:")][0]
                        .split(b":")[1])
                while len(body) < n:
                    body += c.recv(4096)
                hooks.append((head, json.loads(body)))
                c.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            except Exception as e:
                hooks.append((b"", {"error": str(e)}))
            c.close()
    threading.Thread(target=hook_srv, daemon=True).start()

    # allowed by a plain rule: no hold
    r = itlib.roundtrip(P, itlib.req("GET", url("api.test", "/open/1"), auth="a:tok-a"))
    ck.ok(r is not None and r.status == 404, "allow rule: straight through", repr(r))

    # 1. hold, then approve once: the origin sees it once, after
    n0 = origin_n()
    q = Req("a", url("api.test", "/held?k=v"), ["X-Secret: hdr-value-511"])
    e = wait_pending(lambda e: e["host"] == "api.test" and e["sandbox"] == "a", "api.test")
    time.sleep(0.3)
    ck.ok(origin_n() == n0 and q.r is None, "held: no upstream contact, no answer yet")
    if e:
        ck.ok(e[0]["method"] == "GET" and e[0]["path"] == "/held" and
              e[0]["port"] == O and e[0]["policy"] == "gate" and
              0 < e[0]["expires_in_ms"] <= 3000, "pending entry: method, path (no query), policy, expiry", str(e))
        txt = ctl("pending").stdout
        ck.ok(("%s a GET api.test:%d /held" % (e[0]["id"], O)) in txt,
              "airlockctl pending lists it", txt)
        p = ctl("approve", e[0]["id"])
        ck.ok(p.returncode == 0, "airlockctl approve ID", p.stderr)
    r = q.result()
    ck.ok(r is not None and r.status == 404, "approved once: the request completes", repr(r))
    ck.ok(origin_n() == n0 + 1, "the origin saw it once", str(origin_n() - n0))
    ck.ok(pending() == [], "pending list empty after the decision", str(pending()))
    rec = itlib.audit_wait(T + "/audit.jsonl", lambda x: x.get("path") == "/held")
    ck.ok(rec and rec["decision"] == "allow" and rec["status"] == 404,
          "audit: allowed", str(rec))
    # approved once: the next one is held again
    q = Req("a", url("api.test", "/again"))
    e = wait_pending(lambda e: e["path"] == "/again", "once means once")

    # 2. deny
    if e:
        p = ctl("deny", e[0]["id"])
        ck.ok(p.returncode == 0, "airlockctl deny ID", p.stderr)
    ck.error(q.result(), 403, "approval_denied", "denied: 403 approval_denied")
    p = ctl("deny", e[0]["id"] if e else "1")
    ck.ok(p.returncode == 1, "deciding twice: the gateway refuses", p.stderr)

    # a client that leaves while held: its hold ends by ask.timeout at the
    # latest (the connection is not read while it waits)
    s = itlib.connect(P)
    s.sendall(itlib.req("GET", url("api.test", "/leaver"), auth="a:tok-a"))
    wait_pending(lambda e: e["path"] == "/leaver", "leaver")
    s.close()
    end = time.time() + 6
    while time.time() < end and any(x["path"] == "/leaver" for x in pending() or []):
        time.sleep(0.05)
    ck.ok(not any(x["path"] == "/leaver" for x in pending() or []),
          "client gone: its hold leaves the pending list", str(pending()))

    # 3. timeout (ask.timeout 3s)
    n0 = origin_n()
    q = Req("a", url("web.test", "/slow"))
    r = q.result()
    ck.error(r, 403, "approval_timeout", "no decision: 403 approval_timeout")
    ck.ok(2.5 < q.dt < 6, "timed out after ask.timeout", "%.2fs" % q.dt)
    ck.ok(origin_n() == n0, "timed out: nothing reached the origin")

    # the webhook heard of the holds, without header or query values
    time.sleep(0.3)
    bodies = [b for _, b in hooks]
    ck.ok(any(b.get("host") == "api.test" and b.get("sandbox") == "a" and
              b.get("method") == "GET" and b.get("path") == "/held" and
              b.get("request_id") for b in bodies), "webhook: the hold posted", str(bodies))
    ck.ok(all(b"hdr-value-511" not in h and "hdr-value-511" not in json.dumps(b)
              and "k=v" not in json.dumps(b) for h, b in hooks),
          "webhook: no header or query value", str(bodies))

    # 4. scope sandbox, with a ttl: a runtime rule for a, not for b
    q = Req("a", url("web.test", "/1"))
    e = wait_pending(lambda e: e["host"] == "web.test", "web.test for a")
    if e:
        p = ctl("--json", "approve", e[0]["id"], "--scope", "sandbox", "--ttl", "1h")
        ck.ok(p.returncode == 0 and json.loads(p.stdout)["rule"].startswith("r"),
              "approve --scope sandbox --ttl 1h: a rule", p.stdout + p.stderr)
    ck.ok(q.result() is not None and q.r.status == 404, "scope sandbox: the hold goes on")
    r = itlib.roundtrip(P, itlib.req("GET", url("web.test", "/2"), auth="a:tok-a"), timeout=10)
    ck.ok(r is not None and r.status == 404, "runtime rule: the next request of a is not held", repr(r))
    q = Req("b", url("web.test", "/3"))
    e = wait_pending(lambda e: e["sandbox"] == "b", "b is not covered by a's rule")
    if e:
        ctl("deny", e[0]["id"])
    ck.error(q.result(), 403, "approval_denied", "b denied")

    # scope policy: every sandbox of gate
    q = Req("a", url("team.test", "/1"))
    e = wait_pending(lambda e: e["host"] == "team.test", "team.test")
    if e:
        p = ctl("approve", e[0]["id"], "--scope", "policy")
        ck.ok(p.returncode == 0, "approve --scope policy", p.stderr)
    q.result()
    r = itlib.roundtrip(P, itlib.req("GET", url("team.test", "/2"), auth="b:tok-b"), timeout=10)
    ck.ok(r is not None and r.status == 404, "policy rule: b passes too", repr(r))
    p = ctl("rules")
    ck.ok(("sandbox a web.test:%d" % O) in p.stdout and
          ("policy gate team.test:%d -" % O) in p.stdout,
          "airlockctl rules lists both", p.stdout)
    p = ctl("approve", "1", "--scope", "everything")
    ck.ok(p.returncode == 2, "--scope checked", p.stderr)

    # on_unmatched: ask
    q = Req("u", url("new.test", "/n"))
    e = wait_pending(lambda e: e["sandbox"] == "u", "unmatched, on_unmatched: ask")
    if e:
        ctl("approve", e[0]["id"])
    ck.ok(q.result() is not None and q.r.status == 404, "on_unmatched: ask approved")
    r = itlib.roundtrip(P, itlib.req("GET", url("api.test", "/open/u"), auth="u:tok-u"))
    ck.ok(r is not None and r.status == 404, "on_unmatched: ask: rules still allow")

    # 6. flooding: at most 2 holds of fl, the oldest refused
    q1 = Req("fl", url("api.test", "/f1"))
    wait_pending(lambda e: e["path"] == "/f1", "f1")
    q2 = Req("fl", url("api.test", "/f2"))
    wait_pending(lambda e: e["path"] == "/f2", "f2")
    q3 = Req("fl", url("api.test", "/f3"))
    wait_pending(lambda e: e["path"] == "/f3", "f3")
    r1 = q1.result()
    ck.error(r1, 403, "approval_denied", "flood: the oldest hold refused")
    ck.ok(r1 is not None and b"oldest" in r1.body, "flood: says why", repr(r1))
    pl = [e["path"] for e in pending() or [] if e["sandbox"] == "fl"]
    ck.ok(sorted(pl) == ["/f2", "/f3"], "flood: 2 holds left", str(pl))
    for e in pending() or []:
        ctl("deny", e["id"])
    q2.result(); q3.result()

    # 8. holds count against max_connections_per_sandbox (3)
    h1 = Req("cl", url("api.test", "/c1"))
    wait_pending(lambda e: e["path"] == "/c1", "c1")
    h2 = Req("cl", url("api.test", "/c2"))
    wait_pending(lambda e: e["path"] == "/c2", "c2")
    keep = itlib.connect(P)
    keep.sendall(itlib.req("GET", url("api.test", "/open/k"), auth="cl:tok-cl"))
    rd = itlib.Reader(keep)
    rk = itlib.read_response(rd)
    ck.ok(rk.status == 404, "third connection of cl (kept open)")
    r = itlib.roundtrip(P, itlib.req("GET", url("api.test", "/open/4"), auth="cl:tok-cl"))
    ck.error(r, 503, "overloaded", "two holds and one connection: the 4th is over the limit")
    keep.close()
    for e in pending() or []:
        ctl("deny", e["id"])
    h1.result(); h2.result()
elif phase == "kept":
    r = itlib.roundtrip(P, itlib.req("GET", url("web.test", "/k"), auth="a:tok-a"), timeout=10)
    ck.ok(r is not None and r.status == 404, "runtime rule (sandbox) still applies", repr(r))
    r = itlib.roundtrip(P, itlib.req("GET", url("team.test", "/k"), auth="b:tok-b"), timeout=10)
    ck.ok(r is not None and r.status == 404, "runtime rule (policy) still applies", repr(r))
elif phase == "revoke":
    rules = json.loads(ctl("--json", "rules").stdout)["rules"]
    ck.ok(len(rules) == 2, "two runtime rules after the restart", str(rules))
    rid = [x["id"] for x in rules if x["host"] == "team.test"]
    p = ctl("rules", "revoke", rid[0] if rid else "none")
    ck.ok(p.returncode == 0 and "revoked" in p.stdout, "airlockctl rules revoke", p.stderr)
    p = ctl("rules", "revoke", "r000000000000")
    ck.ok(p.returncode == 1, "revoking an unknown rule fails", p.stderr)
    q = Req("b", url("team.test", "/r"))
    e = wait_pending(lambda e: e["host"] == "team.test", "revoked: held again")
    if e:
        ctl("deny", e[0]["id"])
    ck.error(q.result(), 403, "approval_denied", "revoked rule: asks again")
    rules = json.loads(ctl("--json", "rules").stdout)["rules"]
    ck.ok([x["host"] for x in rules] == ["web.test"], "one rule left", str(rules))
ck.done()
PY
}

phase live || check_fail "live checks"
"$CTL" -c "$T/airlock.yaml" reload >"$T/reload.out" 2>&1 || check_fail "reload: $(cat "$T/reload.out")"
phase kept || check_fail "after reload"
stop_airlockd
grep -q '"team.test"' "$T/state/approvals.json" && ok "runtime rules persisted in state_dir" ||
    check_fail "approvals.json: $(cat "$T/state/approvals.json")"
start_airlockd "$T/airlock.yaml"
wait_admin
phase kept || check_fail "after restart"
phase revoke || check_fail "revoke"
m=$(curl -sS --unix-socket "$T/state/admin.sock" \
    -H "Authorization: Bearer $(cat "$T/state/admin.token")" http://airlock/metrics)
echo "$m" | grep -q '^airlock_approval_holds_total{outcome="denied"} [1-9]' &&
    ok "metrics: holds counted" || check_fail "metrics: $(echo "$m" | grep approval)"
stop_airlockd
finish
