#!/usr/bin/env bash
#
# bench/run.sh [BUILD_DIR]: airlockd side by side with Squid, mitmproxy,
# tinyproxy and no proxy at all, in one run, on loopback: plain HTTP
# first, then HTTPS through the proxies (interception, or a plain CONNECT
# tunnel for tinyproxy). See bench/README.md.
#
# Environment: BENCH_OUT (also write the report there), BENCH_DURATION
# (seconds per test, 10), BENCH_WARMUP (seconds, 2), BENCH_THREADS
# (loadgen threads, 1), BENCH_PROXIES (HTTP: subset and order, default
# "direct airlockd squid tinyproxy"), BENCH_HTTPS (1: run the HTTPS
# section, 0: skip it), BENCH_HTTPS_PROXIES (default "direct airlockd
# squid mitmdump tinyproxy"), BENCH_TLS_HOST (host name the HTTPS clients
# use, default localhost: it must resolve to 127.0.0.1 for every proxy),
# BENCH_SSE_RUNS (SSE streams timed per proxy, 20), BENCH_INSTALL (1:
# apt-get install squid-openssl, mitmproxy, tinyproxy when missing and
# running as root; 0: never), BENCH_KEEP=1 (keep the temp dir),
# BENCH_AIRLOCKD_BASE (another airlockd binary, e.g. of the commit
# before a change: the proxy name "airlockd-base" in BENCH_PROXIES and
# BENCH_HTTPS_PROXIES runs it with airlockd's config, so that before
# and after are measured in one run), BENCH_AB_ROUNDS (with
# BENCH_AIRLOCKD_BASE: run both binaries side by side, at the same time,
# in this many rounds of every test; bench/ab.sh; 0, off).

set -u

srcdir=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$srcdir}" && pwd) || exit 2
DURATION=${BENCH_DURATION:-10}
WARMUP=${BENCH_WARMUP:-2}
LG_THREADS=${BENCH_THREADS:-1}
PROXIES=${BENCH_PROXIES:-"direct airlockd squid tinyproxy"}
HTTPS=${BENCH_HTTPS:-1}
HTTPS_PROXIES=${BENCH_HTTPS_PROXIES:-"direct airlockd squid mitmdump tinyproxy"}
TLS_HOST=${BENCH_TLS_HOST:-localhost}
SSE_RUNS=${BENCH_SSE_RUNS:-20}
SSE_PATH="/sse?n=5&ms=100"

ORIGIN=$BUILD/tests/harness/origin
LOADGEN=$BUILD/bench/loadgen
AIRLOCKD=$BUILD/src/airlockd
AIRLOCKD_BASE=${BENCH_AIRLOCKD_BASE:-}
AB_ROUNDS=${BENCH_AB_ROUNDS:-0}
ABNOTES=""
MKPKI=$srcdir/tests/harness/mkpki.sh
PKI=""		# the test PKI, made for the HTTPS section
HZ=$(getconf CLK_TCK)
NPROC=$(nproc)

# Tests: name, path on the origin, connections.
TESTS="json1k /json/1024 32
dl1m /size/1048576 8"

# HTTPS tests: name, path, connections, loadgen mode (-k keep-alive,
# -K a new connection, CONNECT and TLS handshake per request).
TLS_TESTS="ka_json1k /json/1024 32 -k
new_json1k /json/1024 16 -K
dl1m /size/1048576 8 -k"

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
	local p=""
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

# Install a Debian package the benchmark needs, if allowed.
install_pkg() {
	[ "${BENCH_INSTALL:-1}" = 1 ] || return 1
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || return 1
	log "installing $1 (BENCH_INSTALL=0 to skip)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q "$1" >"$TMP/apt-$1.log" 2>&1 && return 0
	apt-get update -q >>"$TMP/apt-$1.log" 2>&1
	apt-get install -y -q "$1" >>"$TMP/apt-$1.log" 2>&1
}

squid_has_tls() {
	squid -v 2>/dev/null | grep -q -- '--with-openssl'
}

# Before anything runs: squid-openssl replaces squid (same binary path,
# same plain-HTTP behaviour), so the HTTP section uses it too.
case " $PROXIES $HTTPS_PROXIES " in
*" tinyproxy "*)
	command -v tinyproxy >/dev/null || install_pkg tinyproxy ;;
esac
if [ "$HTTPS" = 1 ]; then
	case " $HTTPS_PROXIES " in
	*" squid "*)
		squid_has_tls || install_pkg squid-openssl ;;
	esac
	case " $HTTPS_PROXIES " in
	*" mitmdump "*)
		command -v mitmdump >/dev/null || install_pkg mitmproxy ;;
	esac
fi

# Squid's common settings: one worker, no disk or memory cache, one
# access log line per request as airlockd writes one audit record.
squid_common() {
	local dir=$1
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
}

# Wait up to 10 s for FILE (a CA a proxy writes when it starts).
wait_file() {
	for _ in $(seq 1 100); do
		[ -s "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# start_proxy NAME MODE (http|https): sets PPID_ (pid), PPORT, PCA (the
# CA file HTTPS clients must trust) and PNOTE (why skipped).
start_proxy() {
	local name=$1 mode=$2 dir="$TMP/$2-$1" port hosts="" bin=""
	mkdir -p "$dir"
	PPID_="" PPORT="" PNOTE="" PCA="$PKI/ca.crt"
	port=$(free_port)
	case $name/$mode in
	direct/*)
		return 0
		;;
	airlockd/* | airlockd-base/*)
		bin=$AIRLOCKD
		[ "$name" = airlockd-base ] && bin=$AIRLOCKD_BASE
		if [ -z "$bin" ] || [ ! -x "$bin" ]; then
			PNOTE="skipped: ${bin:-BENCH_AIRLOCKD_BASE} not built"
			return 1
		fi
		if [ "$mode" = http ]; then
			cat >"$dir/airlock.yaml" <<EOF
listen: {proxy: "127.0.0.1:$port", default_sandbox: bench}
workers: 2
state_dir: "$dir/state"
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
		else
			case $TLS_HOST in
			*[!0-9.]*) hosts=", hosts: {\"$TLS_HOST\": \"127.0.0.1\"}" ;;
			esac
			cat >"$dir/airlock.yaml" <<EOF
listen: {proxy: "127.0.0.1:$port", default_sandbox: bench}
workers: 2
state_dir: "$dir/state"
upstream: {ca_file: "$PKI/ca.crt", allow_networks: ["127.0.0.1/32"]$hosts}
policies:
  - name: p
    rules:
      - host: "$TLS_HOST"
        ports: [$ORIGIN_TLS_PORT]
sandboxes:
  - {id: bench, policy: p}
audit: {file: "$dir/audit.jsonl"}
EOF
			PCA="$dir/state/ca/bench/ca.crt"
		fi
		(cd "$dir" && exec "$bin" -c "$dir/airlock.yaml") \
		    >"$dir/stdout" 2>"$dir/stderr" &
		;;
	squid/*)
		if ! command -v squid >/dev/null; then
			PNOTE="skipped: squid not installed"
			return 1
		fi
		if [ "$mode" = http ]; then
			{
				echo "http_port 127.0.0.1:$port"
				squid_common "$dir"
			} >"$dir/squid.conf"
		else
			if ! squid_has_tls; then
				PNOTE="skipped: squid built without OpenSSL (apt-get install squid-openssl)"
				return 1
			fi
			# The CA squid signs its bumped certificates with.
			openssl req -x509 -new -newkey ec \
			    -pkeyopt ec_paramgen_curve:P-256 -nodes \
			    -keyout "$dir/bump.key" -out "$dir/bump.crt" \
			    -subj "/CN=bench squid bump CA" -days 30 \
			    -addext "basicConstraints=critical,CA:TRUE" \
			    -addext "keyUsage=critical,keyCertSign,cRLSign" \
			    2>/dev/null
			cat "$dir/bump.crt" "$dir/bump.key" >"$dir/bump.pem"
			/usr/lib/squid/security_file_certgen -c \
			    -s "$dir/ssl_db" -M 16MB >/dev/null 2>&1
			# Peek at the ClientHello (SNI), then bump: a leaf per
			# host from the helper, upstream verified against the
			# test CA. Helpers at their defaults.
			{
				echo "http_port 127.0.0.1:$port ssl-bump" \
				    "tls-cert=$dir/bump.pem" \
				    "generate-host-certificates=on" \
				    "dynamic_cert_mem_cache_size=16MB"
				echo "sslcrtd_program" \
				    "/usr/lib/squid/security_file_certgen" \
				    "-s $dir/ssl_db -M 16MB"
				echo "acl step1 at_step SslBump1"
				echo "ssl_bump peek step1"
				echo "ssl_bump bump all"
				echo "tls_outgoing_options cafile=$PKI/ca.crt"
				squid_common "$dir"
			} >"$dir/squid.conf"
			PCA="$dir/bump.crt"
		fi
		[ "$(id -u)" = 0 ] && chown -R proxy "$dir"
		squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>"$dir/stderr" &
		;;
	mitmdump/*)
		if ! command -v mitmdump >/dev/null; then
			PNOTE="skipped: mitmdump not installed (apt-get install mitmproxy)"
			return 1
		fi
		# Defaults otherwise: its CA in confdir, one line per flow
		# on stdout (its access log), whole bodies buffered.
		mitmdump --listen-host 127.0.0.1 -p "$port" \
		    --set confdir="$dir" \
		    --set ssl_verify_upstream_trusted_ca="$PKI/ca.crt" \
		    >"$dir/stdout" 2>"$dir/stderr" &
		PCA="$dir/mitmproxy-ca-cert.pem"
		;;
	tinyproxy/*)
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
		[ "$mode" = https ] &&
		    echo "ConnectPort $ORIGIN_TLS_PORT" >>"$dir/tinyproxy.conf"
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
	if [ "$mode" = https ] && ! wait_file "$PCA"; then
		PNOTE="skipped: no CA certificate at $PCA"
		stop_pid "$PPID_"
		return 1
	fi
	PPORT=$port
	return 0
}

# run_lg URL CONNS [LOADGEN ARGS...]: loadgen through the current proxy;
# prints its JSON line, keeps its complaints in $TMP/lg.err.
run_lg() {
	local url=$1 conns=$2 px=""
	shift 2
	[ -n "$PPORT" ] && px="-x 127.0.0.1:$PPORT"
	# shellcheck disable=SC2086
	"$LOADGEN" -u "$url" $px -c "$conns" -t "$LG_THREADS" -o json "$@" \
	    2>"$TMP/lg.err"
}

# Plain HTTP, keep-alive, for SECS seconds.
loadgen() {
	run_lg "http://127.0.0.1:$ORIGIN_PORT$1" "$2" -d "$3"
}

# HTTPS to the TLS origin by name, trusting the proxy's CA.
loadgen_tls() {
	local path=$1 conns=$2
	shift 2
	run_lg "https://$TLS_HOST:$ORIGIN_TLS_PORT$path" "$conns" \
	    --cafile "$PCA" "$@"
}

# What loadgen said on stderr besides its summary, on one line.
lg_complaint() {
	grep '^loadgen:' "$TMP/lg.err" 2>/dev/null | head -n 2 | tr '\n' ' ' |
	    cut -c1-200
}

ms() { awk -v v="$1" 'BEGIN { printf "%.2f", v }'; }
ms3() { awk -v v="$1" 'BEGIN { printf "%.3f", v }'; }
div() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN {
	if (b == "" || a == "" || b + 0 == 0) print "n/a"; else printf f, a / b }'; }
sub_() { awk -v a="$1" -v b="$2" 'BEGIN {
	if (a == "" || b == "") print "n/a"; else printf "%.3f", a - b }'; }

# start_origin TLS(0|1) PORTFILE: sets OPORT (empty when it did not
# start). Not in $(...): the origin would hold the substitution open.
start_origin() {
	local tls=$1 pf=$2
	OPORT=""
	if [ "$tls" = 1 ]; then
		"$ORIGIN" -p 0 -P "$pf" -C "$PKI/good.crt" -K "$PKI/good.key" \
		    2>"$pf.stderr" &
	else
		"$ORIGIN" -p 0 -P "$pf" 2>"$pf.stderr" &
	fi
	PIDS="$PIDS $!"
	for _ in $(seq 1 50); do
		[ -s "$pf" ] && break
		sleep 0.1
	done
	OPORT=$(cat "$pf" 2>/dev/null)
}

# Origin: ephemeral port, no log (it would measure our disk).
start_origin 0 "$TMP/origin.port"
ORIGIN_PORT=$OPORT
[ -n "$ORIGIN_PORT" ] || { log "origin did not start"; exit 1; }
log "origin on 127.0.0.1:$ORIGIN_PORT, $NPROC cores, ${DURATION}s per test"

declare -A R T
ROWS=""
NOTES=""
for px in $PROXIES; do
	log "== $px (http)"
	if ! start_proxy "$px" http; then
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

# ---- HTTPS ------------------------------------------------------------
TROWS=""
TNOTES=""
if [ "$HTTPS" = 1 ]; then
	PKI=$TMP/pki
	if ! sh "$MKPKI" "$PKI" >"$TMP/mkpki.log" 2>&1; then
		log "mkpki.sh failed: $(tail -n 3 "$TMP/mkpki.log")"
		HTTPS=0
		TNOTES="- HTTPS section not run: tests/harness/mkpki.sh failed
"
	fi
fi
if [ "$HTTPS" = 1 ]; then
	start_origin 1 "$TMP/origin-tls.port"
	ORIGIN_TLS_PORT=$OPORT
	if [ -z "$ORIGIN_TLS_PORT" ]; then
		log "TLS origin did not start: $(cat "$TMP/origin-tls.port.stderr")"
		HTTPS=0
		TNOTES="- HTTPS section not run: the TLS origin did not start
"
	else
		log "TLS origin on 127.0.0.1:$ORIGIN_TLS_PORT as $TLS_HOST"
	fi
fi
if [ "$HTTPS" = 1 ]; then
	for px in $HTTPS_PROXIES; do
		log "== $px (https)"
		if ! start_proxy "$px" https; then
			log "$PNOTE"
			TNOTES="$TNOTES- $px: $PNOTE
"
			continue
		fi
		j=$(loadgen_tls /json/1024 8 -d "$WARMUP")
		if [ "$(json_get requests "$j")" = "" ] ||
		    [ "$(json_get requests "$j")" = 0 ]; then
			why=$(lg_complaint)
			log "$px: no successful HTTPS request in warm-up: $why $j"
			TNOTES="$TNOTES- $px: no successful HTTPS request during warm-up, tests skipped${why:+: $why}
"
			[ -n "$PPID_" ] && stop_pid "$PPID_"
			continue
		elif [ "$(json_get errors "$j")" != 0 ]; then
			TNOTES="$TNOTES- $px: $(json_get errors "$j") errors during HTTPS warm-up
"
		fi
		while read -r tname tpath tconns tmode; do
			t0=0 t1=0
			[ -n "$PPID_" ] && t0=$(cpu_ticks "$PPID_")
			j=$(loadgen_tls "$tpath" "$tconns" -d "$DURATION" \
			    "$tmode")
			[ -n "$PPID_" ] && t1=$(cpu_ticks "$PPID_")
			log "$px https $tname: $j"
			k="$px/$tname"
			T[$k/rps]=$(json_get rps "$j")
			T[$k/req]=$(json_get requests "$j")
			T[$k/p50]=$(json_get p50_ms "$j")
			T[$k/p99]=$(json_get p99_ms "$j")
			T[$k/err]=$(json_get errors "$j")
			T[$k/mbps]=$(json_get mbps "$j")
			T[$k/conn]=$(json_get connects "$j")
			T[$k/hs]=$(json_get handshakes "$j")
			if [ "${T[$k/err]:-0}" != 0 ]; then
				why=$(lg_complaint)
				[ -n "$why" ] && TNOTES="$TNOTES- $px $tname: $why
"
			fi
			if [ -n "$PPID_" ]; then
				T[$k/cpu]=$(awk -v d=$((t1 - t0)) -v hz="$HZ" \
				    'BEGIN { printf "%.2f", d / hz }')
				T[$k/cpureq]=$(div \
				    "$(((t1 - t0) * 1000000 / HZ))" \
				    "${T[$k/req]:-0}" "%.1f")
			else
				T[$k/cpu]="-" T[$k/cpureq]="-"
			fi
		done <<EOF
$TLS_TESTS
EOF
		# SSE: one kept-alive connection, streams one after the
		# other; the first one also sets the tunnel up, the median
		# does not see it.
		j=$(loadgen_tls "$SSE_PATH" 1 -n "$SSE_RUNS" --sse -T 10)
		log "$px https sse: $j"
		k="$px/sse"
		T[$k/n]=$(json_get ttfe_n "$j")
		T[$k/p50]=$(json_get ttfe_p50_ms "$j")
		T[$k/min]=$(json_get ttfe_min_ms "$j")
		T[$k/p90]=$(json_get ttfe_p90_ms "$j")
		T[$k/full]=$(json_get p50_ms "$j")
		T[$k/err]=$(json_get errors "$j")
		rss="-"
		[ -n "$PPID_" ] && rss=$(awk -v k="$(peak_rss_kb "$PPID_")" \
		    'BEGIN { printf "%.1f", k / 1024 }')
		T[$px/rss]=$rss
		TROWS="$TROWS $px"
		[ -n "$PPID_" ] && stop_pid "$PPID_"
	done
fi

if [ "$AB_ROUNDS" -gt 0 ] && [ -n "$AIRLOCKD_BASE" ]; then
	# shellcheck source=bench/ab.sh
	. "$srcdir/bench/ab.sh"
	ab_mode http "http://127.0.0.1:$ORIGIN_PORT" "$TESTS"
	if [ "$HTTPS" = 1 ] && [ -n "${ORIGIN_TLS_PORT:-}" ]; then
		ab_mode https "https://$TLS_HOST:$ORIGIN_TLS_PORT" "$TLS_TESTS"
	fi
fi

# What a leaf costs airlockd, when the build has the tool.
MINT=""
if [ "$HTTPS" = 1 ] && [ -x "$BUILD/bench/mintbench" ]; then
	MINT=$("$BUILD/bench/mintbench" 1000 2>/dev/null)
fi

version() {
	case $1 in
	airlockd) "$AIRLOCKD" --version 2>/dev/null | head -n 1 ;;
	airlockd-base) "$AIRLOCKD_BASE" --version 2>/dev/null | head -n 1 ;;
	squid) squid -v 2>/dev/null | head -n 1 ;;
	tinyproxy) tinyproxy -v 2>/dev/null | head -n 1 ;;
	mitmdump) mitmdump --version 2>/dev/null | head -n 1 ;;
	esac
}

# ok COND: PASS, FAIL or n/a (from awk's 1/0/"").
verdict() { case $1 in 1) echo PASS ;; 0) echo FAIL ;; *) echo n/a ;; esac; }
# cmp A OP B: 1 or 0, empty when a side is missing.
cmp_() { awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
	if (a == "" || b == "" || a == "-" || b == "-" || a == "n/a" ||
	    b == "n/a") exit
	if (op == ">=") print (a + 0 >= b + 0) ? 1 : 0
	else print (a + 0 < b + 0) ? 1 : 0 }'; }
mul() { awk -v a="$1" -v f="$2" 'BEGIN {
	if (a == "" || a == "-") print "n/a"; else printf "%.1f", a * f }'; }

report() {
	local px t k
	echo "# airlock benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Host: $(uname -sr), $NPROC cores ($(nproc --all) installed)," \
	    "$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' \
	    /proc/meminfo). Loadgen, origin and proxy share these cores:" \
	    "loadgen runs $LG_THREADS thread(s), the origin one, airlockd" \
	    "2 workers, Squid 1 worker, mitmdump one Python process," \
	    "tinyproxy a thread per client."
	echo "Each test: ${WARMUP}s warm-up per proxy, then ${DURATION}s of" \
	    "GETs through an explicit proxy to an origin on 127.0.0.1."
	echo
	# shellcheck disable=SC2086  # lists of words
	for px in $(printf '%s\n' $ROWS $TROWS | awk '!seen[$0]++'); do
		v=$(version "$px")
		[ -n "$v" ] && echo "- $px: $v"
	done
	echo
	echo "## HTTP"
	echo
	echo "Keep-alive GETs in absolute-URI form."
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
	[ -n "$TROWS$TNOTES" ] || return 0

	echo
	echo "## HTTPS"
	echo
	echo "Each connection: CONNECT $TLS_HOST:PORT, then TLS (SNI" \
	    "$TLS_HOST, certificate verified against the proxy's CA; the" \
	    "origin's for direct and tinyproxy), then origin-form GETs." \
	    "airlockd, Squid (ssl-bump) and mitmdump decrypt and re-encrypt;" \
	    "tinyproxy only tunnels. \`ka\`: keep-alive; \`new\`: one" \
	    "request per connection (TCP, CONNECT, a full TLS handshake" \
	    "and the request: handshake bound)."
	echo
	echo "| proxy | test | req/s | p50 ms | p99 ms | errors | MB/s | conns opened | TLS handshakes | CPU s | CPU us/req | peak RSS MiB |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	while read -r t _ c _; do
		for px in $TROWS; do
			k="$px/$t"
			echo "| $px | $t ($c conns) | ${T[$k/rps]:-} |" \
			    "$(ms "${T[$k/p50]:-0}") | $(ms "${T[$k/p99]:-0}") |" \
			    "${T[$k/err]:-} | ${T[$k/mbps]:-} |" \
			    "${T[$k/conn]:-} | ${T[$k/hs]:-} |" \
			    "${T[$k/cpu]:-} | ${T[$k/cpureq]:-} |" \
			    "${T[$px/rss]:-} |"
		done
	done <<EOF
$TLS_TESTS
EOF
	echo
	echo "Server-Sent Events: \`$SSE_PATH\` (5 events 100 ms apart, the" \
	    "first at once), $SSE_RUNS streams one after the other on one" \
	    "kept-alive connection. First event: from writing the request" \
	    "to reading the first \`data:\`. Stream: request to last byte" \
	    "(400 ms of it is the origin's pacing)."
	echo
	echo "| proxy | first event p50 ms | min ms | p90 ms | p50 minus direct ms | stream p50 ms | streams | errors |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|"
	for px in $TROWS; do
		k="$px/sse"
		echo "| $px | $(ms3 "${T[$k/p50]:-0}") | $(ms3 "${T[$k/min]:-0}") |" \
		    "$(ms3 "${T[$k/p90]:-0}") |" \
		    "$(sub_ "${T[$k/p50]:-}" "${T[direct/sse/p50]:-}") |" \
		    "$(ms "${T[$k/full]:-0}") | ${T[$k/n]:-} | ${T[$k/err]:-} |"
	done
	echo
	echo "Ratios:"
	echo
	echo "| test | metric | airlockd/squid | airlockd/mitmdump | airlockd/tinyproxy |"
	echo "|---|---|--:|--:|--:|"
	while read -r t _ _ _; do
		a="airlockd/$t"
		for m in rps cpureq; do
			[ "$m" = rps ] && [ "$t" = dl1m ] && m=mbps
			case $m in
			rps) label="req/s" ;;
			mbps) label="MB/s" ;;
			*) label="CPU us/req" ;;
			esac
			echo "| $t | $label | $(div "${T[$a/$m]:-}" \
			    "${T[squid/$t/$m]:-}" "%.2f") | $(div \
			    "${T[$a/$m]:-}" "${T[mitmdump/$t/$m]:-}" "%.2f") |" \
			    "$(div "${T[$a/$m]:-}" "${T[tinyproxy/$t/$m]:-}" \
			    "%.2f") |"
		done
	done <<EOF
$TLS_TESTS
EOF
	echo "| all | peak RSS | $(div "${T[airlockd/rss]:-}" \
	    "${T[squid/rss]:-}" "%.2f") | $(div "${T[airlockd/rss]:-}" \
	    "${T[mitmdump/rss]:-}" "%.2f") | $(div "${T[airlockd/rss]:-}" \
	    "${T[tinyproxy/rss]:-}" "%.2f") |"
	echo
	echo "Targets (issue 3), same run:"
	echo
	echo "| target | airlockd | bound | result |"
	echo "|---|--:|--:|---|"
	a=airlockd
	echo "| keep-alive req/s >= 1.5x Squid | ${T[$a/ka_json1k/rps]:-} |" \
	    "$(mul "${T[squid/ka_json1k/rps]:-}" 1.5) |" \
	    "$(verdict "$(cmp_ "${T[$a/ka_json1k/rps]:-}" '>=' \
	    "$(mul "${T[squid/ka_json1k/rps]:-}" 1.5)")") |"
	echo "| keep-alive req/s >= 10x mitmdump | ${T[$a/ka_json1k/rps]:-} |" \
	    "$(mul "${T[mitmdump/ka_json1k/rps]:-}" 10) |" \
	    "$(verdict "$(cmp_ "${T[$a/ka_json1k/rps]:-}" '>=' \
	    "$(mul "${T[mitmdump/ka_json1k/rps]:-}" 10)")") |"
	echo "| keep-alive CPU us/req <= 0.5x Squid | ${T[$a/ka_json1k/cpureq]:-} |" \
	    "$(mul "${T[squid/ka_json1k/cpureq]:-}" 0.5) |" \
	    "$(verdict "$(cmp_ "$(mul "${T[squid/ka_json1k/cpureq]:-}" 0.5)" \
	    '>=' "${T[$a/ka_json1k/cpureq]:-}")") |"
	echo "| new-connection req/s >= 1.5x Squid | ${T[$a/new_json1k/rps]:-} |" \
	    "$(mul "${T[squid/new_json1k/rps]:-}" 1.5) |" \
	    "$(verdict "$(cmp_ "${T[$a/new_json1k/rps]:-}" '>=' \
	    "$(mul "${T[squid/new_json1k/rps]:-}" 1.5)")") |"
	echo "| download MB/s >= 1.5x Squid | ${T[$a/dl1m/mbps]:-} |" \
	    "$(mul "${T[squid/dl1m/mbps]:-}" 1.5) |" \
	    "$(verdict "$(cmp_ "${T[$a/dl1m/mbps]:-}" '>=' \
	    "$(mul "${T[squid/dl1m/mbps]:-}" 1.5)")") |"
	d=$(sub_ "${T[$a/sse/p50]:-}" "${T[direct/sse/p50]:-}")
	[ "$d" = n/a ] && d=""
	echo "| SSE first event < 1 ms later than direct | ${d:-n/a} ms |" \
	    "1 ms | $(verdict "$(cmp_ "$d" '<' 1)") |"
	echo "| peak RSS < Squid's | ${T[$a/rss]:-n/a} MiB |" \
	    "${T[squid/rss]:-n/a} MiB |" \
	    "$(verdict "$(cmp_ "${T[$a/rss]:-}" '<' "${T[squid/rss]:-}")") |"
	if [ -n "$MINT" ]; then
		echo
		echo "Leaf minting (bench/mintbench 1000: one thread, no" \
		    "network; a cache hit does no signing):"
		echo
		echo '```'
		printf '%s\n' "$MINT"
		echo '```'
	fi
	case " $TROWS " in
	*" mitmdump "*)
		TNOTES="$TNOTES- mitmdump runs with its defaults, which buffer each response body whole before passing it on (stream_large_bodies unset): its SSE first event arrives with the end of the stream.
" ;;
	esac
	if [ -n "$TNOTES" ]; then
		echo
		echo "Notes:"
		echo
		printf '%s' "$TNOTES"
	fi
}

{
	report
	[ "$AB_ROUNDS" -gt 0 ] && [ -n "$AIRLOCKD_BASE" ] && ab_report
} >"$TMP/report.md"
cat "$TMP/report.md"
[ -n "${BENCH_OUT:-}" ] && cp "$TMP/report.md" "$BENCH_OUT"
exit 0
