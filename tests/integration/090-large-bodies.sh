#!/bin/sh
# Streaming with backpressure: a 1 GiB download and a 1 GiB upload pass
# through with airlockd's peak RSS under 64 MiB; a slow reader of a large
# download does not make airlockd buffer it.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits: {idle_timeout: 60s, upstream_timeout: 60s}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$ORIGIN_PORT
GIB=1073741824

LIMIT_KB=65536
if is_asan; then
	# shadow memory and the allocator's quarantine (256 MiB by default)
	# inflate RSS: keep the quarantine small and allow twice the bound,
	# still far below what buffering a body would cost
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
	export ASAN_OPTIONS
	LIMIT_KB=131072
	note "ASan build: quarantine 16 MiB, peak RSS bound $LIMIT_KB KiB"
fi
start_airlockd "$T/airlock.yaml"

# 1 GiB download
out=$(curl -sS -x "$PROXY" -o /dev/null --max-time 240 \
    -w '%{http_code} %{size_download} %{speed_download}' "$U/size/$GIB") ||
    fail "1 GiB download failed: $out"
set -- $out
[ "$1" = 200 ] && [ "$2" = "$GIB" ] || fail "1 GiB download: status $1, $2 bytes"
ok "1 GiB download ($(($(printf '%.0f' "$3") / 1048576)) MiB/s)"

# 1 GiB upload, chunked (curl -T - streams stdin)
out=$(head -c "$GIB" /dev/zero | curl -sS -x "$PROXY" --max-time 240 \
    -H 'Content-Type: application/octet-stream' -T - "$U/upload") ||
    fail "1 GiB upload failed: $out"
want_sum=$("$PYTHON" -c "
print((14695981039346656037 * pow(1099511628211, $GIB, 1 << 64)) % (1 << 64))")
[ "$(json_field "$out" bytes)" = "$GIB" ] || fail "1 GiB upload: origin says $out"
[ "$(json_field "$out" sum)" = "$want_sum" ] || fail "1 GiB upload: sum $out, want $want_sum"
ok "1 GiB chunked upload"

# 256 MiB upload with Content-Length, from python
"$PYTHON" - <<'PY' || fail "Content-Length upload"
import itlib
from itlib import connect, Reader, read_response
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
n = 256 << 20
s = connect(ap, 120)
s.sendall(b"POST http://api.test:%d/upload HTTP/1.1\r\nHost: api.test:%d\r\n"
          b"Content-Length: %d\r\n\r\n" % (op, op, n))
buf = b"\x00" * (1 << 20)
for i in range(n >> 20):
    s.sendall(buf)
r = read_response(Reader(s), "POST")
j = r.json()
assert r.status == 200 and j["bytes"] == n, r
print("ok - 256 MiB Content-Length upload")
PY

peak=$(peak_rss_kb "$AIRLOCK_PID")
[ -n "$peak" ] || hard_error "no VmHWM for $AIRLOCK_PID"
[ "$peak" -lt "$LIMIT_KB" ] || fail "airlockd peak RSS $peak KiB >= $LIMIT_KB KiB"
ok "peak RSS after the large transfers: $peak KiB"

# slow reader: 64 MiB download read at about 1 MiB/s for 3 s
AIRLOCK_PID=$AIRLOCK_PID "$PYTHON" - <<'PY' || fail "slow reader"
import os, time, itlib
from itlib import connect
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
pid = os.environ["AIRLOCK_PID"]

def rss():
    for line in open("/proc/%s/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

base = rss()
s = connect(ap, 30)
s.setsockopt(__import__("socket").SOL_SOCKET,
             __import__("socket").SO_RCVBUF, 65536)
s.sendall(b"GET http://api.test:%d/size/%d HTTP/1.1\r\nHost: api.test:%d\r\n\r\n"
          % (op, 64 << 20, op))
got, worst = 0, 0
t0 = time.time()
while time.time() - t0 < 3:
    got += len(s.recv(65536))
    time.sleep(1.0 / 16)      # 16 x 64 KiB per second
    worst = max(worst, rss() - base)
s.close()
print("# read %d KiB in 3 s; airlockd RSS grew by at most %d KiB"
      % (got >> 10, worst))
assert got < (16 << 20), "reader was not slow: %d bytes" % got
assert worst < 16384, "airlockd buffered the slow download: +%d KiB" % worst
print("ok - slow reader: RSS bounded (+%d KiB)" % worst)
PY

# the daemon still works afterwards
code=$(curl -sS -x "$PROXY" -o /dev/null -w '%{http_code}' "$U/size/10")
[ "$code" = 200 ] || fail "request after the slow reader: $code"
stop_airlockd
