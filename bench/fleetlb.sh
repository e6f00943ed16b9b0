#!/bin/sh
# fleetlb.sh [BUILD_DIR]: unmetered keep-alive HTTPS requests per second (GET /json/1024)
# (intercepted TLS: a CONNECT tunnel per connection, then keep-alive
# requests inside it) through one airlockd, then through HAProxy (TCP mode)
# in front of two airlockd sharing tls.fleet_ca_key. Loopback, the test
# origin over TLS, bench/loadgen with C connections for D seconds each.
# One run; prints a Markdown table.
#   FLEET_C=32 FLEET_D=10 bench/fleetlb.sh _build/release
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top}
build=$(cd "$build" && pwd)
C=${FLEET_C:-32}
D=${FLEET_D:-10}
W=${FLEET_WORKERS:-1}
T=$(mktemp -d /tmp/fleetlb.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null || :; done
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitport() {
	python3 - "$1" <<'PY'
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
PY
}
sh "$top/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1
"$build/tests/harness/origin" -p 0 -P "$T/origin.port" -C "$T/pki/good.crt" \
    -K "$T/pki/good.key" -l /dev/null 2>"$T/origin.err" &
pids="$pids $!"
while [ ! -s "$T/origin.port" ]; do sleep 0.05; done
OP=$(cat "$T/origin.port")
umask 077
head -c 32 /dev/urandom >"$T/fleet.key"
umask 022

gw() {	# gw I: start gateway I, sets GP
	GP=$(port)
	cat >"$T/gw$1.yaml" <<YAML
listen: {proxy: "127.0.0.1:$GP"}
state_dir: $T/state$1
workers: $W
gateway: gw$1
audit: {file: /dev/null}
tls: {fleet_ca_key: $T/fleet.key}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"localhost": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "localhost", ports: [$OP]}
sandboxes:
  - {id: s, policy: p, token: "literal:tok"}
YAML
	"$build/src/airlockd" -c "$T/gw$1.yaml" >"$T/gw$1.out" 2>"$T/gw$1.log" &
	pids="$pids $!"
	waitport "$GP"
}
lg() {	# lg PROXY_PORT: prints rps
	"$build/bench/loadgen" -u "https://localhost:$OP/json/1024" -x "127.0.0.1:$1" \
	    -A s:tok -c "$C" -d "$D" -k --cafile "$T/ca.crt" -o json \
	    2>"$T/lg.err" | python3 -c 'import json,sys; o=json.load(sys.stdin); print("%.0f %d %d" % (o["rps"], o.get("non2xx",0), o.get("tls_errors",0)))'
}
gw 1; P1=$GP
gw 2; P2=$GP
HA=$(port)
printf 'global\n  maxconn 4000\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\nfrontend fe\n  bind 127.0.0.1:%s\n  default_backend gws\nbackend gws\n  balance roundrobin\n  server gw1 127.0.0.1:%s check inter 1s\n  server gw2 127.0.0.1:%s check inter 1s\n' \
    "$HA" "$P1" "$P2" >"$T/haproxy.cfg"
haproxy -f "$T/haproxy.cfg" -db >"$T/haproxy.log" 2>&1 &
pids="$pids $!"
waitport "$HA"
# the CA (the same from either gateway): one request makes it
curl -sS -k -o /dev/null -x "http://s:tok@127.0.0.1:$P1" "https://localhost:$OP/"
cp "$T/state1/ca/s/ca.crt" "$T/ca.crt"
curl -sS -o /dev/null --cacert "$T/ca.crt" -x "http://s:tok@127.0.0.1:$P2" "https://localhost:$OP/"

one=$(lg "$P1")
ha1=$(lg "$HA")
echo "| setup | req/s | non-2xx | TLS errors |"
echo "|---|---|---|---|"
echo "| 1 gateway (direct) | $(echo "$one" | cut -d' ' -f1) | $(echo "$one" | cut -d' ' -f2) | $(echo "$one" | cut -d' ' -f3) |"
echo "| HAProxy + 2 gateways | $(echo "$ha1" | cut -d' ' -f1) | $(echo "$ha1" | cut -d' ' -f2) | $(echo "$ha1" | cut -d' ' -f3) |"
echo
echo "C=$C connections, D=${D}s each, workers=$W per gateway, $(nproc) cores; uptime: $(uptime)"
