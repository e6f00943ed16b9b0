#!/bin/sh
# The config file is read exactly once at start (issue 15 point 7):
# "airlockd -c /dev/stdin" and "-c <(...)" (a pipe) ran with every default
# because the file was opened twice (once for the launcher). An empty
# configuration is an error at FILE:LINE:COL, for -t and for a start; a
# SIGHUP that finds the pipe empty keeps the running configuration.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
mkconf()
{
	cat <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: $T/state
workers: 1
audit: {file: $T/audit.jsonl}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: s, policy: p, token: "literal:s-token-1"}
YAML
}
mkconf >"$T/airlock.yaml"

# served_ok: the configured sandbox and rule are in force (all defaults
# would mean another port and no sandbox: 407 or nothing)
served_ok()
{
	code=$(curl -sS -o /dev/null -w '%{http_code}' \
	    -x "http://s:s-token-1@127.0.0.1:$AIRLOCK_PORT" \
	    "http://api.test:$ORIGIN_PORT/echo" 2>/dev/null)
	[ "$code" = 200 ]
}

# run_from HOW: start airlockd with its config from a pipe, check, stop
run_pipe()
{
	how=$1
	: >"$T/airlockd.log"
	case $how in
	stdin)
		mkconf | "$AIRLOCKD" -c /dev/stdin >>"$T/airlockd.out" \
		    2>>"$T/airlockd.log" &
		;;
	fd)	# what bash's -c <(...) hands over: /dev/fd/N on a pipe
		mkconf | "$AIRLOCKD" -c /dev/fd/3 3<&0 </dev/null \
		    >>"$T/airlockd.out" 2>>"$T/airlockd.log" &
		;;
	fifo)
		rm -f "$T/conf.fifo"
		mkfifo "$T/conf.fifo"
		(mkconf >"$T/conf.fifo") &
		"$AIRLOCKD" -c "$T/conf.fifo" >>"$T/airlockd.out" \
		    2>>"$T/airlockd.log" &
		;;
	esac
	AIRLOCK_PID=$!
	track_pid "$AIRLOCK_PID"
	if ! wait_port "$AIRLOCK_PORT" 20 "$AIRLOCK_PID"; then
		check_fail "-c from $how: not listening on the configured port: $(tail -n 5 "$T/airlockd.log")"
		kill "$AIRLOCK_PID" 2>/dev/null
		wait_exit "$AIRLOCK_PID" 10
		return
	fi
	if served_ok; then
		ok "-c from $how: the configuration was read and is in force"
	else
		check_fail "-c from $how: the configured sandbox is not served"
	fi
	if [ "$how" = stdin ]; then
		# a reload finds the pipe empty: refused, the running one stays
		kill -HUP "$AIRLOCK_PID"
		sleep 1
		if grep -q "the configuration is empty" "$T/airlockd.log" &&
		    grep -q "reload failed; the running configuration stays" "$T/airlockd.log" &&
		    served_ok; then
			ok "SIGHUP on an exhausted pipe: refused (empty), still serving"
		else
			check_fail "SIGHUP on an exhausted pipe: $(tail -n 5 "$T/airlockd.log")"
		fi
	fi
	stop_airlockd
}
run_pipe stdin
run_pipe fd
run_pipe fifo

# empty configurations: an error at FILE:1:1, with -t and at start
: >"$T/empty.yaml"
printf '# only a comment\n\n' >"$T/comment.yaml"
printf '\n~\n' >"$T/null.yaml"
for f in empty comment null; do
	case $f in null) where=2:1;; *) where=1:1;; esac
	"$AIRLOCKD" -t -c "$T/$f.yaml" >"$T/t.out" 2>"$T/t.err"
	rc=$?
	if [ "$rc" = 1 ] && grep -q "^$T/$f.yaml:$where: the configuration is empty" "$T/t.err"; then
		ok "-t on $f file: exit 1, $where: the configuration is empty"
	else
		check_fail "-t on $f file: exit $rc: $(cat "$T/t.err")"
	fi
done
"$AIRLOCKD" -c "$T/empty.yaml" >"$T/run.out" 2>"$T/run.err" &
p=$!
track_pid "$p"
wait_exit "$p" 15
if [ "$WAIT_STATUS" = 1 ] && grep -q "empty.yaml:1:1: the configuration is empty" "$T/run.err"; then
	ok "starting on an empty file: exit 1 with FILE:LINE:COL"
else
	check_fail "starting on an empty file: status $WAIT_STATUS: $(cat "$T/run.err")"
fi
echo "" | "$AIRLOCKD" -t -c /dev/stdin >"$T/t.out" 2>"$T/t.err"
rc=$?
[ "$rc" = 1 ] && grep -q "^/dev/stdin:1:1: the configuration is empty" "$T/t.err" &&
    ok "-t -c /dev/stdin with nothing in it: exit 1" ||
    check_fail "-t -c /dev/stdin, empty: exit $rc: $(cat "$T/t.err")"
mkconf | "$AIRLOCKD" -t -c /dev/stdin >"$T/t.out" 2>"$T/t.err"
rc=$?
[ "$rc" = 0 ] && grep -q "configuration OK" "$T/t.out" &&
    ok "-t -c /dev/stdin with a config: OK" ||
    check_fail "-t -c /dev/stdin: exit $rc: $(cat "$T/t.err")"
finish
