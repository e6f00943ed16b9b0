#!/bin/sh
# Budgets, metering: every fixture of ../shared/testdata/llm (OpenAI chat
# completions and Responses, Anthropic messages; JSON and SSE), replayed by
# a mock provider over intercepted HTTPS in awkward fragments (1-7 bytes,
# cut inside "data:" and between CR and LF; LF and CRLF streams; chunked,
# Content-Length), is metered: the audit's usage is the MANIFEST's
# expected_usage (input_tokens = every prompt token, cached and
# cache-written included), cost_microusd is this script's own exact integer
# arithmetic over the config's pricing (first glob match wins; no match =
# the highest price of each kind and "unpriced": true), cost_usd is
# cost_microusd / 10^6 exactly. Cached-token prices (OpenAI chat and
# Responses, Anthropic cache reads and writes), include_usage injection into
# OpenAI streams that lack it (and no rewrite otherwise), a response cut
# short charged its reservation (max_tokens, max_completion_tokens,
# max_output_tokens, limits.default_max_tokens; body bytes as the input
# estimate; a body that is not JSON refused with 400), a metered body
# over limits.body_bytes refused with 413, plain HTTP metering.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" -c 'import sys, budlib; budlib.mkleaf(sys.argv[1], ["api.openai.test", "api.anthropic.test", "plain.openai.test"], sys.argv[2])' \
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

# The pricing table, shared by the config and the checks.
cat >"$T/pricing.py" <<'PY'
from budlib import Price
TABLE = [
    Price("gpt-4o-mini*", "0.15", "0.60", cached_input="0.075"),
    Price("gpt-4o*", "2.50", "10.00", cached_input="1.25"),
    Price("claude-sonnet-4*", "3.00", "15.00", cached_input="0.30",
          cache_write="3.75"),
    Price("claude-opus-4*", "15.00", "75.00", cached_input="1.50",
          cache_write="18.75"),
    # cached_input and cache_write default to input
    Price("claude-3-7-sonnet*", "3", "15"),
    Price("claude-test", "0.333333", "1.777777", cached_input="0.033333",
          cache_write="0.416667"),
    Price("odd-*", "0.000007", "0.000013", cached_input="0.000003"),
]
PY
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {default_max_tokens: 3000, body_bytes: 64KiB}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.openai.test": "127.0.0.1", "api.anthropic.test": "127.0.0.1",
          "plain.openai.test": "127.0.0.1"}
budget_store: file
YAML
	(cd "$T" && "$PYTHON" -c 'import budlib, pricing; print(budlib.pricing_yaml(pricing.TABLE), end="")')
	cat <<YAML
policies:
  - name: p
    rules:
      - {host: "api.openai.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "api.anthropic.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: anthropic}
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 1000}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

# --- every fixture, twice: as recorded (SSE chunked with LF, JSON with
# Content-Length), then SSE with CRLF and Content-Length, JSON chunked
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "fixture metering"
import json, os, budlib, itlib
from llm_upstream import Fixtures, fixture_model
from pricing import TABLE
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
fx = Fixtures()
if fx.embedded:
    print("# ../shared/testdata/llm absent: embedded fixtures")
clients = {"openai": budlib.Client(ap, "api.openai.test", tp, "a:tok-a", ca),
           "anthropic": budlib.Client(ap, "api.anthropic.test", tp,
                                      "a:tok-a", ca)}
n_usage = n_stream = n_json = 0
for e in fx.manifest:
    name = e["file"]
    data = fx.data(name)
    model = fixture_model(data) or "gpt-4o-2024-08-06"
    prov, api, stream = e["provider"], e["api"], bool(e.get("stream"))
    if prov == "anthropic":
        path = "/v1/messages"
        req = {"model": model, "max_tokens": 1024, "stream": stream,
               "messages": [{"role": "user", "content": "hi"}]}
    elif api == "responses":
        path = "/v1/responses"
        req = {"model": model, "input": "hi", "max_output_tokens": 1024,
               "stream": stream}
    else:
        path = "/v1/chat/completions"
        req = {"model": model, "max_tokens": 1024, "stream": stream,
               "messages": [{"role": "user", "content": "hi"}]}
        if stream:
            req["stream_options"] = {"include_usage": True}
    want = budlib.expected_usage(e, data)
    status = int(e.get("http_status") or 200)
    for variant in ("as-recorded", "crlf/length"):
        hdrs = ["X-Fixture: " + name, "Content-Type: application/json"]
        body_want = data
        if variant != "as-recorded":
            if name.endswith(".sse"):
                hdrs += ["X-Newlines: crlf", "X-Framing: length"]
                body_want = data.replace(b"\r\n", b"\n").replace(
                    b"\n", b"\r\n")
            else:
                hdrs.append("X-Framing: chunked")
        what = "%s [%s]" % (name, variant)
        r = clients[prov].request("POST", path, budlib.jbody(req), hdrs)
        if not t.ok(r is not None and r.status == status,
                    "%s: status %d through the proxy" % (what, status),
                    repr(r)):
            continue
        t.ok(r.body == body_want, "%s: body relayed unchanged" % what,
             "%d bytes, want %d" % (len(r.body), len(body_want)))
        rid = r.header("X-Airlock-Request-Id")
        rec = budlib.audit_for(audit, rid)
        if not t.ok(rec is not None, "%s: audited" % what, rid):
            continue
        if want is None:
            t.ok("usage" not in rec, "%s: no usage reported, none in the "
                 "audit" % what, rec.get("usage"))
            t.ok(rec.get("cost_microusd") in (None, 0),
                 "%s: nothing charged" % what, rec.get("cost_microusd"))
            continue
        n_usage += 1
        if stream:
            n_stream += 1
        else:
            n_json += 1
        got = rec.get("usage") or {}
        sub = {k: got.get(k) for k in want}
        t.ok(sub == want, "%s: audit usage %s" % (what, json.dumps(want)),
             "got %s" % json.dumps(got))
        micro, unpriced = budlib.cost(TABLE, want)
        budlib.check_cost_fields(t, audit, rec, micro, what)
        if unpriced:
            t.ok(rec.get("unpriced") is True, "%s: model %s matches no "
                 "price: unpriced: true" % (what, model), rec)
        else:
            t.ok(not rec.get("unpriced"), "%s: priced, no unpriced flag" %
                 what, rec)
for c in clients.values():
    c.close()
t.ok(n_stream >= 2 and n_json >= 2, "fixtures with usage covered: %d SSE, "
     "%d JSON (x2 variants)" % (n_stream, n_json))
t.done()
PY

# --- cached-token prices, rounding, unpriced models, first match wins
# (synthesized answers with chosen usage)
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "synthesized usage"
import json, os, budlib, itlib
from pricing import TABLE
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
oa = budlib.Client(ap, "api.openai.test", tp, "a:tok-a", ca)
an = budlib.Client(ap, "api.anthropic.test", tp, "a:tok-a", ca)

# (client, path, synth kind, model, stream, P, C, cached, write)
cases = [
    (oa, "/v1/chat/completions", "openai", "gpt-4o-mini-2024-07-18", False,
     1234567, 76543, 654321, 0),
    (oa, "/v1/chat/completions", "openai", "gpt-4o-2024-08-06", True,
     1001, 333, 257, 0),
    (oa, "/v1/responses", "responses", "gpt-4o-mini-2024-07-18", False,
     777, 91, 512, 0),
    (oa, "/v1/chat/completions", "openai", "odd-model-1", False,
     3, 1, 1, 0),
    (oa, "/v1/chat/completions", "openai", "odd-model-2", False,
     1000003, 999999, 123457, 0),
    (an, "/v1/messages", "anthropic", "claude-test", False,
     5000, 1234, 1700, 900),
    (an, "/v1/messages", "anthropic", "claude-test", True,
     91, 7, 13, 21),
    (an, "/v1/messages", "anthropic", "claude-opus-4-1", True,
     40000, 2000, 30000, 5000),
    # no price matches: the highest of each kind, flagged
    (oa, "/v1/chat/completions", "openai", "mystery-model-9", False,
     10000, 1000, 2000, 0),
    (an, "/v1/messages", "anthropic", "claude-2.1", False,
     12345, 678, 1000, 2000),
]
for cl, path, kind, model, stream, p, c, cached, write in cases:
    req = {"model": model, "max_tokens": 100000, "stream": stream,
           "messages": [{"role": "user", "content": "hi"}]}
    if stream and kind == "openai":
        req["stream_options"] = {"include_usage": True}
    what = "%s %s%s usage %d/%d/%d/%d" % (kind, model, " SSE" if stream
                                         else "", p, c, cached, write)
    r = cl.request("POST", path, budlib.jbody(req), [
        "X-Synth: " + kind, "X-Synth-Usage: %d,%d,%d,%d" % (p, c, cached,
                                                            write)])
    if not t.ok(r is not None and r.status == 200, what + ": 200",
                repr(r)):
        continue
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
    want = {"model": model, "input_tokens": p, "cached_tokens": cached,
            "cache_write_tokens": write, "output_tokens": c}
    got = (rec or {}).get("usage") or {}
    t.ok({k: got.get(k) for k in want} == want, what + ": audit usage",
         json.dumps(got))
    micro, unpriced = budlib.cost(TABLE, want)
    budlib.check_cost_fields(t, audit, rec, micro, what)
    t.ok(bool((rec or {}).get("unpriced")) == unpriced,
         what + ": unpriced %s" % ("true" if unpriced else "absent"),
         (rec or {}).get("unpriced"))
oa.close()
an.close()
t.done()
PY

# --- include_usage: injected into an OpenAI stream that lacks it, left
# alone otherwise; the stream is metered either way
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "include_usage"
import json, os, time, budlib, itlib
from pricing import TABLE
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit, ulog = T + "/audit.jsonl", T + "/llm.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
oa = budlib.Client(ap, "api.openai.test", tp, "a:tok-a", ca)
an = budlib.Client(ap, "api.anthropic.test", tp, "a:tok-a", ca)
M = "gpt-4o-2024-08-06"
msgs = [{"role": "user", "content": "count to 3 \u00e9\u4e2d \"q\" /x/"}]
seq = [0]

def send(cl, path, body, kind, what):
    """POST through the proxy; (response, the request body the upstream
    received, its record, the audit record)."""
    seq[0] += 1
    mark = "inc-%d" % seq[0]
    r = cl.request("POST", path, body, ["X-Synth: " + kind,
                                        "X-Synth-Usage: 120,30",
                                        "X-Mark: " + mark])
    if not t.ok(r is not None and r.status == 200, what + ": 200", repr(r)):
        return None, None, None, None
    up = budlib.upstream_wait(ulog, lambda x: x["headers"].get("x-mark") ==
                              mark)
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
    if not t.ok(up is not None, what + ": reached the upstream"):
        return r, None, None, rec
    return r, up["body"].encode("latin-1"), up, rec

def metered(rec, what):
    u = (rec or {}).get("usage") or {}
    t.ok(u.get("input_tokens") == 120 and u.get("output_tokens") == 30,
         what + ": the stream's usage chunk was metered", rec)
    want = budlib.cost(TABLE, {"model": M, "input_tokens": 120,
                               "output_tokens": 30})[0]
    t.ok((rec or {}).get("cost_microusd") == want, what + ": cost %d" % want,
         rec)

def injected(orig, got, up, what):
    try:
        j = json.loads(got)
    except ValueError:
        t.ok(False, what + ": upstream body is JSON", got[:300])
        return
    so = j.get("stream_options")
    t.ok(isinstance(so, dict) and so.get("include_usage") is True,
         what + ": upstream got stream_options.include_usage: true", got)
    o = json.loads(orig)
    osd = o.pop("stream_options", {})
    jsd = dict(j.pop("stream_options", {}) or {})
    jsd.pop("include_usage", None)
    t.ok(j == o and jsd == {k: v for k, v in osd.items()
                            if k != "include_usage"},
         what + ": every other member unchanged", (o, j))
    cl = int(up["headers"].get("content-length", "-1"))
    t.ok(cl == len(got) and "transfer-encoding" not in up["headers"],
         what + ": Content-Length fixed to the new body (%d)" % len(got),
         up["headers"])

# 1. stream without stream_options
orig = budlib.jbody({"model": M, "stream": True, "messages": msgs,
                     "max_tokens": 64})
r, got, up, rec = send(oa, "/v1/chat/completions", orig, "openai",
                       "stream without stream_options")
if got is not None:
    injected(orig, got, up, "stream without stream_options")
    metered(rec, "stream without stream_options")

# 2. stream_options with other members, no include_usage
orig = budlib.jbody({"model": M, "stream": True, "messages": msgs,
                     "stream_options": {"include_obfuscation": False},
                     "temperature": 0.5, "max_completion_tokens": 64})
r, got, up, rec = send(oa, "/v1/chat/completions", orig, "openai",
                       "stream_options without include_usage")
if got is not None:
    injected(orig, got, up, "stream_options without include_usage")
    metered(rec, "stream_options without include_usage")

# 1b. the same, the sandbox sending its body chunked
orig = budlib.jbody({"model": M, "stream": True, "messages": msgs,
                     "max_tokens": 64})
seq[0] += 1
mark = "inc-%d" % seq[0]
c = oa._tls()
half = len(orig) // 2
c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.test:%d\r\n"
       b"X-Synth: openai\r\nX-Synth-Usage: 120,30\r\nX-Mark: %s\r\n"
       b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n"
       b"0\r\n\r\n" % (tp, mark.encode(), half, orig[:half],
                          len(orig) - half, orig[half:]))
r = itlib.read_response(c.rd)
if t.ok(r.status == 200, "chunked stream request: 200", repr(r)):
    up = budlib.upstream_wait(ulog, lambda x: x["headers"].get("x-mark") ==
                              mark)
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
    if t.ok(up is not None, "chunked stream request: reached the upstream"):
        injected(orig, up["body"].encode("latin-1"), up,
                 "chunked stream request")
        metered(rec, "chunked stream request")

# 1c. 200 such requests of every body size from 100 to 299 bytes: each
# one rewritten (the body is parsed from exactly its own bytes, whatever
# lies beyond them in memory)
marks = {}
for i in range(200):
    seq[0] += 1
    mark = "inc-%d" % seq[0]
    orig = budlib.jbody({"model": M, "stream": True, "max_tokens": 8,
                         "messages": [{"role": "user", "content":
                                       "p" * i}]})
    r = oa.request("POST", "/v1/chat/completions", orig,
                   ["X-Synth: openai", "X-Synth-Usage: 120,30",
                    "X-Mark: " + mark])
    if r is None or r.status != 200:
        t.ok(False, "sizes: request %d: 200" % i, repr(r))
        continue
    marks[mark] = (len(orig), r.header("X-Airlock-Request-Id"))
time.sleep(0.3)
ups = {x["headers"].get("x-mark"): x for x in budlib.upstream_records(ulog)}
missed = []
for mark, (n, rid) in sorted(marks.items()):
    x = ups.get(mark)
    try:
        so = json.loads(x["body"]).get("stream_options") or {}
    except (TypeError, ValueError):
        so = {}
    if so.get("include_usage") is not True:
        missed.append(n)
t.ok(len(marks) == 200 and not missed, "sizes: include_usage injected "
     "into all 200 streams of %d..%d bytes" % (min(v[0] for v in
                                                     marks.values()),
                                               max(v[0] for v in
                                                   marks.values())),
     "not injected at body sizes %r" % missed)
recs = {a.get("id"): a for a in itlib.audit_records(audit)}
unmetered = [n for mark, (n, rid) in marks.items()
             if not (recs.get(rid) or {}).get("usage")]
t.ok(not unmetered, "sizes: all 200 streams metered", unmetered)

# 3. include_usage already true: the body goes out byte for byte
orig = (b'{ "model" : "%s",\n  "stream":true , "stream_options": '
        b'{"include_usage" : true},\n "messages": %s, "max_tokens": 64 }'
        % (M.encode(), json.dumps(msgs).encode()))
r, got, up, rec = send(oa, "/v1/chat/completions", orig, "openai",
                       "include_usage already set")
if got is not None:
    t.ok(got == orig, "include_usage already set: body not rewritten",
         got)
    metered(rec, "include_usage already set")

# 4. not streaming: untouched
orig = b'{"model": "%s", "messages": [], "max_tokens": 64, "stream": false}' \
    % M.encode()
r, got, up, rec = send(oa, "/v1/chat/completions", orig, "openai",
                       "non-streaming request")
if got is not None:
    t.ok(got == orig, "non-streaming request: body not rewritten", got)

# 5. an Anthropic stream: untouched (its usage comes unasked)
orig = b'{"model": "claude-test", "stream": true, "max_tokens": 64, ' \
    b'"messages": []}'
r, got, up, rec = send(an, "/v1/messages", orig, "anthropic",
                       "Anthropic stream")
if got is not None:
    t.ok(got == orig, "Anthropic stream: body not rewritten", got)
oa.close()
an.close()
t.done()
PY

# --- a response cut short is charged its reservation: the body's bytes as
# input, max_tokens | max_completion_tokens | max_output_tokens |
# limits.default_max_tokens (3000) as output, at the model's prices (the
# highest when none matches)
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "cut short"
import json, os, budlib, itlib
from pricing import TABLE
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
oa = budlib.Client(ap, "api.openai.test", tp, "a:tok-a", ca)
an = budlib.Client(ap, "api.anthropic.test", tp, "a:tok-a", ca)
cases = [
    (oa, "/v1/chat/completions", "openai", {"model": "gpt-4o-2024-08-06",
     "max_tokens": 700, "messages": [{"role": "user", "content": "x" * 300}]},
     700),
    (oa, "/v1/chat/completions", "openai", {"model": "gpt-4o-mini-x",
     "max_completion_tokens": 12345, "messages": []}, 12345),
    (oa, "/v1/responses", "responses", {"model": "gpt-4o-mini-x",
     "max_output_tokens": 999, "input": "y" * 50}, 999),
    (oa, "/v1/chat/completions", "openai", {"model": "odd-1",
     "messages": []}, 3000),
    (oa, "/v1/chat/completions", "openai", {"model": "nobody-prices-me",
     "max_tokens": 5000, "messages": []}, 5000),
    # a stream that already asks for usage (so the body is not rewritten),
    # cut before its usage chunk
    (oa, "/v1/chat/completions", "openai", {"model": "gpt-4o-2024-08-06",
     "stream": True, "stream_options": {"include_usage": True},
     "max_tokens": 4321, "messages": []}, 4321),
    (an, "/v1/messages", "anthropic", {"model": "claude-sonnet-4-5",
     "stream": True, "max_tokens": 8000, "messages": []}, 8000),
]
for cl, path, kind, req, max_out in cases:
    if req is None:
        body, model = b"model=gpt-4o&max_tokens=5 (not JSON)", ""
    else:
        body, model = budlib.jbody(req), req["model"]
    want = budlib.worst(TABLE, model, len(body), max_out)
    what = "%s %s cut short (output bound %d)" % (kind, model or
                                                  "(no model)", max_out)
    data = cl.request_raw("POST", path, body, ["X-Synth: " + kind,
                                               "X-Synth-Usage: 10,5",
                                               "X-Cut-After: 40"])
    rid = budlib.head_header(data, "X-Airlock-Request-Id")
    t.ok(data.startswith(b"HTTP/1.1 200"), what + ": the head went out",
         data[:200])
    rec = budlib.audit_for(audit, rid) if rid else None
    if not t.ok(rec is not None, what + ": audited", data[:300]):
        continue
    t.ok(rec.get("cost_microusd") == want, what + ": charged the "
         "reservation %d µUSD (input %d bytes)" % (want, len(body)),
         "cost_microusd %r; %s" % (rec.get("cost_microusd"), rec))
oa.close()
an.close()
t.done()
PY

# --- a metered body that is not JSON cannot be priced: 400 bad_request,
# never forwarded (it used to go out reserved at a guess)
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "not JSON"
import os, time, budlib, itlib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
t = itlib.Checks()
c = budlib.Client(ap, "api.openai.test", tp, "a:tok-a",
                  T + "/state/ca/a/ca.crt")
r = c.request("POST", "/v1/chat/completions",
              b"model=gpt-4o&max_tokens=5 (not JSON)",
              ["X-Synth: openai", "X-Mark: notjson"])
t.error(r, 400, "bad_request", "a metered body that is not JSON → 400")
time.sleep(0.2)
t.ok(not any(x["headers"].get("x-mark") == "notjson" for x in
             budlib.upstream_records(T + "/llm.jsonl")),
     "the body that is not JSON was not forwarded")
c.close()
t.done()
PY

# --- a metered body over limits.body_bytes (64 KiB) cannot be read whole
# to reserve its worst case: 413 body_too_large, never forwarded
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "body_bytes"
import os, time, budlib, itlib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
t = itlib.Checks()
c = budlib.Client(ap, "api.openai.test", tp, "a:tok-a",
                  T + "/state/ca/a/ca.crt")
body = budlib.jbody({"model": "gpt-4o", "max_tokens": 5, "messages": [
    {"role": "user", "content": "z" * 70000}]})
r = c.request("POST", "/v1/chat/completions", body,
              ["X-Synth: openai", "X-Mark: toolarge"])
t.error(r, 413, "body_too_large", "a 70 KB metered body → 413 "
        "body_too_large")
time.sleep(0.2)
t.ok(not any(x["headers"].get("x-mark") == "toolarge" for x in
             budlib.upstream_records(T + "/llm.jsonl")),
     "the oversized body was not forwarded")
c.close()
t.done()
PY

# --- plain HTTP (absolute form) is metered too
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "plain HTTP"
import os, budlib, itlib
from pricing import TABLE
ap, pp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("PLAIN_PORT")
T = os.environ["T"]
t = itlib.Checks()
c = budlib.Client(ap, "plain.openai.test", pp, "a:tok-a")
for stream in (False, True):
    req = {"model": "gpt-4o-2024-08-06", "stream": stream, "max_tokens": 50,
           "messages": []}
    r = c.request("POST", "/v1/chat/completions", budlib.jbody(req),
                  ["X-Synth: openai", "X-Synth-Usage: 4242,424,42"])
    what = "plain HTTP %s" % ("SSE" if stream else "JSON")
    if not t.ok(r is not None and r.status == 200, what + ": 200", repr(r)):
        continue
    rec = budlib.audit_for(T + "/audit.jsonl",
                           r.header("X-Airlock-Request-Id"))
    u = {"model": "gpt-4o-2024-08-06", "input_tokens": 4242,
         "cached_tokens": 42, "cache_write_tokens": 0, "output_tokens": 424}
    got = (rec or {}).get("usage") or {}
    t.ok({k: got.get(k) for k in u} == u, what + ": usage", got)
    budlib.check_cost_fields(t, T + "/audit.jsonl", rec,
                             budlib.cost(TABLE, u)[0], what)
c.close()
t.done()
PY

stop_airlockd
finish
