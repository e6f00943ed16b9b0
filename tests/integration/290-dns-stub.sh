#!/bin/sh
# DNS stub (issue #7): tests/harness/dnsstubtest serves the real stub on
# loopback; sandbox "sb1" is the source address 127.0.0.1 and "sb2"
# 127.0.0.3, 127.0.0.2 is no sandbox. dig and hand-built queries
# (dnsprobe.py) check the answers: an allowed A name gets a stable
# synthetic address of the pool, one per name, shared by the sandboxes;
# AAAA is empty; other names NXDOMAIN; other types REFUSED; unknown
# sources REFUSED; floods are cut by the rate limit with a bounded number
# of audit records; malformed packets get no answer and the stub stays up;
# TCP is refused. Every record is valid JSON with the DNS fields.
. "$top_srcdir/tests/integration/lib.sh"

STUB=$top_builddir/tests/harness/dnsstubtest
PROBE="$PYTHON $IT_DIR/dnsprobe.py"
[ -x "$STUB" ] || hard_error "$STUB not built"
command -v dig >/dev/null 2>&1 ||
    skip "dig not found (Debian: bind9-dnsutils, scripts/install-deps.sh --test)"
"$PYTHON" -c 'import socket
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.2", 0))' \
    2>/dev/null || skip "cannot send from 127.0.0.2"

POOL=198.18.0.0/15
cat >"$T/airlock.yaml" <<YAML
state_dir: $T/state
audit: {file: $T/audit.jsonl}
# the wildcard rule's new-name rate (issue 24, point 6; 463-contain-dns)
# out of the way of the 40-name and flood checks
launcher:
  dns: {new_names_per_minute: 100000}
policies:
  - name: pol
    rules:
      - {host: "api.test", ports: [443]}
      - {host: "*.example.com"}
      - {host: "db.test", ports: [5432]}
      - {host: "shared.test"}
  - name: other
    rules:
      - {host: "other.test"}
      - {host: "shared.test"}
sandboxes:
  - {id: sb1, policy: pol, token: "literal:t1", addresses: ["127.0.0.1"]}
  - {id: sb2, policy: other, token: "literal:t2", addresses: ["127.0.0.3"]}
YAML

# start_stub NAME [dnsstubtest options]: sets STUB_PID and PORT; counters
# at exit in $T/NAME.out, log in $T/airlockd-NAME.log
start_stub()
{
	_sn=$1
	shift
	rm -f "$T/$_sn.port"
	"$STUB" -c "$T/airlock.yaml" -l 127.0.0.1:0 -P "$T/$_sn.port" "$@" \
	    >"$T/$_sn.out" 2>"$T/airlockd-$_sn.log" &
	STUB_PID=$!
	track_pid "$STUB_PID"
	_i=0
	while [ ! -s "$T/$_sn.port" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 200 ] || hard_error "stub did not start"
		kill -0 "$STUB_PID" 2>/dev/null ||
		    hard_error "stub exited: $(cat "$T/airlockd-$_sn.log")"
		sleep 0.05
	done
	PORT=$(cat "$T/$_sn.port")
}

# stop_stub NAME: TERM, exit 0, no sanitizer report
stop_stub()
{
	kill -TERM "$STUB_PID"
	wait_exit "$STUB_PID" 20
	[ "$WAIT_STATUS" -eq 0 ] || check_fail "$1 exited with $WAIT_STATUS"
	if grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer' \
	    "$T/airlockd-$1.log"; then
		check_fail "sanitizer report in $T/airlockd-$1.log"
	fi
}

start_stub stub -p "$POOL"

# q [dig options...]: one dig query against the stub, UDP only (dig
# asks ANY over TCP unless told otherwise)
q()
{
	dig @127.0.0.1 -p "$PORT" +tries=1 +time=2 +ignore +notcp "$@"
}

# status NAME TYPE [-b SRC]: the rcode dig shows
status()
{
	q "$@" | sed -n 's/.*status: \([A-Z]*\),.*/\1/p'
}

# in_pool IP: inside 198.18.0.0/15, not its network or broadcast address
in_pool()
{
	"$PYTHON" -c '
import ipaddress, sys
a = ipaddress.ip_address(sys.argv[1])
n = ipaddress.ip_network(sys.argv[2])
sys.exit(0 if a in n and a not in (n.network_address,
    n.broadcast_address) else 1)' "$1" "$POOL"
}

# 1. allowed A names: an address of the pool, stable, one per name
A1=$(q +short api.test A)
A2=$(q +short api.test A)
A3=$(q +short API.Test. A)
B1=$(q +short a.example.com A)
C1=$(q +short db.test A)
if [ -n "$A1" ] && in_pool "$A1"; then
	ok "api.test A -> $A1"
else
	check_fail "api.test A gave '$A1', not an address of $POOL"
fi
[ "$A1" = "$A2" ] && [ "$A1" = "$A3" ] && ok "same address every time" ||
    check_fail "api.test: $A1, then $A2, then (API.Test.) $A3"
if [ -n "$B1" ] && in_pool "$B1" && [ "$B1" != "$A1" ]; then
	ok "a.example.com A -> $B1, another address"
else
	check_fail "a.example.com A gave '$B1' (api.test has $A1)"
fi
# a rule for another port still makes the name resolvable
[ -n "$C1" ] && in_pool "$C1" && [ "$C1" != "$A1" ] && [ "$C1" != "$B1" ] &&
    ok "db.test (rule for port 5432) -> $C1" ||
    check_fail "db.test A gave '$C1'"
TTL=$(q +noall +answer api.test A | awk '{ print $2 }')
[ "$TTL" = 60 ] && ok "TTL 60" || check_fail "TTL '$TTL', not 60"
q api.test A | grep -q 'flags: qr aa rd ra;' && ok "flags qr aa rd ra" ||
    check_fail "flags: $(q api.test A | grep flags:)"

# 2. AAAA for an allowed name: NOERROR, no answer
out=$(q api.test AAAA)
echo "$out" | grep -q 'status: NOERROR' &&
    echo "$out" | grep -q 'ANSWER: 0,' && ok "api.test AAAA: NOERROR, empty" ||
    check_fail "api.test AAAA: $(echo "$out" | grep -E 'status|ANSWER:')"

# 3. names no rule allows, and names that are no host names: NXDOMAIN
for n in evil.test example.com api.test.evil c2VjcmV0LWRhdGE.evil.test \
    1.2.3.4 127.0.0.1; do
	for t in A AAAA; do
		st=$(status "$n" "$t")
		[ "$st" = NXDOMAIN ] && ok "$n $t: NXDOMAIN" ||
		    check_fail "$n $t: '$st', not NXDOMAIN"
	done
done

# 4. other types, allowed name or not: REFUSED
for t in MX TXT ANY SRV HTTPS CNAME PTR; do
	st=$(status api.test "$t")
	[ "$st" = REFUSED ] && ok "api.test $t: REFUSED" ||
	    check_fail "api.test $t: '$st', not REFUSED"
done
st=$(status evil.test TXT)
[ "$st" = REFUSED ] && ok "evil.test TXT: REFUSED" ||
    check_fail "evil.test TXT: '$st'"
st=$(status version.bind CH TXT)
[ "$st" = REFUSED ] && ok "class CH: REFUSED" || check_fail "class CH: '$st'"

# 5. sources: no sandbox -> REFUSED; another sandbox -> its own policy,
#    the same map
st=$(status -b 127.0.0.2 api.test A)
[ "$st" = REFUSED ] && ok "unknown source 127.0.0.2: REFUSED" ||
    check_fail "unknown source: '$st', not REFUSED"
st=$(status -b 127.0.0.3 api.test A)
[ "$st" = NXDOMAIN ] && ok "sb2 api.test: NXDOMAIN (not in its policy)" ||
    check_fail "sb2 api.test: '$st'"
O1=$(q -b 127.0.0.3 +short other.test A)
[ -n "$O1" ] && in_pool "$O1" && ok "sb2 other.test -> $O1" ||
    check_fail "sb2 other.test: '$O1'"
st=$(status other.test A)
[ "$st" = NXDOMAIN ] && ok "sb1 other.test: NXDOMAIN" ||
    check_fail "sb1 other.test: '$st'"
S1=$(q +short shared.test A)
S2=$(q -b 127.0.0.3 +short shared.test A)
[ -n "$S1" ] && [ "$S1" = "$S2" ] &&
    ok "shared.test: $S1 for both sandboxes" ||
    check_fail "shared.test: sb1 '$S1', sb2 '$S2'"

# 6. hand-built queries: 0x20 case kept in the answer, many names
r=$($PROBE query "$PORT" ApI.tEsT A --id 4660)
echo "$r" | "$PYTHON" -c '
import json, sys
r = json.load(sys.stdin)
ok = (r["rcode"] == "NOERROR" and r["id"] == 4660 and
      r["qname"] == "ApI.tEsT" and len(r["answers"]) == 1 and
      r["answers"][0][0] == 1 and r["answers"][0][2] == sys.argv[1])
sys.exit(0 if ok else 1)' "$A1" && ok "python query: id, 0x20 case, answer" ||
    check_fail "python query: $r"
r=$($PROBE names "$PORT" 40)
[ "$r" = '{"names": 40, "answered": 40, "distinct": 40}' ] &&
    ok "40 names, 40 distinct addresses" || check_fail "names: $r"

# 7. malformed packets: no crash, no answer where none is due
$PROBE malformed "$PORT" >"$T/malformed.json" ||
    check_fail "dnsprobe malformed failed"
bad=$("$PYTHON" -c '
import json, sys
r = json.load(open(sys.argv[1]))
bad = [x for x in r if not x["ok"]]
print("%d of %d" % (len(bad), len(r)))
for x in bad[:10]:
    sys.stderr.write("  %s\n" % json.dumps(x))
sys.exit(1 if bad else 0)' "$T/malformed.json") &&
    ok "malformed packets: $bad wrong, stub alive" ||
    check_fail "malformed packets: $bad wrong"
kill -0 "$STUB_PID" 2>/dev/null || fail "the stub died"

# 8. TCP: nothing listens, the connection is refused
out=$(dig @127.0.0.1 -p "$PORT" +tcp +tries=1 +time=2 api.test A 2>&1)
echo "$out" | grep -q 'connection refused' && ok "TCP: connection refused" ||
    check_fail "TCP: $(echo "$out" | tail -n 2)"

# 9. floods. Let the buckets fill up again first (100 at 50/s).
sleep 2.2
lines0=$(wc -l <"$T/audit.jsonl")
r=$($PROBE flood "$PORT" 600)
note "sandbox flood: $r"
echo "$r" | "$PYTHON" -c '
import json, sys
r = json.load(sys.stdin)
# the burst of 100, and what 50/s adds while the flood lasts; answers
# lost on the way (a loaded machine) count against neither
n, none = r.get("NOERROR", 0), r.get("none", 0)
ok = 100 - none <= n <= 100 + 50 * (r["seconds"] + 0.2) + 2 and \
    r.get("REFUSED", 0) >= 300 and set(r) <= {"NOERROR", "REFUSED",
    "none", "seconds"}
sys.exit(0 if ok else 1)' && ok "sandbox flood: burst answered, rest REFUSED" ||
    check_fail "sandbox flood: $r"
NOERR=$(echo "$r" | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin).get("NOERROR", 0))')
u=$("$PYTHON" - "$PORT" <<'EOF'
import json, socket, sys, time
import dnsprobe as d
port = int(sys.argv[1])
s = d.sock("127.0.0.2", 0.3)
got = {}
for i in range(300):
    _, pkt = d.query("api.test", "A", qid=i)
    s.sendto(pkt, ("127.0.0.1", port))
end = time.time() + 1.0
n = 0
while time.time() < end:
    try:
        data, _ = s.recvfrom(4096)
    except socket.timeout:
        break
    rc = d.parse(data)["rcode"]
    got[rc] = got.get(rc, 0) + 1
    n += 1
got["none"] = 300 - n
print(json.dumps(got, sort_keys=True))
EOF
)
note "unknown-source flood: $u"
echo "$u" | "$PYTHON" -c '
import json, sys
r = json.load(sys.stdin)
ok = r.get("REFUSED", 0) <= 80 and r.get("none", 0) >= 200 and \
    set(r) <= {"REFUSED", "none"}
sys.exit(0 if ok else 1)' && ok "unknown-source flood: mostly unanswered" ||
    check_fail "unknown-source flood: $u"
# summaries come at most once a second; the sweep writes the last ones
sleep 1.5
lines1=$(wc -l <"$T/audit.jsonl")
added=$((lines1 - lines0))
note "audit records during the floods: $added"
# one record per answered query (the sandbox's burst, the unknown
# sources' burst of 40), the rest in summaries: one a second at most
UREF=$(echo "$u" | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin).get("REFUSED", 0))')
[ "$added" -le $((NOERR + UREF + 8)) ] &&
    ok "floods wrote $added audit records ($NOERR + $UREF answered)" ||
    check_fail "floods wrote $added audit records ($NOERR + $UREF answered)"

# 10. stop: exit 0, counters agree with the audit file, no sanitizer report
stop_stub stub
stats=$(cat "$T/stub.out")
note "stub counters: $stats"
audit=$($PROBE audit "$T/audit.jsonl")
note "audit: $audit"
"$PYTHON" - "$stats" "$audit" <<'EOF' && ok "audit: every query has its record, all valid" || check_fail "audit: $audit (stub: $stats)"
import json, sys
st, au = json.loads(sys.argv[1]), json.loads(sys.argv[2])
errs = []
if au["bad"]:
    errs.append("bad lines: %s" % au["bad"][:5])
if au["lines"] != st["records"]:
    errs.append("%d lines, %d records" % (au["lines"], st["records"]))
# each query reaching the stub has a record, or is counted in a summary
if au["lines"] - au["limit_records"] + au["limit_refused"] + \
        au["limit_dropped"] != st["queries"]:
    errs.append("records do not add up to the queries")
if au["limit_refused"] != st["rate_refused"]:
    errs.append("sandbox summaries count %d, stub %d" %
                (au["limit_refused"], st["rate_refused"]))
if au["limit_dropped"] != st["unknown_dropped"]:
    errs.append("unknown summaries count %d, stub %d" %
                (au["limit_dropped"], st["unknown_dropped"]))
if au["limit_records"] > 12:
    errs.append("%d summary records" % au["limit_records"])
if st["unknown_dropped"] < 200:
    errs.append("unknown_dropped %d" % st["unknown_dropped"])
for e in errs:
    sys.stderr.write(e + "\n")
sys.exit(1 if errs else 0)
EOF

# the records themselves
"$PYTHON" - "$T/audit.jsonl" "$A1" <<'EOF' && ok "audit records: fields and escapes" || check_fail "audit record contents"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
def find(**kw):
    for r in recs:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    sys.stderr.write("no record with %s\n" % kw)
    sys.exit(1)
r = find(host="api.test", dns_type="A", dns_rcode="NOERROR")
assert r["sandbox"] == "sb1" and r["decision"] == "allow", r
assert r["dns_answer"] == sys.argv[2] and r["rule"] == "pol#0", r
assert r["client"].startswith("127.0.0.1:"), r
r = find(host="api.test", dns_type="AAAA")
assert r["decision"] == "allow" and "dns_answer" not in r, r
r = find(host="evil.test", dns_type="A")
assert r["dns_rcode"] == "NXDOMAIN" and r["decision"] == "deny", r
assert r["reason"] == "host evil.test is not allowed", r
r = find(host="api.test", dns_type="MX")
assert r["dns_rcode"] == "REFUSED" and \
    r["reason"] == "query type MX is not served", r
r = find(reason="unknown source address")
assert "sandbox" not in r and r["client"].startswith("127.0.0.2:"), r
r = find(host="1.2.3.4", dns_type="A")
assert r["reason"] == "not a valid host name", r
# a binary label, escaped as \DDD (the NUL ends the C string libevent gives)
r = find(host="\\255\\254", dns_type="A")
assert r["dns_rcode"] == "NXDOMAIN", r
r = find(reason="2 questions in one query")
assert r["dns_rcode"] == "FORMERR", r
for r in recs:
    if r.get("reason", "").startswith("dns rate limit:"):
        assert r["dns_rcode"] == "REFUSED" and "host" not in r, r
EOF

# 11. a full pool. 192.0.2.8/30 has two usable addresses, .9 and .10.
# Names answered within the last 10 minutes keep theirs: SERVFAIL.
lines0=$(wc -l <"$T/audit.jsonl")
start_stub full -p 192.0.2.8/30 -i 600000
X1=$(q +short x1.example.com A)
X2=$(q +short x2.example.com A)
st=$(status x3.example.com A)
[ "$X1" = 192.0.2.9 ] && [ "$X2" = 192.0.2.10 ] && [ "$st" = SERVFAIL ] &&
    ok "pool of 2, names kept 10 min: .9, .10, then SERVFAIL" ||
    check_fail "full pool: '$X1' '$X2' '$st'"
X1b=$(q +short x1.example.com A)
[ "$X1b" = "$X1" ] && ok "x1 keeps its address" || check_fail "x1: '$X1b'"
stop_stub full
tail -n +"$((lines0 + 1))" "$T/audit.jsonl" | grep -q \
    '"host":"x3.example.com".*"reason":"no synthetic address free.*"dns_rcode":"SERVFAIL"' &&
    ok "SERVFAIL audited" || check_fail "no SERVFAIL record for x3"

# Without the 10 minutes, names a live sandbox holds still keep their
# addresses (issue 24, point 5: only a deleted sandbox's mappings can be
# reused; the unit suite dns_synth checks the LRU itself): y3 SERVFAIL.
start_stub lru -p 192.0.2.8/30 -i 0
Y1=$(q +short y1.example.com A)
Y2=$(q +short y2.example.com A)
Y1b=$(q +short y1.example.com A)
st=$(status y3.example.com A)
Y2b=$(q +short y2.example.com A)
[ "$Y1" = 192.0.2.9 ] && [ "$Y2" = 192.0.2.10 ] && [ "$Y1b" = "$Y1" ] &&
    [ "$st" = SERVFAIL ] && [ "$Y2b" = "$Y2" ] &&
    ok "held names keep their addresses at min_idle 0: y3 SERVFAIL" ||
    check_fail "held: y1 '$Y1' y2 '$Y2' y1 '$Y1b' y3 '$st' y2 '$Y2b'"
stop_stub lru
grep -q '"evictions": 0}' "$T/lru.out" && ok "no eviction" ||
    check_fail "lru counters: $(cat "$T/lru.out")"

finish
