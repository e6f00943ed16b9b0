#!/usr/bin/env bash
#
# bench/run.sh [BUILD_DIR]: airlockd side by side with Squid, tinyproxy
# and no proxy at all, in one run, on loopback. See bench/README.md.
#
# Environment: BENCH_OUT (also write the table there), BENCH_DURATION
# (seconds per test, 10), BENCH_WARMUP (seconds, 2), BENCH_THREADS
# (loadgen threads, 1), BENCH_PROXIES (subset and order, default
# "direct airlockd squid tinyproxy"), BENCH_KEEP=1 (keep the temp dir).

set -u

srcdir=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$srcdir}" && pwd) || exit 2
DURATION=${BENCH_DURATION:-10}
WARMUP=${BENCH_WARMUP:-2}
LG_THREADS=${BENCH_THREADS:-1}
PROXIES=${BENCH_PROXIES:-"direct airlockd squid tinyproxy"}

ORIGIN=$BUILD/tests/harness/origin
LOADGEN=$BUILD/bench/loadgen
AIRLOCKD=$BUILD/src/airlockd
HZ=$(getconf CLK_TCK)
NPROC=$(nproc)

# Tests: name, path on the origin, connections.
TESTS="json1k /json/1024 32
dl1m /size/1048576 8"

log() { printf '%s\n' "bench: $*" >&2; }

for f in "$ORIGIN" "$LOADGEN"; do
	[ -x "$f" ] || { log "missing $f (run make check first?)"; exit 2; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/airlock-bench.XXXXXX") || exit 2
chmod 755 "$TMP"	# squid runs as "proxy" and writes its own subdir
PIDS=""

# Stop everything we started, politely first.
# shellcheck disable=SC2317  # reached through the trap
cleanup() {
	local p
	for p in $PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		for p in $PIDS; do
			kill -0 "$p" 2>/dev/null && break
			p=""
		done
		[ -z "$p" ] && break
		sleep 0.3
	done
	for p in $PIDS; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		log "kept $TMP"
	else
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

stop_pid() {
	local pid=$1 p rest=""
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 30); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	for p in $PIDS; do
		[ "$p" = "$pid" ] || rest="$rest $p"
	done
	PIDS=$rest
}

# A loopback port nobody listens on (the race with others is ignored).
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# Wait until PID listens on PORT; fail if it dies or 15 s pass.
wait_port() {
	local port=$1 pid=$2
	for _ in $(seq 1 150); do
		kill -0 "$pid" 2>/dev/null || return 1
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# PID and all its descendants.
proc_tree() {
	local c
	echo "$1"
	for c in $(pgrep -P "$1" 2>/dev/null); do
		proc_tree "$c"
	done
}

# utime+stime in clock ticks, over the process tree (threads included).
cpu_ticks() {
	local p t=0 v
	for p in $(proc_tree "$1"); do
		v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' \
		    "/proc/$p/stat" 2>/dev/null) || continue
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

# Peak RSS (VmHWM) in kB, summed over the process tree.
peak_rss_kb() {
	local p t=0 v
	for p in $(proc_tree "$1"); do
		v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

# json_get KEY JSON: a number or bare value from loadgen's flat JSON.
json_get() {
	printf '%s\n' "$2" | sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p"
}

# Start one proxy; sets PPID_ (pid), PPORT and PNOTE (why skipped).
start_proxy() {
	local name=$1 dir="$TMP/$1" port
	mkdir -p "$dir"
	PPID_="" PPORT="" PNOTE=""
	port=$(free_port)
	case $name in
	direct)
		return 0
		;;
	airlockd)
		if [ ! -x "$AIRLOCKD" ]; then
			PNOTE="skipped: $AIRLOCKD not built"
			return 1
		fi
		cat >"$dir/airlock.yaml" <<EOF
listen: {proxy: "127.0.0.1:$port", default_sandbox: bench}
workers: 2
upstream: {allow_networks: ["127.0.0.1/32"]}
policies:
  - name: p
    rules:
      - host: "127.0.0.1"
        ports: [$ORIGIN_PORT]
sandboxes:
  - {id: bench, policy: p}
audit: {file: "$dir/audit.jsonl"}
EOF
		(cd "$dir" && exec "$AIRLOCKD" -c "$dir/airlock.yaml") \
		    >"$dir/stdout" 2>"$dir/stderr" &
		;;
	squid)
		if ! command -v squid >/dev/null; then
			PNOTE="skipped: squid not installed"
			return 1
		fi
		# One worker, no disk or memory cache, one access log line
		# per request as airlockd writes one audit record.
		{
			echo "http_port 127.0.0.1:$port"
			echo "http_access allow localhost"
			echo "http_access deny all"
			echo "cache deny all"
			echo "cache_mem 8 MB"
			echo "workers 1"
			echo "pinger_enable off"
			echo "shutdown_lifetime 1 seconds"
			echo "access_log stdio:$dir/access.log"
			echo "cache_log $dir/cache.log"
			echo "pid_filename $dir/squid.pid"
			echo "coredump_dir $dir"
			[ "$(id -u)" = 0 ] && echo "cache_effective_user proxy"
		} >"$dir/squid.conf"
		[ "$(id -u)" = 0 ] && chown proxy "$dir"
		squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>"$dir/stderr" &
		;;
	tinyproxy)
		if ! command -v tinyproxy >/dev/null; then
			PNOTE="skipped: tinyproxy not installed"
			return 1
		fi
		# LogLevel Connect: the connection and request lines only.
		cat >"$dir/tinyproxy.conf" <<EOF
Port $port
Listen 127.0.0.1
Timeout 600
MaxClients 100
Allow 127.0.0.1
LogFile "$dir/tinyproxy.log"
LogLevel Connect
PidFile "$dir/tinyproxy.pid"
EOF
		tinyproxy -d -c "$dir/tinyproxy.conf" >"$dir/stdout" \
		    2>"$dir/stderr" &
		;;
	*)
		PNOTE="skipped: unknown proxy"
		return 1
		;;
	esac
	PPID_=$!
	PIDS="$PIDS $PPID_"
	if ! wait_port "$port" "$PPID_"; then
		PNOTE="skipped: did not start listening; $(tail -n 3 \
		    "$dir/stderr" "$dir/cache.log" 2>/dev/null | tr '\n' ' ' |
		    cut -c1-200)"
		stop_pid "$PPID_"
		return 1
	fi
	PPORT=$port
	return 0
}

# Run loadgen through the current proxy; prints its JSON line.
loadgen() {
	local path=$1 conns=$2 secs=$3 px=""
	[ -n "$PPORT" ] && px="-x 127.0.0.1:$PPORT"
	# shellcheck disable=SC2086
	"$LOADGEN" -u "http://127.0.0.1:$ORIGIN_PORT$path" $px -c "$conns" \
	    -d "$secs" -t "$LG_THREADS" -o json 2>/dev/null
}

ms() { awk -v v="$1" 'BEGIN { printf "%.2f", v }'; }
div() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN {
	if (b == "" || a == "" || b + 0 == 0) print "n/a"; else printf f, a / b }'; }

# Origin: ephemeral port, no log (it would measure our disk).
"$ORIGIN" -p 0 -P "$TMP/origin.port" 2>"$TMP/origin.stderr" &
ORIGIN_PID=$!
PIDS="$PIDS $ORIGIN_PID"
for _ in $(seq 1 50); do
	[ -s "$TMP/origin.port" ] && break
	sleep 0.1
done
ORIGIN_PORT=$(cat "$TMP/origin.port" 2>/dev/null)
[ -n "$ORIGIN_PORT" ] || { log "origin did not start"; exit 1; }
log "origin on 127.0.0.1:$ORIGIN_PORT, $NPROC cores, ${DURATION}s per test"

declare -A R
ROWS=""
NOTES=""
for px in $PROXIES; do
	log "== $px"
	if ! start_proxy "$px"; then
		log "$PNOTE"
		NOTES="$NOTES- $px: $PNOTE
"
		continue
	fi
	# Warm-up, and a check that the proxy answers at all.
	j=$(loadgen /json/1024 8 "$WARMUP")
	if [ "$(json_get requests "$j")" = "" ] ||
	    [ "$(json_get requests "$j")" = 0 ]; then
		log "$px: no successful request in warm-up: $j"
		NOTES="$NOTES- $px: no successful request during warm-up
"
	elif [ "$(json_get errors "$j")" != 0 ]; then
		NOTES="$NOTES- $px: $(json_get errors "$j") errors during warm-up
"
	fi
	while read -r tname tpath tconns; do
		t0=0 t1=0
		[ -n "$PPID_" ] && t0=$(cpu_ticks "$PPID_")
		j=$(loadgen "$tpath" "$tconns" "$DURATION")
		[ -n "$PPID_" ] && t1=$(cpu_ticks "$PPID_")
		log "$px $tname: $j"
		k="$px/$tname"
		R[$k/rps]=$(json_get rps "$j")
		R[$k/req]=$(json_get requests "$j")
		R[$k/p50]=$(json_get p50_ms "$j")
		R[$k/p99]=$(json_get p99_ms "$j")
		R[$k/err]=$(json_get errors "$j")
		R[$k/mbps]=$(json_get mbps "$j")
		R[$k/conn]=$(json_get connects "$j")
		if [ -n "$PPID_" ]; then
			R[$k/cpu]=$(awk -v d=$((t1 - t0)) -v hz="$HZ" \
			    'BEGIN { printf "%.2f", d / hz }')
			R[$k/cpureq]=$(div "$(((t1 - t0) * 1000000 / HZ))" \
			    "${R[$k/req]:-0}" "%.1f")
		else
			R[$k/cpu]="-" R[$k/cpureq]="-"
		fi
	done <<EOF
$TESTS
EOF
	rss="-"
	[ -n "$PPID_" ] && rss=$(awk -v k="$(peak_rss_kb "$PPID_")" \
	    'BEGIN { printf "%.1f", k / 1024 }')
	R[$px/rss]=$rss
	ROWS="$ROWS $px"
	[ -n "$PPID_" ] && stop_pid "$PPID_"
done

version() {
	case $1 in
	airlockd) "$AIRLOCKD" --version 2>/dev/null | head -n 1 ;;
	squid) squid -v 2>/dev/null | head -n 1 ;;
	tinyproxy) tinyproxy -v 2>/dev/null | head -n 1 ;;
	esac
}

report() {
	local px t k
	echo "# airlock benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Host: $(uname -sr), $NPROC cores ($(nproc --all) installed)," \
	    "$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' \
	    /proc/meminfo). Loadgen, origin and proxy share these cores:" \
	    "loadgen runs $LG_THREADS thread(s), the origin one, airlockd" \
	    "2 workers, Squid 1 worker, tinyproxy a thread per client."
	echo "Each test: ${WARMUP}s warm-up per proxy, then ${DURATION}s of" \
	    "keep-alive GETs through an explicit proxy to an origin on" \
	    "127.0.0.1."
	echo
	for px in $ROWS; do
		v=$(version "$px")
		[ -n "$v" ] && echo "- $px: $v"
	done
	echo
	echo "| proxy | test | req/s | p50 ms | p99 ms | errors | MB/s | conns opened | CPU s | CPU us/req | peak RSS MiB |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	while read -r t _ c; do
		for px in $ROWS; do
			k="$px/$t"
			echo "| $px | $t ($c conns) | ${R[$k/rps]:-} |" \
			    "$(ms "${R[$k/p50]:-0}") | $(ms "${R[$k/p99]:-0}") |" \
			    "${R[$k/err]:-} | ${R[$k/mbps]:-} |" \
			    "${R[$k/conn]:-} | ${R[$k/cpu]:-} |" \
			    "${R[$k/cpureq]:-} | ${R[$px/rss]:-} |"
		done
	done <<EOF
$TESTS
EOF
	echo
	echo "Ratios (req/s: higher is better for airlockd; CPU us/req:" \
	    "lower is better):"
	echo
	echo "| test | metric | airlockd/squid | airlockd/tinyproxy |"
	echo "|---|---|--:|--:|"
	while read -r t _ _; do
		a="airlockd/$t"
		echo "| $t | req/s | $(div "${R[$a/rps]:-}" \
		    "${R[squid/$t/rps]:-}" "%.2f") | $(div "${R[$a/rps]:-}" \
		    "${R[tinyproxy/$t/rps]:-}" "%.2f") |"
		echo "| $t | CPU us/req | $(div "${R[$a/cpureq]:-}" \
		    "${R[squid/$t/cpureq]:-}" "%.2f") |" \
		    "$(div "${R[$a/cpureq]:-}" "${R[tinyproxy/$t/cpureq]:-}" \
		    "%.2f") |"
	done <<EOF
$TESTS
EOF
	if [ -n "$NOTES" ]; then
		echo
		echo "Notes:"
		echo
		printf '%s' "$NOTES"
	fi
}

report >"$TMP/report.md"
cat "$TMP/report.md"
[ -n "${BENCH_OUT:-}" ] && cp "$TMP/report.md" "$BENCH_OUT"
exit 0
