#!/bin/sh
# launcher.qemu.snapshot figures (issue 22.4): boot to ready of a VM
# restored from the template's saved state vs a cold boot, under the same
# airlockd, one VM at a time.
#
#   sh bench/vmsnapbench.sh BUILD_DIR [RUNS]        (as root)
#
# BUILD_DIR holds src/airlockd and guest/ (make guest-image). For each mode
# (cold: snapshot false; restore: snapshot true) it starts its own
# airlockd (10.239.0.0/16, prefix b22-, no warm pool), then RUNS times
# claims a sandbox through the admin API (a cold claim: the VM is created
# and waited for) and deletes it. Printed per mode: the gateway's "VM
# ready in" figures (launcher create to the guest's AIRLOCK-READY; for a
# restore that includes loading the state and handing over the identity),
# the claim round trips, their medians, and the load average before and
# after (the machine may be shared: say so with the figures). The
# template's own boot and save time is printed once.
set -eu
B=$(cd "${1:?usage: vmsnapbench.sh BUILD_DIR [RUNS]}" && pwd)
RUNS=${2:-5}
[ "$(id -u)" = 0 ] || { echo "vmsnapbench: needs root" >&2; exit 1; }
T=$(mktemp -d /tmp/vmsnapbench.XXXXXX)
chmod 711 "$T"
cleanup() { [ -n "${PID:-}" ] && kill -TERM "$PID" 2>/dev/null; sleep 2; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for mode in cold restore; do
	snap=false; [ "$mode" = restore ] && snap=true
	cat >"$T/a.yaml" <<YAML
listen:
  proxy: "127.0.0.1:$PORT"
  admin: "unix:$T/admin.sock"
  transparent: "10.239.0.1:39280"
  dns: "10.239.0.1:39281"
state_dir: $T/state
audit: {file: $T/audit.jsonl}
launcher:
  backend: qemu
  network: 10.239.0.0/16
  interface_prefix: "b22-"
  pool: {warm: 0, max: 2}
  qemu: {kernel: "$B/guest/vmlinux", initrd: "$B/guest/initramfs.cpio",
         memory: 256MiB, accel: auto, boot_timeout: 120s, snapshot: $snap}
policies:
  - name: default
    rules: [{host: "example.test"}]
YAML
	: >"$T/log"
	"$B/src/airlockd" -c "$T/a.yaml" >"$T/out" 2>"$T/log" &
	PID=$!
	i=0
	until grep -q 'airlockd .* ready' "$T/log"; do
		i=$((i + 1)); [ $i -le 600 ] || { tail "$T/log"; exit 1; }
		kill -0 "$PID" 2>/dev/null || { tail "$T/log"; exit 1; }
		sleep 0.5
	done
	grep -o 'accel auto: .*' "$T/log" | tail -1
	grep -o 'qemu template booted.*bytes)' "$T/log" || true
	echo "$mode: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	python3 - "$T" "$RUNS" "$mode" <<'PY'
import json, sys, time, http.client, socket, statistics
T, runs, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tok = open(T + "/state/admin.token").read().strip()
class U(http.client.HTTPConnection):
    def __init__(s): super().__init__("x", timeout=180)
    def connect(s):
        s.sock = socket.socket(socket.AF_UNIX); s.sock.connect(T + "/admin.sock")
def call(m, p, b=None):
    c = U(); c.request(m, p, body=json.dumps(b) if b else None,
                       headers={"Authorization": "Bearer " + tok})
    r = c.getresponse(); d = r.read(); return r.status, json.loads(d) if d else None
ms = []
for k in range(runs):
    t0 = time.perf_counter()
    st, sb = call("POST", "/v1/sandboxes/claim", {"policy": "default"})
    ms.append((time.perf_counter() - t0) * 1000)
    assert st == 200 and not sb["warm"], (st, sb)
    call("DELETE", "/v1/sandboxes/" + sb["id"])
    time.sleep(1)
print("%s: claim round trips (ms): %s; median %.0f" % (mode, " ".join("%.0f" % x for x in ms),
      statistics.median(ms)))
PY
	r=$(grep -o 'VM ready in [0-9]*' "$T/log" | awk '{print $4}' | tr '\n' ' ')
	echo "$mode: VM ready in (ms): $r; median $(echo $r | tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')"
	echo "$mode: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	kill -TERM "$PID"; wait "$PID" || true; PID=
	sleep 2
done
