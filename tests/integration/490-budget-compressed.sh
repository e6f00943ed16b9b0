#!/bin/sh
# Budgets, compressed responses (issue 17.1, 17.3): every fixture of
# ../shared/testdata/llm (or the embedded set) and the Gemini fixtures of
# tests/data/llm, served by the mock provider compressed the way the
# client asked (Accept-Encoding: br, gzip, deflate; like the real APIs),
# over intercepted HTTPS and plain HTTP: the client receives the
# compressed bytes it asked for, unchanged, and the audit's usage and cost
# are exactly the fixture's, as uncompressed. An Accept-Encoding naming a
# coding the meter cannot read (zstd, *) reaches the provider as identity;
# a response in such a coding anyway is charged its reservation (streams
# are not cut here: cut_streams: false, which would ask for identity).
# Gemini:
# generateContent, streamGenerateContent (JSON array and alt=sse), the
# OpenAI-compatible stream shape (usage in the finishing chunk), the
# model taken from the path for the reservation, which counts
# generationConfig.maxOutputTokens times candidateCount (either spelling).
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
# brotli for python is a Debian package: the system python has it
if ! "$PYTHON" -c 'import brotli' 2>/dev/null &&
    /usr/bin/python3 -c 'import brotli' 2>/dev/null; then
	PYTHON=/usr/bin/python3
fi
"$PYTHON" -c 'import brotli' 2>/dev/null ||
    skip "python3 brotli not found (Debian python3-brotli)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" -c 'import sys, budlib; budlib.mkleaf(sys.argv[1], ["api.openai.test", "api.anthropic.test", "gemini.test", "plain.llm.test"], sys.argv[2])' \
    "$T/pki" "$T/pki/llm" || hard_error "leaf for the mock provider"

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

cat >"$T/pricing.py" <<'PY'
from budlib import Price
TABLE = [
    Price("gpt-4o-mini*", "0.15", "0.60", cached_input="0.075"),
    Price("gpt-4o*", "2.50", "10.00", cached_input="1.25"),
    Price("claude-sonnet-4*", "3.00", "15.00", cached_input="0.30",
          cache_write="3.75"),
    Price("claude-opus-4*", "15.00", "75.00", cached_input="1.50",
          cache_write="18.75"),
    Price("claude-3-7-sonnet*", "3", "15"),
    Price("gemini-2.5-pro*", "1.25", "10.00", cached_input="0.31"),
    Price("gemini-2.5-flash*", "0.30", "2.50", cached_input="0.075"),
    Price("gemini-2.0-flash*", "0.10", "0.40", cached_input="0.025"),
    Price("gemini-1.5-flash*", "0.075", "0.30", cached_input="0.01875"),
]
PY
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {default_max_tokens: 3000, body_bytes: 1MiB}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.openai.test": "127.0.0.1", "api.anthropic.test": "127.0.0.1",
          "gemini.test": "127.0.0.1", "plain.llm.test": "127.0.0.1"}
budget_store: file
YAML
	(cd "$T" && "$PYTHON" -c 'import budlib, pricing; print(budlib.pricing_yaml(pricing.TABLE), end="")')
	cat <<YAML
policies:
  - name: p
    rules:
      - {host: "api.openai.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "api.anthropic.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: anthropic}
      - {host: "gemini.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1beta/*"], meter: gemini}
      - {host: "plain.llm.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/oa/*"], meter: openai}
    caps: {usd: 100000, cut_streams: false}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "compressed fixtures"
import gzip, json, os, zlib, brotli, budlib, itlib
from llm_upstream import Fixtures, fixture_model, INTREE_FIXTURES
from pricing import TABLE
ap, tp, pp = (itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT"),
              itlib.env_int("PLAIN_PORT"))
T = os.environ["T"]
audit = T + "/audit.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
fx = Fixtures()
if fx.embedded:
    print("# ../shared/testdata/llm absent: embedded fixtures")
with open(os.path.join(INTREE_FIXTURES, "MANIFEST.json")) as f:
    gemini = json.load(f)
cl = {"openai": budlib.Client(ap, "api.openai.test", tp, "a:tok-a", ca),
      "anthropic": budlib.Client(ap, "api.anthropic.test", tp, "a:tok-a", ca),
      "gemini": budlib.Client(ap, "gemini.test", tp, "a:tok-a", ca),
      "plain": budlib.Client(ap, "plain.llm.test", pp, "a:tok-a")}
DECODE = {"gzip": gzip.decompress, "deflate": zlib.decompress,
          "br": brotli.decompress}
n = {"gzip": 0, "deflate": 0, "br": 0}
n_plain = n_gemini = 0
for e in list(fx.manifest) + gemini:
    name = e["file"]
    data = fx.data(name)
    if data is None:
        t.ok(False, "%s: fixture readable" % name)
        continue
    want = budlib.expected_usage(e, data)
    status = int(e.get("http_status") or 200)
    if want is None or status != 200:
        continue
    model = want["model"] or "gpt-4o-2024-08-06"
    prov, api, stream = e["provider"], e["api"], bool(e.get("stream"))
    if prov == "gemini":
        if name.endswith(".sse"):
            path = "/v1beta/models/%s:streamGenerateContent?alt=sse" % model
        elif "stream" in name:
            path = "/v1beta/models/%s:streamGenerateContent" % model
        else:
            path = "/v1beta/models/%s:generateContent" % model
        req = {"contents": [{"parts": [{"text": "hi"}]}],
               "generationConfig": {"maxOutputTokens": 1024}}
    elif prov == "anthropic":
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
    routes = [(prov, path)]
    if prov == "openai" and api != "responses":
        routes.append(("plain", "/oa" + path))
    for coding in ("br", "gzip", "deflate"):
        for client, p in routes:
            what = "%s [%s, %s]" % (name, coding, client)
            hdrs = ["X-Fixture: " + name, "Content-Type: application/json",
                    "Accept-Encoding: %s, identity;q=0.5" % coding]
            r = cl[client].request("POST", p, budlib.jbody(req), hdrs)
            if not t.ok(r is not None and r.status == 200,
                        "%s: 200 through the proxy" % what, repr(r)):
                continue
            t.ok((r.header("Content-Encoding") or "") == coding,
                 "%s: the client gets the coding it asked for" % what,
                 r.header("Content-Encoding"))
            try:
                plain = DECODE[coding](r.body)
            except Exception as ex:
                plain = repr(ex).encode()
            t.ok(plain == data, "%s: compressed body relayed unchanged" %
                 what, "%d bytes decoded, want %d" % (len(plain), len(data)))
            rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
            if not t.ok(rec is not None, "%s: audited" % what):
                continue
            got = rec.get("usage") or {}
            t.ok({k: got.get(k) for k in want} == want,
                 "%s: usage %s" % (what, json.dumps(want)),
                 "got %s" % json.dumps(got))
            micro, _ = budlib.cost(TABLE, want)
            budlib.check_cost_fields(t, audit, rec, micro, what)
            n[coding] += 1
            n_plain += client == "plain"
            n_gemini += prov == "gemini"
t.ok(min(n.values()) >= 8 and n_plain >= 3 and n_gemini >= 6 * 3,
     "covered: %s, %d plain HTTP, %d Gemini" % (n, n_plain, n_gemini))
for c in cl.values():
    c.close()
t.done()
PY

PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "unknown codings, Gemini reservations"
import json, os, budlib, itlib
from pricing import TABLE
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
oa = budlib.Client(ap, "api.openai.test", tp, "a:tok-a", ca)
gm = budlib.Client(ap, "gemini.test", tp, "a:tok-a", ca)

def upstream_for(seq_hdr):
    recs = budlib.upstream_records(T + "/llm.jsonl")
    return next((x for x in recs if str(x["seq"]) == seq_hdr), None)

# an Accept-Encoding the meter cannot read goes upstream as identity
req = {"model": "gpt-4o-mini", "max_tokens": 50,
       "messages": [{"role": "user", "content": "hi"}]}
for ae in ("gzip, deflate, br, zstd", "*", "compress"):
    r = oa.request("POST", "/v1/chat/completions", budlib.jbody(req),
                   ["X-Synth: openai", "X-Synth-Usage: 30,7",
                    "Accept-Encoding: " + ae])
    if not t.ok(r is not None and r.status == 200, "AE %r: 200" % ae, r):
        continue
    up = upstream_for(r.header("X-Upstream-Seq") or "")
    t.ok(up is not None and up["headers"].get("accept-encoding") ==
         "identity", "AE %r: upstream asked for identity" % ae,
         up and up["headers"].get("accept-encoding"))
    t.ok(r.header("Content-Encoding") is None, "AE %r: identity answer" % ae,
         r.header("Content-Encoding"))
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
    micro, _ = budlib.cost(TABLE, {"model": "gpt-4o-mini",
                                   "input_tokens": 30, "output_tokens": 7})
    t.ok(rec is not None and rec.get("cost_microusd") == micro,
         "AE %r: exact cost %d" % (ae, micro), rec)
# an OpenAI-compatible server (usage in the finishing chunk, include_usage
# ignored): exact; the gateway put include_usage in, so the stream goes
# through its event filter (which leaves the usage-only chunk out) and is
# asked for identity whatever the client accepts
for coding in ("gzip", "br", "identity"):
    creq = {"model": "gpt-4o-mini", "max_tokens": 50, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]}
    r = oa.request("POST", "/v1/chat/completions", budlib.jbody(creq),
                   ["X-Synth: compat", "X-Synth-Usage: 812,33,512",
                    "Accept-Encoding: " + coding])
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id")) \
        if r else None
    micro, _ = budlib.cost(TABLE, {"model": "gpt-4o-mini",
                                   "input_tokens": 812, "cached_tokens": 512,
                                   "cache_write_tokens": 0,
                                   "output_tokens": 33})
    t.ok(r is not None and r.status == 200 and rec is not None and
         rec.get("cost_microusd") == micro and
         (r.header("Content-Encoding") or "identity") == "identity",
         "OpenAI-compatible stream, AE %s: identity, exact cost %d" %
         (coding, micro), rec)
# codings the meter reads are passed on as the client wrote them
r = oa.request("POST", "/v1/chat/completions", budlib.jbody(req),
               ["X-Synth: openai", "Accept-Encoding: gzip;q=1.0, br"])
up = upstream_for(r.header("X-Upstream-Seq") or "") if r else None
t.ok(up is not None and up["headers"].get("accept-encoding") ==
     "gzip;q=1.0, br", "readable Accept-Encoding passed on unchanged",
     up and up["headers"])
# a response in a coding the meter cannot read anyway: the reservation
body = budlib.jbody(req)
r = oa.request("POST", "/v1/chat/completions", body,
               ["X-Synth: openai", "X-Synth-Usage: 30,7",
                "X-Encoding: zstd"])
rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id")) if r else None
res = budlib.worst(TABLE, "gpt-4o-mini", len(body), 50)
t.ok(r is not None and r.header("Content-Encoding") == "zstd" and
     rec is not None and rec.get("cost_microusd") == res,
     "unreadable coding: charged the reservation %d" % res, rec)
# a truncated gzip body (the upstream cut mid-body): the reservation
def last_audit(host, before):
    import time
    for _ in range(100):
        recs = [json.loads(l) for l in
                open(audit).read().splitlines()[before:]]
        recs = [x for x in recs if x.get("host") == host]
        if recs:
            return recs[-1]
        time.sleep(0.1)
    return None

before = len(open(audit).read().splitlines())
oa.request("POST", "/v1/chat/completions", body,
           ["X-Synth: openai", "X-Synth-Usage: 30,7",
            "Accept-Encoding: gzip", "X-Cut-After: 40"])
oa.close()
rec = last_audit("api.openai.test", before)
t.ok(rec is not None and rec.get("cost_microusd") == res,
     "gzip body cut short: charged the reservation %d" % res, rec)

# Gemini reservation: maxOutputTokens x candidateCount, model from the
# path; the stream is cut so the reservation is what is charged
for key, mkey, nkey in (("generationConfig", "maxOutputTokens",
                         "candidateCount"),
                        ("generation_config", "max_output_tokens",
                         "candidate_count")):
    req = {"contents": [{"parts": [{"text": "hi"}]}],
           key: {mkey: 200, nkey: 3}}
    body = budlib.jbody(req)
    before = len(open(audit).read().splitlines())
    gm.request("POST", "/v1beta/models/gemini-2.0-flash:generateContent",
               body, ["X-Cut-After: 30"])
    gm.close()
    rec = last_audit("gemini.test", before)
    res = budlib.worst(TABLE, "gemini-2.0-flash", len(body), 600)
    t.ok(rec is not None and rec.get("cost_microusd") == res,
         "%s: cut Gemini answer charged its reservation %d (600 tokens out)"
         % (key, res), rec)
req = {"contents": [], "generationConfig": {"maxOutputTokens": 5},
       "generation_config": {"max_output_tokens": 9000}}
r = gm.request("POST", "/v1beta/models/gemini-2.0-flash:generateContent",
               budlib.jbody(req))
t.ok(r is not None and r.status == 400, "both spellings: 400", r)
oa.close()
gm.close()
t.done()
PY
finish
