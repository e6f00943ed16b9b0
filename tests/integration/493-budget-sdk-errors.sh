#!/bin/sh
# Budgets, refusals the SDKs can read (issue 17.5): on rules with meter:
# openai | anthropic | gemini the gateway's own answers use the provider's
# error shape with airlock's code and reason inside, SPEC's reason and
# request_id beside it, and X-Airlock-Request-Id. The real SDKs (npm
# "openai", "@anthropic-ai/sdk", tests/compat/llm-sdk.js) show a 402
# (usd cap) and a 429 (rate cap) as their APIError / RateLimitError with
# the reason text in the message; the same SDKs get an answer through the
# same path when nothing is refused. Gemini's shape (402
# RESOURCE_EXHAUSTED, 403 PERMISSION_DENIED with the ErrorInfo reason)
# checked on the wire; a rule without meter, and a request no rule
# matches, keep SPEC's {"error": CODE, ...}. And (17.8) the same SDKs'
# answers compressed by the provider (gzip, br) cost exactly their usage.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_need_node
for _m in openai @anthropic-ai/sdk; do
	[ -f "$NODE_PATH/$_m/package.json" ] ||
	    skip "no $NODE_PATH/$_m: run npm ci in tests/compat (scripts/install-deps.sh --test)"
done
# the mock compresses with brotli: a Debian package, the system python has it
if ! "$PYTHON" -c 'import brotli' 2>/dev/null &&
    /usr/bin/python3 -c 'import brotli' 2>/dev/null; then
	PYTHON=/usr/bin/python3
fi
"$PYTHON" -c 'import brotli' 2>/dev/null ||
    hard_error "python3 brotli not found (Debian python3-brotli, scripts/install-deps.sh --test)"
start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"oa.llm.test": "127.0.0.1", "an.llm.test": "127.0.0.1",
          "gm.llm.test": "127.0.0.1", "nm.llm.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "*", input: 1, output: 1}
policies:
  - name: zero
    rules: &rules
      - {host: "oa.llm.test", ports: [$LLM_PORT], meter: openai}
      - {host: "an.llm.test", ports: [$LLM_PORT], meter: anthropic}
      - {host: "gm.llm.test", ports: [$LLM_PORT], meter: gemini}
      - {host: "nm.llm.test", ports: [$LLM_PORT], paths: ["/v1/*"]}
    caps: {usd: 0, requests: 1000}
  - name: rate
    rules: *rules
    caps: {rate: 1/h}
  - name: open
    rules: *rules
sandboxes:
  - {id: z, policy: zero, token: "literal:tok-z"}
  - {id: r1, policy: rate, token: "literal:tok-r1"}
  - {id: r2, policy: rate, token: "literal:tok-r2"}
  - {id: o, policy: open, token: "literal:tok-o"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

sdk()
{
	# sdk SANDBOX SDK CALL HOST [EXTRA]: llm-sdk.js's JSON line (the
	# OpenAI SDK's base URL ends in /v1, Anthropic's does not)
	_v1=/v1
	[ "$2" = openai ] || _v1=
	node "$COMPAT_DIR/llm-sdk.js" "$2" "$3" "http://$4:$LLM_PORT$_v1" \
	    "http://$1:tok-$1@127.0.0.1:$AIRLOCK_PORT" "${5:-}" 2>>"$T/node.err"
}
{
	sdk z openai chat oa.llm.test
	sdk z anthropic chat an.llm.test
	sdk o openai chat oa.llm.test
	sdk o anthropic chat an.llm.test
	sdk r1 openai chat oa.llm.test
	sdk r1 openai chat oa.llm.test
	sdk r2 anthropic chat an.llm.test
	sdk r2 anthropic chat an.llm.test
} >"$T/sdk.jsonl"
# issue 17.8: answers the provider compressed (gzip, br), decoded by the
# SDKs' fetch, metered exactly
for _enc in gzip br; do
	for _p in openai:oa anthropic:an; do
		LLM_SDK_HEADERS="{\"X-Encoding\": \"$_enc\", \"X-Synth\": \"${_p%%:*}\", \"X-Synth-Usage\": \"1234,567\"}"
		export LLM_SDK_HEADERS
		sdk o "${_p%%:*}" chat "${_p#*:}.llm.test"
	done
done >"$T/sdkenc.jsonl"
unset LLM_SDK_HEADERS

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "refusals in the providers' shapes"
import json, os, budlib, itlib
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
res = [json.loads(l) for l in open(T + "/sdk.jsonl") if l.strip()]
if not t.ok(len(res) == 8, "every SDK run printed its result",
            open(T + "/node.err").read()[-2000:]):
    t.done()
zo, za, oo, oa_, r1a, r1b, r2a, r2b = res

def refused(x, status, code, word, what, cls):
    t.ok(not x["ok"] and x["status"] == status and x["threw"] == cls,
         "%s: the SDK throws %s with status %d" % (what, cls, status), x)
    t.ok(word in (x["message"] or "") and code in (x["message"] or ""),
         "%s: its message carries the reason (%r) and code %s" %
         (what, word, code), x["message"])
    t.ok(x["error_type"] == code, "%s: error type %s" % (what, code), x)
    rec = budlib.audit_for(audit, x["request_id"]) if x["request_id"] \
        else None
    t.ok(rec is not None and rec.get("status") == status,
         "%s: X-Airlock-Request-Id names the audit record" % what, rec)

refused(zo, 402, "budget_exceeded", "usd cap", "openai, usd cap 0",
        "APIError")
# @anthropic-ai/sdk has a class for 402, a subclass of its APIError
refused(za, 402, "budget_exceeded", "usd cap", "anthropic, usd cap 0",
        "PaymentRequiredError")
t.ok(oo["ok"] and oo["text"], "openai SDK through the proxy: answered", oo)
t.ok(oa_["ok"] and oa_["text"], "anthropic SDK through the proxy: answered",
     oa_)
t.ok(r1a["ok"], "openai, rate 1/h: the first call answered", r1a)
refused(r1b, 429, "rate_limited", "rate cap", "openai, rate 1/h: the "
        "second", "RateLimitError")
t.ok(r2a["ok"], "anthropic, rate 1/h: the first call answered", r2a)
refused(r2b, 429, "rate_limited", "rate cap", "anthropic, rate 1/h: the "
        "second", "RateLimitError")

encs = [json.loads(l) for l in open(T + "/sdkenc.jsonl") if l.strip()]
t.ok(len(encs) == 4, "every compressed SDK run printed its result", encs)
TABLE = [budlib.Price("*", "1", "1")]
for x, (enc, prov) in zip(encs, [(e, p) for e in ("gzip", "br")
                                 for p in ("openai", "anthropic")]):
    what = "%s SDK, answer in %s" % (prov, enc)
    t.ok(x["ok"] and x["text"] and x["content_encoding"] == enc,
         "%s: answered, the SDK decoded the %s body" % (what, enc), x)
    rec = budlib.audit_for(audit, x["request_id"]) if x["request_id"] \
        else None
    u = (rec or {}).get("usage") or {}
    t.ok(u.get("input_tokens") == 1234 and u.get("output_tokens") == 567,
         "%s: usage 1234 in, 567 out" % what, rec)
    if rec is not None and u.get("input_tokens") is not None:
        budlib.check_cost_fields(t, audit, rec, budlib.cost(TABLE, u)[0],
                                 what)

# Gemini's shape, and SPEC's where no meter applies
gm = budlib.Client(ap, "gm.llm.test", lp, "z:tok-z")
r = gm.request("POST", "/v1beta/models/gemini-2.0-flash:generateContent",
               budlib.jbody({"contents": []}))
j = r.json() if r is not None else {}
e = j.get("error") or {}
t.error(r, 402, "budget_exceeded", "gemini: 402 budget_exceeded")
t.ok(e.get("code") == 402 and e.get("status") == "RESOURCE_EXHAUSTED" and
     "usd cap" in e.get("message", "") and
     e.get("details", [{}])[0].get("@type") ==
     "type.googleapis.com/google.rpc.ErrorInfo" and
     j.get("request_id") == r.header("X-Airlock-Request-Id"),
     "gemini: {error: {code, message, status, details}}", j)
gm.close()
go = budlib.Client(ap, "gm.llm.test", lp, "o:tok-o")
r = go.request("POST", "/v1beta/models/gemini-2.0-flash:batchGenerateContent",
               budlib.jbody({"requests": []}))
j = r.json() if r is not None else {}
t.error(r, 403, "denied", "gemini: asynchronous work: 403 denied")
t.ok((j.get("error") or {}).get("status") == "PERMISSION_DENIED" and
     "async_usd" in (j.get("error") or {}).get("message", ""),
     "gemini: 403 is PERMISSION_DENIED with the reason", j)
go.close()
oa = budlib.Client(ap, "oa.llm.test", lp, "z:tok-z")
r = oa.request("POST", "/v1/chat/completions", b"{not json")
j = r.json() if r is not None else {}
t.ok(r is not None and r.status == 400 and
     (j.get("error") or {}).get("code") == "bad_request" and
     (j.get("error") or {}).get("type") == "bad_request",
     "openai: 400 bad_request in OpenAI's shape", j)
oa.close()
nm = budlib.Client(ap, "nm.llm.test", lp, "z:tok-z")
r = nm.request("GET", "/elsewhere")
j = r.json() if r is not None else {}
t.error(r, 403, "denied", "no rule matches: 403")
t.ok(j.get("error") == "denied", "no rule matches: SPEC's shape", j)
nm.close()
t.done()
PY
finish
