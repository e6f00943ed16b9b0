#!/bin/sh
# Nothing blocks a worker (issue 16, point 4): a metered request waits for
# its reservation to be durable in the budget ledger (group commit,
# fdatasync) through the stage table's wait verdict, not by blocking the
# worker's event loop. With one worker and the ledger's fsync slowed to
# 600 ms (AIRLOCK_TEST_FSYNC_DELAY_MS, a test-only knob, docs/testing.md),
# metered requests keep arriving while unmetered ones on the same worker
# are timed: the metered ones take the fsync's time (the delay is real),
# the unmetered ones keep their latency (median under 200 ms; with the
# worker blocked they would queue behind each fsync).
. "$top_srcdir/tests/integration/lib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 1
audit: {file: $T/audit.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1", "plain.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: p
    rules:
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "plain.test", ports: [$LLM_PORT], methods: [GET], paths: ["/v1/*"]}
    caps: {usd: 100}
sandboxes:
  - {id: sd, policy: p, token: "literal:tok"}
YAML

AIRLOCK_TEST_FSYNC_DELAY_MS=600
export AIRLOCK_TEST_FSYNC_DELAY_MS
start_airlockd "$T/airlock.yaml"
unset AIRLOCK_TEST_FSYNC_DELAY_MS

"$PYTHON" - <<'PY' || check_fail "unmetered latency while the ledger syncs"
import os, statistics, threading, time, budlib, itlib
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 10,
                     "messages": [{"role": "user", "content": "hi"}]})
stop = threading.Event()
lock = threading.Lock()
metered = []


def metered_loop():
    c = budlib.Client(ap, "plain.openai.test", lp, "sd:tok", timeout=30)
    while not stop.is_set():
        t0 = time.time()
        try:
            r = c.request("POST", "/v1/chat/completions", body,
                          ["X-Synth: openai"], retry=False)
        except Exception:
            r = None
        with lock:
            metered.append((time.time() - t0,
                            r.status if r is not None else None))
        if r is None:
            c.close()
            time.sleep(0.05)


th = [threading.Thread(target=metered_loop, daemon=True) for _ in range(3)]
for x in th:
    x.start()
time.sleep(1.0)         # the fsyncs are under way
plain = []
pc = budlib.Client(ap, "plain.test", lp, "sd:tok", timeout=30)
for i in range(15):
    t0 = time.time()
    r = pc.request("GET", "/v1/models", b"", [], retry=False)
    plain.append((time.time() - t0, r.status if r is not None else None))
    time.sleep(0.1)
stop.set()
for x in th:
    x.join(30)
ms = sorted(d for d, s in metered if s == 200)
ps = sorted(d for d, s in plain if s == 200)
print("# metered: %d answered, median %.0f ms; plain: %d answered, "
      "median %.0f ms, max %.0f ms" % (
          len(ms), 1000 * statistics.median(ms) if ms else -1, len(ps),
          1000 * statistics.median(ps) if ps else -1,
          1000 * max(ps) if ps else -1))
t.ok(len(ms) >= 3, "metered requests were answered", metered)
t.ok(len(ps) == 15, "every unmetered request was answered", plain)
t.ok(ms and statistics.median(ms) >= 0.5, "metered requests wait for the "
     "slowed fsync (median >= 500 ms): the delay is in effect", ms)
t.ok(ps and statistics.median(ps) < 0.2, "unmetered requests on the same "
     "worker keep their latency (median < 200 ms while fsyncs of 600 ms "
     "run)", ps)
t.done()
PY
stop_airlockd
finish
