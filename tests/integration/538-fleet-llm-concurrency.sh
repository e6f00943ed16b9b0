#!/bin/sh
# Fleet mode (issue 18.2): caps.llm_concurrency is the fleet's, not each
# gateway's. Three gateways share a Redis; the sandbox's policy allows 2
# metered requests in flight. 6 slow metered requests at once, two
# through each gateway: exactly 2 are admitted (200), 4 are refused 429
# rate_limited, and the upstream sees 2 (before: each gateway counted its
# own, so all 6 went). Once they end their slots are free again (the
# leased slots are gone from Redis) and the next request is served.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
start_redis
for i in 1 2 3; do
	eval "GW_PORT_$i=\$(free_port)"
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1"}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 1s, store_lease: 2s}
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: p
    rules:
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 100, llm_concurrency: 2}
sandboxes:
  - {id: sl, policy: p, token: "literal:tok"}
YAML
	start_gateway $i "$T/gw$i.yaml"
done
export LLM_PORT GW_PORT_1 GW_PORT_2 GW_PORT_3 REDIS_PORT T

"$PYTHON" - <<'PY' || check_fail "llm_concurrency across three gateways"
import json, os, subprocess, threading, time, budlib, itlib
lp = itlib.env_int("LLM_PORT")
gws = [itlib.env_int("GW_PORT_%d" % i) for i in (1, 2, 3)]
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 100,
                     "messages": [{"role": "user", "content": "hi"}]})
hdrs = ["X-Synth: openai", "X-Synth-Usage: 20,70", "X-Delay-Ms: 1500"]
res, lock = [], threading.Lock()
go = threading.Barrier(6)


def one(port):
    c = budlib.Client(port, "plain.openai.test", lp, "sl:tok", timeout=10)
    go.wait()
    r = c.request("POST", "/v1/chat/completions", body, hdrs, retry=False)
    with lock:
        res.append((port, r.status if r is not None else None))


th = [threading.Thread(target=one, args=(gws[i % 3],)) for i in range(6)]
for x in th:
    x.start()
for x in th:
    x.join()
st = sorted(s for _, s in res)
t.ok(st == [200, 200, 429, 429, 429, 429], "statuses %r" % res)
n = sum(1 for l in open(os.environ["T"] + "/llm.jsonl") if l.strip())
t.ok(n == 2, "the upstream saw %d requests, want 2" % n)
# settled just after the answers: give it up to 2 s
t0 = time.monotonic()
while time.monotonic() - t0 < 2:
    live = subprocess.check_output(
        ["redis-cli", "-p", os.environ["REDIS_PORT"], "ZCARD",
         "airlock:{sl}:llm"]).decode().strip()
    if live == "0":
        break
    time.sleep(0.05)
t.ok(live == "0", "slots still leased after the requests ended: %s" % live)
c = budlib.Client(gws[2], "plain.openai.test", lp, "sl:tok")
r = c.request("POST", "/v1/chat/completions", body, hdrs[:2])
t.ok(r is not None and r.status == 200, "a later request is served")
t.done()
PY
ok "llm_concurrency 2 across three gateways: 6 at once, exactly 2 admitted"

# the admin API's view is the fleet's: 3 requests served by 3 gateways,
# 90 µUSD each, whichever gateway is asked
wait_admin 1 2 3
"$PYTHON" - <<'PY' || check_fail "the admin usage view in fleet mode"
import os, time, adminlib as A
T = os.environ["T"]
for i in (1, 2, 3):
    t0 = time.monotonic()
    while True:
        st, _, b = A.call("unix:%s/state%d/admin.sock" % (T, i), "GET",
                          "/v1/sandboxes/sl/usage",
                          token=A.token("%s/state%d" % (T, i)))
        if st == 200 and b.get("spend_microusd") == 270 or \
                time.monotonic() - t0 > 3:
            break
        time.sleep(0.05)
    assert st == 200, (i, st, b)
    assert b.get("scope") == "fleet", (i, b)
    assert b.get("requests") == 3 and b.get("spend_microusd") == 270, (i, b)
    assert b.get("reserved_microusd") == 0, (i, b)
PY
ok "the admin usage view on every gateway shows the fleet's figures"

# ?by=model is each gateway's own share (docs/admin-api.md, "Usage by
# model and day"): said so in the answer, and the shares add up to the
# fleet's counters
"$PYTHON" - <<'PY' || check_fail "the per-gateway breakdown in fleet mode"
import os, adminlib as A
T = os.environ["T"]
req = cost = 0
for i in (1, 2, 3):
    st, _, b = A.call("unix:%s/state%d/admin.sock" % (T, i), "GET",
                      "/v1/sandboxes/sl/usage?by=model",
                      token=A.token("%s/state%d" % (T, i)))
    assert st == 200, (i, st, b)
    assert b.get("scope") == "fleet", (i, b)
    assert b.get("breakdown_scope") == "gateway", (i, b)
    rows = b.get("breakdown")
    assert all(r["model"] == "unit-a" for r in rows), (i, rows)
    req += sum(r["requests"] for r in rows)
    cost += sum(r["cost_microusd"] for r in rows)
    assert b.get("requests") == 3, (i, b)
    print("# gateway %d: breakdown %r" % (i, rows))
assert (req, cost) == (3, 270), ("the gateways' shares", req, cost)
PY
ok "?by=model on each gateway is its own share (breakdown_scope gateway); the shares add up to the fleet's"

stop_gateways 1 2 3
finish
