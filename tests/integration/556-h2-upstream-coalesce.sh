#!/bin/sh
# A burst of requests to an h2 origin (nghttpd) through a fresh airlockd
# opens one upstream connection, not one a request (issue 19 point 2):
# the requests that find a connection to the origin being set up wait for
# its SETTINGS and share it; a new connection only when it is full
# (ceil(N / MAX_CONCURRENT_STREAMS)). nghttpd's -v log numbers its
# connections ([id=N]). And 200 answers of 8 KiB in a row on one upstream
# connection: each stream's bytes go back to the connection's window
# (1 MiB), which once stalled every stream after about 1 MiB.
. "$top_srcdir/tests/integration/lib.sh"

command -v nghttpd >/dev/null 2>&1 ||
    hard_error "nghttpd missing (nghttp2-server, scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
mkdir -p "$T/www"
head -c 524288 /dev/urandom >"$T/www/big.bin"
head -c 8192 /dev/urandom >"$T/www/small.bin"
A_PORT=$(free_port)
nghttpd -v --address=127.0.0.1 -d "$T/www" "$A_PORT" \
    "$T/pki/good.key" "$T/pki/good.crt" >"$T/a.log" 2>&1 &
track_pid $!
B_PORT=$(free_port)
nghttpd -v -m 3 --address=127.0.0.1 -d "$T/www" "$B_PORT" \
    "$T/pki/good.key" "$T/pki/good.crt" >"$T/b.log" 2>&1 &
track_pid $!
wait_port "$A_PORT" 10 || hard_error "nghttpd did not listen: $(cat "$T/a.log")"
wait_port "$B_PORT" 10 || hard_error "nghttpd did not listen: $(cat "$T/b.log")"
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
      - {host: "api.test", ports: [$A_PORT, $B_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt

conns()
{
	grep ':path:' "$1" | grep -o '^\[id=[0-9]*\]' | sort -u | wc -l
}

# 10 HTTP/1.1 client connections at once (10 CONNECT tunnels)
set --
for i in 1 2 3 4 5 6 7 8 9 10; do
	set -- "$@" -o "$T/a$i" "https://api.test:$A_PORT/big.bin"
done
curl -sS --http1.1 --parallel --parallel-immediate --parallel-max 10 \
    -x "$PROXY" --cacert "$CA" "$@" || fail "parallel curl (A)"
for i in 1 2 3 4 5 6 7 8 9 10; do
	cmp -s "$T/a$i" "$T/www/big.bin" || fail "download A$i"
done
n=$(conns "$T/a.log")
s=$(grep -c ':path: /big.bin' "$T/a.log")
[ "$n" -eq 1 ] && [ "$s" -eq 10 ] ||
    fail "a burst of 10 requests: $n upstream connections, $s streams"
ok "a burst of 10 client connections: 10 streams on 1 upstream connection"

# 7 streams of one h2 client, the origin allows 3 at a time: ceil(7/3)
set --
for i in 1 2 3 4 5 6 7; do
	set -- "$@" -o "$T/b$i" "https://api.test:$B_PORT/big.bin"
done
curl -sS --http2 --parallel --parallel-immediate --parallel-max 7 \
    -x "$PROXY" --cacert "$CA" "$@" || fail "parallel curl (B)"
for i in 1 2 3 4 5 6 7; do
	cmp -s "$T/b$i" "$T/www/big.bin" || fail "download B$i"
done
n=$(conns "$T/b.log")
[ "$n" -le 3 ] || grep -E "^\[id=[0-9]+\].*(recv HEADERS|:path:|GOAWAY|closed|RST)" "$T/b.log" | head -80 >&2
[ "$n" -ge 1 ] && [ "$n" -le 3 ] ||
    fail "7 streams, MAX_CONCURRENT_STREAMS 3: $n upstream connections"
ok "7 streams at once, MAX_CONCURRENT_STREAMS 3: $n upstream connections (at most 3)"

# 200 x 8 KiB, one after the other (one client connection, one upstream)
mkdir -p "$T/s"
curl -sS --http1.1 --max-time 60 -x "$PROXY" --cacert "$CA" \
    -o "$T/s/#1" -w '%{http_code}\n' \
    "https://api.test:$A_PORT/small.bin?n=[1-200]" >"$T/codes" ||
    fail "200 small answers: curl stopped after $(grep -c 200 "$T/codes")"
[ "$(grep -c '^200$' "$T/codes")" -eq 200 ] &&
    cmp -s "$T/s/100" "$T/www/small.bin" ||
    fail "200 small answers: $(sort "$T/codes" | uniq -c)"
ok "200 answers of 8 KiB in a row over the pooled connection (past its 1 MiB window)"
stop_airlockd
finish
