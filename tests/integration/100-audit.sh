#!/bin/sh
# Audit records field by field, audit.file "-", SIGUSR1 reopen, and the
# hash chain (including across a restart and a reopen).
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
write_cfg()
{
	# write_cfg FILE AUDIT-YAML
	cat >"$1" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", default_sandbox: local}
state_dir: $T/state
workers: 2
audit: $2
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: first
    rules:
      - {host: "nothing.test"}
  - name: pol
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], methods: [GET], paths: ["/size/*"]}
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/echo", "/upload"]}
sandboxes:
  - {id: local, policy: pol}
  - {id: other, policy: first, token: "literal:other-token-9"}
YAML
}
# wait_lines FILE N: until FILE has N lines (the writer thread is async)
wait_lines()
{
	_i=0
	while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ] && [ $_i -lt 200 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
}
write_cfg "$T/airlock.yaml" "{file: $T/audit.jsonl}"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "audit fields"
import datetime, json, os, re, time, itlib
from itlib import req, connect, Reader, read_response
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
path = os.environ["T"] + "/audit.jsonl"
t = itlib.Checks()
A = "api.test:%d" % op
U = "http://" + A

# one connection, three requests: allowed POST, allowed GET (reusing the
# upstream connection), denied GET
s = connect(ap)
cport = s.getsockname()[1]
rd = Reader(s)
body = b"z" * 1000
s.sendall(req("POST", U + "/upload?token=abc&x=1", body=body))
r1 = read_response(rd, "POST")
s.sendall(req("GET", U + "/size/5000?q=1"))
r2 = read_response(rd)
s.sendall(req("DELETE", U + "/size/1?q=2"))
r3 = read_response(rd)
s.close()
t.ok(r1.status == 200 and r2.status == 200 and r3.status == 403,
     "requests answered 200, 200, 403", (r1, r2, r3))
ids = [r.header("X-Airlock-Request-Id") for r in (r1, r2, r3)]
t.ok(all(ids) and len(set(ids)) == 3, "three distinct request ids", ids)
recs = [itlib.audit_wait(path, lambda a, i=i: a.get("id") == i, 10)
        for i in ids]
t.ok(all(recs), "each request audited under its X-Airlock-Request-Id", recs)
ts_re = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
now = datetime.datetime.now(datetime.timezone.utc)

def common(a, n):
    if a is None:
        return
    ts = a.get("ts", "")
    t.ok(ts_re.match(ts), "%s: ts RFC 3339 with ms and Z" % n, ts)
    try:
        d = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc)
        t.ok(abs((d - now).total_seconds()) < 120, "%s: ts is now" % n, ts)
    except ValueError:
        t.ok(False, "%s: ts parses" % n, ts)
    t.ok(a.get("sandbox") == "local", "%s: sandbox" % n, a)
    t.ok(a.get("client") == "127.0.0.1:%d" % cport, "%s: client IP:PORT" % n,
         (a.get("client"), cport))
    t.ok(a.get("mode") == "explicit", "%s: mode" % n, a)
    t.ok(a.get("proto") == "http", "%s: proto" % n, a)
    t.ok(a.get("host") == "api.test", "%s: host" % n, a)
    t.ok(a.get("port") == op and type(a.get("port")) is int, "%s: port int" % n,
         a)
    t.ok(a.get("tls") == "none", "%s: tls none" % n, a)
    for k in ("status", "bytes_in", "bytes_out", "duration_ms"):
        t.ok(type(a.get(k)) is int and a[k] >= 0, "%s: %s int" % (n, k), a)
    t.ok(not any("token=abc" in str(v) for v in a.values()),
         "%s: no query in the record" % n, a)

a1, a2, a3 = recs
common(a1, "allowed POST")
if a1:
    t.ok(a1.get("method") == "POST" and a1.get("path") == "/upload",
         "allowed POST: method, path without query", a1)
    t.ok(a1.get("status") == 200 and a1.get("decision") == "allow" and
         "reason" not in a1, "allowed POST: status, decision, no reason", a1)
    t.ok(a1.get("rule") == "pol#1", "allowed POST: rule POLICY#INDEX", a1)
    t.ok(a1.get("upstream") == "127.0.0.1:%d" % op, "allowed POST: upstream",
         a1)
    t.ok(a1.get("bytes_out", 0) >= 1000 + 40 and a1.get("bytes_in", 0) > 20,
         "allowed POST: bytes_out counts the request sent upstream", a1)
common(a2, "allowed GET")
if a2:
    t.ok(a2.get("method") == "GET" and a2.get("path") == "/size/5000",
         "allowed GET: method, path", a2)
    t.ok(a2.get("rule") == "pol#0" and a2.get("decision") == "allow",
         "allowed GET: rule pol#0", a2)
    t.ok(a2.get("bytes_in", 0) >= 5000, "allowed GET: bytes_in counts the "
         "response", a2)
    t.ok(a2.get("upstream") == "127.0.0.1:%d" % op,
         "allowed GET on a reused upstream connection: upstream", a2)
common(a3, "denied DELETE")
if a3:
    t.ok(a3.get("method") == "DELETE" and a3.get("path") == "/size/1",
         "denied: method, path", a3)
    t.ok(a3.get("status") == 403 and a3.get("decision") == "deny",
         "denied: status, decision", a3)
    t.ok(a3.get("reason") == r3.json()["reason"] and a3["reason"],
         "denied: reason as sent to the client", (a3.get("reason"), r3.body))
    t.ok("upstream" not in a3, "denied: no upstream", a3)
    t.ok(a3.get("bytes_out") == 0, "denied: nothing sent upstream", a3)
# every line is one JSON object; one line per request
lines = open(path, "rb").read().split(b"\n")
t.ok(lines[-1] == b"", "file ends with a newline")
objs = [json.loads(l) for l in lines if l]
t.ok(len(objs) == 3 and sorted(o["id"] for o in objs) == sorted(ids),
     "exactly one line per request", len(objs))
t.done()
PY

# SIGUSR1: reopen after the file was moved away
wait_lines "$T/audit.jsonl" 3
mv "$T/audit.jsonl" "$T/audit.jsonl.1"
kill -USR1 "$AIRLOCK_PID"
i=0
while [ ! -f "$T/audit.jsonl" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ -f "$T/audit.jsonl" ] || check_fail "SIGUSR1 did not create a new audit file"
curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -D "$T/h" -o /dev/null \
    "http://api.test:$ORIGIN_PORT/size/1" || fail "curl after SIGUSR1"
rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/h" | tr -d '\r')
if audit_wait_id "$rid" "$T/audit.jsonl" 10 >/dev/null; then
	ok "SIGUSR1: new records in the new file"
else
	check_fail "SIGUSR1: record $rid not in the new audit.jsonl"
fi
grep -q "$rid" "$T/audit.jsonl.1" && check_fail "record $rid went to the old file"
stop_airlockd

# audit.file "-": records on stdout
write_cfg "$T/stdout.yaml" '{file: "-"}'
: >"$T/airlockd.out"
start_airlockd "$T/stdout.yaml"
curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -D "$T/h" -o /dev/null \
    "http://api.test:$ORIGIN_PORT/size/2" || fail "curl with audit to stdout"
rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/h" | tr -d '\r')
if audit_wait_id "$rid" "$T/airlockd.out" 10 >/dev/null; then
	ok "audit.file \"-\": records on stdout"
else
	check_fail "audit.file \"-\": record $rid not on stdout"
fi
grep -q "$rid" "$T/airlockd.log" && check_fail "audit record went to stderr"
stop_airlockd

# hash chain, across a restart and a reopen
write_cfg "$T/chain.yaml" "{file: $T/chain.jsonl, hash_chain: true}"
start_airlockd "$T/chain.yaml"
for i in 1 2 3; do
	curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -o /dev/null \
	    "http://api.test:$ORIGIN_PORT/size/$i" || fail "curl $i (chain)"
done
curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -o /dev/null \
    "http://api.test:$ORIGIN_PORT/denied" || fail "curl denied (chain)"
stop_airlockd
start_airlockd "$T/chain.yaml"
for i in 4 5; do
	curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -o /dev/null \
	    "http://api.test:$ORIGIN_PORT/size/$i" || fail "curl $i (chain)"
done
wait_lines "$T/chain.jsonl" 6
mv "$T/chain.jsonl" "$T/chain.jsonl.1"
kill -USR1 "$AIRLOCK_PID"
i=0
while [ ! -f "$T/chain.jsonl" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
for i in 6 7; do
	curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" -o /dev/null \
	    "http://api.test:$ORIGIN_PORT/size/$i" || fail "curl $i (chain)"
done
stop_airlockd
"$PYTHON" - "$T/chain.jsonl.1" "$T/chain.jsonl" <<'PY' || check_fail "hash chain"
import hashlib, json, re, sys, itlib
t = itlib.Checks()
end = re.compile(rb',"prev":"([0-9a-f]{64})","hash":"([0-9a-f]{64})"\}$')
lines = []
for f in sys.argv[1:]:
    try:
        lines += [(f, l) for l in open(f, "rb").read().split(b"\n") if l]
    except FileNotFoundError:
        t.ok(False, "%s exists" % f)
t.ok(len(lines) == 8, "8 chained records in the two files", len(lines))
prev = b"0" * 64
for n, (f, l) in enumerate(lines):
    m = end.search(l)
    if not t.ok(m, "record %d ends with prev and hash" % n, l[-160:]):
        continue
    json.loads(l)
    p, h = m.group(1), m.group(2)
    t.ok(p == prev, "record %d: prev is the previous hash%s" % (
        n, " (first: 64 zeros)" if n == 0 else ""), (p, prev))
    stripped = l.replace(b',"hash":"' + h + b'"', b"", 1)
    t.ok(hashlib.sha256(stripped).hexdigest().encode() == h,
         "record %d: hash = sha256(line without its hash member)" % n)
    prev = h
t.done()
PY
finish
