#!/bin/sh
# workers threads; SIGTERM drains in-flight requests and exits 0 (cutting
# what outlives shutdown_grace); SIGHUP reloads, keeping the old config
# when the new one is broken (and saying why as FILE:LINE:COL).
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
PROXY=http://127.0.0.1:$AIRLOCK_PORT
U=http://api.test:$ORIGIN_PORT

write_cfg()
{
	# write_cfg WORKERS PATHS [EXTRA-RULE-LINE]
	cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", default_sandbox: local}
state_dir: $T/state
workers: $1
audit: {file: $T/audit.jsonl}
limits: {shutdown_grace: 2s}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: [$2]}
${3:-}
sandboxes:
  - {id: local, policy: p}
YAML
}
code()
{
	curl -sS -x "$PROXY" -o /dev/null -w '%{http_code}' --max-time 10 "$@"
}

# workers: 3
write_cfg 3 '"/size/*", "/delay/*", "/stall"'
start_airlockd "$T/airlock.yaml"
i=0
while ntask=$(ls "/proc/$AIRLOCK_PID/task" | wc -l) && [ "$ntask" -lt 4 ] &&
    [ $i -lt 60 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ "$ntask" -ge 4 ] || check_fail "workers: 3 but only $ntask threads"
"$PYTHON" - <<'PY' || check_fail "concurrent requests"
import threading, time, itlib
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
res = []
def one(i):
    r = itlib.roundtrip(ap, itlib.req(
        "GET", "http://api.test:%d/delay/800" % op), timeout=10)
    res.append(r is not None and r.status == 200)
t0 = time.time()
th = [threading.Thread(target=one, args=(i,)) for i in range(9)]
for x in th: x.start()
for x in th: x.join()
el = time.time() - t0
assert res.count(True) == 9, res
assert el < 2.5, "9 concurrent 800 ms requests took %.1fs" % el
print("ok - 9 concurrent slow requests in %.1fs" % el)
PY
ok "workers: 3 ($ntask threads)"

# SIGTERM with a request in flight: it completes, the daemon exits 0
curl -sS -x "$PROXY" -o "$T/slow.out" -w '%{http_code}' --max-time 10 \
    "$U/delay/1500" >"$T/slow.code" 2>&1 &
CURL_PID=$!
track_pid $CURL_PID
sleep 0.5
kill -TERM "$AIRLOCK_PID"
sleep 0.3
# no longer accepting
if "$PYTHON" -c '
import socket, sys
s = socket.socket(); s.settimeout(2)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
s.sendall(b"GET http://api.test:%s/size/1 HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
try:
    d = s.recv(100)
except OSError:
    d = b""
sys.exit(1 if d.startswith(b"HTTP/1.1 200") else 0)
' "$AIRLOCK_PORT" "$ORIGIN_PORT"; then
	ok "new connections not served while draining"
else
	check_fail "a new request was served after SIGTERM"
fi
wait_exit "$CURL_PID" 10
[ "$(cat "$T/slow.code")" = 200 ] && [ "$(cat "$T/slow.out")" = ok ] ||
    check_fail "in-flight request during SIGTERM: $(cat "$T/slow.code")"
wait_exit "$AIRLOCK_PID" 10
[ "$WAIT_STATUS" -eq 0 ] || check_fail "airlockd exited $WAIT_STATUS after SIGTERM"
ok "SIGTERM drains an in-flight request and exits 0"

# SIGTERM with a request that outlives shutdown_grace (2s)
start_airlockd "$T/airlock.yaml"
curl -sS -x "$PROXY" -o /dev/null --max-time 20 "$U/stall" >/dev/null 2>&1 &
CURL_PID=$!
track_pid $CURL_PID
sleep 0.5
t0=$(date +%s)
kill -TERM "$AIRLOCK_PID"
wait_exit "$AIRLOCK_PID" 15
t1=$(date +%s)
[ "$WAIT_STATUS" -eq 0 ] || check_fail "airlockd exited $WAIT_STATUS after SIGTERM with a stalled request"
[ $((t1 - t0)) -le 6 ] || check_fail "shutdown took $((t1 - t0))s with shutdown_grace 2s"
ok "shutdown_grace bounds the drain ($((t1 - t0))s)"
kill "$CURL_PID" 2>/dev/null
wait "$CURL_PID" 2>/dev/null
untrack_pid "$CURL_PID"

# SIGHUP: a new rule takes effect
write_cfg 2 '"/size/*"'
start_airlockd "$T/airlock.yaml"
[ "$(code "$U/echo")" = 403 ] || check_fail "/echo allowed before the reload"
write_cfg 2 '"/size/*", "/echo"'
kill -HUP "$AIRLOCK_PID"
i=0
while [ "$(code "$U/echo")" != 200 ]; do
	i=$((i + 1))
	[ $i -lt 50 ] || break
	sleep 0.1
done
[ $i -lt 50 ] && ok "SIGHUP: new rule in effect" ||
    check_fail "SIGHUP: /echo still refused after the reload"

# SIGHUP with a broken config: old rules stay, the log says why
write_cfg 2 '"/size/*", "/echo", "/status/*"' '      - {host: "api.test", metods: [GET]}'
line=$(grep -n 'metods' "$T/airlock.yaml" | cut -d: -f1)
col=$(awk '/metods/ { print index($0, "metods") }' "$T/airlock.yaml")
kill -HUP "$AIRLOCK_PID"
i=0
while ! grep -q "airlock.yaml:$line:" "$T/airlockd.log"; do
	i=$((i + 1))
	[ $i -lt 50 ] || break
	sleep 0.1
done
grep -q "airlock.yaml:$line:$col: .*metods" "$T/airlockd.log" ||
    check_fail "broken reload: no airlock.yaml:$line:$col: line in the log: $(tail -5 "$T/airlockd.log")"
kill -0 "$AIRLOCK_PID" 2>/dev/null || fail "airlockd died on a broken reload"
[ "$(code "$U/echo")" = 200 ] || check_fail "broken reload: old rule /echo lost"
[ "$(code "$U/status/200")" = 403 ] || check_fail "broken reload: half-applied (/status allowed)"
ok "broken SIGHUP reload keeps the old config"
stop_airlockd

# workers: 0 = one per core
write_cfg 0 '"/size/*"'
start_airlockd "$T/airlock.yaml"
ncpu=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
i=0
while ntask=$(ls "/proc/$AIRLOCK_PID/task" | wc -l) &&
    [ "$ntask" -lt $((ncpu + 1)) ] && [ $i -lt 60 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ "$ntask" -ge $((ncpu + 1)) ] ||
    check_fail "workers: 0 on $ncpu CPUs gives only $ntask threads"
[ "$(code "$U/size/3")" = 200 ] || check_fail "workers: 0 does not serve"
ok "workers: 0 ($ntask threads on $ncpu CPUs)"
stop_airlockd
finish
