#!/bin/sh
# launcher.backend qemu figures (issue 9): boot to ready, warm claim
# (resume of a paused VM), resume after an idle pause, RSS per VM.
#
#   sh bench/vmbench.sh BUILD_DIR [WARM]        (as root)
#
# BUILD_DIR holds src/airlockd and guest/ (make guest-image). Starts its own
# airlockd on 10.237.0.0/16 (interface prefix b337-) with a warm pool of
# WARM VMs (default 4), waits for it, then: the boot-to-ready time of each
# VM (the gateway's log: from qemu's start to the guest's AIRLOCK-READY),
# the RSS of each paused warm qemu, WARM claims back to back through the
# admin API (bench/claimbench.py), the RSS of a claimed VM after a
# command ran in it, and POST …/resume of VMs paused by idle_timeout.
set -eu
B=$(cd "${1:?usage: vmbench.sh BUILD_DIR [WARM]}" && pwd)
WARM=${2:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "vmbench: needs root" >&2; exit 1; }
T=$(mktemp -d /tmp/vmbench.XXXXXX)
chmod 711 "$T"
cleanup() { [ -n "${PID:-}" ] && kill -TERM "$PID" 2>/dev/null; sleep 2; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$T/a.yaml" <<YAML
listen:
  proxy: "127.0.0.1:$PORT"
  admin: "unix:$T/admin.sock"
  transparent: "10.237.0.1:39180"
  dns: "10.237.0.1:39181"
state_dir: $T/state
audit: {file: $T/audit.jsonl}
launcher:
  backend: qemu
  network: 10.237.0.0/16
  interface_prefix: "b337-"
  pool: {warm: $WARM, max: $((WARM * 2)), idle_timeout: 2s}
  qemu: {kernel: "$B/guest/vmlinux", initrd: "$B/guest/initramfs.cpio",
         memory: 256MiB, accel: auto, boot_timeout: 120s}
policies:
  - name: default
    rules: [{host: "example.test"}]
YAML
"$B/src/airlockd" -c "$T/a.yaml" >"$T/out" 2>"$T/log" &
PID=$!
TOK="$T/state/admin.token"
i=0
until [ "$(grep -c 'VM ready in' "$T/log" 2>/dev/null)" -ge "$WARM" ]; do
	i=$((i + 1)); [ $i -le 600 ] || { tail "$T/log"; exit 1; }
	kill -0 "$PID" 2>/dev/null || { tail "$T/log"; exit 1; }
	sleep 0.5
done
sleep 1
grep -o 'accel auto: .*' "$T/log" | tail -1
echo "boot to ready (ms): $(grep -o 'VM ready in [0-9]*' "$T/log" | awk '{print $4}' | tr '\n' ' ')"
# RSS, PSS (file pages shared between VMs divided among them) and private
# memory, KiB, from smaps_rollup
mem() { awk '/^Rss:/ {r=$2} /^Pss:/ {p=$2} /^Private_(Clean|Dirty):/ {u+=$2}
    END {printf "%d/%d/%d\n", r, p, u}' "/proc/$1/smaps_rollup"; }
echo "memory of paused warm VMs (RSS/PSS/private KiB): $(for p in $(pgrep -f 'qemu-system-x86_64 -M microvm.*airlock_b337'); do mem "$p"; done | tr '\n' ' ')"
python3 "$HERE/claimbench.py" "unix:$T/admin.sock" "$TOK" "$WARM" default 2>&1 |
    sed 's/^/warm claims (resume): /' || true
# claimbench deletes what it claimed; claim one to run in and pause
python3 - "$T" "$B" <<'PY'
import json, subprocess, sys, time, http.client, socket
T, B = sys.argv[1], sys.argv[2]
tok = open(T + "/state/admin.token").read().strip()
class U(http.client.HTTPConnection):
    def __init__(s): super().__init__("x", timeout=120)
    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX); s.sock.connect(T + "/admin.sock")
def call(m, p, b=None):
    c = U(); c.request(m, p, body=json.dumps(b) if b else None,
                       headers={"Authorization": "Bearer " + tok})
    r = c.getresponse(); d = r.read(); return r.status, json.loads(d) if d else None
time.sleep(3)   # let the pool refill
st, sb = call("POST", "/v1/sandboxes/claim", {"policy": "default"})
t0 = time.perf_counter()
p = subprocess.run([B + "/src/airlockctl", "-c", T + "/a.yaml", "run", "--sandbox",
                    sb["id"], "--", "sh", "-c", "dd if=/dev/zero of=/tmp/x bs=1M count=32 2>/dev/null; echo ok"],
                   capture_output=True, text=True)
run_ms = (time.perf_counter() - t0) * 1000
rss = int([l for l in open("/proc/%d/status" % sb["pid"]) if l.startswith("VmRSS")][0].split()[1])
print("run of a command in a claimed VM: %.0f ms (%s); its qemu RSS after 32 MiB in tmpfs: %d KiB"
      % (run_ms, p.stdout.strip(), rss))
res = []
for k in range(5):
    deadline = time.time() + 30
    while not call("GET", "/v1/sandboxes/" + sb["id"])[1].get("paused"):
        assert time.time() < deadline, "not paused"
        time.sleep(0.1)
    t0 = time.perf_counter()
    st, b = call("POST", "/v1/sandboxes/%s/resume" % sb["id"])
    res.append((time.perf_counter() - t0) * 1000)
    assert st == 200 and not b["paused"], b
print("resume after an idle pause (ms, 5 times): " + " ".join("%.2f" % x for x in res))
PY
