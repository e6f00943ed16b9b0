#!/bin/sh
# Budgets, durability: the ledger under state_dir/budget keeps a sandbox's
# spend across kill -9. Under load (16 clients, the mock provider holding
# each answer 200 ms, so requests are in flight), airlockd is killed with
# SIGKILL, then restarted on the same state_dir. Every request the upstream
# received must still be paid for: answered ones at least at their metered
# cost, the others (forwarded, never answered) at their reservation. The
# remaining budget shows it exactly: with F forwarded requests of which n
# were answered, spend >= n*cost + (F-n)*reservation, so a request reserving
# one micro-dollar more than cap minus that bound is refused; and spend <=
# (requests sent)*reservation, so one reserving cap minus that is admitted.
# The ledger is compacted on start: after hundreds of requests and a
# restart it shrinks, and the spend it carries is unchanged (exact
# remaining budget after a clean restart too). Counters other than money
# (here: requests) reach the ledger within a second: counted 1.5 s before
# a kill -9, they are still counted after it.
#
# The price of model "unit-*" is 1 USD per million tokens in and out, so a
# request reserves its body's bytes plus its max_tokens in µUSD.
. "$top_srcdir/tests/integration/lib.sh"

# start_llm NAME [ARGS...]: llm_upstream.py, logging requests to
# $T/NAME.jsonl; sets LLM_PORT.
start_llm()
{
	_ln=$1
	shift
	rm -f "$T/$_ln.port"
	"$PYTHON" "$IT_DIR/llm_upstream.py" -P "$T/$_ln.port" \
	    -l "$T/$_ln.jsonl" "$@" 2>"$T/$_ln.err" &
	_lp=$!
	track_pid "$_lp"
	_i=0
	while [ ! -s "$T/$_ln.port" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 300 ] || hard_error "$_ln did not start: $(cat "$T/$_ln.err")"
		kill -0 "$_lp" 2>/dev/null ||
		    hard_error "$_ln exited: $(cat "$T/$_ln.err")"
		sleep 0.05
	done
	LLM_PORT=$(cat "$T/$_ln.port")
}

start_llm plain
PLAIN_PORT=$LLM_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT PLAIN_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: big
    rules:
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 1.0, clamp: false}
  - name: exact
    rules:
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 0.3005, clamp: false}
  - name: count
    rules:
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {requests: 8}
sandboxes:
  - {id: dur, policy: big, token: "literal:tok"}
  - {id: comp, policy: exact, token: "literal:tok"}
  - {id: cnt, policy: count, token: "literal:tok"}
YAML
} >"$T/airlock.yaml"

cat >"$T/durcommon.py" <<'PY'
import json, os, threading, time, budlib, itlib
ap, pp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("PLAIN_PORT")
T = os.environ["T"]
ULOG = T + "/plain.jsonl"
CAP = 1000000           # sandbox dur, µUSD
R = 1000                # reservation of a load request: 300 bytes + 700
COST = 100              # what an answered load request costs
t = itlib.Checks()


def client(sb):
    return budlib.Client(ap, "plain.openai.test", pp, sb + ":tok",
                         timeout=15)


def body_of(size, max_tokens):
    b = budlib.jbody({"model": "unit-a", "max_tokens": max_tokens,
                      "messages": [{"role": "user", "content": ""}]})
    return budlib.jbody({"model": "unit-a", "max_tokens": max_tokens,
                         "messages": [{"role": "user", "content":
                                       "x" * (size - len(b))}]})


def post(c, size, max_tokens, usage=None, extra=()):
    h = ["X-Synth: openai"] + list(extra)
    if usage:
        h.append("X-Synth-Usage: " + usage)
    return c.request("POST", "/v1/chat/completions",
                     body_of(size, max_tokens), h, retry=False)


def ledger_bytes():
    d = T + "/state/budget"
    n = 0
    files = []
    for root, _, fs in os.walk(d):
        for f in fs:
            p = os.path.join(root, f)
            n += os.path.getsize(p)
            files.append((p[len(d) + 1:], os.path.getsize(p)))
    return n, files
PY

start_airlockd "$T/airlock.yaml"
AIRLOCK_PID_1=$AIRLOCK_PID
export AIRLOCK_PID

# --- load, then SIGKILL while requests are in flight
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "load and kill -9"
import signal
from durcommon import *
stop = threading.Event()
lock = threading.Lock()
st = {"sent": 0, "ok": 0, "other": 0}


def worker(i):
    c = client("dur")
    k = 0
    while not stop.is_set():
        k += 1
        with lock:
            st["sent"] += 1
        try:
            r = post(c, 300, 700, "%d,0" % COST,
                     ["X-Delay-Ms: 200", "X-Mark: load-%d-%d" % (i, k)])
        except Exception:
            r = None
        with lock:
            if r is not None and r.status == 200:
                st["ok"] += 1
            else:
                st["other"] += 1
        if r is None:
            c.close()
            time.sleep(0.02)

th = [threading.Thread(target=worker, args=(i,), daemon=True)
      for i in range(16)]
for x in th:
    x.start()
time.sleep(1.3)
# no new requests from here on (those in flight stay in flight)
stop.set()
try:
    os.kill(int(os.environ["AIRLOCK_PID"]), signal.SIGKILL)
except ProcessLookupError:
    t.ok(False, "airlockd still running under load at the kill")
for x in th:
    x.join(20)
fw = [r for r in budlib.upstream_records(ULOG)
      if (r["headers"].get("x-mark") or "").startswith("load-")]
st["forwarded"] = len(fw)
json.dump(st, open(T + "/load.json", "w"))
print("# load: %r" % st)
t.ok(st["ok"] >= 16, "load: requests answered before the kill", st)
t.ok(st["forwarded"] > st["ok"], "load: requests were in flight at the "
     "kill (forwarded %d > answered %d)" % (st["forwarded"], st["ok"]), st)
n, files = ledger_bytes()
t.ok(n > 0, "a ledger under state_dir/budget after the load", files)
json.dump({"before": n}, open(T + "/ledger.json", "w"))
t.done()
PY
wait_exit "$AIRLOCK_PID" 10
[ "$WAIT_STATUS" -eq 137 ] || fail "airlockd: status $WAIT_STATUS after SIGKILL, want 137"

start_airlockd "$T/airlock.yaml"
export AIRLOCK_PID

# --- after the restart: every forwarded request is still paid for
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "spend after kill -9"
from durcommon import *
st = json.load(open(T + "/load.json"))
n, F, A = st["ok"], st["forwarded"], st["sent"]
lo = n * COST + (F - n) * R     # the least spend the ledger may show
hi = A * R                      # the most it may show
print("# answered %d, forwarded %d, sent %d: spend in [%d, %d]"
      % (n, F, A, lo, hi))
c = client("dur")
# reserving CAP - lo + 1 fits only if spend < lo
res = CAP - lo + 1
r = post(c, 300, res - 300, "1,0")
if not t.error(r, 402, "budget_exceeded", "after kill -9: reserving %d "
               "(cap %d - lower bound %d + 1) → 402: nothing forwarded "
               "was forgotten" % (res, CAP, lo)):
    rec = budlib.audit_for(T + "/audit.jsonl",
                           r.header("X-Airlock-Request-Id")) if r else None
    print("# the probe was admitted: spend < %d (%r)" % (lo, rec))
res = CAP - hi
r = post(c, 300, res - 300, "1,0")
t.ok(r is not None and r.status == 200, "after kill -9: reserving %d (cap "
     "- everything sent at its reservation) → 200: spend not overstated"
     % res, repr(r))
# the spend itself, by bisection with probes that cost nothing once
# admitted (usage 0 tokens): the largest reservation that still fits
lo_r, hi_r = 301, CAP - lo + 1        # fits / does not fit
while hi_r - lo_r > 1:
    mid = (lo_r + hi_r) // 2
    r = post(c, 300, mid - 300, "0,0")
    if r is not None and r.status == 200:
        lo_r = mid
    else:
        hi_r = mid
spend = CAP - lo_r
print("# spend after the restart: %d µUSD (%d forwarded: %d answered x %d "
      "+ %d unanswered x %d = %d; probes 1)" % (spend, F, n, COST, F - n, R,
                                              lo))
t.ok(lo <= spend <= hi, "after kill -9: the spend %d lies in [%d, %d]"
     % (spend, lo, hi))
c.close()
n2, files = ledger_bytes()
t.ok(n2 > 0, "the ledger is still there after the restart", files)
t.done()
PY

# --- compaction: hundreds of requests, a clean restart, a smaller ledger
# carrying the same spend (comp: cap 300500, 300 requests of 1000)
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "many requests"
from durcommon import *
c = client("comp")
bad = 0
for i in range(300):
    r = post(c, 300, 700)
    if r is None or r.status != 200:
        bad += 1
c.close()
t.ok(bad == 0, "comp: 300 requests of 1000 µUSD admitted", bad)
time.sleep(1.5)         # counters reach the ledger within a second
n, files = ledger_bytes()
json.dump({"before": n, "files": files}, open(T + "/ledger2.json", "w"))
print("# ledger after 300 more requests: %d bytes %r" % (n, files))
t.done()
PY
stop_airlockd
start_airlockd "$T/airlock.yaml"
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "compaction"
from durcommon import *
before = json.load(open(T + "/ledger2.json"))["before"]
n, files = ledger_bytes()
print("# ledger after the restart: %d bytes %r" % (n, files))
t.ok(0 < n < before, "the ledger is compacted on start (%d → %d bytes)"
     % (before, n), files)
t.ok(n <= 16384, "the compacted ledger is small (%d bytes for 3 "
     "sandboxes)" % n, files)
c = client("comp")
r = post(c, 300, 201)
t.error(r, 402, "budget_exceeded", "comp after compaction: reserving 501 "
        "with 500 left → 402")
r = post(c, 300, 200, "1,0")
t.ok(r is not None and r.status == 200, "comp after compaction: reserving "
     "the 500 left → 200 (spend carried exactly)", repr(r))
c.close()
t.done()
PY

# --- counters other than money reach the ledger within a second: 5 of 8
# requests, 1.5 s, kill -9, restart: 3 more, then 402
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "requests before kill"
from durcommon import *
c = client("cnt")
n = sum(1 for i in range(5) if (post(c, 300, 10) or itlib.Response()).status
        == 200)
c.close()
t.ok(n == 5, "cnt: 5 requests of 8 admitted", n)
time.sleep(1.5)
t.done()
PY
kill -9 "$AIRLOCK_PID"
wait_exit "$AIRLOCK_PID" 10 2>/dev/null
start_airlockd "$T/airlock.yaml"
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "requests after kill"
from durcommon import *
c = client("cnt")
st = [(post(c, 300, 10) or itlib.Response()).status for i in range(4)]
c.close()
t.ok(st == [200, 200, 200, 402], "cnt after kill -9: the 5 requests "
     "counted 1.5 s before the kill are remembered: 3 more, then 402", st)
t.done()
PY

stop_airlockd
finish
