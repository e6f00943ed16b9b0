#!/bin/sh
# Live reload under load (issue 6, point 4): while loadgen drives plain
# HTTP keep-alive, HTTP with a new connection per request and intercepted
# HTTPS through the proxy, the config is changed and reloaded by a SIGHUP
# every 100 ms (the fault suite of issue 8) and, in between, by POST
# /v1/reload as fast as it answers (at most every 100 ms). No request may
# fail, every reload must be taken, and requests in flight finish under
# their config.
. "$top_srcdir/tests/integration/lib.sh"

LOADGEN=$top_builddir/bench/loadgen
[ -x "$LOADGEN" ] || hard_error "$LOADGEN not built"
command -v openssl >/dev/null 2>&1 || hard_error "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin
HTTP_PORT=$ORIGIN_PORT
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT T

# write_config N: the Nth variant (the rule's path list changes, so every
# reload builds a different policy; all variants allow the load's paths)
write_config()
{
	{
		config_common "$AIRLOCK_PORT"
		cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$HTTP_PORT, $TLS_PORT], paths: ["/size/*", "/v$1/*"]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
	} >"$T/airlock.yaml.tmp"
	mv "$T/airlock.yaml.tmp" "$T/airlock.yaml"
}
write_config 0
start_airlockd "$T/airlock.yaml"

DUR=8
is_asan && DUR=6
"$LOADGEN" -u "http://api.test:$HTTP_PORT/size/512" -x "127.0.0.1:$AIRLOCK_PORT" \
    -A a:tok-a -c 8 -d "$DUR" -k -o json >"$T/lg-ka.json" 2>"$T/lg-ka.err" &
LG1=$!
"$LOADGEN" -u "http://api.test:$HTTP_PORT/size/512" -x "127.0.0.1:$AIRLOCK_PORT" \
    -A a:tok-a -c 4 -d "$DUR" -K -o json >"$T/lg-nc.json" 2>"$T/lg-nc.err" &
LG2=$!
"$LOADGEN" -u "https://api.test:$TLS_PORT/size/512" -x "127.0.0.1:$AIRLOCK_PORT" \
    -A a:tok-a -c 4 -d "$DUR" -k --cafile "$T/state/ca/a/ca.crt" -o json \
    >"$T/lg-tls.json" 2>"$T/lg-tls.err" &
LG3=$!
track_pid "$LG1"; track_pid "$LG2"; track_pid "$LG3"

# a SIGHUP every 100 ms for the whole run (on a fixed schedule), and
# between them reloads through the API, as fast as they are answered but
# at most every 100 ms; each reload has a config of its own
"$PYTHON" - "$DUR" "$AIRLOCK_PID" <<'PY' >"$T/reloads.out" || fail "reload loop"
import os, re, signal, sys, threading, time
import adminlib as A
dur, pid = float(sys.argv[1]), int(sys.argv[2])
T = os.environ["T"]
addr = "unix:%s/state/admin.sock" % T
tok = A.token(T + "/state")
lock = threading.Lock()
st = {"n": 0, "api": 0, "hup": 0}
t0 = time.time()
end = t0 + dur - 0.5

def next_config():
    with lock:
        st["n"] += 1
        cfg = open(T + "/airlock.yaml").read()
        cfg = re.sub(r'"/v\d+/\*"', '"/v%d/*"' % st["n"], cfg)
        open(T + "/airlock.yaml.tmp", "w").write(cfg)
        os.rename(T + "/airlock.yaml.tmp", T + "/airlock.yaml")

def api_loop():
    while time.time() < end:
        t1 = time.time()
        next_config()
        code, h, b = A.call(addr, "POST", "/v1/reload", token=tok)
        assert code == 200, (code, b)
        st["api"] += 1
        time.sleep(max(0, 0.1 - (time.time() - t1)))

th = threading.Thread(target=api_loop)
th.start()
k = 0
late = 0.0
while True:
    k += 1
    due = t0 + 0.05 + k * 0.1
    if due >= end:
        break
    time.sleep(max(0, due - time.time()))
    late = max(late, time.time() - due)
    next_config()
    os.kill(pid, signal.SIGHUP)
    st["hup"] += 1
th.join()
n, api, hup = st["n"], st["api"], st["hup"]
time.sleep(0.3)
code, h, b = A.call(addr, "GET", "/v1/status", token=tok)
print("reloads: %d (api %d, sighup %d every 100 ms, at most %.0f ms late); "
      "status %s" % (n, api, hup, late * 1000, b["reloads"]))
# on a fixed 100 ms grid: a late one does not delay the next
assert hup >= (dur - 0.6) * 10 - 1, (hup, late)
assert b["reloads"]["failed"] == 0, b
# every SIGHUP is handled (signals may coalesce, so at least half)
assert b["reloads"]["ok"] >= api + hup // 2, b
PY
cat "$T/reloads.out"
for p in $LG1 $LG2 $LG3; do
	wait_exit "$p" 30
done
for f in ka nc tls; do
	j=$(cat "$T/lg-$f.json")
	[ -n "$j" ] || fail "loadgen $f printed nothing: $(cat "$T/lg-$f.err")"
	req=$(json_field "$j" requests)
	err=$(json_field "$j" errors)
	echo "loadgen $f: $req requests, $err errors"
	[ "$err" = 0 ] || fail "loadgen $f: $err errors during reloads: $(cat "$T/lg-$f.err")"
	[ "$req" -gt 100 ] || fail "loadgen $f: only $req requests"
done
ok "no request lost across $(grep -o 'reloads: [0-9]*' "$T/reloads.out") reloads"

# the daemon is still healthy and on the last config
code=$(curl -sS -o /dev/null -w '%{http_code}' -x "http://a:tok-a@127.0.0.1:$AIRLOCK_PORT" \
    "http://api.test:$HTTP_PORT/v0/x")
[ "$code" = 403 ] || fail "an old config's path is still allowed ($code)"
stop_airlockd
finish
