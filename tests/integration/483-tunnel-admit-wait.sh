#!/bin/sh
# Tunnels are admitted through the stage table's wait verdict, like
# requests (issue 16, point 4): no worker calls the blocking bud_admit. A
# tunnel reserves nothing (no rule of its own is metered), so its
# admission has no ledger line to wait for; what must hold is that it
# does not queue behind the metered requests that do. With one worker and
# the ledger's fsync slowed to 600 ms (AIRLOCK_TEST_FSYNC_DELAY_MS, as in
# 481), metered requests keep waiting for their reservations while raw
# TCP tunnels are opened on the transparent listener (as uid 65534, whose
# connections to the echo server an nftables rule redirects, as in 285)
# and unmetered requests go through the explicit proxy: the metered ones
# take the fsync's time, the tunnels and the unmetered requests keep
# their latency (medians under 200 ms).
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (nftables, setpriv)"
command -v nft >/dev/null 2>&1 || skip "nft not installed"
command -v setpriv >/dev/null 2>&1 || skip "setpriv (util-linux) not found"
start_py_upstream llm llm_upstream.py -l "$T/llm.jsonl"
LLM_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
TPORT=$(free_port)
TABLE=airlock_it_$$

# the raw TCP upstream: echoes a line back
"$PYTHON" - "$T/echo.port" <<'PY' 2>"$T/echo.err" &
import os, socketserver, sys


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(self.rfile.readline())


socketserver.ThreadingTCPServer.allow_reuse_address = True
srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
open(sys.argv[1] + ".tmp", "w").write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
PY
track_pid $!
i=0
until [ -s "$T/echo.port" ]; do
	i=$((i + 1))
	[ "$i" -le 200 ] || hard_error "echo server: $(cat "$T/echo.err")"
	sleep 0.05
done
RAW_PORT=$(cat "$T/echo.port")
export AIRLOCK_PORT LLM_PORT RAW_PORT T

nft -f - <<NFT || fail "nft rules"
table ip $TABLE {
	chain out {
		type nat hook output priority -100; policy accept;
		meta skuid 65534 ip daddr 127.0.0.0/8 tcp dport $RAW_PORT redirect to :$TPORT
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

cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", transparent: "127.0.0.1:$TPORT"}
state_dir: $T/state
workers: 1
audit: {file: $T/audit.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1", "plain.test": "127.0.0.1"}
budget_store: file
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: p
    rules:
      - {host: "127.0.0.0/24", ports: [$RAW_PORT]}
      - {host: "plain.openai.test", ports: [$LLM_PORT], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "plain.test", ports: [$LLM_PORT], methods: [GET], paths: ["/v1/*"]}
    caps: {usd: 100}
sandboxes:
  - {id: sd, policy: p, token: "literal:tok", addresses: ["127.0.0.1"]}
YAML

AIRLOCK_TEST_FSYNC_DELAY_MS=600
export AIRLOCK_TEST_FSYNC_DELAY_MS
start_airlockd "$T/airlock.yaml"
unset AIRLOCK_TEST_FSYNC_DELAY_MS
wait_port "$TPORT" 10 || fail "transparent listener not up"

# uid 65534 opens tunnels, three at a time, until $NB/stop appears
cat >"$NB/tunnels.py" <<'PY'
import os, socket, sys, threading, time
NB, rp = sys.argv[1], int(os.environ["RAW_PORT"])
lock, out = threading.Lock(), []


def loop():
    while not os.path.exists(NB + "/stop"):
        t0 = time.time()
        ok = False
        try:
            s = socket.create_connection(("127.0.0.1", rp), timeout=10)
            s.sendall(b"ping\n")
            ok = s.recv(64) == b"ping\n"
            s.close()
        except OSError:
            time.sleep(0.05)
        with lock:
            out.append("%.3f %d\n" % (time.time() - t0, ok))
        time.sleep(0.02)


th = [threading.Thread(target=loop, daemon=True) for _ in range(3)]
for x in th:
    x.start()
for x in th:
    x.join(30)
open(NB + "/tunnels.txt", "w").write("".join(out))
PY
chmod 0644 "$NB/tunnels.py"
setpriv --reuid=65534 --regid=65534 --clear-groups \
    env RAW_PORT="$RAW_PORT" "$SYSPY" "$NB/tunnels.py" "$NB" \
    >"$T/tunnels.log" 2>&1 &
TUN_PID=$!
track_pid $TUN_PID

NB="$NB" "$PYTHON" - <<'PY' || check_fail "tunnels and unmetered latency while the ledger syncs"
import os, statistics, threading, time, budlib, itlib
ap, lp, nb = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("LLM_PORT"), \
    os.environ["NB"]
t = itlib.Checks()
body = budlib.jbody({"model": "unit-a", "max_tokens": 10,
                     "messages": [{"role": "user", "content": "hi"}]})
stop = threading.Event()
lock = threading.Lock()
metered = []


def metered_loop():
    c = budlib.Client(ap, "plain.openai.test", lp, "sd:tok", timeout=30)
    while not stop.is_set():
        t0 = time.time()
        try:
            r = c.request("POST", "/v1/chat/completions", body,
                          ["X-Synth: openai"], retry=False)
        except Exception:
            r = None
        with lock:
            metered.append((time.time() - t0,
                            r.status if r is not None else None))
        if r is None:
            c.close()
            time.sleep(0.05)


th = [threading.Thread(target=metered_loop, daemon=True) for _ in range(3)]
for x in th:
    x.start()
time.sleep(1.5)         # fsyncs under way, tunnels being opened
plain = []
pc = budlib.Client(ap, "plain.test", lp, "sd:tok", timeout=30)
for i in range(15):
    t0 = time.time()
    r = pc.request("GET", "/v1/models", b"", [], retry=False)
    plain.append((time.time() - t0, r.status if r is not None else None))
    time.sleep(0.1)
open(nb + "/stop", "w").close()
stop.set()
for x in th:
    x.join(30)
for i in range(300):
    if os.path.exists(nb + "/tunnels.txt"):
        break
    time.sleep(0.1)
tun = []
for line in open(nb + "/tunnels.txt"):
    d, ok = line.split()
    tun.append((float(d), ok == "1"))
ms = sorted(d for d, s in metered if s == 200)
ts = sorted(d for d, ok in tun if ok)
ps = sorted(d for d, s in plain if s == 200)


def med(x):
    return 1000 * statistics.median(x) if x else -1


print("# metered: %d, median %.0f ms; tunnels: %d echoed, median %.0f ms; "
      "plain: %d, median %.0f ms" % (len(ms), med(ms), len(ts), med(ts),
                                     len(ps), med(ps)))
t.ok(len(ms) >= 3, "metered requests were answered", len(metered))
t.ok(ms and statistics.median(ms) >= 0.5, "metered requests wait for the "
     "slowed fsync (median >= 500 ms): the delay is in effect", med(ms))
t.ok(len(ts) >= 10, "tunnels were admitted and echoed",
     (len(ts), len(tun)))
t.ok(ts and statistics.median(ts) < 0.2, "tunnels on the same worker are "
     "admitted without waiting behind the fsyncs (median < 200 ms)",
     med(ts))
t.ok(len(ps) == 15, "every unmetered request was answered", plain)
t.ok(ps and statistics.median(ps) < 0.2, "unmetered requests on the same "
     "worker keep their latency (median < 200 ms)", med(ps))
recs = [r for r in itlib.audit_records(os.environ["T"] + "/audit.jsonl")
        if r.get("proto") == "tunnel" and r.get("sandbox") == "sd"]
t.ok(len(recs) >= 10 and all(r.get("decision") == "allow" for r in recs),
     "the tunnels are audited, allowed", recs[:2])
t.done()
PY
wait "$TUN_PID" 2>/dev/null
stop_airlockd
finish
