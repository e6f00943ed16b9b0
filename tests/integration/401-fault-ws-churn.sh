#!/bin/sh
# Fault suite, WebSocket churn (issue 15.1): 1,000 WebSocket sessions open
# and end through every mode (explicit ws://, intercepted wss://, spliced,
# transparent ws:// and wss://) and every way of ending (close frames,
# FIN, RST, from either side, with data in flight), four at a time, while
# another sandbox's plain requests keep their latency (median under 50 ms,
# none failed). Afterwards the daemon still serves and its descriptors are
# back to where they were. Needs root (nftables, setpriv), like 285.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (nftables, setpriv); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
command -v setpriv >/dev/null 2>&1 || fail "setpriv (util-linux) not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_py_upstream ws ws_upstream.py
WS_PORT=$PY_PORT
start_py_upstream wss ws_upstream.py -C "$T/pki/good.crt" -K "$T/pki/good.key"
WSS_PORT=$PY_PORT
start_py_upstream spl ws_upstream.py -C "$T/pki/good.crt" -K "$T/pki/good.key"
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
  - {id: other, policy: p, token: "literal:other-token"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
wait_port "$TPORT" 10 || fail "transparent listener not up"
cp "$T/state/ca/local/ca.crt" "$NB/ca.crt" && chmod 0644 "$NB/ca.crt"
export AIRLOCK_PID
fds() { fd_count_but_pool "$AIRLOCK_PID" "$ORIGIN_PORT"; }

# the other sandbox: plain requests, one after another, until told to stop
"$PYTHON" - >"$T/latency.out" 2>&1 <<'PY' &
import base64, os, time, itlib
from itlib import req, roundtrip
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
auth = b"Basic " + base64.b64encode(b"other:other-token")
lat, fails = [], []
stop = os.environ["T"] + "/stop"
while not os.path.exists(stop):
    t0 = time.monotonic()
    try:
        r = roundtrip(ap, b"GET http://api.test:%d/echo HTTP/1.1\r\n"
                      b"Host: api.test:%d\r\nProxy-Authorization: %s\r\n"
                      b"Connection: close\r\n\r\n" % (op, op, auth))
        if r.status != 200:
            fails.append(r.status)
    except Exception as e:
        fails.append(repr(e))
    lat.append(time.monotonic() - t0)
    time.sleep(0.02)
lat.sort()
print("requests %d failures %d median_ms %.1f p99_ms %.1f %s" % (
    len(lat), len(fails), 1000 * lat[len(lat) // 2],
    1000 * lat[int(len(lat) * 0.99)], fails[:5]))
PY
PROBE=$!
track_pid "$PROBE"
# the baseline, leaving out the probe's pooled upstream connections (one
# per worker that took a request; they stay for idle_timeout)
sleep 1.5
FD0=$(fds)
fd_report "$AIRLOCK_PID" >"$T/fd0.txt"

WS_FLOOD=20000 setpriv --reuid=65534 --regid=65534 --clear-groups "$SYSPY" - <<'PY' ||
import os, sys, threading, time, wsmodes
N, THREADS = 1000, 4
combos = [(m, h) for m in wsmodes.MODES for h in wsmodes.ENDS]
bad, done = [], [0]
lock = threading.Lock()
def churn(k):
    for i in range(k, N, THREADS):
        mode, how = combos[i % len(combos)]
        try:
            problems = wsmodes.run(mode, how)
        except Exception as e:
            problems = ["%s: %s" % (type(e).__name__, e)]
        with lock:
            done[0] += 1
            if problems:
                bad.append("%d %s %s: %s" % (i, mode, how, problems))
t0 = time.time()
ts = [threading.Thread(target=churn, args=(k,)) for k in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("%d sessions in %.1f s, %d with problems" % (done[0], time.time() - t0,
                                                  len(bad)))
for b in bad[:10]:
    print("not ok - " + b)
sys.exit(1 if bad or done[0] != N else 0)
PY
    { touch "$T/stop"; fail "WebSocket churn"; }
touch "$T/stop"
wait_exit "$PROBE" 30
cat "$T/latency.out"
"$PYTHON" - "$T/latency.out" <<'PY' || fail "the other sandbox's requests suffered"
import sys
w = open(sys.argv[1]).read().split()
n, f, med = int(w[1]), int(w[3]), float(w[5])
assert n >= 50 and f == 0 and med < 50.0, (n, f, med)
PY
ok "the other sandbox's requests kept their latency"

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
[ "$code" = 200 ] || fail "a plain request after the churn: $code"
ok "daemon up, descriptors back to $FD0"
stop_airlockd
