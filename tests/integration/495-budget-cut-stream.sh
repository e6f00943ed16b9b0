#!/bin/sh
# Budgets, streams cut at the cap (issue 17.2) and the usage chunk the
# program never asked for (17.4), with the real SDKs (npm "openai",
# "@anthropic-ai/sdk", tests/compat/llm-sdk.js) through the proxy:
# - an OpenAI stream without include_usage: the gateway asks for usage and
#   leaves the usage-only chunk (choices: []) out of what the SDK gets,
#   which then sees no chunk without choices; the audit has the exact
#   usage. Asked for by the client, the chunk is kept.
# - caps.cut_streams (on with usd): an OpenAI-compatible stream reporting
#   usage in every chunk (vLLM-like) that passes a $0.001 cap mid-stream
#   ends with an error chunk and [DONE]: the SDK throws an APIError with
#   airlock's reason after the chunks up to the one that passed the cap;
#   audited reason budget_cut, settled at what the stream had cost (prompt
#   + the output that came from the upstream), the rest never sent. An Anthropic stream whose
#   message_start reports a prompt over the cap ends with event: error
#   (budget_exceeded): the SDK throws. With cut_streams: false the same
#   stream runs to its end.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_need_node
for _m in openai @anthropic-ai/sdk; do
	[ -f "$NODE_PATH/$_m/package.json" ] ||
	    skip "no $NODE_PATH/$_m: run npm ci in tests/compat (scripts/install-deps.sh --test)"
done
start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"oa.llm.test": "127.0.0.1", "an.llm.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "*", input: 1, output: 1}
policies:
  - name: cap
    rules: &rules
      - {host: "oa.llm.test", ports: [$LLM_PORT], meter: openai}
      - {host: "an.llm.test", ports: [$LLM_PORT], meter: anthropic}
    caps: {usd: 0.001}
  - name: nocut
    rules: *rules
    caps: {usd: 0.001, cut_streams: false}
  - name: big
    rules: *rules
    caps: {usd: 100}
sandboxes:
  - {id: a, policy: cap, token: "literal:tok-a"}
  - {id: b, policy: cap, token: "literal:tok-b"}
  - {id: n, policy: nocut, token: "literal:tok-n"}
  - {id: g, policy: big, token: "literal:tok-g"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

sdk()
{
	# sdk SANDBOX SDK HOST HEADERS_JSON [EXTRA]: one streaming call
	_v1=/v1
	[ "$2" = openai ] || _v1=
	LLM_SDK_HEADERS=$4 node "$COMPAT_DIR/llm-sdk.js" "$2" stream \
	    "http://$3:$LLM_PORT$_v1" "http://$1:tok-$1@127.0.0.1:$AIRLOCK_PORT" \
	    "${5:-}" 2>>"$T/node.err"
}
{
	sdk g openai oa.llm.test '{"X-Synth":"openai","X-Synth-Usage":"30,7"}'
	sdk g openai oa.llm.test '{"X-Synth":"openai","X-Synth-Usage":"30,7"}' \
	    '{"stream_options":{"include_usage":true}}'
	sdk a openai oa.llm.test '{"X-Synth":"long","X-Synth-Usage":"100,40,50","X-Frag":"none"}'
	sdk b anthropic an.llm.test '{"X-Synth":"anthropic","X-Synth-Usage":"2000,5"}'
	sdk n openai oa.llm.test '{"X-Synth":"long","X-Synth-Usage":"100,40,50","X-Frag":"none"}'
} >"$T/sdk.jsonl"

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "streams cut at the cap"
import json, os, time, budlib, itlib
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
res = [json.loads(l) for l in open(T + "/sdk.jsonl") if l.strip()]
if not t.ok(len(res) == 5, "every SDK run printed its result",
            open(T + "/node.err").read()[-2000:]):
    t.done()
plain, asked, cut, acut, nocut = res

def last(host, sandbox):
    for _ in range(100):
        recs = [r for r in itlib.audit_records(audit)
                if r.get("host") == host and r.get("sandbox") == sandbox]
        if recs:
            return recs[-1]
        time.sleep(0.1)
    return None

t.ok(plain["ok"] and plain["text"] == "ok" and plain["empty_choices"] == 0
     and plain["usage_chunks"] == 0, "no include_usage asked: the SDK sees "
     "no usage-only chunk (choices[0] never undefined)", plain)
rec = last("oa.llm.test", "g")
t.ok(rec is not None and (rec.get("usage") or {}).get("output_tokens") == 7
     and rec.get("cost_microusd") == 37,
     "... and the stream is metered exactly (37 µUSD)", rec)
t.ok(asked["ok"] and asked["usage_chunks"] == 1 and
     asked["empty_choices"] == 1, "include_usage asked: the chunk is kept",
     asked)

t.ok(not cut["ok"] and cut["threw"] == "APIError" and
     "budget_exceeded" in (cut["message"] or "") and
     "usd cap" in (cut["message"] or ""),
     "openai stream over the cap: the SDK throws APIError with the reason",
     cut)
# 100 + 50 n µUSD after n chunks: the 19th passes the $0.001 cap
t.ok(cut["chunks"] == 19 and cut["text"].startswith("w1 w2 ") and
     cut["text"].endswith("w19 "),
     "openai: the 19 chunks up to the one that passed the cap reached the "
     "program, nothing after it", cut)
rec = last("oa.llm.test", "a")
c = rec.get("cost_microusd") if rec else None
# settled at what came from the upstream (the provider bills it): at
# least the 19 chunks, at most the 40
t.ok(rec is not None and rec.get("reason") == "budget_cut" and
     rec.get("status") == 200 and isinstance(c, int) and
     (c - 100) % 50 == 0 and 19 <= (c - 100) // 50 <= 40,
     "openai: audited budget_cut, settled at what it had cost", rec)
t.ok(not acut["ok"] and acut["threw"] in ("APIError",
                                          "PaymentRequiredError") and
     acut["error_type"] == "budget_exceeded" and
     "usd cap" in (acut["message"] or ""),
     "anthropic stream over the cap: the SDK throws with budget_exceeded",
     acut)
rec = last("an.llm.test", "b")
t.ok(rec is not None and rec.get("reason") == "budget_cut",
     "anthropic: audited budget_cut", rec)
t.ok(nocut["ok"] and nocut["chunks"] == 40,
     "cut_streams: false: the stream runs to its end", nocut)
t.done()
PY
finish
