#!/bin/sh
# A SOCKS5 parent (issue 23 point 1): upstream.proxy: socks5://, with
# RFC 1929 credentials from a source (microsocks -u/-P as the real
# parent). HTTPS and plain HTTP go through its CONNECT to the address
# airlock checked; a name airlock cannot resolve goes to the parent as a
# name; the parent's reply code is in the 502's reason; a parent on [::1];
# a rule's SOCKS5 parent without credentials is told apart.
. "$top_srcdir/tests/integration/lib.sh"

command -v microsocks >/dev/null 2>&1 || hard_error "microsocks not installed (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
P=$T/pki
start_origin origin -C "$P/good.crt" -K "$P/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin plain
PLAIN_PORT=$ORIGIN_PORT
MS=$(free_port)
MS6=$(free_port)
CLOSED=$(free_port)
AIRLOCK_PORT=$(free_port)
PW="pw-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
microsocks -i 127.0.0.1 -p "$MS" -u agent -P "$PW" >"$T/ms.log" 2>&1 &
track_pid $!
microsocks -i ::1 -p "$MS6" >"$T/ms6.log" 2>&1 &
track_pid $!
wait_port "$MS" 10 || hard_error "microsocks did not start: $(cat "$T/ms.log")"
PROXY_AUTH="agent:$PW"
export PROXY_AUTH
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
upstream:
  ca_file: $P/ca.crt
  proxy: "socks5://127.0.0.1:$MS"
  proxy_auth: "env:PROXY_AUTH"
  allow_networks: ["127.0.0.1/32", "::1/128"]
  hosts: {"api.test": "127.0.0.1", "plain.test": "127.0.0.1",
          "noauth.test": "127.0.0.1", "v6.test": "::1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT]}
      - {host: "plain.test", ports: [$PLAIN_PORT, $CLOSED]}
      - {host: "byname.test", ports: [$PLAIN_PORT]}
      - {host: "noauth.test", ports: [$PLAIN_PORT], via: "socks5://127.0.0.1:$MS"}
      - {host: "localhost", ports: [$PLAIN_PORT], via: "socks5://[::1]:$MS6"}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
"$AIRLOCKD" -t -c "$T/airlock.yaml" >"$T/t.out" 2>&1 ||
    hard_error "config refused: $(cat "$T/t.out")"
start_airlockd "$T/airlock.yaml"
X="http://127.0.0.1:$AIRLOCK_PORT"
CA=$T/state/ca/a/ca.crt

get()
{
	curl -sS -x "$X" --cacert "$CA" -o "$T/$1" -w '%{http_code}' "$2" \
	    2>"$T/$1.err" || true
}
last_for()
{
	sleep 0.3
	grep -F "$1" "$T/audit.jsonl" | tail -n 1
}

code=$(get s1 "https://api.test:$TLS_PORT/json/21")
code2=$(get s2 "http://plain.test:$PLAIN_PORT/echo")
rec=$(last_for "/json/21")
case $rec in *"\"via\":\"socks5://127.0.0.1:$MS\""*) via=1 ;; *) via=0 ;; esac
if [ "$code" = 200 ] && [ "$code2" = 200 ] && [ "$via" = 1 ] &&
    grep -q "^GET /echo HTTP/1.1" "$T/s2"; then
	ok "HTTPS and plain HTTP via microsocks (RFC 1929 credentials): 200, audit via socks5://"
else
	check_fail "via SOCKS5: '$code' '$code2' $(cat "$T/s1.err") audit $rec"
fi

code=$(get s3 "http://plain.test:$CLOSED/")
if [ "$code" = 502 ] && grep -q '"error":"upstream_unreachable"' "$T/s3" &&
    grep -q "parent proxy socks5://127.0.0.1:$MS: refused the tunnel: SOCKS5 reply [0-9]" "$T/s3"; then
	ok "the SOCKS5 parent cannot connect: 502 upstream_unreachable with its reply code"
else
	check_fail "SOCKS5 refusal: '$code' $(cat "$T/s3")"
fi

# a name airlock cannot resolve: the parent is asked for the name itself
code=$(get s4 "http://byname.test:$PLAIN_PORT/")
if [ "$code" = 502 ] && grep -q "asked for byname.test:$PLAIN_PORT" "$T/s4"; then
	ok "a name airlock cannot resolve goes to the parent as the name"
else
	check_fail "by name: '$code' $(cat "$T/s4")"
fi

code=$(get s5 "http://noauth.test:$PLAIN_PORT/echo")
code2=$(get s6 "http://localhost:$PLAIN_PORT/echo?v6=1")
if [ "$code" = 502 ] && grep -q "127.0.0.1:$MS: wants authentication" "$T/s5" &&
    [ "$code2" = 200 ]; then
	ok "a rule's SOCKS5 parent on [::1]: 200; a rule's parent that wants credentials it has not: 502 saying so"
else
	check_fail "rule parents: '$code' $(cat "$T/s5") '$code2' $(cat "$T/s6")"
fi

if grep -rqF "$PW" "$T/airlockd.log" "$T/airlockd.out" "$T/audit.jsonl" "$T"/s[0-9]* 2>/dev/null; then
	check_fail "the SOCKS5 password appears in a log, audit record or answer"
else
	ok "the SOCKS5 password is in no log, audit record or answer"
fi
finish
