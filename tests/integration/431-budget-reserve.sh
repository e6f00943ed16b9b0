#!/bin/sh
# Money caps that hold (issue 14, point 6): what a metered request reserves
# bounds what it can cost.
#  - n / best_of multiply the output reservation: n: 128 with max_tokens
#    1000 under a 0.1 USD cap → 402, never forwarded; n: 2 and best_of: 3
#    cut short are charged body + 2000 / body + 3000;
#  - an absent or null max_tokens (max_output_tokens in the Responses API)
#    reserves the model's pricing max_output (5000 here), or
#    limits.default_max_tokens (128000 by default) when it has none;
#  - a metered body the parser cannot read within bounds (nesting deeper
#    than 64, truncated, a bound given twice) → 400 bad_request, never
#    forwarded (it used to go out unmetered);
#  - asynchronous endpoints (OpenAI /v1/batches, /v1/fine_tuning/jobs,
#    /v1/threads/*/runs, background: true; Anthropic /v1/messages/batches)
#    → 403 denied naming async_usd, while GET and cancel pass; a rule with
#    async_usd: 0.5 lets a batch through charged exactly 500000 µUSD;
#  - caps.llm_concurrency (default 4): 6 metered requests at once → 4
#    admitted, 2 answered 429 rate_limited with Retry-After; when each
#    prompt is far larger than its body (previous_response_id, file ids),
#    the overshoot past the usd cap stays within llm_concurrency times one
#    request's unreserved cost (docs/configuration.md states it); an
#    explicit llm_concurrency: 2 admits 2 of 3.
#
# Prices: 1 USD per million tokens in and out for "unit-*" (a micro-dollar
# a token), so a request reserves its body's bytes plus its output bound.
. "$top_srcdir/tests/integration/lib.sh"

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

policy()
{
	cat <<YAML
  - name: $1
    rules:
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST, GET], paths: ["/v1/*"], meter: openai}
      - {host: "plain.anthropic.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: anthropic}
      - {host: "async.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai, async_usd: 0.5}
    caps: $2
YAML
}
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1", "plain.anthropic.test": "127.0.0.1",
          "async.openai.test": "127.0.0.1"}
pricing:
  - {model: "unit-max*", input: 1, output: 1, max_output: 5000}
  - {model: "unit-*", input: 1, output: 1}
policies:
YAML
	policy n "{usd: 0.1, clamp: false}"
	policy big "{usd: 1000}"
	policy conc "{usd: 0.01, clamp: false}"
	policy conc2 "{usd: 1000, llm_concurrency: 2}"
	cat <<YAML
sandboxes:
  - {id: n, policy: n, token: "literal:tok"}
  - {id: mx, policy: big, token: "literal:tok"}
  - {id: conc, policy: conc, token: "literal:tok"}
  - {id: conc2, policy: conc2, token: "literal:tok"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

cat >"$T/common.py" <<'PY'
import json, os, threading, time, budlib, itlib
ap, pp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("PLAIN_PORT")
T = os.environ["T"]
AUDIT, ULOG = T + "/audit.jsonl", T + "/plain.jsonl"
t = itlib.Checks()
_n = [0]


def client(sb, host="plain.openai.test"):
    return budlib.Client(ap, host, pp, sb + ":tok")


def mark():
    _n[0] += 1
    return "m%d-%f" % (_n[0], time.time())


def reached(m):
    return any(r["headers"].get("x-mark") == m
               for r in budlib.upstream_records(ULOG))


def send(c, path, body, synth="openai", extra=()):
    m = mark()
    r = c.request("POST", path, body, ["X-Synth: " + synth, "X-Mark: " + m]
                  + list(extra))
    return r, m


def refused(r, m, status, code, word, what):
    t.error(r, status, code, "%s → %d %s" % (what, status, code))
    if r is not None and r.status == status:
        t.ok(word in r.json().get("reason", ""), what + ": the reason says "
             "%r" % word, r.json())
    time.sleep(0.1)
    t.ok(not reached(m), what + ": never forwarded")


def charged_cut_short(c, path, body, want, what, synth="openai"):
    """Cut short after 40 bytes, a request is charged its reservation."""
    data = c.request_raw("POST", path, body, ["X-Synth: " + synth,
                                              "X-Synth-Usage: 1,1",
                                              "X-Cut-After: 40"])
    rid = budlib.head_header(data, "X-Airlock-Request-Id")
    rec = budlib.audit_for(AUDIT, rid) if rid else None
    t.ok(rec is not None and rec.get("cost_microusd") == want,
         "%s: reserved and charged %d µUSD" % (what, want),
         rec if rec else data[:300])
PY

# --- n / best_of
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "n and best_of"
from common import *
c = client("n")
body = budlib.jbody({"model": "unit-a", "max_tokens": 1000, "n": 128,
                     "messages": [{"role": "user", "content": "hi"}]})
r, m = send(c, "/v1/chat/completions", body)
refused(r, m, 402, "budget_exceeded", "usd", "n: 128 × max_tokens 1000 "
        "over a 0.1 USD cap")
body = budlib.jbody({"model": "unit-a", "max_tokens": 1000, "n": 2,
                     "messages": []})
charged_cut_short(c, "/v1/chat/completions", body, len(body) + 2000, "n: 2")
body = budlib.jbody({"model": "unit-a", "prompt": "x", "max_tokens": 1000,
                     "n": 2, "best_of": 3})
charged_cut_short(c, "/v1/completions", body, len(body) + 3000,
                  "best_of: 3, n: 2")
body = b'{"model":"unit-a","max_tokens":10,"n":"128","messages":[]}'
r, m = send(c, "/v1/chat/completions", body)
refused(r, m, 400, "bad_request", "whole number", "n as a string")
c.close()
t.done()
PY

# --- absent or null output bounds
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "max_tokens"
from common import *
c = client("mx")
for req, want, what, path, synth in (
        ({"model": "unit-max-a", "messages": []}, 5000,
         "absent max_tokens: the model's max_output",
         "/v1/chat/completions", "openai"),
        ({"model": "unit-max-a", "max_tokens": None, "messages": []}, 5000,
         "max_tokens: null", "/v1/chat/completions", "openai"),
        ({"model": "unit-max-a", "max_completion_tokens": None,
          "stream": True, "stream_options": {"include_usage": True},
          "messages": []}, 5000,
         "max_completion_tokens: null, streaming", "/v1/chat/completions",
         "openai"),
        ({"model": "unit-max-b", "max_output_tokens": None, "input": "x"},
         5000, "Responses API max_output_tokens: null", "/v1/responses",
         "responses"),
        ({"model": "unit-b", "messages": []}, 128000,
         "no max_output for the model: limits.default_max_tokens (128000)",
         "/v1/chat/completions", "openai")):
    body = budlib.jbody(req)
    charged_cut_short(c, path, body, len(body) + want, what, synth)
c.close()
# Anthropic: an absent max_tokens as well
c = client("mx", "plain.anthropic.test")
body = budlib.jbody({"model": "unit-max-c", "messages": []})
charged_cut_short(c, "/v1/messages", body, len(body) + 5000,
                  "Anthropic without max_tokens", "anthropic")
c.close()
t.done()
PY

# --- bodies that cannot be read within bounds → 400, not forwarded
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "unparsable"
from common import *
c = client("mx")
deep = b"[" * 100 + b"]" * 100
for body, word, what in (
        (b'{"model":"unit-a","max_tokens":5,"messages":' + deep + b'}',
         "deeper", "nesting 100 deep"),
        (b'{"model":"unit-a","stream":true,"max_tokens":5,"messages":' +
         deep + b'}', "deeper", "a stream nesting 100 deep"),
        (b'{"model":"unit-a","max_tokens":5,"messages":[', "JSON",
         "a truncated body"),
        (b'{"model":"unit-a","max_tokens":5,"max_tokens":500000}',
         "more than once", "max_tokens given twice")):
    r, m = send(c, "/v1/chat/completions", body)
    refused(r, m, 400, "bad_request", word, what)
    c.close()
t.done()
PY

# --- asynchronous endpoints
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "async"
from common import *
c = client("mx")
for path, req, what in (
        ("/v1/batches", {"input_file_id": "file-1", "endpoint":
                         "/v1/chat/completions",
                         "completion_window": "24h"}, "OpenAI batch"),
        ("/v1/fine_tuning/jobs", {"model": "unit-a",
                                  "training_file": "file-1"},
         "fine-tuning job"),
        ("/v1/threads/thread_1/runs", {"assistant_id": "asst_1"},
         "assistants run"),
        ("/v1/threads/runs", {"assistant_id": "asst_1"},
         "thread created and run"),
        ("/v1/responses", {"model": "unit-a", "input": "x",
                           "background": True}, "background response")):
    r, m = send(c, path, budlib.jbody(req))
    refused(r, m, 403, "denied", "async_usd", what)
c.close()
c = client("mx", "plain.anthropic.test")
r, m = send(c, "/v1/messages/batches", budlib.jbody({"requests": []}),
            "anthropic")
refused(r, m, 403, "denied", "async_usd", "Anthropic message batch")
c.close()
c = client("mx")
m = mark()
r = c.request("GET", "/v1/batches/batch_1", b"", ["X-Synth: openai",
                                                   "X-Mark: " + m])
t.ok(r is not None and r.status == 200 and reached(m), "reading a batch "
     "passes", repr(r))
r, m = send(c, "/v1/batches/batch_1/cancel", b"")
t.ok(r is not None and r.status == 200 and reached(m), "cancelling one "
     "passes", repr(r))
c.close()
# disguised: an encoded slash an upstream may decode, a method override
c = client("mx")
r, m = send(c, "/v1%2Fbatches", budlib.jbody({"input_file_id": "file-1"}))
refused(r, m, 403, "denied", "async_usd", "a batch at /v1%2Fbatches")
c.close()
c = client("mx")
m = mark()
r = c.request("GET", "/v1/batches", budlib.jbody({"input_file_id":
              "file-1"}), ["X-Synth: openai", "X-Mark: " + m,
              "X-HTTP-Method-Override: POST",
              "Content-Type: application/json"])
t.ok(r is not None and r.status == 403 and not reached(m), "a GET that "
     "overrides its method to POST on /v1/batches is refused", repr(r))
c.close()
# priced by the rule: admitted, charged the flat price
c = client("mx", "async.openai.test")
r, m = send(c, "/v1/batches", budlib.jbody({"input_file_id": "file-1"}))
t.ok(r is not None and r.status == 200 and reached(m), "a rule with "
     "async_usd lets a batch through", repr(r))
rec = budlib.audit_for(AUDIT, r.header("X-Airlock-Request-Id")) if r else None
t.ok(rec is not None and rec.get("cost_microusd") == 500000,
     "and charges it async_usd (500000 µUSD)", rec)
c.close()
t.done()
PY

# --- caps.llm_concurrency
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "concurrency"
from common import *
import adminlib


def parallel(sb, n, usage, delay):
    out = [None] * n

    def run(i):
        c = client(sb)
        body = budlib.jbody({"model": "unit-a", "max_tokens": 100,
                             "previous_response_id": "resp_%d" % i,
                             "input": "x"})
        out[i] = c.request("POST", "/v1/responses", body, [
            "X-Synth: responses", "X-Synth-Usage: " + usage,
            "X-Delay-Ms: %d" % delay])
        c.close()
    ths = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in ths:
        th.start()
        time.sleep(0.02)
    for th in ths:
        th.join(30)
    return out

# each reserves about 160 (body) + 100; each really costs 5000 + 100
rs = parallel("conc", 6, "5000,100", 2000)
codes = [r.status if r is not None else None for r in rs]
t.ok(codes.count(200) == 4 and codes.count(429) == 2, "6 at once under "
     "llm_concurrency 4: 4 admitted, 2 refused with 429", codes)
for r in rs:
    if r is not None and r.status == 429:
        t.error(r, 429, "rate_limited", "beyond llm_concurrency → 429")
        t.ok("llm_concurrency" in r.json().get("reason", "") and
             (r.header("Retry-After") or "").isdigit(), "the reason names "
             "llm_concurrency; Retry-After given", (r.json(), r.headers))
        break
# a request is settled when its exchange ends, which may be just after
# its client read the answer: wait until no reservation is outstanding
deadline = time.time() + 10
while True:
    st, _, u = adminlib.call("unix:" + T + "/state/admin.sock", "GET",
                             "/v1/sandboxes/conc/usage",
                             token=adminlib.token(T + "/state"))
    if u.get("reserved_microusd", -1) == 0 or time.time() > deadline:
        break
    time.sleep(0.05)
spend, cap, each = u.get("spend_microusd", -1), 10000, 5100
# worst overshoot: llm_concurrency requests, each costing what it did not
# reserve (its prompt beyond the body's bytes)
t.ok(spend == 4 * each, "spend is what the 4 admitted cost (%d)" % spend, u)
t.ok(spend - cap <= 4 * each, "overshoot %d <= llm_concurrency × one "
     "request's cost" % (spend - cap))
c = client("conc")
r = c.request("POST", "/v1/responses", budlib.jbody({"model": "unit-a",
              "max_tokens": 1, "input": "x"}), ["X-Synth: responses"])
t.error(r, 402, "budget_exceeded", "then the usd cap is spent: 402")
c.close()
rs = parallel("conc2", 3, "10,10", 1500)
codes = [r.status if r is not None else None for r in rs]
t.ok(codes.count(200) == 2 and codes.count(429) == 1, "llm_concurrency: 2 "
     "→ 2 of 3 at once", codes)
rs = parallel("conc2", 2, "10,10", 10)
t.ok([r.status if r else None for r in rs] == [200, 200], "slots come "
     "back when requests end")
t.done()
PY

stop_airlockd
finish
