#!/bin/sh
# Budgets under concurrency: 64 metered requests released at once (one
# connection each, intercepted TLS or plain HTTP, two workers), the mock
# provider holding every answer 400 ms so that all are in flight together,
# race a usd cap that fits K of them: never more than K are admitted, the
# recorded spend (sum of the audit's cost_microusd) never passes the cap,
# every refusal is 402 budget_exceeded, only admitted requests reach the
# upstream, and afterwards every reservation has settled (the remaining
# budget is exactly the cap minus the spend: a request reserving it fits,
# one more micro-dollar does not). The same with the requests cap.
# (caps.llm_concurrency: 0 here: the race is the point, not its bound;
# clamp: false, so that a request over what is left is refused, not
# lowered.)
#
# The price of model "unit-*" is 1 USD per million tokens in and out, so a
# request reserves its body's bytes plus its max_tokens in µUSD; the mock
# answers with that usage (cost = reservation) unless told otherwise.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
"$PYTHON" -c 'import sys, budlib; budlib.mkleaf(sys.argv[1], ["api.openai.test"], sys.argv[2])' \
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

policy()
{
	cat <<YAML
  - name: $1
    rules:
      - {host: "plain.openai.test", ports: [$PLAIN_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "api.openai.test", ports: [$TLS_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: $2
YAML
}
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
limits: {max_connections_per_sandbox: 512}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.openai.test": "127.0.0.1", "plain.openai.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
YAML
	policy usd "{usd: 0.0205, llm_concurrency: 0, clamp: false}"
	policy reqs "{requests: 10, llm_concurrency: 0}"
	cat <<YAML
sandboxes:
  - {id: race1, policy: usd, token: "literal:tok"}
  - {id: race2, policy: usd, token: "literal:tok"}
  - {id: race3, policy: reqs, token: "literal:tok"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "race"
import json, os, threading, time, budlib, itlib
ap, pp, tp = (itlib.env_int("AIRLOCK_PORT"), itlib.env_int("PLAIN_PORT"),
              itlib.env_int("TLS_PORT"))
T = os.environ["T"]
AUDIT = T + "/audit.jsonl"
t = itlib.Checks()
N = 64
CAP = 20500


def client(sb, tls):
    if tls:
        return budlib.Client(ap, "api.openai.test", tp, sb + ":tok",
                             T + "/state/ca/%s/ca.crt" % sb, timeout=30)
    return budlib.Client(ap, "plain.openai.test", pp, sb + ":tok",
                         timeout=30)


def body_of(size, max_tokens):
    b = budlib.jbody({"model": "unit-a", "max_tokens": max_tokens,
                      "messages": [{"role": "user", "content": ""}]})
    return budlib.jbody({"model": "unit-a", "max_tokens": max_tokens,
                         "messages": [{"role": "user", "content":
                                       "x" * (size - len(b))}]})


def race(sb, tls, body, usage, tag):
    """N requests released together; [(status, request id, mark)]."""
    out = [None] * N
    bar = threading.Barrier(N)

    def one(i):
        c = client(sb, tls)
        if tls:
            try:
                c._tls()        # CONNECT and handshake before the race
            except Exception as e:
                out[i] = ("connect: %r" % e, None, None, None)
                bar.wait()
                return
        mark = "%s-%d" % (tag, i)
        h = ["X-Synth: openai", "X-Delay-Ms: 400", "X-Mark: " + mark]
        if usage:
            h.append("X-Synth-Usage: " + usage)
        try:
            bar.wait(30)
            r = c.request("POST", "/v1/chat/completions", body, h,
                          retry=False)
            out[i] = (r.status if r is not None else None,
                      r.header("X-Airlock-Request-Id") if r is not None
                      else None, mark, r)
        except Exception as e:
            out[i] = ("error: %r" % e, None, mark, None)
        c.close()

    th = [threading.Thread(target=one, args=(i,)) for i in range(N)]
    for x in th:
        x.start()
    for x in th:
        x.join(60)
    return out


def settle_audit(ids):
    """Audit records for <ids>, waiting for the writer."""
    end = time.time() + 10
    while True:
        recs = {r.get("id"): r for r in itlib.audit_records(AUDIT)}
        if all(i in recs for i in ids) or time.time() > end:
            return [recs.get(i) for i in ids]
        time.sleep(0.1)


def upstream_marks(log):
    return set(r["headers"].get("x-mark")
               for r in budlib.upstream_records(log))


def check(sb, tls, res, R, cost_each, K, what):
    st = [x[0] for x in res]
    ok200 = [x for x in res if x[0] == 200]
    n402 = st.count(402)
    t.ok(all(s in (200, 402) for s in st), what + ": every answer is 200 "
         "or 402", st)
    for x in res:
        if x[0] == 402:
            t.error(x[3], 402, "budget_exceeded", what + ": a refusal is "
                    "402 budget_exceeded")
            break
    t.ok(1 <= len(ok200) <= K, what + ": %d admitted, at most K = %d"
         % (len(ok200), K), "%d x 200, %d x 402" % (len(ok200), n402))
    if cost_each == R:
        # every decision is spend + reserved + R <= cap with nothing
        # released early: exactly K fit, however they interleave
        t.ok(len(ok200) == K, what + ": exactly K = %d admitted (cost = "
             "reservation)" % K, len(ok200))
    recs = settle_audit([x[1] for x in res if x[1]])
    t.ok(all(r is not None for r in recs), what + ": every request audited")
    spent = sum(r.get("cost_microusd") or 0 for r in recs if r and
                r.get("sandbox") == sb)
    t.ok(spent <= CAP, what + ": recorded spend %d <= cap %d" % (spent, CAP))
    t.ok(spent == len(ok200) * cost_each, what + ": spend %d = %d admitted "
         "x %d" % (spent, len(ok200), cost_each), spent)
    log = T + ("/llm.jsonl" if tls else "/plain.jsonl")
    marks = upstream_marks(log)
    got = set(x[2] for x in res if x[2] in marks)
    t.ok(got == set(x[2] for x in ok200), what + ": exactly the admitted "
         "requests reached the upstream", (len(got), len(ok200)))
    return spent


def probe(sb, tls, remaining, what):
    """The remaining budget is exactly <remaining>: reserving one more
    µUSD is refused, reserving it all is admitted."""
    c = client(sb, tls)
    r = c.request("POST", "/v1/chat/completions",
                  body_of(300, remaining - 300 + 1), ["X-Synth: openai"])
    t.error(r, 402, "budget_exceeded", what + ": reserving %d (1 more than "
            "left) → 402" % (remaining + 1))
    r = c.request("POST", "/v1/chat/completions",
                  body_of(300, remaining - 300), ["X-Synth: openai",
                                                  "X-Synth-Usage: 1,0"])
    t.ok(r is not None and r.status == 200, what + ": reserving all %d "
         "left → 200 (no reservation leaked)" % remaining, repr(r))
    c.close()


# 1. race1 over TLS, cost = reservation = 1000: K = 20
R = 1000
t0 = time.time()
res = race("race1", True, body_of(300, 700), None, "r1")
el = time.time() - t0
print("# race1: %.2fs" % el)
spent = check("race1", True, res, R, R, CAP // R, "race1 (TLS, cost = "
              "reservation)")
probe("race1", True, CAP - spent, "race1 after the race")

# 2. race2 over plain HTTP, reservation 1000, cost 100: at most 20 while
# all are in flight, spend stays under the cap
res = race("race2", False, body_of(300, 700), "60,40", "r2")
spent = check("race2", False, res, R, 100, CAP // 100, "race2 (plain, "
              "cost 100 < reservation 1000)")
n = sum(1 for x in res if x[0] == 200)
t.ok(n >= CAP // R, "race2: at least %d admitted (reservations alone "
     "allow that many)" % (CAP // R), n)
probe("race2", False, CAP - spent, "race2 after the race")

# 3. race3: requests cap 10
res = race("race3", False, body_of(300, 10), None, "r3")
st = [x[0] for x in res]
t.ok(st.count(200) == 10 and st.count(402) == N - 10,
     "race3: exactly 10 of 64 admitted by the requests cap 10",
     "%d x 200, %d x 402, others %r" % (st.count(200), st.count(402),
                                        [s for s in st if s not in (200,
                                                                    402)]))
marks = upstream_marks(T + "/plain.jsonl")
t.ok(len([x for x in res if x[2] in marks]) == 10,
     "race3: 10 reached the upstream")
t.done()
PY

stop_airlockd
finish
