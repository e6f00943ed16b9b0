#!/bin/sh
# Ending a WebSocket never takes the gateway down (issue 15.1): a session
# through each mode (explicit HTTP upgrade to ws://, intercepted wss:// via
# CONNECT, spliced CONNECT, and ws:// / wss:// on the transparent
# listener) is ended from either side, cleanly (close frame, close_notify,
# FIN) and abruptly (RST), with and without data in flight. Each time the
# client sees the end (and, where the upstream sent them, every byte and
# the close frame), the daemon keeps serving, and no descriptor is left.
# python websocket-client (the client of the original report) closes and
# aborts wss:// sessions too. Transparent needs root (nftables, setpriv),
# like 285-transparent.sh.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (nftables, setpriv); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
command -v setpriv >/dev/null 2>&1 || fail "setpriv (util-linux) not found"
"$SYSPY" -c "import websocket" 2>/dev/null ||
    fail "python3-websocket missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_py_upstream ws ws_upstream.py -l "$T/ws.jsonl"
WS_PORT=$PY_PORT
start_py_upstream wss ws_upstream.py -l "$T/wss.jsonl" -C "$T/pki/good.crt" -K "$T/pki/good.key"
WSS_PORT=$PY_PORT
start_py_upstream spl ws_upstream.py -l "$T/spl.jsonl" -C "$T/pki/good.crt" -K "$T/pki/good.key"
SPL_PORT=$PY_PORT
start_origin
AIRLOCK_PORT=$(free_port)
TPORT=$(free_port)
TABLE=airlock_it_$$
export T AIRLOCK_PORT WS_PORT WSS_PORT SPL_PORT ORIGIN_PORT TPORT

nft -f - <<NFT || fail "nft rules"
table ip $TABLE {
	chain out {
		type nat hook output priority -100; policy accept;
		meta skuid 65534 ip daddr 127.0.0.0/8 tcp dport { $WS_PORT, $WSS_PORT } redirect to :$TPORT
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
NB=$T/nobody
mkdir "$NB" && chmod 0777 "$NB" && chmod 0711 "$T" || hard_error "mkdir $NB"
chmod 0755 "$T/pki" && chmod 0644 "$T/pki/ca.crt"

{
	echo "listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\", transparent: \"127.0.0.1:$TPORT\", default_sandbox: local}"
	echo "state_dir: $T/state"
	echo "workers: 2"
	echo "audit: {file: $T/audit.jsonl}"
	cat <<YAML
limits: {idle_timeout: 60s}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$WS_PORT, $WSS_PORT, $ORIGIN_PORT]}
      - {host: "api.test", ports: [$SPL_PORT], intercept: false}
sandboxes:
  - {id: local, policy: p, addresses: ["127.0.0.1", "127.0.0.2"]}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_port "$TPORT" 10 || fail "transparent listener not up"
cp "$T/state/ca/local/ca.crt" "$NB/ca.crt" && chmod 0644 "$NB/ca.crt"
export AIRLOCK_PID

fds() { ls "/proc/$AIRLOCK_PID/fd" | wc -l; }
# settle: the probes of wait_port are closed and audited
sleep 0.5
FD0=$(fds)
fd_report "$AIRLOCK_PID" >"$T/fd0.txt"
export FD0

# every mode x every end, as uid 65534 (its direct connections to the
# upstream ports are redirected to the transparent listener)
setpriv --reuid=65534 --regid=65534 --clear-groups "$SYSPY" - <<'PY' ||
import os, socket, sys, wsmodes
def alive():
    try:
        socket.create_connection(("127.0.0.1",
                                  int(os.environ["AIRLOCK_PORT"])), 5).close()
        return True
    except OSError:
        return False
bad = []
for mode in wsmodes.MODES:
    for how in wsmodes.ENDS:
        try:
            problems = wsmodes.run(mode, how)
        except Exception as e:
            problems = ["%s: %s" % (type(e).__name__, e)]
        if not alive():
            print("not ok - %s %s: the daemon is gone" % (mode, how))
            sys.exit(1)
        line = "%s - %s %s" % ("not ok" if problems else "ok", mode, how)
        print(line + ("" if not problems else ": " + "; ".join(problems)))
        if problems:
            bad.append(line)
sys.exit(1 if bad else 0)
PY
    fail "WebSocket sessions through every mode"

# the client of the report, python websocket-client, over wss:// (CONNECT,
# intercepted) and through a spliced tunnel; closed and aborted
"$SYSPY" - <<'PY' || fail "websocket-client"
import os, socket, struct, websocket
T = os.environ["T"]
ap = int(os.environ["AIRLOCK_PORT"])
for port, ca, what in ((os.environ["WSS_PORT"], T + "/nobody/ca.crt",
                        "intercepted"),
                       (os.environ["SPL_PORT"], T + "/pki/ca.crt", "spliced")):
    for end in ("close", "abort", "server"):
        ws = websocket.create_connection(
            "wss://api.test:%s/ws" % port, http_proxy_host="127.0.0.1",
            http_proxy_port=ap, proxy_type="http", timeout=10,
            sslopt={"ca_certs": ca})
        ws.send("hello %s" % what)
        assert ws.recv() == "hello %s" % what, what
        if end == "close":
            ws.close()
        elif end == "abort":
            fd = os.dup(ws.sock.fileno())
            s = socket.socket(fileno=fd)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack("ii", 1, 0))
            s.close()
            ws.sock.close()
        else:
            ws.send("close")
            try:
                while True:
                    ws.recv()
            except websocket.WebSocketConnectionClosedException:
                pass
            ws.close()
        print("ok - websocket-client %s, %s" % (what, end))
PY

# every tunnel's descriptors are gone, and the daemon still serves
i=0
while [ "$(fds)" -gt "$FD0" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ "$(fds)" -le "$FD0" ] || {
	{ echo "--- before:"; cat "$T/fd0.txt"; fd_report "$AIRLOCK_PID"; } >&2
	fail "descriptors: $(fds) now, $FD0 before"
}
code=$(curl -sS -o /dev/null -w '%{http_code}' -x "127.0.0.1:$AIRLOCK_PORT" \
    "http://api.test:$ORIGIN_PORT/echo")
[ "$code" = 200 ] || fail "a plain request after the closes: $code"
ok "daemon up, descriptors back to $FD0"

"$PYTHON" - <<'PY' || fail "audit and upstream records"
import json, os, time
T = os.environ["T"]
time.sleep(0.5)
recs = [json.loads(l) for l in open(T + "/audit.jsonl")]
tun = [r for r in recs if r.get("status") == 101 or
       r.get("proto") == "tunnel" and r.get("decision") == "allow"]
# 5 modes x 11 ends + 6 websocket-client sessions (3 of them spliced:
# one tunnel record; 3 intercepted: the 101 inside)
assert len(tun) >= 5 * 11 + 6, len(tun)
# the transparent sessions came from wsmodes' own source address
tr = [r for r in tun if r.get("mode") == "transparent"]
assert len(tr) >= 2 * 11 and all(r["client"].startswith("127.0.0.2:")
                                 for r in tr), tr[:3]
assert all(isinstance(r.get("bytes_in"), int) and r["bytes_in"] > 0
           for r in tun), [r for r in tun if not r.get("bytes_in")]
ends = []
for n in ("ws", "wss", "spl"):
    ends += [json.loads(l) for l in open(T + "/%s.jsonl" % n)]
errs = [e for e in ends if e.get("end", "").startswith("error")]
# the upstream saw each client close frame arrive
# (5 modes, and websocket-client's two close() calls)
assert sum(e.get("end") == "client-close-frame" for e in ends) >= 5 + 2, ends
print("ok - %d tunnels audited, %d upstream sessions ended (%d errors: %s)"
      % (len(tun), len(ends), len(errs), errs[:3]))
PY
stop_airlockd
