#!/bin/sh
# Fleet mode (issue 18.1, 18.5): budget_store: rediss:// to a Redis whose
# certificate chains to budget_store_ca but does not name HOST (SAN
# other.test only, HOST localhost). The TLS relay refuses it with a log
# line that says why (the name); requests under a capped policy get 503
# budget_unavailable (in the audit too); a policy that needs nothing from
# the store is still served.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

command -v openssl >/dev/null 2>&1 || hard_error "openssl CLI not found"
command -v redis-server >/dev/null 2>&1 ||
    hard_error "redis-server not installed (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin
RP=$(free_port)
mkdir -p "$T/redis"
redis-server --port 0 --tls-port "$RP" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$T/redis" --logfile "$T/redis/redis.log" \
    --tls-cert-file "$T/pki/wronghost.crt" \
    --tls-key-file "$T/pki/wronghost.key" \
    --tls-ca-cert-file "$T/pki/ca.crt" --tls-auth-clients no &
REDIS_PID=$!
track_pid "$REDIS_PID"
wait_port "$RP" 10 "$REDIS_PID" ||
    hard_error "redis-server (TLS) did not start: $(tail -5 "$T/redis/redis.log")"

GW_PORT_1=$(free_port)
cat >"$T/gw1.yaml" <<YAML
listen: {proxy: "127.0.0.1:$GW_PORT_1"}
state_dir: $T/state1
workers: 1
gateway: gw1
audit: {file: $T/audit1.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
budget_store: "rediss://localhost:$RP/0"
budget_store_ca: $T/pki/ca.crt
limits: {store_timeout: 500ms}
policies:
  - name: capped
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
    caps: {requests: 1000}
  - name: free
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: c, policy: capped, token: "literal:tok"}
  - {id: f, policy: free, token: "literal:tok"}
YAML
start_gateway 1 "$T/gw1.yaml"

code() { curl -sS -o "$T/body" -w '%{http_code}' -x "http://$2:tok@127.0.0.1:$1" \
    "http://api.test:$ORIGIN_PORT/echo"; }
c=$(code "$GW_PORT_1" c)
[ "$c" = 503 ] || check_fail "capped request: $c, want 503"
grep -q budget_unavailable "$T/body" ||
    check_fail "the 503 is not budget_unavailable: $(head -c 300 "$T/body")"
c=$(code "$GW_PORT_1" f)
[ "$c" = 200 ] || check_fail "uncapped request: $c, want 200"
# the record lands just after the answer is read: give it up to 5 s
_n=0
until grep -q '"sandbox":"c".*"status":503' "$T/audit1.jsonl"; do
	_n=$((_n + 1))
	if [ $_n -gt 100 ]; then
		check_fail "no 503 record of c in the audit"; break
	fi
	sleep 0.05
done
_n=0
until grep -q "rediss://localhost:$RP: the server's certificate is refused: hostname mismatch" \
    "$T/airlockd-1.log"; do
	_n=$((_n + 1))
	if [ $_n -gt 100 ]; then
		check_fail "no clear log line: $(grep rediss "$T/airlockd-1.log" | head -3)"
		break
	fi
	sleep 0.05
done
ok "rediss:// to a certificate that does not name HOST: refused (logged: hostname mismatch), capped requests 503 budget_unavailable, others served"

stop_gateways 1
finish
