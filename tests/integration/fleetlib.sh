# fleetlib.sh: a fleet for the 53x scripts (issue 18): redis-server and N
# airlockd sharing it (budget_store: redis://), HAProxy in TCP mode in
# front, all on loopback with their own ports and directories under $T.
# Sourced after lib.sh.


# start_redis: redis-server on $REDIS_PORT (picked if unset), its
# directory $T/redis; no persistence (the tests need none); more options
# from $REDIS_EXTRA. Sets REDIS_PID.
start_redis()
{
	command -v redis-server >/dev/null 2>&1 || hard_error \
	    "redis-server not installed (scripts/install-deps.sh --test)"
	command -v redis-cli >/dev/null 2>&1 || hard_error \
	    "redis-cli not installed (scripts/install-deps.sh --test)"
	: "${REDIS_PORT:=$(free_port)}"
	mkdir -p "$T/redis"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
	    --appendonly no --dir "$T/redis" --maxmemory-policy noeviction \
	    --logfile "$T/redis/redis.log" ${REDIS_EXTRA:-} &
	REDIS_PID=$!
	track_pid "$REDIS_PID"
	wait_port "$REDIS_PORT" 10 "$REDIS_PID" ||
	    hard_error "redis-server did not start: $(tail -5 "$T/redis/redis.log")"
}

stop_redis()
{
	kill -9 "$REDIS_PID" 2>/dev/null
	wait "$REDIS_PID" 2>/dev/null
	untrack_pid "$REDIS_PID"
}

rcli()
{
	redis-cli -p "$REDIS_PORT" "$@"
}

# start_gateway I CONFIG: airlockd number I (log $T/airlockd-I.log) on the
# port its config names, $GW_PORT_I. Sets GW_PID_I.
start_gateway()
{
	_gi=$1
	eval "_gp=\$GW_PORT_$_gi"
	"$AIRLOCKD" -c "$2" >>"$T/airlockd-$_gi.out" \
	    2>>"$T/airlockd-$_gi.log" &
	eval "GW_PID_$_gi=\$!"
	track_pid "$!"
	wait_port "$_gp" 20 "$!" ||
	    hard_error "gateway $_gi did not start listening on $_gp"
}

# start_gateways I...: gateways I... with configs $T/gwI.yaml at once,
# then one wait for all their ports (a start is mostly the wait, and a
# python per port costs seconds on a loaded machine). Sets GW_PID_I.
start_gateways()
{
	_gw_wait=""
	for _gi in "$@"; do
		eval "_gp=\$GW_PORT_$_gi"
		"$AIRLOCKD" -c "$T/gw$_gi.yaml" >>"$T/airlockd-$_gi.out" \
		    2>>"$T/airlockd-$_gi.log" &
		eval "GW_PID_$_gi=\$!"
		track_pid "$!"
		_gw_wait="$_gw_wait $_gp:$!"
	done
	"$PYTHON" - $_gw_wait <<'PY' || hard_error "gateways $* did not start"
import socket, sys, time
want = [tuple(map(int, a.split(":"))) for a in sys.argv[1:]]
end = time.time() + 20
while want and time.time() < end:
    for port, pid in list(want):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    sys.exit("gateway pid %d exited" % pid)
        except (OSError, IndexError):
            sys.exit("gateway pid %d exited" % pid)
        s = socket.socket()
        s.settimeout(1)
        try:
            s.connect(("127.0.0.1", port))
            want.remove((port, pid))
        except OSError:
            pass
        s.close()
    time.sleep(0.05)
sys.exit("not listening: %s" % want if want else 0)
PY
}

# start_haproxy PORT BACKEND_PORT...: TCP mode, round robin, checks.
start_haproxy()
{
	command -v haproxy >/dev/null 2>&1 ||
	    hard_error "haproxy not installed (scripts/install-deps.sh --test)"
	HAPROXY_PORT=$1
	shift
	{
		printf 'global\n  maxconn 2000\n'
		printf 'defaults\n  mode tcp\n  timeout connect 2s\n'
		printf '  timeout client 60s\n  timeout server 60s\n'
		printf 'frontend fe\n  bind 127.0.0.1:%s\n' "$HAPROXY_PORT"
		printf '  default_backend gws\n'
		printf 'backend gws\n  balance roundrobin\n'
		_n=0
		for _p in "$@"; do
			_n=$((_n + 1))
			printf '  server gw%s 127.0.0.1:%s check inter 500ms\n' \
			    "$_n" "$_p"
		done
	} >"$T/haproxy.cfg"
	haproxy -f "$T/haproxy.cfg" -db >"$T/haproxy.log" 2>&1 &
	HAPROXY_PID=$!
	track_pid "$HAPROXY_PID"
	wait_port "$HAPROXY_PORT" 10 "$HAPROXY_PID" ||
	    hard_error "haproxy did not start: $(tail -5 "$T/haproxy.log")"
}

# The budget a sandbox has in Redis: "spend reserved" of its lifetime.
redis_spend()
{
	_s=$(rcli HGET "airlock:{$1}:w:0" spend)
	_r=$(rcli GET "airlock:{$1}:rt")
	echo "${_s:-0} ${_r:-0}"
}

# stop_gateways I...: SIGTERM (to all, then each waited for), a clean
# exit, no sanitizer report.
stop_gateways()
{
	for _gi in "$@"; do
		eval "_pid=\$GW_PID_$_gi"
		kill -TERM "$_pid"
	done
	for _gi in "$@"; do
		eval "_pid=\$GW_PID_$_gi"
		wait_exit "$_pid" 30
		[ "$WAIT_STATUS" -eq 0 ] ||
		    check_fail "gateway $_gi exited $WAIT_STATUS"
		untrack_pid "$_pid"
		if grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer' \
		    "$T/airlockd-$_gi.log"; then
			check_fail "sanitizer report in gateway $_gi's log"
		fi
	done
}

# wait_admin I...: each gateway's admin socket is there.
wait_admin()
{
	for _gi in "$@"; do
		_w=0
		until [ -S "$T/state$_gi/admin.sock" ]; do
			_w=$((_w + 1))
			[ $_w -le 100 ] || hard_error "no admin socket $_gi"
			sleep 0.05
		done
	done
}
