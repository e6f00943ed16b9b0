#!/bin/sh
# Upstream HTTP/2 GOAWAY (issue 19 point 2): a python-h2 origin answers a
# first request, holds a second until a third arrives on the same pooled
# connection, then answers the second and sends GOAWAY with the second's
# stream id as last_stream_id, never answering the third. airlockd takes
# no new stream on that connection, and the third request (above
# last_stream_id, no body) is retried on a new connection: all three
# clients get their answer, the third from connection 2.
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import h2" 2>/dev/null ||
    hard_error "python3-h2 missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
PYTHON=$SYS_PYTHON start_py_upstream h2o h2_goaway_origin.py \
    --cert "$T/pki/good.crt" --key "$T/pki/good.key" -l "$T/h2o.log"
H2_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
{
	config_common "$AIRLOCK_PORT" a | sed 's/^workers: 2/workers: 1/'
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$H2_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt
U=https://api.test:$H2_PORT

out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" "$U/one")
[ "$out" = "conn 1 stream 1 path /one" ] || fail "first request: '$out'"
ok "the first request on connection 1"
curl -sS --http1.1 -x "$PROXY" --cacert "$CA" -o "$T/two" "$U/two" &
p2=$!
i=0
until grep -q '"/two"' "$T/h2o.log"; do
	i=$((i + 1)); [ "$i" -le 100 ] || fail "/two never reached the origin"
	sleep 0.05
done
out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" "$U/three")
wait "$p2" || fail "curl /two"
[ "$(cat "$T/two")" = "conn 1 stream 3 path /two" ] ||
    fail "second request: '$(cat "$T/two")'"
ok "the second request, answered before GOAWAY"
grep -q '"conn": 1, "stream": 5, "path": "/three"' "$T/h2o.log" ||
    fail "/three did not go to connection 1 first: $(cat "$T/h2o.log")"
case $out in
"conn 2 stream "*" path /three") ;;
*) fail "the third request, above last_stream_id: '$out'" ;;
esac
ok "the third request, above GOAWAY's last_stream_id: retried on connection 2"
out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" "$U/four")
case $out in
"conn 2 stream "*" path /four") ;;
*) fail "after GOAWAY: '$out'" ;;
esac
ok "no new stream on the connection that sent GOAWAY"
stop_airlockd
finish
