#!/bin/sh
# Budgets, clamping (issue 17.6): a metered request whose worst case passes
# what the usd cap leaves, but whose prompt and at least 16 output tokens
# fit, is admitted with its output bound lowered to the most that fits:
# every bound it gives rewritten (max_tokens, max_completion_tokens,
# max_output_tokens, generationConfig.maxOutputTokens), or the API's own
# put in when it gives none (chat: max_completion_tokens, Responses API:
# max_output_tokens, Gemini: generationConfig.maxOutputTokens, into an
# existing generationConfig or a new one), the rest of the body byte for
# byte; the reservation is the clamped worst case; the audit says
# budget_clamped. n multiplies it. Refused (402) when fewer than 16 tokens
# fit. A request that fits is not touched.
. "$top_srcdir/tests/integration/lib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

cat >"$T/pricing.py" <<'PY'
from budlib import Price
TABLE = [
    Price("gpt-4o-mini*", "0.15", "0.60"),
    Price("claude-sonnet-4*", "3.00", "15.00"),
    Price("gemini-2.0-flash*", "0.10", "0.40", cached_input="0.025"),
]
PY
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {default_max_tokens: 100000}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"oa.llm.test": "127.0.0.1", "an.llm.test": "127.0.0.1",
          "gm.llm.test": "127.0.0.1"}
budget_store: file
YAML
	(cd "$T" && "$PYTHON" -c 'import budlib, pricing; print(budlib.pricing_yaml(pricing.TABLE), end="")')
	cat <<YAML
policies:
  - name: p
    rules:
      - {host: "oa.llm.test", ports: [$LLM_PORT], meter: openai}
      - {host: "an.llm.test", ports: [$LLM_PORT], meter: anthropic}
      - {host: "gm.llm.test", ports: [$LLM_PORT], meter: gemini}
    caps: {usd: 0.01}
  - name: tiny
    rules:
      - {host: "oa.llm.test", ports: [$LLM_PORT], meter: openai}
    caps: {usd: 0.000040}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: t, policy: tiny, token: "literal:tok-t"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "clamping"
import json, os, re, budlib, itlib
from pricing import TABLE
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
CAP = 10000
oa = budlib.Client(ap, "oa.llm.test", lp, "a:tok-a")
an = budlib.Client(ap, "an.llm.test", lp, "a:tok-a")
gm = budlib.Client(ap, "gm.llm.test", lp, "a:tok-a")

def fits(model, body_len, n, left, max_out):
    """The most output tokens per completion that fit in <left>."""
    lo, hi = 0, max_out
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if budlib.worst(TABLE, model, body_len, mid * n) <= left:
            lo = mid
        else:
            hi = mid - 1
    return lo

def upstream(r):
    seq = r.header("X-Upstream-Seq") if r else None
    return budlib.upstream_wait(T + "/llm.jsonl",
                                lambda x: str(x["seq"]) == seq) \
        if seq else None

spent = 0

def case(cl, path, req, model, want_body, what, n=1, max_out=100000,
         hdrs=("X-Synth: openai", "X-Synth-Usage: 20,5")):
    """Send <req>; it must go upstream as want_body(k) with k what fits."""
    global spent
    body = budlib.jbody(req)
    left = CAP - spent
    k = fits(model, len(body), n, left, max_out)
    r = cl.request("POST", path, body, ["Content-Type: application/json"] +
                   list(hdrs))
    if not t.ok(r is not None and r.status == 200, what + ": 200", r):
        return None
    up = upstream(r)
    got = up["body"].encode("latin-1") if up else b""
    t.ok(got == want_body(k), what + ": clamped to %d tokens, the rest "
         "byte for byte" % k, "sent %r, upstream saw %r" % (body, got))
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
    t.ok(rec is not None and (rec.get("reason") or "").startswith(
        "budget_clamped") and (" %d tokens" % k) in rec.get("reason", ""),
         what + ": audited budget_clamped", rec)
    if rec is not None and isinstance(rec.get("cost_microusd"), int):
        spent += rec["cost_microusd"]
    return k

# chat, max_tokens given (worst: 60000+ µUSD against 10000)
req = {"model": "gpt-4o-mini", "max_tokens": 100000,
       "messages": [{"role": "user", "content": "hi"}]}
b0 = budlib.jbody(req)
case(oa, "/v1/chat/completions", req, "gpt-4o-mini",
     lambda k: b0.replace(b'"max_tokens":100000', b'"max_tokens":%d' % k),
     "chat max_tokens")
# chat, both bounds given: both rewritten
req = {"model": "gpt-4o-mini", "max_tokens": 90000,
       "max_completion_tokens": 100000,
       "messages": [{"role": "user", "content": "hi"}]}
b1 = budlib.jbody(req)
case(oa, "/v1/chat/completions", req, "gpt-4o-mini",
     lambda k: b1.replace(b'"max_tokens":90000', b'"max_tokens":%d' % k)
     .replace(b'"max_completion_tokens":100000',
              b'"max_completion_tokens":%d' % k), "chat two bounds")
# chat without a bound (default_max_tokens 100000), streaming: the bound
# and include_usage both put in
req = {"model": "gpt-4o-mini", "stream": True,
       "messages": [{"role": "user", "content": "hi"}]}
b2 = budlib.jbody(req)
case(oa, "/v1/chat/completions", req, "gpt-4o-mini",
     lambda k: b2[:-1] + b',"stream_options":{"include_usage":true}' +
     b',"max_completion_tokens":%d}' % k, "chat stream, no bound")
# n = 3: the bound per completion
req = {"model": "gpt-4o-mini", "n": 3, "max_tokens": 50000,
       "messages": [{"role": "user", "content": "hi"}]}
b3 = budlib.jbody(req)
case(oa, "/v1/chat/completions", req, "gpt-4o-mini",
     lambda k: b3.replace(b'"max_tokens":50000', b'"max_tokens":%d' % k),
     "chat n=3", n=3, max_out=50000)
# Responses API without a bound
req = {"model": "gpt-4o-mini", "input": "hi"}
b4 = budlib.jbody(req)
case(oa, "/v1/responses", req, "gpt-4o-mini",
     lambda k: b4[:-1] + b',"max_output_tokens":%d}' % k, "responses",
     hdrs=("X-Synth: responses", "X-Synth-Usage: 20,5"))
# Anthropic max_tokens
req = {"model": "claude-sonnet-4-20250514", "max_tokens": 64000,
       "messages": [{"role": "user", "content": "hi"}]}
b5 = budlib.jbody(req)
case(an, "/v1/messages", req, "claude-sonnet-4-20250514",
     lambda k: b5.replace(b'"max_tokens":64000', b'"max_tokens":%d' % k),
     "anthropic", max_out=64000,
     hdrs=("X-Synth: anthropic", "X-Synth-Usage: 20,5"))
# Gemini: into an existing generationConfig, then a new one
req = {"contents": [{"parts": [{"text": "hi"}]}],
       "generationConfig": {"temperature": 0.5}}
b6 = budlib.jbody(req)
case(gm, "/v1beta/models/gemini-2.0-flash:generateContent", req,
     "gemini-2.0-flash", lambda k: b6.replace(
         b'"temperature":0.5}', b'"temperature":0.5,"maxOutputTokens":%d}'
         % k), "gemini generationConfig", hdrs=())
req = {"contents": [{"parts": [{"text": "hi"}]}]}
b7 = budlib.jbody(req)
case(gm, "/v1beta/models/gemini-2.0-flash:generateContent", req,
     "gemini-2.0-flash", lambda k: b7[:-1] +
     b',"generationConfig":{"maxOutputTokens":%d}}' % k, "gemini none",
     hdrs=())
# a request that fits is sent as written, not audited clamped
req = {"model": "gpt-4o-mini", "max_tokens": 100,
       "messages": [{"role": "user", "content": "hi"}]}
b8 = budlib.jbody(req)
r = oa.request("POST", "/v1/chat/completions", b8,
               ["X-Synth: openai", "X-Synth-Usage: 20,5"])
up = upstream(r)
rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id")) if r else None
t.ok(up is not None and up["body"].encode("latin-1") == b8 and
     rec is not None and "clamped" not in (rec.get("reason") or ""),
     "a request that fits is not touched", (up, rec))

# tiny cap (40 µUSD): about 10 tokens fit after the prompt: refused
tc = budlib.Client(ap, "oa.llm.test", lp, "t:tok-t")
req = {"model": "gpt-4o-mini", "max_tokens": 1000,
       "messages": [{"role": "user", "content": "x" * 170}]}
body = budlib.jbody(req)
k = fits("gpt-4o-mini", len(body), 1, 40, 1000)
assert k < 16, k
r = tc.request("POST", "/v1/chat/completions", body,
               ["X-Synth: openai", "X-Synth-Usage: 20,5"])
t.error(r, 402, "budget_exceeded", "fewer than 16 tokens fit (%d): 402" % k)
# a shorter prompt: 16 or more fit, clamped
req = {"model": "gpt-4o-mini", "max_tokens": 1000, "messages": []}
body = budlib.jbody(req)
k = fits("gpt-4o-mini", len(body), 1, 40, 1000)
assert k >= 16, k
r = tc.request("POST", "/v1/chat/completions", body,
               ["X-Synth: openai", "X-Synth-Usage: 20,5"])
up = upstream(r)
t.ok(r is not None and r.status == 200 and up is not None and
     json.loads(up["body"]).get("max_tokens") == k,
     "tiny cap: %d tokens fit: clamped" % k, (r, up))
for c in (oa, an, gm, tc):
    c.close()
t.done()
PY
finish
