#!/bin/sh
# Snapshot benchmark (issue 22, point 7): as root, airlockd with backend
# netns and a static busybox rootfs (interface prefix b509-, network
# 10.209.0.0/16, table airlock_b509, all in a temp dir).
#
#   bench/snapbench.sh [BUILD_DIR] [MiB]     (default: the repo root, 100)
#
# 1. snapshot create of a sandbox whose upper layer holds MiB of random
#    data (MiB files of 1 MiB): time, bytes in the store;
# 2. again with the same content (deduplicated: the objects are shared);
# 3. restore: a sandbox claimed from it until a command in it has read
#    a file of it (cold path), 5 times;
# 4. warm claims from a pool built from it (pool.from), bench/claimbench.py.
# Prints Markdown-ready lines.
set -eu
B=${1:-.}
MIB=${2:-100}
AIRLOCKD=$B/src/airlockd
CTL=$B/src/airlockctl
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "snapbench: needs root" >&2; exit 1; }
T=$(mktemp -d /tmp/snapbench.XXXXXX)
chmod 0711 "$T"
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; nft delete table inet airlock_b509 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM

mkdir -p "$T/rootfs/bin" "$T/rootfs/data" "$T/rootfs/etc"
cp "$(command -v busybox)" "$T/rootfs/bin/busybox"
for a in sh cat dd ls true head wc sha256sum; do ln -s busybox "$T/rootfs/bin/$a"; done
chmod 0777 "$T/rootfs/data"; chmod -R go+rX "$T/rootfs"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # POOL
	cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$(port)", transparent: "10.209.0.1:$(port)", dns: "10.209.0.1:$(port)"}
state_dir: $T/state
audit: {file: $T/audit.jsonl}
launcher:
  backend: netns
  network: 10.209.0.0/16
  interface_prefix: "b509-"
  rootfs: $T/rootfs
  limits: {memory: $((MIB * 3))MiB}
  snapshots: {max_bytes: $((MIB * 4))MiB}
  pool: $1
policies:
  - name: default
    rules: [{host: "api.test", ports: [443]}]
YAML
	"$AIRLOCKD" -c "$T/airlock.yaml" >>"$T/log" 2>&1 &
	PID=$!
	i=0; until [ -S "$T/state/admin.sock" ] && [ -s "$T/state/admin.token" ]; do
		i=$((i + 1)); [ $i -le 200 ] || { tail "$T/log"; exit 1; }; sleep 0.05; done
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
ctl() { "$CTL" -c "$T/airlock.yaml" "$@"; }
ms() { python3 -c 'import time; print(int(time.monotonic() * 1000))'; }
claim() { # [FROM] -> id
	b='{}'; [ -n "${1:-}" ] && b="{\"from\": \"$1\"}"
	python3 -c '
import http.client, json, socket, sys
class U(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1] + "/state/admin.sock")
c = U("x"); tok = open(sys.argv[1] + "/state/admin.token").read().strip()
c.request("POST", "/v1/sandboxes/claim", sys.argv[2], {"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
r = c.getresponse(); b = json.loads(r.read()); assert r.status == 200, b; print(b["id"])' "$T" "$b"
}

start '{warm: 0, max: 64}'
A=$(claim)
ctl run --sandbox "$A" -- sh -c "i=0; while [ \$i -lt $MIB ]; do dd if=/dev/urandom of=/data/f\$i bs=1M count=1 2>/dev/null; i=\$((i+1)); done"
t0=$(ms); ctl snapshot create "$A" --name big >/dev/null; t1=$(ms)
du1=$(du -sb "$T/state/snapshots" | cut -f1)
echo "| snapshot create, $MIB MiB upper layer ($MIB files) | $((t1 - t0)) ms | store $((du1 / 1048576)) MiB |"
t0=$(ms); ctl snapshot create "$A" --name big2 >/dev/null; t1=$(ms)
du2=$(du -sb "$T/state/snapshots" | cut -f1)
echo "| snapshot create again, same content (deduplicated) | $((t1 - t0)) ms | store +$(((du2 - du1) / 1024)) KiB |"
for i in 1 2 3 4 5; do
	t0=$(ms); R=$(claim big); ctl run --sandbox "$R" -- head -c 16 /data/f0 >/dev/null; t1=$(ms)
	echo "| restore: cold claim from the snapshot + first command, run $i | $((t1 - t0)) ms | |"
	ctl sandbox delete "$R" >/dev/null
done
t0=$(ms); R=$(claim); ctl run --sandbox "$R" -- true; t1=$(ms)
echo "| reference: cold claim without a snapshot + first command | $((t1 - t0)) ms | |"
stop
start '{warm: 60, max: 200, from: big}'
i=0; until [ "$(ctl --json sandbox list | python3 -c 'import json,sys; print(sum(1 for s in json.load(sys.stdin)["sandboxes"] if s["state"] == "warm"))')" -ge 50 ]; do
	i=$((i + 1)); [ $i -le 600 ] || break; sleep 0.1; done
echo "| warm claims from a pool with from: big | $(python3 "$HERE/claimbench.py" "unix:$T/state/admin.sock" "$T/state/admin.token" 50) | |"
stop
