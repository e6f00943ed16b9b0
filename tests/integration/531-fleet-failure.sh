#!/bin/sh
# Fleet mode (issue 18): caps shared through Redis, and what happens when
# Redis goes away.
#  - a rate cap of 10/s holds across three gateways: 90 requests spread
#    over them in about 2 s get at most 10 + 10 a second through, the rest
#    429 rate_limited;
#  - a requests cap of 12 in a window is shared: 30 requests over three
#    gateways, exactly 12 served;
#  - Redis stopped (SIGSTOP: slow, then kill -9: gone): a capped rule's
#    requests get 503 budget_unavailable within limits.store_timeout
#    (1 s here), a rule that needs nothing from the store is still served;
#  - Redis back on its port: capped requests are served again, no restart.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
start_redis
GW_PORT_1=$(free_port)
GW_PORT_2=$(free_port)
GW_PORT_3=$(free_port)
export LLM_PORT GW_PORT_1 GW_PORT_2 GW_PORT_3 REDIS_PORT T

for i in 1 2 3; do
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
audit: {file: $T/audit$i.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1", "plain.test": "127.0.0.1"}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 1s}
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: rated
    rules:
      - {host: "plain.test", ports: [$LLM_PORT], methods: [GET], paths: ["/v1/*"]}
    caps: {rate: 10/s}
  - name: counted
    rules:
      - {host: "plain.test", ports: [$LLM_PORT], methods: [GET], paths: ["/v1/*"]}
    caps: {requests: 12, window: 1h}
  - name: capped
    rules:
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 10}
  - name: free
    rules:
      - {host: "plain.test", ports: [$LLM_PORT], methods: [GET], paths: ["/v1/*"]}
sandboxes:
  - {id: sr, policy: rated, token: "literal:tok"}
  - {id: sq, policy: counted, token: "literal:tok"}
  - {id: sc, policy: capped, token: "literal:tok"}
  - {id: sf, policy: free, token: "literal:tok"}
YAML
	start_gateway $i "$T/gw$i.yaml"
done

"$PYTHON" - <<'PY' || check_fail "caps shared across gateways"
import threading, time, budlib, itlib
lp = itlib.env_int("LLM_PORT")
gws = [itlib.env_int("GW_PORT_%d" % i) for i in (1, 2, 3)]
t = itlib.Checks()
res = []
lock = threading.Lock()


def burst(port, sb, n, gap):
    c = budlib.Client(port, "plain.test", lp, sb + ":tok")
    for _ in range(n):
        r = c.request("GET", "/v1/models")
        with lock:
            res.append(r.status if r is not None else None)
        time.sleep(gap)


t0 = time.time()
th = [threading.Thread(target=burst, args=(p, "sr", 30, 0.066)) for p in gws]
for x in th:
    x.start()
for x in th:
    x.join()
el = time.time() - t0
ok = res.count(200)
t.ok(set(res) <= {200, 429}, "only 200 and 429: %r" % sorted(set(res)))
t.ok(ok <= 10 + 10 * el + 1, "rate: %d served in %.2f s (<= %d)"
     % (ok, el, 10 + 10 * el + 1))
t.ok(ok >= 10 + 10 * (el - 0.5) - 3, "rate: %d served in %.2f s, not fewer"
     % (ok, el))
res.clear()
th = [threading.Thread(target=burst, args=(p, "sq", 10, 0)) for p in gws]
for x in th:
    x.start()
for x in th:
    x.join()
t.ok(res.count(200) == 12 and res.count(402) == 18,
     "requests cap 12 shared: %d served, %d refused"
     % (res.count(200), res.count(402)))
t.done()
PY
ok "rate and requests caps shared by three gateways"

# requests of the capped (metered) and free sandboxes through gateway 2
cat >"$T/probe.py" <<'PY'
import json, sys, time, budlib, itlib
lp, p = itlib.env_int("LLM_PORT"), itlib.env_int("GW_PORT_2")
want = sys.argv[1]
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 10,
                     "messages": [{"role": "user", "content": "hi"}]})
deadline = time.time() + float(sys.argv[2]) if len(sys.argv) > 2 else 0
while True:
    c = budlib.Client(p, "plain.openai.test", lp, "sc:tok")
    t0 = time.time()
    r = c.request("POST", "/v1/chat/completions", body,
                  ["X-Synth: openai", "X-Synth-Usage: 5,5"], retry=False)
    el = time.time() - t0
    st = r.status if r is not None else None
    if want == "200" and st != 200 and time.time() < deadline:
        time.sleep(0.2)
        continue
    break
if want == "503":
    t.error(r, 503, "budget_unavailable", "capped rule: 503 (%.2f s)" % el)
    t.ok(el < 1.8, "answered within store_timeout (%.2f s)" % el)
else:
    t.ok(st == 200, "capped rule served (%r)" % st)
f = budlib.Client(p, "plain.test", lp, "sf:tok").request("GET", "/v1/models")
t.ok(f is not None and f.status == 200, "free rule served")
t.done()
PY

"$PYTHON" "$T/probe.py" 200 || check_fail "capped rule with Redis up"
kill -STOP "$REDIS_PID"
"$PYTHON" "$T/probe.py" 503 || check_fail "Redis stopped (SIGSTOP)"
ok "Redis slow: 503 budget_unavailable within store_timeout"
kill -CONT "$REDIS_PID"
stop_redis
"$PYTHON" "$T/probe.py" 503 || check_fail "Redis gone"
ok "Redis gone: 503 budget_unavailable, the free rule served"
start_redis
"$PYTHON" "$T/probe.py" 200 10 || check_fail "recovery"
ok "Redis back: served again without a restart"
grep -q '"status":503,"decision":"deny","reason":"budget store did not answer within store_timeout"' \
    "$T/audit2.jsonl" || check_fail "no slow-store 503 in gateway 2's audit"
grep -q '"status":503,"decision":"deny","reason":"budget store unavailable"' \
    "$T/audit2.jsonl" || check_fail "no store-gone 503 in gateway 2's audit"

for i in 1 2 3; do
	eval "_pid=\$GW_PID_$i"
	kill -TERM "$_pid"
	wait_exit "$_pid" 30
	[ "$WAIT_STATUS" -eq 0 ] || check_fail "gateway $i exited $WAIT_STATUS"
	untrack_pid "$_pid"
	if grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer' \
	    "$T/airlockd-$i.log"; then
		check_fail "sanitizer report in gateway $i's log"
	fi
done
finish
