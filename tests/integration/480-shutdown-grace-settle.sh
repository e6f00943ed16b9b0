#!/bin/sh
# Shutdown grace (issue 16, point 5): when limits.shutdown_grace runs out
# with requests still in flight, every one of them is ended through
# conn_close: audited (reason says the grace ran out, decision allow) and
# its budget settled. A metered request held by the upstream at the
# expiry leaves an S line in the ledger settling its whole reservation
# (cut short: it costs what it reserved); an unmetered plain request in flight is audited too. Before
# this, the worker freed such connections with no record and no settle.
. "$top_srcdir/tests/integration/lib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {shutdown_grace: 1s}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1", "slow.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: p
    rules:
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "slow.test", ports: [$LLM_PORT], methods: [GET]}
    caps: {usd: 1.0}
sandboxes:
  - {id: sd, policy: p, token: "literal:tok"}
YAML
} >"$T/airlock.yaml"

start_airlockd "$T/airlock.yaml"
export AIRLOCK_PID

"$PYTHON" - <<'PY' || check_fail "requests in flight at the grace's end"
import json, os, signal, threading, time, budlib, itlib
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
T = os.environ["T"]
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 700,
                     "messages": [{"role": "user", "content": "hi"}]})
RES = len(body) + 700           # µUSD: body bytes plus max_tokens
res = {}


def metered():
    c = budlib.Client(ap, "plain.openai.test", lp, "sd:tok", timeout=30)
    try:
        res["m"] = c.request("POST", "/v1/chat/completions", body,
                             ["X-Synth: openai", "X-Delay-Ms: 60000",
                              "X-Mark: held-metered"], retry=False)
    except Exception as e:
        res["m"] = e


def plain():
    c = budlib.Client(ap, "slow.test", lp, "sd:tok", timeout=30)
    try:
        res["p"] = c.request("GET", "/slow-plain", b"",
                             ["X-Delay-Ms: 60000", "X-Mark: held-plain"],
                             retry=False)
    except Exception as e:
        res["p"] = e


th = [threading.Thread(target=f, daemon=True) for f in (metered, plain)]
for x in th:
    x.start()
end = time.time() + 15
while True:
    held = [r for r in budlib.upstream_records(T + "/llm.jsonl")
            if (r["headers"].get("x-mark") or "").startswith("held-")]
    if len(held) >= 2 or time.time() > end:
        break
    time.sleep(0.05)
t.ok(len(held) >= 2, "both requests reached the upstream before the stop",
     held)
t0 = time.time()
os.kill(int(os.environ["AIRLOCK_PID"]), signal.SIGTERM)
for x in th:
    x.join(20)
print("# clients released after %.1f s: %r" % (time.time() - t0, res))
recs = []
deadline = time.time() + 15
while time.time() < deadline:
    try:
        os.kill(int(os.environ["AIRLOCK_PID"]), 0)
    except ProcessLookupError:
        break
    time.sleep(0.1)
for line in open(T + "/audit.jsonl"):
    line = line.strip()
    if line:
        recs.append(json.loads(line))
m = [r for r in recs if r.get("path") == "/v1/chat/completions"]
p = [r for r in recs if r.get("path") == "/slow-plain"]
t.ok(len(m) == 1, "the metered request held at the grace's end has its "
     "audit record", recs)
t.ok(len(p) == 1, "the plain request held at the grace's end has its "
     "audit record", recs)
for what, rs in (("metered", m), ("plain", p)):
    if rs:
        r = rs[0]
        t.ok(r.get("decision") == "allow" and "shutdown_grace" in
             (r.get("reason") or ""), "%s: audited allow, the reason "
             "names shutdown_grace" % what, r)
settles = [ln.split() for ln in open(T + "/state/budget/ledger")
           if ln.startswith("S ")]
t.ok(any(s[1] == "sd" and s[3] == str(RES) and s[4] == str(RES)
         for s in settles), "ledger: an S line settles the reservation "
     "(%d reserved, %d charged)" % (RES, RES), settles)
t.done()
PY
wait_exit "$AIRLOCK_PID" 20
[ "$WAIT_STATUS" -eq 0 ] || fail "airlockd: status $WAIT_STATUS after SIGTERM, want 0"
check_sanitizers
finish
