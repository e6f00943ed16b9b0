#!/bin/sh
# Budgets, caps: each cap of a policy stops its sandbox before the request
# is forwarded, answered with the gateway's JSON error and audited with the
# cap named in the reason: requests (lifetime; per sandbox, not per
# policy), bytes_out, bytes_in → 402 budget_exceeded; usd → 402 with the
# worst case reserved (boundary inclusive: spend + reserved + this request's
# reservation <= cap), also inside intercepted TLS; rate (token bucket,
# 5/s) → 429 rate_limited with Retry-After >= 1, admitting again after a
# second; window 2s (fixed, UTC-aligned: resets on even seconds) → the
# requests cap admits again after the boundary.
#
# The price of model "unit-*" is 1 USD per million tokens in and out: one
# micro-dollar a token, so a metered request reserves exactly its body's
# length plus its max_tokens in µUSD, and the mock provider answers
# (X-Synth) with that very usage unless told otherwise.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" -c 'import sys, budlib; budlib.mkleaf(sys.argv[1], ["api.openai.test"], sys.argv[2])' \
    "$T/pki" "$T/pki/llm" || hard_error "leaf for the mock provider"

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

start_llm llm -C "$T/pki/llm.crt" -K "$T/pki/llm.key"
TLS_PORT=$LLM_PORT
start_llm plain
PLAIN_PORT=$LLM_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT TLS_PORT PLAIN_PORT T

# policy NAME CAPS: one metered rule for plain HTTP, one unmetered path,
# one metered rule over TLS
policy()
{
	cat <<YAML
  - name: $1
    rules:
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [GET], paths: ["/models"]}
      - {host: "api.openai.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: $2
YAML
}
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.openai.test": "127.0.0.1", "plain.openai.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "unit-*", input: 1, output: 1}
  - {model: "gpt-4o*", input: 2.50, output: 10.00}
policies:
YAML
	policy req "{requests: 3}"
	policy bout "{bytes_out: 2000}"
	policy bin "{bytes_in: 1500}"
	policy usd "{usd: 0.01, clamp: false}"
	policy usdtls "{usd: 0.001, clamp: false}"
	policy rate "{rate: 5/s}"
	policy win "{requests: 3, window: 2s}"
	cat <<YAML
sandboxes:
  - {id: req, policy: req, token: "literal:tok"}
  - {id: req2, policy: req, token: "literal:tok"}
  - {id: bout, policy: bout, token: "literal:tok"}
  - {id: bin, policy: bin, token: "literal:tok"}
  - {id: usd, policy: usd, token: "literal:tok"}
  - {id: usdtls, policy: usdtls, token: "literal:tok"}
  - {id: rate, policy: rate, token: "literal:tok"}
  - {id: win, policy: win, token: "literal:tok"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

cat >"$T/capcommon.py" <<'PY'
import json, os, time, budlib, itlib
ap, pp, tp = (itlib.env_int("AIRLOCK_PORT"), itlib.env_int("PLAIN_PORT"),
              itlib.env_int("TLS_PORT"))
T = os.environ["T"]
AUDIT, ULOG = T + "/audit.jsonl", T + "/plain.jsonl"
t = itlib.Checks()
_n = [0]


def client(sb, tls=False):
    if tls:
        return budlib.Client(ap, "api.openai.test", tp, sb + ":tok",
                             T + "/state/ca/%s/ca.crt" % sb)
    return budlib.Client(ap, "plain.openai.test", pp, sb + ":tok")


def body_of(size, max_tokens, model="unit-a"):
    """A chat request body of exactly <size> bytes."""
    b = budlib.jbody({"model": model, "max_tokens": max_tokens,
                      "messages": [{"role": "user", "content": ""}]})
    pad = size - len(b)
    assert pad >= 0, (size, len(b))
    return budlib.jbody({"model": model, "max_tokens": max_tokens,
                         "messages": [{"role": "user", "content":
                                       "x" * pad}]})


def post(c, body, usage=None, extra=()):
    """POST a metered request; (response, mark)."""
    _n[0] += 1
    mark = "m%d-%f" % (_n[0], time.time())
    h = ["X-Synth: openai", "X-Mark: " + mark] + list(extra)
    if usage:
        h.append("X-Synth-Usage: " + usage)
    return c.request("POST", "/v1/chat/completions", body, h), mark


def reached(mark, log=ULOG):
    return any(r["headers"].get("x-mark") == mark
               for r in budlib.upstream_records(log))


def refused(r, status, code, cap, what, mark=None, log=ULOG):
    """<r> is the gateway's <status> <code> naming <cap>, audited so, and
    the request never reached the upstream."""
    if not t.error(r, status, code, what + ": %d %s" % (status, code)):
        return False
    j = r.json()
    t.ok(cap in j.get("reason", ""), what + ": reason names the %s cap"
         % cap, j)
    rec = budlib.audit_for(AUDIT, r.header("X-Airlock-Request-Id"))
    t.ok(rec is not None and rec.get("status") == status and
         cap in (rec.get("reason") or ""), what + ": audited as %d with "
         "the %s cap in the reason" % (status, cap), rec)
    if mark is not None:
        time.sleep(0.05)
        t.ok(not reached(mark, log), what + ": never reached the upstream")
    return True


def admitted(r, what):
    return t.ok(r is not None and r.status == 200, what + ": 200", repr(r))
PY

# --- requests: 3 per sandbox (metered or not), then 402; per sandbox
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "requests cap"
from capcommon import *
c = client("req")
r, m = post(c, body_of(100, 10))
admitted(r, "req: request 1 (metered)")
r = c.request("GET", "/models")
admitted(r, "req: request 2 (not metered)")
r, m = post(c, body_of(100, 10))
admitted(r, "req: request 3 (metered)")
for i in (4, 5):
    r, m = post(c, body_of(100, 10))
    refused(r, 402, "budget_exceeded", "requests", "req: request %d" % i, m)
r = c.request("GET", "/models")
refused(r, 402, "budget_exceeded", "requests", "req: unmetered request 6")
c.close()
c = client("req2")
r, m = post(c, body_of(100, 10))
admitted(r, "req2 (same policy, its own counters): request 1")
c.close()
t.done()
PY

# --- bytes_out 2000 / bytes_in 1500: once spent, 402; what went through
# before the last admitted request stayed under the cap
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "bytes caps"
from capcommon import *
for sb, cap, field, body, usage in (
        ("bout", 2000, "bytes_out", 700, "5,5"),
        ("bin", 1500, "bytes_in", 100, None)):
    c = client(sb)
    seq = []
    first_refusal = None
    for i in range(1, 9):
        if usage:
            r, m = post(c, body_of(body, 10), usage)
        else:
            # answers of a few hundred bytes
            r, m = post(c, body_of(body, 10), "%d,5" % (200 + i))
        if r is not None and r.status == 200:
            if first_refusal is not None:
                t.ok(False, "%s: request %d admitted after a refusal"
                     % (sb, i), repr(r))
            rec = budlib.audit_for(AUDIT, r.header("X-Airlock-Request-Id"))
            seq.append(rec.get(field) if rec else None)
            continue
        if first_refusal is None:
            first_refusal = i
            # bytes_in: the request that would pass the cap may have been
            # forwarded; its response is then withheld (402, nothing sent)
            refused(r, 402, "budget_exceeded", field,
                    "%s: request %d" % (sb, i),
                    m if field == "bytes_out" else None)
        else:
            t.error(r, 402, "budget_exceeded", "%s: request %d still "
                    "refused" % (sb, i))
    c.close()
    t.ok(first_refusal is not None, "%s: the %s cap %d stops the sandbox"
         % (sb, field, cap), seq)
    t.ok(len(seq) >= 2, "%s: requests under the cap went through" % sb,
         seq)
    if seq and all(isinstance(x, int) for x in seq):
        before_last = sum(seq[:-1])
        t.ok(before_last < cap, "%s: the last request was admitted with "
             "%d < %d %s counted" % (sb, before_last, cap, field))
        t.ok(sum(seq) >= cap or sum(seq) + seq[-1] > cap,
             "%s: refused only once %s reached (or would pass) the cap "
             "(%d counted)" % (sb, field, sum(seq)), seq)
    else:
        t.ok(False, "%s: audit records carry %s" % (sb, field), seq)
t.done()
PY

# --- usd 0.01 = 10000 µUSD; a request reserves body bytes + max_tokens
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "usd cap"
from capcommon import *
c = client("usd")

def step(size, max_tokens, usage, expect, what):
    body = body_of(size, max_tokens)
    r, m = post(c, body, usage)
    if expect == 200:
        if admitted(r, what):
            rec = budlib.audit_for(AUDIT, r.header("X-Airlock-Request-Id"))
            want = size + max_tokens if usage is None else \
                sum(int(x) for x in usage.split(","))
            t.ok(rec is not None and rec.get("cost_microusd") == want,
                 what + ": cost %d µUSD" % want, rec)
    else:
        refused(r, 402, "budget_exceeded", "usd", what, m)

step(1000, 5000, None, 200, "usd: reserve 6000 of 10000, spend 6000")
step(1000, 3001, None, 402, "usd: reserve 4001 with 4000 left")
step(1000, 3000, "100,100", 200, "usd: reserve exactly the 4000 left, "
     "spend 200")
step(500, 3301, None, 402, "usd: reserve 3801 with 3800 left")
step(500, 3300, None, 200, "usd: reserve exactly the 3800 left, spend it")
step(200, 1, None, 402, "usd: spent: reserve 201 with 0 left")
c.close()

# inside intercepted TLS (usdtls: 1000 µUSD)
c = client("usdtls", tls=True)
r, m = post(c, body_of(200, 801))
refused(r, 402, "budget_exceeded", "usd", "usdtls (TLS): reserve 1001 "
        "of 1000", m, T + "/llm.jsonl")
r, m = post(c, body_of(200, 800), "10,10")
admitted(r, "usdtls (TLS): then reserving 1000 of 1000 → 200")
r, m = post(c, body_of(200, 781))
refused(r, 402, "budget_exceeded", "usd", "usdtls (TLS): reserve 981 "
        "with 980 left", m, T + "/llm.jsonl")
r, m = post(c, body_of(200, 780), "30,0")
admitted(r, "usdtls (TLS): reserve exactly the 980 left")
c.close()
t.done()
PY

# --- rate 5/s: a burst of 12 → 5 admitted, then 429 with Retry-After; a
# second later, admitted again
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "rate cap"
from capcommon import *
c = client("rate")
codes, rs = [], []
t0 = time.time()
for i in range(12):
    r, m = post(c, body_of(100, 10))
    codes.append(r.status if r is not None else None)
    rs.append((r, m))
el = time.time() - t0
n200 = codes.count(200)
t.ok(codes.count(429) >= 1, "rate: a burst of 12 in %.2fs meets 429" % el,
     codes)
t.ok(5 <= n200 <= 5 + int(5 * el) + 1, "rate: 5 admitted (a bucket of 5, "
     "refilled at 5/s)", codes)
t.ok(all(x in (200, 429) for x in codes), "rate: only 200 and 429", codes)
first = next(((r, m) for r, m in rs if r is not None and r.status == 429),
             None)
if first:
    r, m = first
    refused(r, 429, "rate_limited", "rate", "rate: refused request", m)
    ra = r.header("Retry-After")
    t.ok(ra is not None and ra.isdigit() and int(ra) >= 1,
         "rate: Retry-After is whole seconds >= 1", ra)
time.sleep(1.2)
r, m = post(c, body_of(100, 10))
admitted(r, "rate: admitted again 1.2 s later")
c.close()
t.done()
PY

# --- window 2s: requests 3 per window; windows start on even seconds (UTC
# aligned), so after the boundary 3 more go through
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "window"
from capcommon import *
c = client("win")

def wait_until(when):
    now = time.time()
    if when > now:
        time.sleep(when - now)

def next_even():
    return (int(time.time()) // 2 + 1) * 2

def burst(n):
    return [post(c, body_of(100, 10)) for i in range(n)]

# window W (from an even second E): 3 admitted at E+0.05, the 4th refused
# at E+1.6 (same UTC-aligned window; a window counted from some other
# instant would mostly have reset in between), then at E+2.05 a new window:
# 3 admitted, the 4th refused at once
for attempt in range(3):
    E = next_even()
    wait_until(E + 0.05)
    first = burst(3)
    t1 = time.time()
    wait_until(E + 1.6)
    late = burst(1)
    t2 = time.time()
    wait_until(E + 2.05)
    second = burst(4)
    t3 = time.time()
    if t1 < E + 1.5 and t2 < E + 1.95 and t3 < E + 3.9:
        break
    print("# window phases too slow (%.2f %.2f %.2f), again" %
          (t1 - E, t2 - E, t3 - E))
else:
    t.ok(False, "win: requests within their windows (machine too slow?)")
for i, (r, m) in enumerate(first):
    admitted(r, "win: window 1: request %d at +0.05 s" % (i + 1))
refused(late[0][0], 402, "budget_exceeded", "requests", "win: window 1: "
        "request 4 at +1.6 s (same UTC-aligned window)", late[0][1])
for i, (r, m) in enumerate(second[:3]):
    admitted(r, "win: window 2 (after the even second): request %d"
             % (i + 1))
refused(second[3][0], 402, "budget_exceeded", "requests",
        "win: window 2: request 4", second[3][1])
c.close()
# the lifetime cap of sandbox req did not reset meanwhile
c = client("req")
r, m = post(c, body_of(100, 10))
refused(r, 402, "budget_exceeded", "requests", "req (no window): still "
        "refused seconds later", m)
c.close()
t.done()
PY

stop_airlockd
finish
