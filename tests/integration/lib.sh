# lib.sh: shared helpers for the integration scripts (POSIX sh, sourced).
#
# The automake harness exports top_srcdir and top_builddir and runs each
# NNN-name.sh with $(SHELL). Exit 0 = pass, 77 = skip, 99 = hard error,
# anything else = fail. Everything a script starts is killed on exit; the
# scratch directory $T is removed unless the script failed, in which case
# the daemon log, the audit file and the origin log tail go to stderr.

set -u

if [ -z "${top_srcdir:-}" ] || [ -z "${top_builddir:-}" ]; then
	echo "top_srcdir and top_builddir must be set" >&2
	exit 99
fi

IT_DIR=$top_srcdir/tests/integration
AIRLOCKD=$top_builddir/src/airlockd
ORIGIN=$top_builddir/tests/harness/origin
PYTHON=${PYTHON:-python3}
# the interpreter itself, not a version manager's shim (pyenv's costs
# about a second a start, and a script starts python many times)
_it_py=$("$PYTHON" -c 'import sys; print(sys.executable)' 2>/dev/null) &&
    [ -x "$_it_py" ] && PYTHON=$_it_py
# a python every uid can run, for steps that drop to uid 65534 (a version
# manager's interpreter under /root is not readable there)
SYSPY=/usr/bin/python3
[ -x "$SYSPY" ] || SYSPY=$PYTHON
PYTHONPATH=$IT_DIR${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
TESTDATA=$top_srcdir/../shared/testdata
TEST_NAME=$(basename "$0" .sh)

# Proxy variables from the environment must not steer curl or python.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy \
    no_proxy NO_PROXY 2>/dev/null || true

_it_pids=""

T=$(mktemp -d "${TMPDIR:-/tmp}/airlock-$TEST_NAME.XXXXXX") || exit 99

_it_cleanup()
{
	_rc=$?
	trap - EXIT INT TERM
	for _p in $_it_pids; do
		kill -9 "$_p" 2>/dev/null
	done
	for _p in $_it_pids; do
		wait "$_p" 2>/dev/null
	done
	if [ "$_rc" -ne 0 ] && [ "$_rc" -ne 77 ]; then
		{
			echo "=== $TEST_NAME failed (exit $_rc); scratch dir $T"
			for _f in "$T"/airlockd*.log; do
				[ -f "$_f" ] || continue
				echo "--- $_f (last 60 lines)"
				tail -n 60 "$_f"
			done
			for _f in "$T"/audit*.jsonl; do
				[ -f "$_f" ] || continue
				echo "--- $_f (last 20 lines)"
				tail -n 20 "$_f"
			done
			if [ -f "$T/origin.log" ]; then
				echo "--- origin log (last 40 lines)"
				tail -n 40 "$T/origin.log" | cut -c1-300
			fi
		} >&2
	else
		rm -rf "$T"
	fi
	exit "$_rc"
}
trap _it_cleanup EXIT
trap 'exit 99' INT TERM

# Register a background process for cleanup; untrack it once reaped, so
# that cleanup never signals a recycled PID.
track_pid()
{
	_it_pids="$_it_pids $1"
}

untrack_pid()
{
	_np=""
	for _p in $_it_pids; do
		[ "$_p" = "$1" ] || _np="$_np $_p"
	done
	_it_pids=$_np
}

fail()
{
	echo "FAIL: $TEST_NAME: $*" >&2
	exit 1
}

# what a process's descriptors are, for a test that finds more than it had
# (the TCP sockets with their states and peers, and everything else)
fd_report()
{
	echo "--- descriptors of $1"
	ls -l "/proc/$1/fd" 2>&1 | sed 1d
	ss -tanpe 2>/dev/null | grep "pid=$1," || true
}

# how many descriptors a process holds, leaving out its idle pooled
# connections to upstream port $2 (the pool keeps them for idle_timeout;
# how many exist depends on which worker took which request)
fd_count_but_pool()
{
	_all=$(ls "/proc/$1/fd" | wc -l)
	_pool=$(ss -tanp state established "( dport = :$2 )" 2>/dev/null |
	    grep -c "pid=$1,")
	echo $((_all - _pool))
}

skip()
{
	echo "SKIP: $TEST_NAME: $*" >&2
	exit 77
}

# check_fail MSG: record a failed check and go on; finish reports them.
_it_failed=""
check_fail()
{
	echo "not ok - $*"
	_it_failed="$_it_failed; $*"
}

# py_failed: the checks an inline python noted as failed in $T/failed
# (itlib.check), recorded as check_fail.
py_failed()
{
	[ -s "$T/failed" ] || return 0
	check_fail "$(sed 's/^; //' "$T/failed")"
	rm -f "$T/failed"
}

# finish: exit 1 when a check failed, else 0.
finish()
{
	[ -z "$_it_failed" ] || fail "${_it_failed#; }"
	exit 0
}

hard_error()
{
	echo "ERROR: $TEST_NAME: $*" >&2
	exit 99
}

note()
{
	echo "# $*" >&2
}

ok()
{
	echo "ok - $*"
}

command -v "$PYTHON" >/dev/null 2>&1 || skip "python3 not found"
command -v curl >/dev/null 2>&1 || skip "curl not found"
[ -x "$AIRLOCKD" ] || hard_error "$AIRLOCKD not built"

# Is airlockd built with AddressSanitizer? (memory bounds get looser)
is_asan()
{
	grep -q __asan_init "$AIRLOCKD" 2>/dev/null
}

# A free loopback TCP port below the ephemeral range, so that no outgoing
# connection takes it between the check and the daemon's bind; free_port N:
# N distinct ones, separated by spaces (one python for them all).
free_port()
{
	"$PYTHON" -c '
import random, socket, sys
lo = 32768
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except Exception:
    pass
lo = max(lo, 12000)
n, got = int(sys.argv[1]), []
for _ in range(500 * n):
    p = random.randint(10000, lo - 1)
    if p in got:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    got.append(p)
    if len(got) == n:
        print(" ".join(map(str, got)))
        sys.exit(0)
sys.exit(1)
' "${1:-1}" || hard_error "no free port"
}

# wait_port PORT [SECONDS [PID]]: until PORT accepts a connection.
wait_port()
{
	"$PYTHON" - "$1" "${2:-15}" "${3:-0}" <<'EOF'
import os, socket, sys, time
port, limit, pid = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
end = time.time() + limit
while time.time() < end:
    if pid:
        try:
            os.kill(pid, 0)
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    sys.exit(2)
        except (OSError, IndexError):
            sys.exit(2)
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", port))
        s.close()
        sys.exit(0)
    except OSError:
        s.close()
        time.sleep(0.05)
sys.exit(1)
EOF
}

# start_origin [NAME [ARGS...]]: the mock upstream on an ephemeral port
# (extra ARGS, e.g. -C CERT -K KEY for TLS); sets ORIGIN_PORT and
# ORIGIN_PID, logs to $T/NAME.log (default origin).
start_origin()
{
	_on=${1:-origin}
	[ $# -gt 0 ] && shift
	[ -x "$ORIGIN" ] || hard_error "$ORIGIN not built"
	rm -f "$T/$_on.port"
	"$ORIGIN" -p 0 -P "$T/$_on.port" -l "$T/$_on.log" "$@" \
	    2>"$T/$_on.err" &
	ORIGIN_PID=$!
	track_pid "$ORIGIN_PID"
	_i=0
	while [ ! -s "$T/$_on.port" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 200 ] || hard_error "origin did not start: $(cat "$T/$_on.err")"
		kill -0 "$ORIGIN_PID" 2>/dev/null ||
		    hard_error "origin exited: $(cat "$T/$_on.err")"
		sleep 0.05
	done
	ORIGIN_PORT=$(cat "$T/$_on.port")
	wait_port "$ORIGIN_PORT" 10 || hard_error "origin port $ORIGIN_PORT dead"
}

# start_airlockd CONFIG [PORT]: run the daemon in the background (log to
# $T/airlockd.log, stdout to $T/airlockd.out, extra flags from
# $AIRLOCKD_FLAGS); waits until PORT (default $AIRLOCK_PORT) accepts. Sets
# AIRLOCK_PID.
start_airlockd()
{
	_port=${2:-$AIRLOCK_PORT}
	"$AIRLOCKD" ${AIRLOCKD_FLAGS:-} -c "$1" >>"$T/airlockd.out" \
	    2>>"$T/airlockd.log" &
	AIRLOCK_PID=$!
	track_pid "$AIRLOCK_PID"
	if ! wait_port "$_port" 20 "$AIRLOCK_PID"; then
		hard_error "airlockd did not start listening on $_port"
	fi
}

# wait_admin: until the admin socket and token under $T/state exist (the
# admin API may come up a moment after the proxy port).
wait_admin()
{
	_i=0
	until [ -S "$T/state/admin.sock" ] && [ -s "$T/state/admin.token" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 100 ] ||
		    fail "no admin socket $T/state/admin.sock or token"
		sleep 0.05
	done
}

# stop_airlockd [SIGNAL]: signal (default TERM) and wait; the exit status
# must be 0.
stop_airlockd()
{
	kill -"${1:-TERM}" "$AIRLOCK_PID" 2>/dev/null ||
	    fail "airlockd (pid $AIRLOCK_PID) already gone"
	wait_exit "$AIRLOCK_PID" 30
	_st=$WAIT_STATUS
	[ "$_st" -eq 0 ] || fail "airlockd exited with status $_st after SIG${1:-TERM}"
	check_sanitizers
}

# check_sanitizers: fail on any ASan/UBSan/LSan report in the daemon log.
check_sanitizers()
{
	if grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer|ThreadSanitizer' \
	    "$T/airlockd.log" 2>/dev/null; then
		fail "sanitizer report in the airlockd log"
	fi
}

# wait_exit PID SECONDS: wait for a background child with a deadline; sets
# WAIT_STATUS (124 on timeout, after killing it).
wait_exit()
{
	_wp=$1
	_lim=$(( $2 * 20 ))
	_i=0
	while kill -0 "$_wp" 2>/dev/null; do
		# a zombie still answers kill -0; wait reaps it below
		if grep -q '^State:.*Z' "/proc/$_wp/status" 2>/dev/null; then
			break
		fi
		_i=$((_i + 1))
		if [ "$_i" -gt "$_lim" ]; then
			kill -9 "$_wp" 2>/dev/null
			wait "$_wp" 2>/dev/null
			untrack_pid "$_wp"
			WAIT_STATUS=124
			return 0
		fi
		sleep 0.05
	done
	wait "$_wp"
	WAIT_STATUS=$?
	untrack_pid "$_wp"
}

# peak_rss_kb PID: VmHWM in KiB.
peak_rss_kb()
{
	awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"
}

# rss_kb PID: VmRSS in KiB.
rss_kb()
{
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# audit_last [FILE]: the last audit line.
audit_last()
{
	tail -n 1 "${1:-$T/audit.jsonl}"
}

# audit_field JSON-LINE FIELD: one field of a record ("" when absent).
audit_field()
{
	"$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1])
v = r.get(sys.argv[2])
if v is None:
    print("")
elif isinstance(v, bool):
    print("true" if v else "false")
elif isinstance(v, (dict, list)):
    print(json.dumps(v))
else:
    print(v)
' "$1" "$2"
}

# audit_wait_id ID [FILE [SECONDS]]: print the record with this id, waiting
# for the writer thread to flush it.
audit_wait_id()
{
	"$PYTHON" -m itlib audit-id "$1" "${2:-$T/audit.jsonl}" "${3:-10}"
}

# json_field JSON FIELD: like audit_field, for response bodies.
json_field()
{
	audit_field "$1" "$2"
}

# origin_count: request records in the origin log so far.
origin_count()
{
	grep -c '^===$' "${1:-$T/origin.log}" 2>/dev/null || true
}

# The common part of a config: listen, state_dir, workers, audit.
# config_common PROXY_PORT [DEFAULT_SANDBOX]
config_common()
{
	if [ -n "${2:-}" ]; then
		echo "listen: {proxy: \"127.0.0.1:$1\", default_sandbox: $2}"
	else
		echo "listen: {proxy: \"127.0.0.1:$1\"}"
	fi
	echo "state_dir: $T/state"
	echo "workers: 2"
	echo "audit: {file: $T/audit.jsonl}"
}

# Start tests/integration/secret_upstream.py as NAME (ARGS passed on); its
# port lands in SECUP_PORT, its request log in $T/NAME.jsonl.
start_secup()
{
	_sn=$1
	shift
	start_py_upstream "$_sn" secret_upstream.py -l "$T/$_sn.jsonl" "$@"
	SECUP_PORT=$PY_PORT
}

# start_py_upstream NAME SCRIPT [ARGS...]: a python upstream of this
# directory that writes its port to the file named by -P ($T/NAME.port);
# stderr to $T/NAME.err. Sets PY_PORT.
start_py_upstream()
{
	_sn=$1
	_ss=$2
	shift 2
	rm -f "$T/$_sn.port"
	"$PYTHON" "$IT_DIR/$_ss" -P "$T/$_sn.port" "$@" 2>"$T/$_sn.err" &
	_sp=$!
	track_pid "$_sp"
	_i=0
	while [ ! -s "$T/$_sn.port" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 200 ] || hard_error "$_sn did not start: $(cat "$T/$_sn.err")"
		kill -0 "$_sp" 2>/dev/null || hard_error "$_sn exited: $(cat "$T/$_sn.err")"
		sleep 0.05
	done
	PY_PORT=$(cat "$T/$_sn.port")
}
