#!/bin/sh
# Metrics: GET /metrics on the admin socket after real traffic (an allowed
# request, a 403 denied, a 407, two intercepted HTTPS requests, reloads
# that succeed and fail). The exposition must parse with
# prometheus_client's parser (and promtool's check when installed) and
# with tests/integration/metcheck.py's stricter rules, and its counters
# must match the traffic and the audit file; without the token it is 401.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
curl --help all 2>/dev/null | grep -q -- --unix-socket ||
    skip "curl without --unix-socket"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"

# prometheus_client: the Debian package lives in the system python
PROM_PY=""
for _py in "$PYTHON" /usr/bin/python3 python3; do
	if "$_py" -c 'import prometheus_client.parser' 2>/dev/null; then
		PROM_PY=$_py
		break
	fi
done

start_origin plain
PLAIN_PORT=$ORIGIN_PORT
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT T

write_config()
{
	cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - host: "api.test"
        ports: [$PLAIN_PORT, $TLS_PORT]
        methods: [GET]
        paths: ["/echo", "/json/*"]
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
}
write_config
start_airlockd "$T/airlock.yaml"

SOCK=$T/state/admin.sock
TOKEN_FILE=$T/state/admin.token

wait_admin
m=$(stat -c %a "$TOKEN_FILE")
[ "$m" = 600 ] && ok "admin.token created with mode 600" ||
    check_fail "admin.token mode $m, want 600"

# scrape [OUT]: GET /metrics with the token into OUT (default
# $T/metrics.txt), headers into OUT.h; prints the status.
scrape()
{
	curl -sS --unix-socket "$SOCK" \
	    -H "Authorization: Bearer $(cat "$TOKEN_FILE")" \
	    -D "${1:-$T/metrics.txt}.h" -o "${1:-$T/metrics.txt}" \
	    -w '%{http_code}' http://airlock/metrics
}

# --- the token is required
code=$(curl -sS --unix-socket "$SOCK" -o "$T/noauth.body" -w '%{http_code}' \
    http://airlock/metrics) || fail "curl to $SOCK failed"
[ "$code" = 401 ] && ok "/metrics without a token: 401" ||
    check_fail "/metrics without a token: $code"
code=$(curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer wrong" \
    -o /dev/null -w '%{http_code}' http://airlock/metrics)
[ "$code" = 401 ] && ok "/metrics with a wrong token: 401" ||
    check_fail "/metrics with a wrong token: $code"

# --- before any traffic: parses, and the fixed series are there
code=$(scrape "$T/m0.txt")
[ "$code" = 200 ] || fail "/metrics: status $code: $(cat "$T/m0.txt")"
grep -qi '^Content-Type: text/plain; version=0\.0\.4; charset=utf-8' \
    "$T/m0.txt.h" && ok "Content-Type text/plain; version=0.0.4" ||
    check_fail "Content-Type: $(grep -i '^content-type' "$T/m0.txt.h")"
"$PYTHON" -c '
import sys, metcheck
s = metcheck.check(open(sys.argv[1]).read())
assert metcheck.get(s, "airlock_request_duration_seconds_count") == 0, s
' "$T/m0.txt" >"$T/m0.out" 2>&1 && ok "before traffic: metcheck passes" ||
    check_fail "before traffic: $(cat "$T/m0.out")"

# --- traffic
PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$PLAIN_PORT
code=$(curl -sS -x "$PROXY" -U a:tok-a -o /dev/null -w '%{http_code}' \
    "$U/echo") || fail "allowed request failed"
[ "$code" = 200 ] || fail "allowed request: $code"
code=$(curl -sS -x "$PROXY" -U a:tok-a -o /dev/null -w '%{http_code}' \
    "$U/not-allowed")
[ "$code" = 403 ] || fail "denied request: $code"
code=$(curl -sS -x "$PROXY" -o /dev/null -w '%{http_code}' "$U/echo")
[ "$code" = 407 ] || fail "request without credentials: $code"
for n in 1 2; do
	code=$(curl -sS -x "$PROXY" -U a:tok-a --cacert "$T/state/ca/a/ca.crt" \
	    -o "$T/https.$n" -w '%{http_code}' \
	    "https://api.test:$TLS_PORT/json/64") ||
	    fail "intercepted HTTPS request $n failed"
	[ "$code" = 200 ] || fail "intercepted HTTPS request $n: $code"
done
ok "traffic: 200, 403, 407, two intercepted HTTPS 200"

# --- reloads: one good, one broken (each waited for in the counters)
# wait_reload OUTCOME N: until airlock_reloads_total{outcome=OUTCOME} is N
wait_reload()
{
	_i=0
	while :; do
		scrape "$T/mr.txt" >/dev/null
		grep -qx "airlock_reloads_total{outcome=\"$1\"} $2" "$T/mr.txt" &&
		    return 0
		_i=$((_i + 1))
		[ "$_i" -le 100 ] ||
		    fail "reloads{outcome=$1} not $2: $(grep reloads "$T/mr.txt")"
		sleep 0.1
	done
}
kill -HUP "$AIRLOCK_PID"
wait_reload ok 1
echo "policies: [" >"$T/airlock.yaml"
kill -HUP "$AIRLOCK_PID"
wait_reload error 1
write_config
ok "reloads counted: ok 1, error 1"

# --- check: the last scrape of the traffic (audit lines flushed and the
# counters agreeing; a tunnel is counted when its connection is gone)
export PROM_PY
_i=0
while :; do
	code=$(scrape "$T/m1.txt")
	[ "$code" = 200 ] || fail "/metrics: status $code"
	"$PYTHON" - "$T/m1.txt" "$T/audit.jsonl" >"$T/check.out" 2>&1 <<'PY' && break
import json, sys
import metcheck
text = open(sys.argv[1]).read()
s = metcheck.check(text)
g = lambda name, **kw: metcheck.get(s, name, **kw)
recs = [json.loads(l) for l in open(sys.argv[2])]
want = {
    ("airlock_requests_total", "allow", "none"): 3,
    ("airlock_requests_total", "deny", "denied"): 1,
    ("airlock_requests_total", "deny", "proxy_auth_required"): 1,
}
bad = []
for (n, d, r), v in want.items():
    if g(n, decision=d, reason=r) != v:
        bad.append("%s{%s,%s} = %s, want %s" % (n, d, r,
                   g(n, decision=d, reason=r), v))
total = sum(v for (n, _), v in s.items() if n == "airlock_requests_total")
count = g("airlock_request_duration_seconds_count")
if total != len(recs) or count != len(recs):
    bad.append("requests_total %s, histogram count %s, audit records %d"
               % (total, count, len(recs)))
allow = sum(1 for r in recs if r.get("decision") == "allow")
if g("airlock_requests_total", decision="allow", reason="none") != allow:
    bad.append("allow/none != %d audited allows" % allow)
bi = sum(r.get("bytes_in", 0) for r in recs)
bo = sum(r.get("bytes_out", 0) for r in recs)
if g("airlock_bytes_in_total") != bi or g("airlock_bytes_out_total") != bo:
    bad.append("bytes in/out %s/%s, audit says %d/%d" % (
        g("airlock_bytes_in_total"), g("airlock_bytes_out_total"), bi, bo))
if not g("airlock_bytes_in_total") > 0 or not g("airlock_bytes_out_total") > 0:
    bad.append("bytes not counted")
if g("airlock_tls_handshakes_total") < 2:
    bad.append("tls handshakes %s" % g("airlock_tls_handshakes_total"))
if g("airlock_cert_cache_misses_total") < 1 or \
        g("airlock_cert_cache_hits_total") < 1 or \
        g("airlock_cert_cache_entries") < 1:
    bad.append("cert cache hits/misses/entries %s/%s/%s" % (
        g("airlock_cert_cache_hits_total"),
        g("airlock_cert_cache_misses_total"),
        g("airlock_cert_cache_entries")))
if g("airlock_connections_active") != 0:
    bad.append("connections_active %s" % g("airlock_connections_active"))
if g("airlock_sandboxes") != 1 or \
        ("airlock_spend_usd", (("sandbox", "a"),)) not in s:
    bad.append("sandboxes %s, spend series of a missing" %
               g("airlock_sandboxes"))
if g("airlock_reloads_total", outcome="ok") != 1 or \
        g("airlock_reloads_total", outcome="error") != 1:
    bad.append("reloads ok/error %s/%s" % (
        g("airlock_reloads_total", outcome="ok"),
        g("airlock_reloads_total", outcome="error")))
if g("airlock_audit_available") != 1 or \
        g("airlock_audit_write_errors_total") != 0:
    bad.append("audit available %s, write errors %s" % (
        g("airlock_audit_available"), g("airlock_audit_write_errors_total")))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("%d samples; %d requests" % (len(s), total))
PY
	_i=$((_i + 1))
	[ "$_i" -le 50 ] || fail "metrics do not match the traffic: $(cat "$T/check.out")
$(cat "$T/m1.txt")"
	sleep 0.2
done
ok "metcheck: strict format; counters match traffic and audit ($(tail -n 1 "$T/check.out"))"

# --- the reference parsers
if [ -n "$PROM_PY" ]; then
	"$PROM_PY" - "$T/m1.txt" <<'PY' >"$T/prom.out" 2>&1 ||
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(
    open(sys.argv[1]).read())}
# counters lose their _total in the family name
want = {"airlock_requests": "counter",
        "airlock_request_duration_seconds": "histogram",
        "airlock_connections_active": "gauge",
        "airlock_tls_handshakes": "counter",
        "airlock_cert_cache_hits": "counter",
        "airlock_cert_cache_misses": "counter",
        "airlock_cert_cache_entries": "gauge",
        "airlock_bytes_in": "counter", "airlock_bytes_out": "counter",
        "airlock_sandboxes": "gauge", "airlock_spend_usd": "gauge",
        "airlock_spend_reserved_usd": "gauge",
        "airlock_audit_write_errors": "counter",
        "airlock_audit_available": "gauge", "airlock_reloads": "counter",
        "airlock_build_info": "gauge",
        "airlock_start_time_seconds": "gauge"}
for n, t in want.items():
    if n not in fams or fams[n].type != t:
        sys.exit("family %s: %s" % (n, fams[n].type if n in fams else "absent"))
    if not fams[n].documentation:
        sys.exit("family %s: no HELP" % n)
h = fams["airlock_request_duration_seconds"]
inf = [x.value for x in h.samples
       if x.name.endswith("_bucket") and x.labels["le"] == "+Inf"]
cnt = [x.value for x in h.samples if x.name.endswith("_count")]
if inf != cnt or not cnt or cnt[0] < 5:
    sys.exit("histogram +Inf %s count %s" % (inf, cnt))
print("%d families" % len(fams))
PY
	    check_fail "prometheus_client: $(cat "$T/prom.out")"
	[ -s "$T/prom.out" ] && grep -q families "$T/prom.out" &&
	    ok "prometheus_client parser: $(cat "$T/prom.out")"
else
	note "prometheus_client not importable (apt-get install" \
	    "python3-prometheus-client): only metcheck.py ran"
fi
if command -v promtool >/dev/null 2>&1; then
	if promtool check metrics <"$T/m1.txt" >"$T/promtool.out" 2>&1; then
		ok "promtool check metrics"
	else
		check_fail "promtool check metrics: $(cat "$T/promtool.out")"
	fi
fi

stop_airlockd
finish
