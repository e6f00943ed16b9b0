#!/bin/sh
# Budgets, round 2 of streams (issue 17.2, 17.4, 17.1), against the mock
# provider over plain HTTP, pricing 1 µUSD a prompt and 10 an output token:
# - Gemini's streamGenerateContent without alt=sse (one JSON array, usage
#   in every element) passing a $0.0002 cap at its 4th element: the
#   client gets a valid JSON array, the 4 elements then Gemini's error
#   object {"error": {code 402, message, status}} and "]"; audited
#   budget_cut. With alt=sse the same stream ends with a data event
#   carrying that error object.
# - a stream compressed although airlock asked for identity (X-Encoding
#   forces gzip or br): decoded, sent on without Content-Encoding, byte-
#   exact as uncompressed, the usage-only chunk still left out, metered
#   exactly; the Gemini array too.
# - answers without a usage object: llama.cpp's own /completion counts
#   (body and stream) priced exactly; an OpenAI-compatible stream whose
#   usage came before text that followed it, an Anthropic stream without
#   message_delta: charged the reservation, audited unmetered and
#   usage_partial.
. "$top_srcdir/tests/integration/lib.sh"

if ! "$PYTHON" -c 'import brotli' 2>/dev/null &&
    /usr/bin/python3 -c 'import brotli' 2>/dev/null; then
	PYTHON=/usr/bin/python3
fi
"$PYTHON" -c 'import brotli' 2>/dev/null ||
    skip "python3 brotli not found (Debian python3-brotli)"
start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"ge.llm.test": "127.0.0.1", "oa.llm.test": "127.0.0.1",
          "an.llm.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "*", input: 1, output: 10}
policies:
  - name: cap
    rules: &rules
      - {host: "ge.llm.test", ports: [$LLM_PORT], meter: gemini}
      - {host: "oa.llm.test", ports: [$LLM_PORT], meter: openai}
      - {host: "an.llm.test", ports: [$LLM_PORT], meter: anthropic}
    caps: {usd: 0.0002}
  - name: big
    rules: *rules
    caps: {usd: 100}
sandboxes:
  - {id: c1, policy: cap, token: "literal:tok-c1"}
  - {id: c2, policy: cap, token: "literal:tok-c2"}
  - {id: g, policy: big, token: "literal:tok-g"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "stream shapes"
import json, os, budlib, itlib
from llm_upstream import INTREE_FIXTURES
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
GPATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
GREQ = budlib.jbody({"contents": [{"parts": [{"text": "hi"}]}],
                     "generationConfig": {"maxOutputTokens": 1}})
JSON = "Content-Type: application/json"

def fixture(name):
    with open(os.path.join(INTREE_FIXTURES, name), "rb") as f:
        return f.read()

def rec_of(r):
    return budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))

def sse_data(body):
    return [json.loads(ln[5:]) for ln in body.decode().split("\n")
            if ln.startswith("data:") and ln[5:].strip() != "[DONE]"]

def is_cut_error(o):
    e = o.get("error") if isinstance(o, dict) else None
    return (isinstance(e, dict) and e.get("code") == 402 and
            isinstance(e.get("status"), str) and
            "usd cap" in (e.get("message") or ""))

# 1. cut at the cap: the JSON array, then alt=sse. 10 prompt and 5 more
# output tokens a chunk: 10 + 50 n µUSD after n chunks, the 4th passes
# the $0.0002 cap
LONG = [JSON, "X-Synth: gemini-long", "X-Synth-Usage: 10,20,5"]
c1 = budlib.Client(ap, "ge.llm.test", lp, "c1:tok-c1")
r = c1.request("POST", GPATH, GREQ, LONG)
try:
    arr = json.loads(r.body)
except Exception as ex:
    arr = repr(ex)
t.ok(r is not None and r.status == 200 and isinstance(arr, list) and
     len(arr) == 5 and
     [a["usageMetadata"]["candidatesTokenCount"] for a in arr[:4]] ==
     [5, 10, 15, 20] and is_cut_error(arr[4]),
     "gemini array over the cap: a valid JSON array, the 4 elements up to "
     "the one that passed the cap, then Gemini's error object",
     r.body[-600:] if r else None)
rec = rec_of(r) if r else None
c = rec.get("cost_microusd") if rec else None
t.ok(rec is not None and rec.get("reason") == "budget_cut" and
     isinstance(c, int) and (c - 10) % 50 == 0 and 4 <= (c - 10) // 50 <= 20,
     "gemini array: audited budget_cut, settled at what came", rec)
c2 = budlib.Client(ap, "ge.llm.test", lp, "c2:tok-c2")
r = c2.request("POST", GPATH + "?alt=sse", GREQ, LONG)
try:
    evs = sse_data(r.body)
except Exception as ex:
    evs = [repr(ex)]
t.ok(r is not None and r.status == 200 and len(evs) == 5 and
     all("candidates" in e for e in evs[:4]) and is_cut_error(evs[4]),
     "gemini alt=sse over the cap: 4 events, then a data event with "
     "Gemini's error object", r.body[-600:] if r else None)
rec = rec_of(r) if r else None
t.ok(rec is not None and rec.get("reason") == "budget_cut",
     "gemini alt=sse: audited budget_cut", rec)

# 2. compressed although identity was asked for: decoded, sent identity
g = budlib.Client(ap, "ge.llm.test", lp, "g:tok-g")
o = budlib.Client(ap, "oa.llm.test", lp, "g:tok-g")
for coding in ("gzip", "br"):
    for path, name in ((GPATH + "?alt=sse",
                        "gemini/stream_generate_content_sse.sse"),
                       (GPATH, "gemini/stream_generate_content_array.json")):
        r = g.request("POST", path, GREQ, [JSON, "X-Encoding: " + coding])
        what = "%s [%s]" % (name, coding)
        t.ok(r is not None and r.status == 200 and
             r.header("Content-Encoding") is None and
             r.body == fixture(name),
             "%s: decoded and sent on identity, byte-exact" % what,
             (r.header("Content-Encoding"), r.body[:200]) if r else None)
        rec = rec_of(r) if r else None
        # 11 prompt + (17 + 217 thoughts) output tokens
        t.ok(rec is not None and rec.get("cost_microusd") == 11 + 2340 and
             not rec.get("unmetered"), "%s: metered exactly" % what, rec)
    r = o.request("POST", "/v1/chat/completions", budlib.jbody(
        {"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "hi"}]}),
        [JSON, "X-Synth: openai", "X-Synth-Usage: 30,7",
         "Accept-Encoding: " + coding, "X-Encoding: " + coding])
    evs = sse_data(r.body) if r else []
    t.ok(r is not None and r.status == 200 and
         r.header("Content-Encoding") is None and len(evs) == 2 and
         all(e.get("choices") for e in evs),
         "openai stream [%s]: decoded, the usage-only chunk left out" %
         coding, r.body[:400] if r else None)
    rec = rec_of(r) if r else None
    t.ok(rec is not None and rec.get("cost_microusd") == 100,
         "openai stream [%s]: metered exactly (100)" % coding, rec)

# 3. no usage object: knowable or not
for stream in (False, True):
    r = o.request("POST", "/completion", budlib.jbody(
        {"model": "m", "prompt": "hi", "n_predict": 50,
         "stream": stream}),
        [JSON, "X-Synth: llama", "X-Synth-Usage: 9,4"])
    rec = rec_of(r) if r else None
    t.ok(rec is not None and rec.get("cost_microusd") == 49 and
         not rec.get("unmetered"),
         "llama.cpp /completion (stream %s): its own counts priced" %
         stream, rec)
an = budlib.Client(ap, "an.llm.test", lp, "g:tok-g")
for cl, path, kind, req in (
        (o, "/v1/chat/completions", "stale", {"model": "m", "stream": True,
         "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}),
        (an, "/v1/messages", "anthropic-nodelta", {"model": "m",
         "stream": True, "max_tokens": 20, "messages": [
             {"role": "user", "content": "hi"}]})):
    body = budlib.jbody(req)
    r = cl.request("POST", path, body, [JSON, "X-Synth: " + kind,
                                        "X-Synth-Usage: 9,4"])
    rec = rec_of(r) if r else None
    t.ok(rec is not None and rec.get("unmetered") is True and
         rec.get("usage_partial") is True and
         rec.get("cost_microusd") == len(body) + 200,
         "%s: part of a bill: the reservation (%d), unmetered, "
         "usage_partial" % (kind, len(body) + 200), rec)
for c in (c1, c2, g, o, an):
    c.close()
t.done()
PY
finish
