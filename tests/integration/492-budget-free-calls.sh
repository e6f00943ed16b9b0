#!/bin/sh
# Budgets, what the program receives is what it asked for (issue 17.4):
# calls that generate nothing (GET /v1/models, GET batch status, DELETE,
# POST .../count_tokens, :countTokens, /responses/input_tokens, /files)
# reserve nothing and cost 0 on a metered rule, so a sandbox whose usd cap
# is 0 still makes them while a completion is refused 402; a
# method-override header does not make a completion free. A complete 2xx
# of a generating call without usage is charged its reservation and
# audited unmetered: true. stream_options.include_usage is put into
# /v1/chat/completions and /v1/completions streams only, never into a
# Responses API stream.
. "$top_srcdir/tests/integration/lib.sh"

start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {default_max_tokens: 1000}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"oa.llm.test": "127.0.0.1", "an.llm.test": "127.0.0.1",
          "gm.llm.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "*", input: 1, output: 1}
policies:
  - name: zero
    rules: &rules
      - {host: "oa.llm.test", ports: [$LLM_PORT], meter: openai}
      - {host: "an.llm.test", ports: [$LLM_PORT], meter: anthropic}
      - {host: "gm.llm.test", ports: [$LLM_PORT], meter: gemini}
    caps: {usd: 0}
  - name: open
    rules: *rules
    caps: {usd: 100}
sandboxes:
  - {id: z, policy: zero, token: "literal:tok-z"}
  - {id: o, policy: open, token: "literal:tok-o"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "calls that generate nothing"
import json, os, budlib, itlib
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
cl = {h: budlib.Client(ap, h + ".llm.test", lp, "z:tok-z")
      for h in ("oa", "an", "gm")}

def seen_upstream(r):
    seq = r.header("X-Upstream-Seq") if r else None
    return seq is not None and budlib.upstream_wait(
        T + "/llm.jsonl", lambda x: str(x["seq"]) == seq) is not None

synth = ["X-Synth: anthropic", "X-Synth-Usage: 500,500"]
free = [("oa", "GET", "/v1/models", b"", []),
        ("oa", "GET", "/v1/batches/batch_123", b"", []),
        ("oa", "DELETE", "/v1/files/file-1", b"", []),
        ("oa", "POST", "/v1/responses/input_tokens",
         budlib.jbody({"model": "gpt-4o", "input": "hi"}), []),
        ("oa", "POST", "/v1/files", b"--b\r\n\r\nx\r\n--b--\r\n",
         ["Content-Type: multipart/form-data; boundary=b"]),
        # even one whose answer carries usage is not metered
        ("an", "POST", "/v1/messages/count_tokens",
         budlib.jbody({"model": "claude-sonnet-4", "messages": []}), synth),
        ("gm", "POST", "/v1beta/models/gemini-2.0-flash:countTokens",
         budlib.jbody({"contents": []}), [])]
for h, m, path, body, hdrs in free:
    what = "%s %s (usd cap 0)" % (m, path)
    r = cl[h].request(m, path, body, hdrs)
    t.ok(r is not None and not itlib.is_gateway_error(r) and
         seen_upstream(r), what + ": forwarded, not refused", r)
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id")) \
        if r else None
    t.ok(rec is not None and rec.get("cost_microusd") == 0 and
         "usage" not in rec, what + ": cost 0, not metered", rec)
# a completion is refused, however it names its method
req = budlib.jbody({"model": "gpt-4o", "max_tokens": 5, "messages": []})
r = cl["oa"].request("POST", "/v1/chat/completions", req)
t.error(r, 402, "budget_exceeded", "a completion under usd cap 0: 402")
r = cl["oa"].request("POST", "/v1/chat/completions", req,
                     ["X-HTTP-Method-Override: GET"])
t.error(r, 402, "budget_exceeded", "a completion with a GET method "
        "override: still reserved (402)")
for c in cl.values():
    c.close()

# a complete 2xx without usage: the reservation, flagged
oa = budlib.Client(ap, "oa.llm.test", lp, "o:tok-o")
body = budlib.jbody({"model": "gpt-4o", "max_tokens": 50, "messages": []})
r = oa.request("POST", "/v1/chat/completions", body,
               ["X-Synth: openai", "X-Synth-Usage: none"])
rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id")) if r else None
t.ok(r is not None and r.status == 200 and rec is not None and
     rec.get("cost_microusd") == len(body) + 50 and
     rec.get("unmetered") is True,
     "2xx without usage: charged the reservation %d, unmetered: true" %
     (len(body) + 50), rec)
body = budlib.jbody({"model": "gpt-4o", "max_tokens": 50, "messages": []})
r = oa.request("POST", "/v1/chat/completions", body,
               ["X-Synth: openai", "X-Synth-Usage: 10,2"])
rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id")) if r else None
t.ok(rec is not None and rec.get("cost_microusd") == 12 and
     "unmetered" not in rec, "metered: its usage, not flagged", rec)

# include_usage: chat and completions streams, never the Responses API
def upstream_body(r):
    seq = r.header("X-Upstream-Seq") if r else None
    x = budlib.upstream_wait(T + "/llm.jsonl",
                             lambda x: str(x["seq"]) == seq) if seq else None
    return json.loads(x["body"]) if x else None

for path, synth_kind, want in (("/v1/chat/completions", "openai", True),
                               ("/v1/completions", "openai", True),
                               ("/v1/responses", "responses", False)):
    req = {"model": "gpt-4o", "stream": True, "max_tokens": 5}
    r = oa.request("POST", path, budlib.jbody(req),
                   ["X-Synth: " + synth_kind, "X-Synth-Usage: 3,2"])
    up = upstream_body(r)
    t.ok(up is not None and ("stream_options" in up) == want,
         "%s stream: include_usage %s" % (path, "put in" if want else
                                          "not put in"), up)
oa.close()
t.done()
PY
finish
