#!/bin/sh
# A parent proxy (issue 23 point 1): upstream.proxy for the whole gateway,
# a rule's "via" (direct, or another parent), credentials from a source.
# Real parents on loopback: tinyproxy (Basic auth) and Squid. airlock's
# policy and destination guard come first (a denied request never reaches
# the parent); HTTPS and plain HTTP both go through the parent's CONNECT
# to the address airlock checked; a refusing or dead parent gives 502
# upstream_unreachable with the parent's status in the reason; the audit
# records "via"; the password is in no log, audit record or answer.
. "$top_srcdir/tests/integration/lib.sh"

command -v tinyproxy >/dev/null 2>&1 || hard_error "tinyproxy not installed (scripts/install-deps.sh --test)"
command -v squid >/dev/null 2>&1 || hard_error "squid not installed (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
P=$T/pki
start_origin origin -C "$P/good.crt" -K "$P/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin plain
PLAIN_PORT=$ORIGIN_PORT
start_origin refused
REFUSED_PORT=$ORIGIN_PORT
TP=$(free_port)
SQ=$(free_port)
DEAD=$(free_port)
AIRLOCK_PORT=$(free_port)
PW="pw-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
chmod 777 "$T"

# tinyproxy: Basic auth, CONNECT to the two allowed origin ports only
cat >"$T/tinyproxy.conf" <<CONF
Port $TP
Listen 127.0.0.1
Timeout 30
LogFile "$T/tinyproxy.log"
LogLevel Connect
MaxClients 20
Allow 127.0.0.1
BasicAuth agent $PW
ConnectPort $TLS_PORT
ConnectPort $PLAIN_PORT
CONF
[ "$(id -u)" = 0 ] && printf 'User nobody\nGroup nogroup\n' >>"$T/tinyproxy.conf"
tinyproxy -d -c "$T/tinyproxy.conf" >"$T/tinyproxy.out" 2>&1 &
track_pid $!
wait_port "$TP" 10 || hard_error "tinyproxy did not start: $(cat "$T/tinyproxy.out")"

# squid: CONNECT anywhere on loopback except to REFUSED_PORT
mkdir -p "$T/squid"
chmod 777 "$T/squid"
cat >"$T/squid.conf" <<CONF
http_port 127.0.0.1:$SQ
pid_filename $T/squid/squid.pid
access_log stdio:$T/squid/access.log
cache_log $T/squid/cache.log
cache_store_log none
cache deny all
cache_mem 8 MB
pinger_enable off
shutdown_lifetime 0 seconds
coredump_dir $T/squid
acl refused port $REFUSED_PORT
acl CONNECT method CONNECT
http_access deny CONNECT refused
http_access allow localhost
http_access deny all
CONF
squid -N -f "$T/squid.conf" >"$T/squid.out" 2>&1 &
track_pid $!
wait_port "$SQ" 30 || hard_error "squid did not start: $(cat "$T/squid.out" "$T/squid/cache.log" 2>/dev/null | tail -5)"

printf 'agent:%s\n' "$PW" >"$T/proxy.auth"
chmod 600 "$T/proxy.auth"
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
upstream:
  ca_file: $P/ca.crt
  proxy: "http://127.0.0.1:$TP"
  proxy_auth: "file:$T/proxy.auth"
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "plain.test": "127.0.0.1",
          "direct.test": "127.0.0.1", "localhost": "127.0.0.1",
          "inside.test": "10.1.2.3", "dead.test": "127.0.0.1",
          "splice.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT, $REFUSED_PORT]}
      - {host: "plain.test", ports: [$PLAIN_PORT, $REFUSED_PORT]}
      - {host: "direct.test", ports: [$PLAIN_PORT], via: direct}
      - {host: "localhost", ports: [$TLS_PORT, $PLAIN_PORT, $REFUSED_PORT], via: "http://127.0.0.1:$SQ"}
      - {host: "dead.test", ports: [$PLAIN_PORT], via: "http://127.0.0.1:$DEAD"}
      - {host: "inside.test", ports: [$PLAIN_PORT]}
      - {host: "splice.test", ports: [$TLS_PORT], intercept: false, via: "http://127.0.0.1:$SQ"}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
"$AIRLOCKD" -t -c "$T/airlock.yaml" >"$T/t.out" 2>&1 ||
    hard_error "config refused: $(cat "$T/t.out")"
start_airlockd "$T/airlock.yaml"
X="http://127.0.0.1:$AIRLOCK_PORT"
CA=$T/state/ca/a/ca.crt

# get NAME URL: body in $T/NAME, status printed
get()
{
	curl -sS -x "$X" --cacert "$CA" -o "$T/$1" -w '%{http_code}' "$2" \
	    2>"$T/$1.err" || true
}

# last_for PATTERN: the last audit record whose text contains PATTERN
last_for()
{
	sleep 0.3
	grep -F "$1" "$T/audit.jsonl" | tail -n 1
}

# has REC FIELD VALUE: the record's string FIELD is VALUE (no python: fast)
has()
{
	case $1 in *"\"$2\":\"$3\""*) return 0 ;; esac
	return 1
}

# --- HTTPS through tinyproxy: CONNECT to the checked address, TLS inside
code=$(get t1 "https://api.test:$TLS_PORT/json/20")
rec=$(last_for "/json/20")
if [ "$code" = 200 ] && has "$rec" via "http://127.0.0.1:$TP" &&
    has "$rec" upstream "127.0.0.1:$TLS_PORT" &&
    grep -q "CONNECT.*127.0.0.1:$TLS_PORT" "$T/tinyproxy.log"; then
	ok "HTTPS via tinyproxy: 200, CONNECT 127.0.0.1:$TLS_PORT at the parent, audit via"
else
	check_fail "HTTPS via tinyproxy: status '$code' $(cat "$T/t1.err") audit $rec"
fi

# --- plain HTTP through tinyproxy (a CONNECT too: the origin gets the
# request the pipeline wrote)
code=$(get t2 "http://plain.test:$PLAIN_PORT/echo")
rec=$(last_for "\"path\":\"/echo\"")
if [ "$code" = 200 ] && grep -q "^GET /echo HTTP/1.1" "$T/t2" &&
    has "$rec" via "http://127.0.0.1:$TP" &&
    grep -q "CONNECT.*127.0.0.1:$PLAIN_PORT" "$T/tinyproxy.log"; then
	ok "plain HTTP via tinyproxy: 200, origin-form request inside the parent's tunnel"
else
	check_fail "plain HTTP via tinyproxy: status '$code' $(head -c 300 "$T/t2") audit $rec"
fi

# --- the parent refuses (tinyproxy: port not in ConnectPort) -> 502
code=$(get t3 "http://plain.test:$REFUSED_PORT/size/3")
if [ "$code" = 502 ] && grep -q '"error":"upstream_unreachable"' "$T/t3" &&
    grep -q "parent proxy http://127.0.0.1:$TP: refused the tunnel: 403" "$T/t3"; then
	ok "tinyproxy refuses the CONNECT: 502 upstream_unreachable naming its 403"
else
	check_fail "tinyproxy refusal: status '$code' $(cat "$T/t3")"
fi

# --- policy and the destination guard first: the parent never hears of it
n0=$(grep -c CONNECT "$T/tinyproxy.log")
code=$(get t4 "https://denied.test:$TLS_PORT/")
code2=$(get t5 "http://inside.test:$PLAIN_PORT/")
n1=$(grep -c CONNECT "$T/tinyproxy.log")
if [ "$code" = 403 ] && [ "$code2" = 403 ] && grep -q "denied network" "$T/t5" &&
    [ "$n0" = "$n1" ]; then
	ok "a denied host and a host in a denied network: 403, never sent to the parent"
else
	check_fail "policy first: '$code' '$code2' $(cat "$T/t5") connects $n0 -> $n1"
fi

# --- via: direct
code=$(get t6 "http://direct.test:$PLAIN_PORT/echo?direct=1")
rec=$(last_for "direct.test")
n2=$(grep -c CONNECT "$T/tinyproxy.log")
if [ "$code" = 200 ] && ! case $rec in *'"via"'*) true ;; *) false ;; esac && [ "$n2" = "$n1" ]; then
	ok "via: direct goes straight to the origin (no via in the audit)"
else
	check_fail "via direct: '$code' audit $rec connects $n1 -> $n2"
fi

# --- a rule's own parent: Squid, HTTPS and plain HTTP, and its refusal
code=$(get t7 "https://localhost:$TLS_PORT/json/30")
code2=$(get t8 "http://localhost:$PLAIN_PORT/echo?sq=1")
rec=$(last_for "/json/30")
if [ "$code" = 200 ] && [ "$code2" = 200 ] &&
    has "$rec" via "http://127.0.0.1:$SQ"; then
	ok "via Squid (a rule's parent): HTTPS and plain HTTP 200, audit via Squid"
else
	check_fail "via Squid: '$code' '$code2' audit $rec squid log: $(tail -3 "$T/squid/access.log" 2>/dev/null)"
fi
code=$(get t9 "http://localhost:$REFUSED_PORT/size/3")
sleep 0.3
if [ "$code" = 502 ] && grep -q "parent proxy http://127.0.0.1:$SQ: refused the tunnel: 403" "$T/t9" &&
    grep -q "TCP_DENIED/403 .* CONNECT 127.0.0.1:$REFUSED_PORT" "$T/squid/access.log"; then
	ok "Squid refuses (http_access deny): 502 naming its 403, TCP_DENIED in Squid's log"
else
	check_fail "Squid refusal: '$code' $(cat "$T/t9")"
fi

# --- a spliced CONNECT tunnel follows its rule's parent too
code=$(curl -sS -k -x "$X" -o "$T/t11" -w '%{http_code}' "https://splice.test:$TLS_PORT/json/11" 2>"$T/t11.err")
rec=$(last_for "splice.test")
if [ "$code" = 200 ] && has "$rec" via "http://127.0.0.1:$SQ" && has "$rec" tls splice; then
	ok "a spliced tunnel goes through its rule's parent (Squid): 200, audit via, tls splice"
else
	check_fail "spliced via Squid: '$code' $(cat "$T/t11.err") audit $rec"
fi

# --- a dead parent
code=$(get t10 "http://dead.test:$PLAIN_PORT/")
if [ "$code" = 502 ] && grep -q '"error":"upstream_unreachable"' "$T/t10" &&
    grep -q "parent proxy http://127.0.0.1:$DEAD: connect: Connection refused" "$T/t10"; then
	ok "a dead parent: 502 upstream_unreachable, connect refused"
else
	check_fail "dead parent: '$code' $(cat "$T/t10")"
fi

# --- keep-alive through the parent: two requests, one parent tunnel
n3=$(grep -c "CONNECT.*127.0.0.1:$PLAIN_PORT" "$T/tinyproxy.log")
curl -sS -x "$X" -o /dev/null -o /dev/null "http://plain.test:$PLAIN_PORT/size/5" \
    "http://plain.test:$PLAIN_PORT/size/6" 2>"$T/ka.err" || check_fail "keep-alive: $(cat "$T/ka.err")"
n4=$(grep -c "CONNECT.*127.0.0.1:$PLAIN_PORT" "$T/tinyproxy.log")
if [ $((n4 - n3)) -le 1 ]; then
	ok "pooled: two requests to one origin reuse the parent's tunnel ($((n4 - n3)) new)"
else
	check_fail "keep-alive through the parent: $((n4 - n3)) CONNECTs"
fi

# --- the password is nowhere
if grep -rqF "$PW" "$T/airlockd.log" "$T/airlockd.out" "$T/audit.jsonl" "$T"/t[0-9]* 2>/dev/null; then
	check_fail "the parent's password appears in a log, audit record or answer"
else
	ok "the parent's password is in no log, audit record or answer"
fi

# --- configuration errors
{
	config_common "$AIRLOCK_PORT"
	printf 'upstream:\n  proxy: "http://agent:%s@127.0.0.1:%s"\n' "$PW" "$TP"
} >"$T/bad.yaml"
if ! "$AIRLOCKD" -t -c "$T/bad.yaml" >"$T/bad.out" 2>&1 &&
    grep -q "bad.yaml:6:10: .*credentials do not go in the URL" "$T/bad.out" &&
    ! grep -qF "$PW" "$T/bad.out"; then
	ok "credentials in the URL: refused at FILE:LINE:COL, not echoed"
else
	check_fail "credentials in URL: $(cat "$T/bad.out")"
fi
finish
