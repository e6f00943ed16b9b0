#!/bin/sh
# Fleet mode (issue 18.1, 18.7): budget_store: rediss:// through the
# in-process TLS relay (hiredis 0.14 has no TLS). redis-server 7 listens
# on TLS only, with a certificate from a test CA made here
# (tests/harness/mkpki.sh). Two gateways trusting that CA
# (budget_store_ca): a capped request is admitted through the shared store
# (its counter is in Redis), and a sandbox created on gateway 1 is served
# by gateway 2 (the registry over TLS too). A third gateway trusting
# another certificate only gets 503 budget_unavailable (the server's
# certificate is checked).
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

command -v openssl >/dev/null 2>&1 || hard_error "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin
RP=$(free_port)
mkdir -p "$T/redis"
redis-server --port 0 --tls-port "$RP" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$T/redis" --logfile "$T/redis/redis.log" \
    --tls-cert-file "$T/pki/good.crt" --tls-key-file "$T/pki/good.key" \
    --tls-ca-cert-file "$T/pki/ca.crt" --tls-auth-clients no &
REDIS_PID=$!
track_pid "$REDIS_PID"
wait_port "$RP" 10 "$REDIS_PID" ||
    hard_error "redis-server (TLS) did not start: $(tail -5 "$T/redis/redis.log")"
trcli() { redis-cli --tls --cacert "$T/pki/ca.crt" -h localhost -p "$RP" "$@"; }
[ "$(trcli PING)" = PONG ] || hard_error "redis-cli --tls: $(trcli PING 2>&1)"

for i in 1 2 3; do
	eval "GW_PORT_$i=\$(free_port)"
	eval "_p=\$GW_PORT_$i"
	_ca=$T/pki/ca.crt
	_h=localhost
	[ $i = 3 ] && _ca=$T/pki/selfsigned.crt
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
budget_store: "rediss://$_h:$RP/0"
budget_store_ca: $_ca
limits: {store_timeout: 1s}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
    caps: {requests: 1000}
sandboxes:
  - {id: s, policy: p, token: "literal:tok"}
YAML
	start_gateway $i "$T/gw$i.yaml"
done

code() { curl -sS -o /dev/null -w '%{http_code}' -x "http://$2@127.0.0.1:$1" \
    "http://api.test:$ORIGIN_PORT/echo"; }
_n=0
until [ "$(code "$GW_PORT_1" s:tok)" = 200 ]; do
	_n=$((_n + 1)); [ $_n -le 50 ] || break
	sleep 0.1
done
[ "$(code "$GW_PORT_1" s:tok)" = 200 ] || check_fail "gateway 1 over rediss://"
[ "$(code "$GW_PORT_2" s:tok)" = 200 ] || check_fail "gateway 2 over rediss://"
trcli --scan --pattern 'airlock:{s}*' | grep -q . ||
    check_fail "no counter of s in Redis"
ok "rediss://: capped requests admitted through the shared store over TLS"

for i in 1 2; do
	_w=0
	until [ -S "$T/state$i/admin.sock" ]; do
		_w=$((_w + 1)); [ $_w -le 100 ] || hard_error "no admin socket $i"
		sleep 0.05
	done
done
export T GW_PORT_2 ORIGIN_PORT
"$PYTHON" - <<'PY' || check_fail "registry over rediss://"
import os, subprocess, time, adminlib as A
T = os.environ["T"]
st, _, b = A.call("unix:%s/state1/admin.sock" % T, "POST", "/v1/sandboxes",
                  body={"id": "fz", "policy": "p"},
                  token=A.token(T + "/state1"))
assert st == 201, (st, b)
t0 = time.monotonic()
while time.monotonic() - t0 < 1.0:
    c = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                        "-x", "http://fz:%s@127.0.0.1:%s" % (b["token"],
                                                             os.environ["GW_PORT_2"]),
                        "http://api.test:%s/echo" % os.environ["ORIGIN_PORT"]],
                       capture_output=True, text=True).stdout
    if c == "200":
        break
    time.sleep(0.05)
assert c == "200", "gateway 2 did not serve fz within 1 s: %s" % c
PY
ok "rediss://: a sandbox made on gateway 1 serves through gateway 2"

"$PYTHON" - <<'PY' || check_fail "usage reset in Redis"
import os, adminlib as A
T = os.environ["T"]
st, _, b = A.call("unix:%s/state2/admin.sock" % T, "POST",
                  "/v1/sandboxes/s/usage/reset", token=A.token(T + "/state2"))
assert st == 200, (st, b)
PY
# its 200 is sent once Redis has done it (create-after-write): no wait
trcli --scan --pattern 'airlock:{s}:w:*' | grep -q . &&
    check_fail "usage reset on gateway 2 left s's shared counters in Redis"
ok "usage reset through gateway 2 has cleared the shared counters when it answers"

[ "$(code "$GW_PORT_3" s:tok)" = 503 ] ||
    check_fail "gateway 3 (untrusted server certificate) was not refused 503"
# the record lands just after the answer is read: give it up to 5 s
_n=0
until grep -q 'budget_unavailable\|"status":503' "$T/audit3.jsonl"; do
	_n=$((_n + 1))
	if [ $_n -gt 100 ]; then
		check_fail "no 503 in gateway 3's audit"; break
	fi
	sleep 0.05
done
ok "rediss://: a server certificate outside budget_store_ca is refused (503)"

for i in 1 2 3; do
	eval "_pid=\$GW_PID_$i"
	kill -TERM "$_pid"
	wait_exit "$_pid" 30
	[ "$WAIT_STATUS" -eq 0 ] || check_fail "gateway $i exited $WAIT_STATUS"
	untrack_pid "$_pid"
	if grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer' \
	    "$T/airlockd-$i.log"; then
		check_fail "sanitizer report in gateway $i's log"
	fi
done
finish
