#!/bin/sh
# Client compatibility (issue 15, point 8): node's "ws" package, unmodified,
# through the explicit proxy as a sandbox would use it, against a recording
# WebSocket upstream (compat_upstream.py):
#   ws://  with http-proxy-agent  (absolute-form GET + Upgrade)
#   ws://  with https-proxy-agent (CONNECT, then plain HTTP in the tunnel:
#          issue 15 point 3)
#   wss:// with https-proxy-agent (CONNECT + interception, the sandbox CA in
#          NODE_EXTRA_CA_CERTS: the close is issue 15 point 1)
# each ended four ways: a clean close by the client and by the server, an
# abort by the client (the socket destroyed, no close frame) and by the
# server (no close frame, no TLS close_notify). For each: what the client
# got (open, echo, close code and reason: 1000 and the reason for a clean
# close, 1006 for an abort), what the upstream saw (an origin-form GET
# with the Upgrade, no Proxy-Authorization, the masked message, the close
# frame or the EOF), the audit record, and that airlockd lives on and
# serves the next request.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_need_node
compat_pki
start_compat_up ws
WS_PORT=$PY_PORT
start_compat_up wss -C "$T/pki/compat.crt" -K "$T/pki/compat.key"
WSS_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
COMPAT_CONFIG=$T/airlock.yaml
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"ws.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "ws.test", ports: [$WS_PORT, $WSS_PORT], paths: ["/ws/*", "/ping"]}
sandboxes:
  - {id: n, policy: p, token: "literal:tok-n"}
YAML
} >"$COMPAT_CONFIG"
start_airlockd "$COMPAT_CONFIG"
PROXY=http://n:tok-n@127.0.0.1:$AIRLOCK_PORT
NODE_EXTRA_CA_CERTS=$T/state/ca/n/ca.crt
export NODE_EXTRA_CA_CERTS T

# ws_case TAG URL-SCHEME AGENT CLOSE-BY: one session and its checks.
ws_case()
{
	_tag=$1
	_scheme=$2
	_agent=$3
	_by=$4
	if [ "$_scheme" = wss ]; then
		_port=$WSS_PORT _log=$T/wss.jsonl _proto=https _tls=intercept
	else
		_port=$WS_PORT _log=$T/ws.jsonl _proto=http _tls=
	fi
	_what="node ws $_scheme:// via ${_agent}-proxy-agent, ended by $_by"
	_out=$(cd "$COMPAT_DIR" && node ws-client.js \
	    "$_scheme://ws.test:$_port/ws/$_tag" "$PROXY" "$_agent" "$_by" \
	    "$_tag" 2>"$T/node-$_tag.err")
	echo "# $_what: $_out $(head -c 300 "$T/node-$_tag.err")"
	case $_by in
	client) _reason="done" ;;
	server) _reason=bye ;;
	*) _reason= ;;
	esac
	"$PYTHON" - "$_out" "$_tag" "$_by" "$_reason" "$_log" "$_what" <<'PY' ||
import json, sys, time, itlib
out, tag, by, reason, log, what = sys.argv[1:7]
t = itlib.Checks()
try:
    o = json.loads(out)
except ValueError:
    o = {}
t.ok(o.get("opened") is True, what + ": the client's handshake completes", o)
t.ok(o.get("echo") == "hello " + tag, what + ": the echo arrives", o)
if by in ("client", "server"):
    t.ok(o.get("close_code") == 1000 and o.get("close_reason") == reason,
         what + ": the client sees the clean close 1000 %r" % reason, o)
else:
    t.ok(o.get("close_code") == 1006,
         what + ": the client sees the abnormal close 1006", o)

def events():
    with open(log) as f:
        return [json.loads(x) for x in f if x.strip()]

end = time.time() + 5
while True:
    ev = events()
    req = [e for e in ev if e["ev"] == "request" and
           e["target"] == "/ws/" + tag]
    conn = req[0]["conn"] if req else None
    mine = [e for e in ev if e.get("conn") == conn]
    if any(e["ev"] in ("ws_close", "ws_eof", "ws_abort") for e in mine) or \
            time.time() > end:
        break
    time.sleep(0.1)
if t.ok(len(req) == 1, what + ": the upstream got one origin-form GET /ws/" +
        tag, [e.get("target") for e in ev if e["ev"] == "request"]):
    head = req[0]["head"].lower()
    t.ok(req[0]["method"] == "GET" and "\r\nupgrade: websocket\r\n" in head
         and "sec-websocket-key:" in head,
         what + ": the upstream saw the Upgrade and the key", head)
    t.ok("proxy-authorization" not in head,
         what + ": no Proxy-Authorization upstream", head)
msgs = [e for e in mine if e["ev"] == "ws_msg"]
t.ok(any(m["data"] == "hello " + tag and m["masked"] for m in msgs),
     what + ": the upstream got the client's masked message", msgs)
closes = [e for e in mine if e["ev"] == "ws_close"]
evs = [e["ev"] for e in mine]
if by in ("client", "server"):
    want_by = "client" if by == "client" else "reply"
    t.ok(any(c["code"] == 1000 and c["by"] == want_by and
             c["reason"] == reason for c in closes),
         what + ": the upstream got the client's close frame (%s)" % want_by,
         closes or evs)
elif by == "client-abort":
    t.ok("ws_eof" in evs and not closes,
         what + ": the upstream sees the end without a close frame", evs)
else:
    t.ok("ws_abort" in evs, what + ": the upstream dropped it", evs)
t.done()
PY
	check_fail "$_what: client or upstream checks"
	daemon_check "$_what" || return 0
	_rec=$("$PYTHON" - "$T/audit.jsonl" "/ws/$_tag" <<'PY'
import json, sys, itlib
r = itlib.audit_wait(sys.argv[1], lambda a: a.get("path") == sys.argv[2] and
                     a.get("method") == "GET", 10)
print(json.dumps(r) if r else "")
PY
)
	if [ -z "$_rec" ]; then
		check_fail "$_what: no audit record for /ws/$_tag"
	else
		check_audit "$_rec" "$_what" status=101 decision=allow sandbox=n \
		    host=ws.test port="$_port" proto="$_proto" rule=p#0
		[ -z "$_tls" ] || check_audit "$_rec" "$_what" tls="$_tls"
	fi
	# the gateway still serves a request (same upstream, plain HTTP)
	_code=$(curl -sS -m 10 -x "$PROXY" -o /dev/null -w '%{http_code}' \
	    "http://ws.test:$WS_PORT/ping") || _code=failed
	[ "$_code" = 200 ] && ok "$_what: a request after it is served" ||
	    check_fail "$_what: a request after it: $_code"
}

for by in client server client-abort server-abort; do
	ws_case "abs-$by" ws http "$by"
	ws_case "tun-$by" ws https "$by"
	ws_case "tls-$by" wss https "$by"
done

stop_airlockd
finish
