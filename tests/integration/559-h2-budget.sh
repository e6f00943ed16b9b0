#!/bin/sh
# Metering and caps the same over HTTP/2 (issue 19 point 5): python httpx
# (http2=True) through CONNECT to the mock LLM provider over TLS. A JSON
# and an SSE chat completion on h2 streams are charged exactly their usage
# (audit "http": "2"); a stream whose reservation does not fit the usd cap
# gets 402 on that stream, never forwarded; two streams at once on one
# connection each reserve at admission, so only one of two that fit the
# cap alone is admitted. (The reflection guard on h2 DATA: 550.)
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import h2, httpx" 2>/dev/null ||
    hard_error "python3-h2 / python3-httpx missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" "$IT_DIR/llm_upstream.py" -P "$T/llm.port" -l "$T/llm.jsonl" \
    -C "$T/pki/good.crt" -K "$T/pki/good.key" -d 600 2>"$T/llm.err" &
track_pid $!
i=0
while [ ! -s "$T/llm.port" ]; do
	i=$((i + 1))
	[ "$i" -le 300 ] || hard_error "llm_upstream did not start: $(cat "$T/llm.err")"
	sleep 0.05
done
LLM_PORT=$(cat "$T/llm.port")
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT LLM_PORT T
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 0.01, clamp: false}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$SYS_PYTHON" - <<'PY' || fail "budget over h2"
import json, os, threading, httpx, itlib
ap, lp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT")
T = os.environ["T"]
audit, llog = T + "/audit.jsonl", T + "/llm.jsonl"
U = "https://api.test:%d/v1/chat/completions" % lp
t = itlib.Checks()
hc = httpx.Client(proxies="http://127.0.0.1:%d" % ap,
                  verify=T + "/state/ca/a/ca.crt", http2=True, timeout=20)


def chat(max_tokens, usage, stream=False, tag=""):
    body = {"model": "unit-a", "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "hi" + tag}]}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return hc.post(U, content=json.dumps(body).encode(),
                   headers={"content-type": "application/json",
                            "x-synth": "openai", "x-synth-usage": usage})


def nreq():
    return sum(1 for _ in open(llog)) if os.path.exists(llog) else 0


def rec_of(r):
    rid = r.headers.get("x-airlock-request-id")
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid)


r = chat(100, "100,50")
a = rec_of(r)
t.ok(r.status_code == 200 and r.http_version == "HTTP/2" and a and
     a.get("http") == "2" and a.get("cost_microusd") == 150 and
     (a.get("usage") or {}).get("output_tokens") == 50,
     "JSON completion over h2: charged its usage (150 µUSD)",
     (r.status_code, r.http_version, a))
r = chat(100, "200,20", stream=True)
a = rec_of(r)
t.ok(r.status_code == 200 and b"data: " in r.content and a and
     a.get("http") == "2" and a.get("cost_microusd") == 220,
     "SSE completion over h2: charged its usage (220 µUSD)",
     (r.status_code, a))

n = nreq()
r = chat(20000, "1,1")
t.ok(r.status_code == 402 and r.json().get("error", {}).get("type") == "budget_exceeded",
     "a stream reserving past the usd cap: 402 budget_exceeded",
     (r.status_code, r.text[:200]))
t.ok(nreq() == n, "... never forwarded")

# two streams at once on the one connection, each fitting the cap alone
# (9630 µUSD left; each reserves its body and 6000)
n = nreq()
res = {}
th = [threading.Thread(target=lambda k: res.__setitem__(k, chat(6000, "1,1",
                       tag=str(k))), args=(k,)) for k in (1, 2)]
for x in th:
    x.start()
for x in th:
    x.join()
codes = sorted(v.status_code for v in res.values())
t.ok(codes == [200, 402] and all(v.http_version == "HTTP/2"
                                 for v in res.values()),
     "two h2 streams at once, room for one reservation: 200 and 402",
     codes)
t.ok(nreq() == n + 1, "... one forwarded", nreq() - n)
hc.close()
t.done()
PY
stop_airlockd
finish
