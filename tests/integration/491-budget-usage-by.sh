#!/bin/sh
# Spend you can see (issue 17.7): metered requests of two sandboxes over
# intercepted HTTPS, several models (one answer gzip-compressed, one
# without usage, charged its reservation), then GET
# /v1/sandboxes/{id}/usage?by=model and ?by=day give each model's (and
# today's) request count, exact cost and tokens, per sandbox; a bad "by"
# is a 400 in SPEC's shape; `airlockctl usage ID --by model|day` prints
# the same as a table (and the JSON with --json), a bad --by is exit 2;
# /metrics has airlock_llm_tokens_total{sandbox,model,kind} and the
# request and cost counters with the same numbers; every metric the
# sample Grafana dashboard (conf/grafana-airlock-llm.json) queries is one
# airlockd exposes; after a restart (the ledger replayed and compacted)
# the breakdown is unchanged.
. "$top_srcdir/tests/integration/lib.sh"

CTL=$top_builddir/src/airlockctl
[ -x "$CTL" ] || hard_error "$CTL not built"
command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" -c 'import sys, budlib; budlib.mkleaf(sys.argv[1], ["api.openai.test"], sys.argv[2])' \
    "$T/pki" "$T/pki/llm" || hard_error "leaf for the mock provider"

rm -f "$T/llm.port"
"$PYTHON" "$IT_DIR/llm_upstream.py" -P "$T/llm.port" -l "$T/llm.jsonl" \
    -C "$T/pki/llm.crt" -K "$T/pki/llm.key" 2>"$T/llm.err" &
track_pid $!
_i=0
while [ ! -s "$T/llm.port" ]; do
	_i=$((_i + 1))
	[ "$_i" -le 300 ] || hard_error "llm_upstream did not start: $(cat "$T/llm.err")"
	sleep 0.05
done
TLS_PORT=$(cat "$T/llm.port")
AIRLOCK_PORT=$(free_port)
SOCK=$T/state/admin.sock
TOKEN_FILE=$T/state/admin.token
export AIRLOCK_PORT TLS_PORT T SOCK TOKEN_FILE CTL

cat >"$T/pricing.py" <<'PY'
from budlib import Price
TABLE = [
    Price("gpt-4o-mini*", "0.15", "0.60", cached_input="0.075"),
    Price("gpt-4o*", "2.50", "10.00", cached_input="1.25"),
]
PY
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {default_max_tokens: 1000}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.openai.test": "127.0.0.1"}
budget_store: file
YAML
	(cd "$T" && "$PYTHON" -c 'import budlib, pricing; print(budlib.pricing_yaml(pricing.TABLE), end="")')
	cat <<YAML
policies:
  - name: p
    rules:
      - {host: "api.openai.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 1000}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: b, policy: p, token: "literal:tok-b"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_admin

# the requests; what each should add up to goes to $T/want.json
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - <<'PY' || check_fail "metered traffic"
import json, os, budlib, itlib
from pricing import TABLE
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
t = itlib.Checks()
want = {}
calls = [("a", "gpt-4o-mini", (100, 20, 0), []),
         ("a", "gpt-4o-mini", (300, 5, 200), ["Accept-Encoding: gzip"]),
         ("a", "gpt-4o", (50, 50, 0), []),
         ("a", "gpt-4o", None, []),
         ("b", "gpt-4o", (7, 3, 0), [])]
for sb, model, usage, extra in calls:
    ca = T + "/state/ca/%s/ca.crt" % sb
    c = budlib.Client(ap, "api.openai.test", tp, "%s:tok-%s" % (sb, sb), ca)
    req = {"model": model, "max_tokens": 40,
           "messages": [{"role": "user", "content": "hi"}]}
    body = budlib.jbody(req)
    if usage is None:
        # an answer without usage: charged its reservation
        r = c.request("POST", "/v1/chat/completions", body,
                      ["X-Synth: openai", "X-Synth-Usage: none"])
        u = {"model": model, "input_tokens": 0, "cached_tokens": 0,
             "cache_write_tokens": 0, "output_tokens": 0}
    else:
        r = c.request("POST", "/v1/chat/completions", body,
                      ["X-Synth: openai", "X-Synth-Usage: %d,%d,%d" % usage]
                      + extra)
        u = {"model": model, "input_tokens": usage[0],
             "cached_tokens": usage[2], "cache_write_tokens": 0,
             "output_tokens": usage[1]}
    c.close()
    t.ok(r is not None and r.status == 200, "%s %s: 200" % (sb, model), r)
    rec = budlib.audit_for(audit, r.header("X-Airlock-Request-Id"))
    cost = rec.get("cost_microusd") if rec else None
    if usage is not None:
        t.ok(cost == budlib.cost(TABLE, u)[0], "%s %s: exact cost" %
             (sb, model), rec)
    if usage is None:
        t.ok(cost == budlib.worst(TABLE, model, len(body), 40),
             "%s %s without usage: its reservation" % (sb, model), rec)
        u = {k: 0 for k in u}
    w = want.setdefault(sb, {}).setdefault(model, {
        "requests": 0, "cost_microusd": 0, "input_tokens": 0,
        "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0})
    w["requests"] += 1
    w["cost_microusd"] += cost or 0
    for k in ("input_tokens", "cached_tokens", "cache_write_tokens",
              "output_tokens"):
        w[k] += u[k]
json.dump(want, open(T + "/want.json", "w"))
t.done()
PY

cat >"$T/check.py" <<'PY'
import datetime, json, os, re, subprocess, sys, itlib
T = os.environ["T"]
t = itlib.Checks()
want = json.load(open(T + "/want.json"))
tok = open(os.environ["TOKEN_FILE"]).read().strip()
label = sys.argv[1]

def admin(path):
    p = subprocess.run(["curl", "-sS", "--unix-socket", os.environ["SOCK"],
                        "-H", "Authorization: Bearer " + tok,
                        "-w", "\n%{http_code}", "http://airlock" + path],
                       capture_output=True, text=True)
    body, _, code = p.stdout.rpartition("\n")
    return int(code or 0), body

today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
KEYS = ("requests", "cost_microusd", "input_tokens", "cached_tokens",
        "cache_write_tokens", "output_tokens")
for sb in ("a", "b"):
    code, body = admin("/v1/sandboxes/%s/usage?by=model" % sb)
    o = json.loads(body) if code == 200 else {}
    rows = {r["model"]: {k: r[k] for k in KEYS}
            for r in o.get("breakdown", [])}
    t.ok(o.get("by") == "model" and rows == want[sb],
         "%s: %s by model" % (label, sb), "got %s, want %s" % (rows, want[sb]))
    for r in o.get("breakdown", []):
        t.ok(str(r.get("cost_usd")) == "%d.%06d" % divmod(
             r["cost_microusd"], 1000000) or
             abs(r["cost_usd"] * 1e6 - r["cost_microusd"]) < 0.5,
             "%s: %s %s cost_usd matches" % (label, sb, r["model"]))
    code, body = admin("/v1/sandboxes/%s/usage?by=day" % sb)
    o = json.loads(body) if code == 200 else {}
    total = {k: sum(m[k] for m in want[sb].values()) for k in KEYS}
    rows = [dict({k: r[k] for k in KEYS}, day=r["day"])
            for r in o.get("breakdown", [])]
    t.ok(rows == [dict(total, day=today)], "%s: %s by day (%s)" %
         (label, sb, today), rows)
    # the window counters are still there
    t.ok(o.get("spend_microusd") == total["cost_microusd"],
         "%s: %s spend_microusd is the sum" % (label, sb), o)
code, body = admin("/v1/sandboxes/a/usage?by=week")
o = json.loads(body) if body.startswith("{") else {}
t.ok(code == 400 and o.get("error") == "bad_request" and "reason" in o and
     "request_id" in o, "%s: by=week: 400 in SPEC's shape" % label, body)
code, body = admin("/v1/sandboxes/a/usage")
t.ok(code == 200 and "breakdown" not in json.loads(body),
     "%s: no query: the usage object as before" % label, body)

def ctl(*args):
    return subprocess.run([os.environ["CTL"], "-c", T + "/airlock.yaml"]
                          + list(args), capture_output=True, text=True)
p = ctl("usage", "a", "--by", "model")
lines = p.stdout.splitlines()
t.ok(p.returncode == 0 and lines and lines[0].split()[0] == "MODEL",
     "%s: airlockctl usage a --by model: a table" % label, p.stdout + p.stderr)
for model, w in want["a"].items():
    row = [l.split() for l in lines if l.split() and l.split()[0] == model]
    t.ok(row and row[0][1] == str(w["requests"]) and
         row[0][2] == "%d.%06d" % divmod(w["cost_microusd"], 1000000) and
         row[0][3] == str(w["input_tokens"]) and
         row[0][6] == str(w["output_tokens"]),
         "%s: airlockctl row of %s" % (label, model), lines)
p = ctl("usage", "b", "--by", "day")
t.ok(p.returncode == 0 and today in p.stdout, "%s: airlockctl --by day "
     "shows %s" % (label, today), p.stdout + p.stderr)
p = ctl("--json", "usage", "b", "--by", "model")
try:
    j = json.loads(p.stdout)
except ValueError:
    j = {}
t.ok(p.returncode == 0 and j.get("by") == "model" and
     [r["model"] for r in j.get("breakdown", [])] == ["gpt-4o"],
     "%s: airlockctl --json --by model" % label, p.stdout)
p = ctl("usage", "a", "--by", "hour")
t.ok(p.returncode == 2 and "--by" in p.stderr,
     "%s: --by hour: usage error, exit 2" % label, p.stderr)
t.done()
PY
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" "$T/check.py" "live" ||
    check_fail "usage by model and day"

# /metrics: the token counters, and the dashboard's metric names
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" - "$top_srcdir/conf/grafana-airlock-llm.json" <<'PY' || check_fail "metrics"
import json, os, re, subprocess, sys, itlib
T = os.environ["T"]
t = itlib.Checks()
want = json.load(open(T + "/want.json"))
tok = open(os.environ["TOKEN_FILE"]).read().strip()
text = subprocess.run(["curl", "-sS", "--unix-socket", os.environ["SOCK"],
                       "-H", "Authorization: Bearer " + tok,
                       "http://airlock/metrics"], capture_output=True,
                      text=True).stdout
samples = {}
for line in text.splitlines():
    if line.startswith("#") or not line.strip():
        continue
    name, _, value = line.rpartition(" ")
    samples[name] = float(value)
families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
for sb, models in want.items():
    for model, w in models.items():
        base = 'sandbox="%s",model="%s"' % (sb, model)
        kinds = {"input": w["input_tokens"] - w["cached_tokens"] -
                 w["cache_write_tokens"], "cached": w["cached_tokens"],
                 "cache_write": w["cache_write_tokens"],
                 "output": w["output_tokens"]}
        for kind, v in kinds.items():
            key = 'airlock_llm_tokens_total{%s,kind="%s"}' % (base, kind)
            t.ok(samples.get(key) == v, "%s = %d" % (key, v),
                 samples.get(key))
        key = "airlock_llm_requests_total{%s}" % base
        t.ok(samples.get(key) == w["requests"], "%s = %d" %
             (key, w["requests"]), samples.get(key))
        key = "airlock_llm_cost_usd_total{%s}" % base
        t.ok(abs(samples.get(key, -1) * 1e6 - w["cost_microusd"]) < 0.5,
             "%s = %d µUSD" % (key, w["cost_microusd"]), samples.get(key))
dash = json.load(open(sys.argv[1]))
exprs = []
def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                exprs.append(v)
            else:
                walk(v)
    elif isinstance(o, list):
        for v in o:
            walk(v)
walk(dash)
names = set()
for e in exprs:
    names |= set(re.findall(r"\b(airlock_[a-z0-9_]+)", e))
t.ok(len(exprs) >= 10 and len(names) >= 8, "dashboard: %d queries over %d "
     "metrics" % (len(exprs), len(names)))
for n in sorted(names):
    fam = re.sub(r"_(bucket|sum|count)$", "", n) if n not in families else n
    t.ok(fam in families, "dashboard metric %s is exposed" % n)
others = set(re.findall(r"\b([a-z_]+_total|[a-z_]+_seconds\w*)\b",
                        " ".join(exprs))) - names
t.ok(not [o for o in others if not o.startswith("airlock_")],
     "dashboard uses only airlock's metrics", others)
t.done()
PY

# after a restart: replayed (and compacted) from the ledger
stop_airlockd
start_airlockd "$T/airlock.yaml"
wait_admin
PYTHONPATH=$T:$PYTHONPATH "$PYTHON" "$T/check.py" "restarted" ||
    check_fail "usage by model and day after a restart"
grep -q '^U ' "$T/state/budget/ledger" && ok "the ledger holds U lines" ||
    check_fail "no U line in the ledger: $(head -c 600 "$T/state/budget/ledger")"
stop_airlockd
finish
