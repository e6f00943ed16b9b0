#!/bin/sh
# Upstream HTTP/2 to a real h2-only origin (nghttpd, issue 19 point 2):
# airlockd offers ALPN h2,http/1.1 and nghttpd picks h2, so curl
# --http1.1 and curl --http2 clients through CONNECT both reach it over
# HTTP/2 (the origin's -v log shows the streams): GET, a POST body
# echoed back, requests of separate client connections multiplexed on
# one pooled upstream connection, and SETTINGS_MAX_CONCURRENT_STREAMS 2
# respected by opening more connections for 6 parallel streams. With
# upstream.alpn: ["http/1.1"] airlockd speaks HTTP/1.1, which the
# h2-only origin does not answer (502).
. "$top_srcdir/tests/integration/lib.sh"

command -v nghttpd >/dev/null 2>&1 ||
    hard_error "nghttpd missing (nghttp2-server, scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
mkdir -p "$T/www"
printf 'hello from nghttpd 554\n' >"$T/www/hello.txt"
head -c 1048576 /dev/urandom >"$T/www/big.bin"
head -c 200000 /dev/urandom >"$T/up.bin"
NG_PORT=$(free_port)
nghttpd -v -m 2 --address=127.0.0.1 -d "$T/www" --echo-upload "$NG_PORT" \
    "$T/pki/good.key" "$T/pki/good.crt" >"$T/nghttpd.log" 2>&1 &
track_pid $!
wait_port "$NG_PORT" 10 || hard_error "nghttpd did not listen: $(cat "$T/nghttpd.log")"
AIRLOCK_PORT=$(free_port)
conf()
{
	config_common "$AIRLOCK_PORT" a | sed 's/^workers: 2/workers: 1/'
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
  ${1:-}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$NG_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
}
conf "" >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt
U=https://api.test:$NG_PORT

out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" -o "$T/c1" \
    -w '%{http_code} %{http_version}' "$U/hello.txt")
[ "$out" = "200 1.1" ] && cmp -s "$T/c1" "$T/www/hello.txt" ||
    fail "curl --http1.1 to the h2 origin: '$out' $(head -c 300 "$T/c1")"
grep -q ':path: /hello.txt' "$T/nghttpd.log" ||
    fail "nghttpd saw no h2 request: $(tail -5 "$T/nghttpd.log")"
ok "curl --http1.1 client, h2 origin: 200, the body; nghttpd saw the stream"
# HTTP/2 has no reason phrase; the status line written for an HTTP/1.1
# client still carries one (h2load --h1 counted "HTTP/1.1 200 " as failed)
curl -sS --http1.1 -x "$PROXY" --cacert "$CA" -o /dev/null -D "$T/h1head" \
    "$U/hello.txt" || fail "curl --http1.1 -D"
# (-D holds the CONNECT's answer first, then the origin's)
grep '^HTTP/' "$T/h1head" | tail -1 | grep -q '^HTTP/1.1 200 OK' ||
    fail "status line without its reason phrase: $(grep '^HTTP/' "$T/h1head" | tail -1 | od -c | head -2)"
ok "status line to an HTTP/1.1 client: $(grep '^HTTP/' "$T/h1head" | tail -1 | tr -d '\r')"
out=$(curl -sS --http2 -x "$PROXY" --cacert "$CA" -o "$T/c2" \
    -w '%{http_code} %{http_version}' "$U/big.bin")
[ "$out" = "200 2" ] && cmp -s "$T/c2" "$T/www/big.bin" ||
    fail "curl --http2 to the h2 origin: '$out'"
ok "curl --http2 client, h2 origin: 1 MiB intact"
out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" -o "$T/c3" \
    --data-binary "@$T/up.bin" -H 'Content-Type: application/octet-stream' \
    -w '%{http_code}' "$U/echo")
[ "$out" = "200" ] && cmp -s "$T/c3" "$T/up.bin" ||
    fail "POST through to the h2 origin: '$out' $(wc -c <"$T/c3")"
ok "a 200 kB POST body (HTTP/1.1 client) as DATA, echoed back"
n=$(grep ':path:' "$T/nghttpd.log" | grep -o '^\[id=[0-9]*\]' | sort -u | wc -l)
[ "$n" -eq 1 ] || fail "three client connections: $n upstream connections"
ok "three client connections, one pooled upstream h2 connection"

# 6 parallel streams, the origin allows 2 at a time: more connections
set --
for i in 1 2 3 4 5 6; do set -- "$@" -o "$T/p$i" "$U/big.bin"; done
curl -sS --http2 --parallel --parallel-max 6 -x "$PROXY" --cacert "$CA" \
    "$@" || fail "parallel curl"
for i in 1 2 3 4 5 6; do
	cmp -s "$T/p$i" "$T/www/big.bin" || fail "parallel download $i"
done
n=$(grep ':path:' "$T/nghttpd.log" | grep -o '^\[id=[0-9]*\]' | sort -u | wc -l)
[ "$n" -ge 3 ] || fail "6 parallel streams, 2 per connection: $n connections"
ok "6 parallel 1 MiB streams with MAX_CONCURRENT_STREAMS 2: $n upstream connections"
rec=$(audit_last)
echo "$rec" | grep -q '"upstream":"127.0.0.1:'"$NG_PORT"'"' ||
    fail "audit: $rec"
stop_airlockd

# upstream.alpn restricted to HTTP/1.1: the h2-only origin refuses
conf 'alpn: ["http/1.1"]' >"$T/airlock2.yaml"
before=$(grep -c ':path:' "$T/nghttpd.log")
start_airlockd "$T/airlock2.yaml"
out=$(curl -sS --http1.1 -x "$PROXY" --cacert "$CA" -o "$T/c4" \
    -w '%{http_code}' "$U/hello.txt")
[ "$out" = "502" ] || fail "upstream.alpn http/1.1 to an h2-only origin: '$out'"
[ "$(grep -c ':path:' "$T/nghttpd.log")" = "$before" ] ||
    fail "upstream.alpn http/1.1: the origin saw an h2 request"
ok "upstream.alpn: [http/1.1]: no h2 to the h2-only origin (502)"
stop_airlockd
finish
