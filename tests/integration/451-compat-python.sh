#!/bin/sh
# Client compatibility (issue 15, point 8): python clients, unmodified, as
# Debian ships them (system /usr/bin/python3: python3-websocket,
# -requests, -httpx, -aiohttp) through the explicit proxy with
# credentials, against compat_upstream.py over HTTP and HTTPS (intercepted,
# the sandbox CA as the client's trust store). Each case
# (compat_clients.py CASE) checks what the client got, what the upstream
# saw and the audit record:
#   websocket-client ws:// (tunnels through CONNECT: issue 15 point 3) and
#     wss:// (intercepted: the close is issue 15 point 1), closed by each
#     side;
#   requests, httpx, aiohttp: GET and POST over http:// and https://;
#   requests to a denied host (https: the 403 inside TLS, issue 15 point 4)
#     and to a path with %2F (issue 15 point 2).
# airlockd must outlive every case.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_need_pymods websocket requests httpx aiohttp
compat_pki
start_compat_up up
HTTP_PORT=$PY_PORT
start_compat_up ups -C "$T/pki/compat.crt" -K "$T/pki/compat.key"
HTTPS_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
COMPAT_CONFIG=$T/airlock.yaml
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "ws.test": "127.0.0.1", "deniedhttp.test": "127.0.0.1", "deniedhttps.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$HTTP_PORT, $HTTPS_PORT]}
      - {host: "ws.test", ports: [$HTTP_PORT, $HTTPS_PORT], paths: ["/ws/*"]}
sandboxes:
  - {id: n, policy: p, token: "literal:tok-n"}
YAML
} >"$COMPAT_CONFIG"
start_airlockd "$COMPAT_CONFIG"
export AIRLOCK_PORT T HTTP_PORT HTTPS_PORT

for c in requests-http requests-https httpx-http httpx-https \
    aiohttp-http aiohttp-https requests-denied-http requests-denied-https \
    requests-scoped websocket-client-ws-client websocket-client-ws-server \
    websocket-client-wss-client websocket-client-wss-server; do
	"$SYS_PYTHON" "$IT_DIR/compat_clients.py" "$c" 2>"$T/$c.err" ||
	    check_fail "$c: $(tail -n 3 "$T/$c.err" | tr '\n' ' ' | cut -c1-400)"
	daemon_check "$c"
done

stop_airlockd
finish
