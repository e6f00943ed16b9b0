#!/bin/sh
# Fleet mode (issue 18, point 4): the same CA on every gateway. Three
# gateways with the same tls.fleet_ca_key (a master key file) derive the
# same CA for a sandbox: an intercepted HTTPS request through each of them
# verifies with the CA certificate taken from the first one (curl
# --cacert), their CA certificates have the same key and serial, and no
# gateway stored anything but its own state_dir. A fourth gateway with
# another master key is not trusted by that CA certificate (the check can
# fail).
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/fleetlib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
umask 077
openssl rand 32 >"$T/fleet.key"
openssl rand 32 >"$T/other.key"

for i in 1 2 3 4; do
	eval "GW_PORT_$i=\$(free_port)"
	eval "_p=\$GW_PORT_$i"
	_k=$T/fleet.key
	[ $i = 4 ] && _k=$T/other.key
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl}
tls: {fleet_ca_key: $_k}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: s, policy: p, token: "literal:tok"}
YAML
	start_gateway $i "$T/gw$i.yaml"
done

# the first request through gateway 1 makes its CA (not verified yet)
curl -sS -k -o /dev/null -x "http://s:tok@127.0.0.1:$GW_PORT_1" \
    "https://api.test:$ORIGIN_PORT/echo" || fail "first request through gateway 1"
[ -s "$T/state1/ca/s/ca.crt" ] || fail "gateway 1 made no CA for s"
cp "$T/state1/ca/s/ca.crt" "$T/fleet-ca.crt"

for i in 1 2 3; do
	eval "_p=\$GW_PORT_$i"
	code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$T/fleet-ca.crt" \
	    -x "http://s:tok@127.0.0.1:$_p" "https://api.test:$ORIGIN_PORT/echo")
	[ "$code" = 200 ] || check_fail "gateway $i: $code, the fleet CA did not verify"
done
ok "a leaf from each of three gateways verifies with gateway 1's CA"

pub() { openssl x509 -in "$1" -noout -pubkey; }
ser() { openssl x509 -in "$1" -noout -serial; }
for i in 2 3; do
	[ "$(pub "$T/state$i/ca/s/ca.crt")" = "$(pub "$T/fleet-ca.crt")" ] ||
	    check_fail "gateway $i's CA key differs"
	[ "$(ser "$T/state$i/ca/s/ca.crt")" = "$(ser "$T/fleet-ca.crt")" ] ||
	    check_fail "gateway $i's CA serial differs"
done
ok "same CA key and serial on every gateway"

if curl -sS -o /dev/null --cacert "$T/fleet-ca.crt" \
    -x "http://s:tok@127.0.0.1:$GW_PORT_4" "https://api.test:$ORIGIN_PORT/echo" \
    2>"$T/gw4.curl"; then
	check_fail "a gateway with another fleet key was trusted"
fi
ok "another fleet key gives another CA"
grep -q '"gateway":"gw2"' "$T/audit2.jsonl" ||
    check_fail "gateway 2's audit records do not name it"

for i in 1 2 3 4; do
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
