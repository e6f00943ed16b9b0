#!/bin/sh
# Fleet mode (issue 18): three airlockd share one budget through Redis
# (budget_store: redis://), behind HAProxy in TCP mode.
#  - 64 concurrent metered streaming requests spread over the three (each
#    client loops until 402, then one last client per gateway does) never
#    push spend past the usd cap, and stop within one request's worst
#    case of it: cap - worst < spend <= cap (read from Redis);
#  - kill -9 of one gateway while its metered requests are in flight: the
#    other two keep serving, the dead one's reservations expire after
#    limits.store_lease (released by the next admission), and the spend
#    settled before the kill is still there.
# Prices: 1 USD per million tokens for "unit-*" (one µUSD a token); a
# request reserves its body's bytes + max_tokens and costs its usage.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
start_redis
GW_PORT_1=$(free_port)
GW_PORT_2=$(free_port)
GW_PORT_3=$(free_port)
HA_PORT=$(free_port)
export LLM_PORT GW_PORT_1 GW_PORT_2 GW_PORT_3 HA_PORT REDIS_PORT T

for i in 1 2 3; do
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 2
audit: {file: $T/audit$i.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1"}
budget_store: "redis://127.0.0.1:$REDIS_PORT/0"
limits: {store_timeout: 1s, store_lease: 2s}
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: capped
    rules:
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 0.06, llm_concurrency: 100}
  - name: big
    rules:
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 100, llm_concurrency: 100}
sandboxes:
  - {id: sc, policy: capped, token: "literal:tok"}
  - {id: sk, policy: big, token: "literal:tok"}
YAML
	start_gateway $i "$T/gw$i.yaml"
done
start_haproxy "$HA_PORT" "$GW_PORT_1" "$GW_PORT_2" "$GW_PORT_3"

"$PYTHON" - <<'PY' || check_fail "the shared usd cap under 64 concurrent requests"
import json, os, subprocess, threading, budlib, itlib
ha, lp = itlib.env_int("HA_PORT"), itlib.env_int("LLM_PORT")
gws = [itlib.env_int("GW_PORT_%d" % i) for i in (1, 2, 3)]
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 1000, "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]})
worst = len(body) + 1000
# the stream reports 200 in + 700 out (the gateway asks for the usage)
hdrs = ["X-Synth: openai", "X-Synth-Usage: 200,700", "X-Delay-Ms: 150"]
cap = 60000
lock = threading.Lock()
seen = {}


def loop(port):
    c = budlib.Client(port, "plain.openai.test", lp, "sc:tok", timeout=30)
    while True:
        r = c.request("POST", "/v1/chat/completions", body, hdrs,
                      retry=False)
        st = r.status if r is not None else None
        with lock:
            seen[st] = seen.get(st, 0) + 1
        if st != 200:
            return st
        pass


th = [threading.Thread(target=loop, args=(ha,)) for _ in range(64)]
for x in th:
    x.start()
for x in th:
    x.join()
# whatever the concurrent ones left: one client per gateway until 402
for p in gws:
    loop(p)


def spend():
    out = subprocess.check_output(
        ["redis-cli", "-p", os.environ["REDIS_PORT"], "HGET",
         "airlock:{sc}:w:0", "spend"]).decode().strip()
    return int(out or 0)


s = spend()
t.ok(seen.get(200, 0) >= 20, "requests served: %r" % seen)
t.ok(set(seen) <= {200, 402}, "only 200 and 402: %r" % seen)
t.ok(s <= cap, "spend %d <= cap %d" % (s, cap))
t.ok(s > cap - worst, "spend %d > cap - worst (%d)" % (s, cap - worst))
t.ok(s == seen.get(200, 0) * 900,
        "spend %d is 900 per served request (%d)" % (s, seen.get(200, 0)))
# every gateway served some of them
for i in (1, 2, 3):
    n = sum(1 for l in open("%s/audit%d.jsonl" % (os.environ["T"], i))
            if '"status":200' in l)
    t.ok(n > 0, "gateway %d served %d" % (i, n))
t.done()
PY
ok "64 concurrent metered requests over three gateways keep the shared cap"

# kill -9 of gateway 1 with requests in flight through it
"$PYTHON" - <<'PY' || check_fail "settled spend before the kill"
import budlib, itlib
lp = itlib.env_int("LLM_PORT")
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 1000, "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]})
for p in (itlib.env_int("GW_PORT_1"), itlib.env_int("GW_PORT_2")):
    c = budlib.Client(p, "plain.openai.test", lp, "sk:tok")
    r = c.request("POST", "/v1/chat/completions", body,
                  ["X-Synth: openai", "X-Synth-Usage: 200,700"])
    t.ok(r is not None and r.status == 200, "settled request")
t.done()
PY
sleep 0.3
set -- $(redis_spend sk)
SETTLED=$1
[ "$SETTLED" = 1800 ] || check_fail "settled spend $SETTLED, want 1800"

"$PYTHON" - >"$T/slow.out" 2>&1 <<'PY' &
import threading, budlib, itlib
lp, p = itlib.env_int("LLM_PORT"), itlib.env_int("GW_PORT_1")
body = budlib.jbody({"model": "unit-a", "max_tokens": 1000, "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]})
def one():
    c = budlib.Client(p, "plain.openai.test", lp, "sk:tok", timeout=30)
    c.request("POST", "/v1/chat/completions", body,
              ["X-Synth: openai", "X-Synth-Usage: 200,700",
               "X-Delay-Ms: 20000"], retry=False)
th = [threading.Thread(target=one) for _ in range(4)]
for x in th:
    x.start()
for x in th:
    x.join()
PY
SLOW_PID=$!
track_pid "$SLOW_PID"
# until its four reservations are in Redis
i=0
until [ "$(rcli ZCARD 'airlock:{sk}:res')" = 4 ]; do
	i=$((i + 1))
	[ "$i" -le 100 ] || { check_fail "4 reservations never made"; break; }
	sleep 0.05
done
set -- $(redis_spend sk)
[ "$2" -gt 0 ] || check_fail "no live reservation before the kill ($2)"
kill -9 "$GW_PID_1"
wait "$GW_PID_1" 2>/dev/null
untrack_pid "$GW_PID_1"
ok "gateway 1 killed with 4 metered requests in flight"

"$PYTHON" - <<'PY' || check_fail "the others after the kill"
import time, budlib, itlib
lp, ha = itlib.env_int("LLM_PORT"), itlib.env_int("HA_PORT")
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 1000, "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]})
for p in (itlib.env_int("GW_PORT_2"), itlib.env_int("GW_PORT_3")):
    c = budlib.Client(p, "plain.openai.test", lp, "sk:tok")
    r = c.request("POST", "/v1/chat/completions", body,
                  ["X-Synth: openai", "X-Synth-Usage: 200,700"])
    t.ok(r is not None and r.status == 200, "served by %d" % p)
# past the lease (2 s) an admission releases the dead one's reservations
time.sleep(2.5)
c = budlib.Client(itlib.env_int("GW_PORT_3"), "plain.openai.test", lp,
                  "sk:tok")
r = c.request("POST", "/v1/chat/completions", body,
              ["X-Synth: openai", "X-Synth-Usage: 200,700"])
t.ok(r is not None and r.status == 200, "served after the lease")
t.done()
PY
sleep 0.3
set -- $(redis_spend sk)
[ "$1" = $((SETTLED + 3 * 900)) ] ||
    check_fail "spend $1 after the kill, want $((SETTLED + 3 * 900))"
[ "$2" = 0 ] || check_fail "reservations $2 left after the lease, want 0"
[ "$(rcli ZCARD 'airlock:{sk}:res')" = 0 ] ||
    check_fail "leases left: $(rcli ZRANGE 'airlock:{sk}:res' 0 -1)"
ok "dead gateway's reservations expired, settled spend intact"
kill "$SLOW_PID" 2>/dev/null

for i in 2 3; do
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
