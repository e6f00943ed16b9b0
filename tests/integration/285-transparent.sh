#!/bin/sh
# Transparent listener without a launcher: connections that uid 65534
# makes to the test's origin ports are redirected by an nftables output
# rule (the same "redirect" the gateway's host rules use), so the gateway
# sees them with SO_ORIGINAL_DST, and the sandbox is found by the source
# address. Plain HTTP goes through policy on the Host name, TLS is
# intercepted by its SNI with the sandbox's CA, other TCP passes only by a
# rule for its IP and port; everything else is closed and audited.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (nftables, setpriv); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
command -v setpriv >/dev/null 2>&1 || fail "setpriv (util-linux) not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin
HTTP_PORT=$ORIGIN_PORT
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin raw
RAW_PORT=$ORIGIN_PORT
start_origin other
DENIED_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
TPORT=$(free_port)
TABLE=airlock_it_$$
export T HTTP_PORT TLS_PORT RAW_PORT DENIED_PORT TPORT

# only uid 65534's connections to the origins are redirected: the gateway
# (root) reaches them directly
nft -f - <<NFT || fail "nft rules"
table ip $TABLE {
	chain out {
		type nat hook output priority -100; policy accept;
		meta skuid 65534 ip daddr 127.0.0.0/8 tcp dport { $HTTP_PORT, $TLS_PORT, $RAW_PORT, $DENIED_PORT } redirect to :$TPORT
	}
}
NFT
_nft_cleanup()
{
	_nrc=$?
	nft delete table ip "$TABLE" 2>/dev/null
	(exit "$_nrc")
	_it_cleanup
}
trap _nft_cleanup EXIT
# what the unprivileged client writes and reads
NB=$T/nobody
mkdir "$NB" && chmod 0777 "$NB" && chmod 0711 "$T" || hard_error "mkdir $NB"

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "evil.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$HTTP_PORT, $TLS_PORT], methods: [GET], paths: ["/echo", "/size/*"]}
      - {host: "127.0.0.0/24", ports: [$RAW_PORT]}
sandboxes:
  - {id: t1, policy: p, token: "literal:unused-here", addresses: ["127.0.0.1"]}
YAML
} | sed "s|^listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\"}|listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\", transparent: \"127.0.0.1:$TPORT\"}|" \
    >"$T/airlock.yaml"
grep -q "transparent: \"127.0.0.1:$TPORT\"" "$T/airlock.yaml" || fail "config"
start_airlockd "$T/airlock.yaml"
wait_port "$TPORT" 10 || fail "transparent listener not up"
cp "$T/state/ca/t1/ca.crt" "$NB/ca.crt" && chmod 0644 "$NB/ca.crt"

asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# plain HTTP, no proxy settings: policy on the Host name
code=$(asnobody curl -sS -o "$NB/b1" -w '%{http_code}' -H "Host: api.test:$HTTP_PORT" \
    "http://127.0.0.1:$HTTP_PORT/echo")
[ "$code" = 200 ] || fail "transparent HTTP to an allowed host: $code"
grep -qi "^host: api.test:$HTTP_PORT" "$NB/b1" || fail "upstream saw: $(head -5 "$NB/b1")"
code=$(asnobody curl -sS -o /dev/null -w '%{http_code}' -H "Host: evil.test:$HTTP_PORT" \
    "http://127.0.0.1:$HTTP_PORT/echo")
[ "$code" = 403 ] || fail "transparent HTTP to a host no rule names: $code"
code=$(asnobody curl -sS -o /dev/null -w '%{http_code}' -X POST -H "Host: api.test:$HTTP_PORT" \
    "http://127.0.0.1:$HTTP_PORT/echo")
[ "$code" = 403 ] || fail "method policy on the transparent path: $code"
ok "transparent HTTP: Host-based policy, methods and paths"

# TLS by SNI, intercepted with the sandbox's CA
code=$(asnobody curl -sS -o "$NB/b2" -w '%{http_code}' --cacert "$NB/ca.crt" \
    --resolve "api.test:$TLS_PORT:127.0.0.1" "https://api.test:$TLS_PORT/size/100")
[ "$code" = 200 ] || fail "transparent TLS: $code"
[ "$(wc -c <"$NB/b2")" = 100 ] || fail "transparent TLS body"
issuer=$(asnobody sh -c "echo | openssl s_client -connect 127.0.0.1:$TLS_PORT -servername api.test 2>/dev/null" |
    openssl x509 -noout -issuer 2>/dev/null)
echo "$issuer" | grep -q "t1" || fail "leaf not issued by the sandbox CA: $issuer"
# an SNI no rule names: refused before any handshake
asnobody curl -sS -o /dev/null --cacert "$NB/ca.crt" \
    --resolve "evil.test:$TLS_PORT:127.0.0.1" "https://evil.test:$TLS_PORT/" 2>/dev/null &&
    fail "TLS to a denied SNI went through"
ok "transparent TLS: SNI policy, leaf from the sandbox CA"

# raw TCP by an IP rule; another port closed
out=$(printf 'ping, not http\r\n\r\n' | asnobody timeout 10 "$SYSPY" -c "
import socket, sys
s = socket.create_connection(('127.0.0.1', $RAW_PORT), timeout=8)
s.sendall(sys.stdin.buffer.read())
print(s.recv(200).decode('latin-1').split('\r\n')[0])")
case "$out" in HTTP/1.1\ 4*) ;; *) fail "raw TCP tunnel: got '$out'" ;; esac
out=$(asnobody timeout 10 "$SYSPY" -c "
import socket
s = socket.create_connection(('127.0.0.1', $DENIED_PORT), timeout=8)
s.sendall(b'hello\r\n')
print(repr(s.recv(200)))" 2>&1)
case "$out" in "b''"|*Reset*) ;; *) fail "raw TCP to an unlisted port: got '$out'" ;; esac
ok "raw TCP: relayed by a network rule (127.0.0.0/24), closed otherwise"

# a source address that belongs to no sandbox: closed, audited
out=$(asnobody timeout 10 "$SYSPY" -c "
import socket
s = socket.socket()
s.bind(('127.0.0.2', 0))
s.settimeout(8)
s.connect(('127.0.0.1', $HTTP_PORT))
s.sendall(b'GET /echo HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n')
print(repr(s.recv(200)))" 2>&1)
case "$out" in "b''"|*Reset*) ;; *) fail "unknown source address: got '$out'" ;; esac
ok "unknown source address: closed"

stop_airlockd
"$PYTHON" - <<'PY' || fail "audit records"
import json, os
alls = [json.loads(l) for l in open(os.environ["T"] + "/audit.jsonl")]
assert all(r["mode"] == "transparent" for r in alls), alls
# wait_port's probe went to the listener itself: refused, no sandbox
assert any("not redirected" in r.get("reason", "") and "sandbox" not in r
           for r in alls), alls
assert any(r.get("reason", "").startswith("connection from an address "
           "of no sandbox") for r in alls), alls
recs = [r for r in alls if "sandbox" in r]
assert all(r["sandbox"] == "t1" for r in recs), recs
http = [r for r in recs if r["proto"] == "http"]
assert any(r["status"] == 200 and r["host"] == "api.test" for r in http), http
assert any(r["decision"] == "deny" and r["host"] == "evil.test" for r in http)
https = [r for r in recs if r["proto"] == "https"]
assert any(r["status"] == 200 and r["tls"] == "intercept" for r in https), recs
tun = [r for r in recs if r["proto"] == "tunnel"]
port = int(os.environ["RAW_PORT"]); dport = int(os.environ["DENIED_PORT"])
assert any(r["decision"] == "allow" and r["port"] == port and r["bytes_out"] > 0
           for r in tun), tun
assert any(r["decision"] == "deny" and r["port"] == dport for r in tun), tun
print("ok - every transparent connection audited: %d records" % len(recs))
PY
finish
