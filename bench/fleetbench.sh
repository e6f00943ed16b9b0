#!/bin/sh
# fleetbench.sh [BUILD_DIR]: metered LLM-shaped requests per second through
# one airlockd with budget_store: file, then with budget_store: redis://
# (a redis-server started here), and the Redis commands per metered request
# (INFO commandstats: evalsha calls / requests). Loopback, the mock LLM
# provider of the integration tests, C concurrent keep-alive clients
# (python) for D seconds each. One run; prints a Markdown table.
#   FLEET_C=16 FLEET_D=10 bench/fleetbench.sh _build/release
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top}
C=${FLEET_C:-16}
D=${FLEET_D:-10}
T=$(mktemp -d /tmp/fleetbench.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null || :; done
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitport() {
	python3 - "$1" <<'EOF'
import socket, sys, time
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
EOF
}
IT=$top/tests/integration
python3 "$IT/llm_upstream.py" -P "$T/llm.port" -l /dev/null 2>"$T/llm.err" &
pids="$pids $!"
while [ ! -s "$T/llm.port" ]; do sleep 0.05; done
LLM=$(cat "$T/llm.port")
RP=$(port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$T" --logfile "$T/redis.log" &
pids="$pids $!"
waitport "$RP"

run() {	# run NAME STORE: prints "req/s requests"
	ap=$(port)
	cat >"$T/$1.yaml" <<YAML
listen: {proxy: "127.0.0.1:$ap"}
state_dir: $T/state-$1
workers: 2
audit: {file: $T/audit-$1.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"plain.openai.test": "127.0.0.1"}
budget_store: "$2"
pricing:
  - {model: "unit-*", input: 1, output: 1}
policies:
  - name: p
    rules:
      - {host: "plain.openai.test", ports: [$LLM], methods: [POST], paths: ["/v1/*"], meter: openai}
    caps: {usd: 100000, llm_concurrency: 1000}
sandboxes:
  - {id: b, policy: p, token: "literal:tok"}
YAML
	"$build/src/airlockd" -c "$T/$1.yaml" 2>"$T/$1.log" &
	gp=$!
	waitport "$ap"
	PYTHONPATH=$IT python3 - "$ap" "$LLM" "$C" "$D" <<'EOF'
import sys, threading, time, budlib
ap, lp, c, d = (int(x) for x in sys.argv[1:5])
body = budlib.jbody({"model": "unit-a", "max_tokens": 100, "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]})
n = [0] * c
stop = time.time() + d
def loop(i):
    cl = budlib.Client(ap, "plain.openai.test", lp, "b:tok")
    while time.time() < stop:
        r = cl.request("POST", "/v1/chat/completions", body,
                       ["X-Synth: openai", "X-Synth-Usage: 20,30",
                        "X-Frag: none"])
        if r is not None and r.status == 200:
            n[i] += 1
th = [threading.Thread(target=loop, args=(i,)) for i in range(c)]
t0 = time.time()
for x in th: x.start()
for x in th: x.join()
print("%.0f %d" % (sum(n) / (time.time() - t0), sum(n)))
EOF
	kill "$gp"; wait "$gp" 2>/dev/null || :
}
set -- $(run file file)
FILE_RPS=$1
redis-cli -p "$RP" CONFIG RESETSTAT >/dev/null
set -- $(run redis "redis://127.0.0.1:$RP/0")
REDIS_RPS=$1
REDIS_N=$2
CALLS=$(redis-cli -p "$RP" INFO commandstats | tr -d '\r' |
    sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
echo "| store | metered req/s | Redis commands per request |"
echo "| --- | --- | --- |"
echo "| file | $FILE_RPS | - |"
echo "| redis | $REDIS_RPS | $(python3 -c "print('%.2f' % ($CALLS / $REDIS_N))") (EVALSHA: admission, waited; settlement, not waited) |"
echo
echo "C=$C clients, D=$D s each, $(nproc) cores, $(date -u +%F)"
