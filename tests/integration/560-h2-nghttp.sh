#!/bin/sh
# nghttp (Debian nghttp2-client) as a real HTTP/2 client (issue 19 point
# 6): 24 GETs as concurrent streams on one intercepted TLS connection,
# one of them to a path the policy denies. nghttp has no proxy option, so
# socat's PROXY address does the CONNECT and relays the bytes; nghttp
# names the host in :authority (-H), which must match the CONNECT host.
# (The relay forks per connection: the port probe takes one.) Every allowed stream → 200 with its body, the denied one → 403 with the
# gateway's JSON, each its own audit record with "http": "2", all from
# one client connection.
. "$top_srcdir/tests/integration/lib.sh"

command -v nghttp >/dev/null 2>&1 ||
    hard_error "nghttp missing (nghttp2-client: scripts/install-deps.sh --test)"
command -v socat >/dev/null 2>&1 ||
    hard_error "socat missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
AIRLOCK_PORT=$(free_port)
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/json/*"]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

RELAY=$(free_port)
socat "TCP-LISTEN:$RELAY,bind=127.0.0.1,reuseaddr,fork" \
    "PROXY:127.0.0.1:api.test:$ORIGIN_PORT,proxyport=$AIRLOCK_PORT" \
    2>"$T/socat.log" &
track_pid $!
wait_port "$RELAY" || fail "socat did not listen"

B=https://127.0.0.1:$RELAY
set --
i=1
while [ $i -le 23 ]; do
	set -- "$@" "$B/json/$((i * 8))"
	i=$((i + 1))
done
set -- "$@" "$B/status/500"
# -v prints every frame; -a is off: only the URIs given; -m 1 each
timeout 30 nghttp -v -H ":authority: api.test:$ORIGIN_PORT" "$@" \
    >"$T/nghttp.out" 2>"$T/nghttp.err"
rc=$?
[ $rc -eq 0 ] || fail "nghttp exit $rc: $(tail -5 "$T/nghttp.err") $(tail -5 "$T/nghttp.out")"
grep -q "negotiated protocol: h2" "$T/nghttp.out" ||
    fail "nghttp did not speak h2: $(head -20 "$T/nghttp.out")"

# stream id → :path (sent) and :status (received)
awk '
/send HEADERS frame/ { match($0, /stream_id=[0-9]+/); sid = substr($0, RSTART + 10, RLENGTH - 10) }
/; :path: / || / :path: / { if (sid != "") path[sid] = $NF }
/recv \(stream_id=[0-9]+\) :status: / { match($0, /stream_id=[0-9]+/);
	s = substr($0, RSTART + 10, RLENGTH - 10); status[s] = $NF }
END { for (s in path) print s, path[s], (s in status ? status[s] : "none") }
' "$T/nghttp.out" | sort -n >"$T/streams"
n200=$(awk '$2 ~ /^\/json\// && $3 == 200' "$T/streams" | wc -l)
n403=$(awk '$2 == "/status/500" && $3 == 403' "$T/streams" | wc -l)
nall=$(wc -l <"$T/streams")
[ "$nall" -eq 24 ] && [ "$n200" -eq 23 ] && [ "$n403" -eq 1 ] ||
    fail "streams: $nall, 200: $n200, 403: $n403: $(cat "$T/streams")"
ok "nghttp: 24 streams on one connection, 23 × 200, the denied one 403"
grep -q '"error":"denied"' "$T/nghttp.out" ||
    fail "no JSON denial in nghttp's output"
ok "the denied stream carries the gateway's JSON answer"
# nghttp opened the streams before the first answer came back
first_recv=$(grep -n 'recv HEADERS frame' "$T/nghttp.out" | head -1 | cut -d: -f1)
sends=$(head -n "$first_recv" "$T/nghttp.out" | grep -c 'send HEADERS frame')
[ "$sends" -ge 10 ] || fail "only $sends streams open before the first answer"
ok "$sends streams were open at once before the first answer"

"$PYTHON" - "$T/audit.jsonl" <<'PY' || fail "audit"
import json, sys, time
for _ in range(50):
    recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    recs = [r for r in recs if r.get("http") == "2"]
    if len(recs) >= 24:
        break
    time.sleep(0.1)
ok = [r for r in recs if r.get("status") == 200 and r.get("decision") == "allow"]
no = [r for r in recs if r.get("status") == 403 and r.get("decision") == "deny"]
clients = {r.get("client") for r in recs}
assert len(recs) == 24 and len(ok) == 23 and len(no) == 1, (len(recs), len(ok), len(no))
assert no[0].get("path") == "/status/500", no[0]
assert all(r.get("proto") == "https" and r.get("host") == "api.test" for r in recs)
assert len(clients) == 1, clients
PY
ok "24 audit records (http 2, proto https), 23 allow + 1 deny, one client connection"

stop_airlockd
finish
