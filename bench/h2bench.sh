#!/usr/bin/env bash
#
# bench/h2bench.sh [BUILD_DIR]: HTTP/2 through airlockd, through mitmdump
# and direct, in one run, on loopback (issue 19 point 7). h2load (Debian
# nghttp2-client) runs 10 connections with 10 concurrent streams each
# (100 streams) of GET /json/1024 (1 KiB answers) for BENCH_DURATION
# seconds, after a warm-up. Neither h2load nor nghttp has a proxy
# option: socat's PROXY address sends the CONNECT and relays the bytes
# (one socat per connection, the same for both proxies); h2load names
# the origin in :authority. The origin is tests/harness/origin over TLS,
# HTTP/1.1 only ("h2 to h1"; "direct" is h2load --h1 to it), or with
# BENCH_ORIGIN=h2 nghttpd (Debian nghttp2-server) serving the same 1 KiB
# as a file, which airlockd and mitmdump speak h2 to ("h2 to h2";
# "direct" is h2load in h2 to it). airlockd's own HTTP/1.1 keep-alive
# figure comes from h2load --h1 through the same relay in the same run.
# The proxies' tests run in BENCH_ROUNDS rounds, each round airlockd h2,
# mitmdump h2 and airlockd HTTP/1.1 back to back (the order turned round
# every other round), so that each round's ratio compares figures from
# the same minute; the targets are judged on the median round, and every
# round is in the report. Prints a Markdown report; BENCH_OUT also
# writes it there.
#
# Environment: BENCH_DURATION (seconds per test, 10), BENCH_WARMUP (2),
# BENCH_CONNS (10), BENCH_STREAMS (per connection, 10), BENCH_ORIGIN (h1
# or h2, h1), BENCH_ROUNDS (3), BENCH_KEEP=1.

set -u

srcdir=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$srcdir}" && pwd) || exit 2
DURATION=${BENCH_DURATION:-10}
WARMUP=${BENCH_WARMUP:-2}
CONNS=${BENCH_CONNS:-10}
STREAMS=${BENCH_STREAMS:-10}
OKIND=${BENCH_ORIGIN:-h1}
ROUNDS=${BENCH_ROUNDS:-3}
ORIGIN=$BUILD/tests/harness/origin
AIRLOCKD=$BUILD/src/airlockd
HOST=localhost
PATH_=/json/1024

log() { printf '%s\n' "h2bench: $*" >&2; }

for f in "$ORIGIN" "$AIRLOCKD"; do
	[ -x "$f" ] || { log "missing $f (make check builds it)"; exit 2; }
done
case $OKIND in
h1) NEED="h2load socat" ;;
h2) NEED="h2load socat nghttpd" ;;
*) log "BENCH_ORIGIN is h1 or h2, not $OKIND"; exit 2 ;;
esac
for c in $NEED; do
	command -v "$c" >/dev/null ||
	    { log "missing $c (apt-get install nghttp2-client nghttp2-server socat)"; exit 2; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/h2bench.XXXXXX") || exit 2
PIDS=""
cleanup() {
	local p
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ "${BENCH_KEEP:-0}" = 1 ] && log "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() {
	local i
	for i in $(seq 1 150); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

sh "$srcdir/tests/harness/mkpki.sh" "$TMP/pki" >"$TMP/mkpki.log" 2>&1 ||
    { log "mkpki.sh failed"; exit 1; }
if [ "$OKIND" = h2 ]; then
	# the same 1 KiB answer, as a file, from an h2-only origin
	mkdir -p "$TMP/www/json"
	head -c 1024 /dev/zero | tr '\0' 'x' >"$TMP/www$PATH_"
	OPORT=$(free_port)
	nghttpd -n 2 --address=127.0.0.1 -d "$TMP/www" "$OPORT" \
	    "$TMP/pki/good.key" "$TMP/pki/good.crt" 2>"$TMP/origin.err" &
	PIDS="$PIDS $!"
	wait_port "$OPORT" || { log "nghttpd did not start"; exit 1; }
else
	"$ORIGIN" -p 0 -P "$TMP/origin.port" -C "$TMP/pki/good.crt" \
	    -K "$TMP/pki/good.key" 2>"$TMP/origin.err" &
	PIDS="$PIDS $!"
	for _ in $(seq 1 50); do [ -s "$TMP/origin.port" ] && break; sleep 0.1; done
	OPORT=$(cat "$TMP/origin.port")
fi

AP=$(free_port)
mkdir -p "$TMP/airlockd"
cat >"$TMP/airlockd/airlock.yaml" <<EOF
listen: {proxy: "127.0.0.1:$AP", default_sandbox: bench}
workers: 2
state_dir: "$TMP/airlockd/state"
upstream: {ca_file: "$TMP/pki/ca.crt", allow_networks: ["127.0.0.1/32"], hosts: {"$HOST": "127.0.0.1"}}
policies:
  - name: p
    rules:
      - host: "$HOST"
        ports: [$OPORT]
sandboxes:
  - {id: bench, policy: p}
audit: {file: "$TMP/airlockd/audit.jsonl"}
EOF
"$AIRLOCKD" -c "$TMP/airlockd/airlock.yaml" >"$TMP/airlockd/stdout" \
    2>"$TMP/airlockd/stderr" &
APID=$!
PIDS="$PIDS $APID"
wait_port "$AP" || { log "airlockd did not start: $(tail -3 "$TMP/airlockd/stderr")"; exit 1; }

MP="" MPID=""
if command -v mitmdump >/dev/null; then
	MP=$(free_port)
	mkdir -p "$TMP/mitmdump"
	# defaults otherwise: one line per flow on stdout, bodies buffered
	mitmdump --listen-host 127.0.0.1 -p "$MP" --set confdir="$TMP/mitmdump" \
	    --set ssl_verify_upstream_trusted_ca="$TMP/pki/ca.crt" \
	    >"$TMP/mitmdump/stdout" 2>"$TMP/mitmdump/stderr" &
	MPID=$!
	PIDS="$PIDS $MPID"
	wait_port "$MP" || { log "mitmdump did not start"; MP=""; }
fi

# relay PROXY_PORT: sets RP, a local port whose connections are
# CONNECTed there (not in $(...): socat would hold it open). nodelay on
# both sides: without it socat's Nagle holds the second TLS record of an
# answer until h2load's delayed ACK, which capped one connection at about
# 90 req/s through either proxy and measured the relay, not the proxy.
relay() {
	RP=$(free_port)
	socat "TCP-LISTEN:$RP,bind=127.0.0.1,reuseaddr,fork,backlog=512,nodelay" \
	    "PROXY:127.0.0.1:$HOST:$OPORT,proxyport=$1,nodelay" >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	wait_port "$RP" || RP=""
}
relay "$AP"
AR=$RP
MR=""
[ -n "$MP" ] && relay "$MP" && MR=$RP

# cpu_ticks PID: user+system clock ticks the process has used so far
cpu_ticks() {
	[ -n "$1" ] && awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null
}
TICK=$(getconf CLK_TCK)
# box_ticks: busy clock ticks of the whole machine so far (all cores,
# everything but idle, iowait and steal: h2load, socat, the origin, the proxies,
# the kernel)
box_ticks() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat
}

declare -A RPS OK FAIL CPU REST
# run NAME PORT PROXY-PID H2LOAD-ARGS...: one warm-up, then the measured
# run; CPU[NAME] is the proxy's CPU µs per answered request in it
run() {
	local name=$1 port=$2 pid=$3 out t0 t1 b0 b1
	shift 3
	# a proxy that stops answering must not hang the run (h2load waits
	# for its streams past -D)
	timeout -k 5 $((WARMUP + 30)) h2load -D "$WARMUP" -c "$CONNS" "$@" \
	    -H ":authority: $HOST:$OPORT" "https://127.0.0.1:$port$PATH_" \
	    >/dev/null 2>&1
	t0=$(cpu_ticks "$pid") b0=$(box_ticks)
	out=$(timeout -k 5 $((DURATION + 30)) h2load -D "$DURATION" -c "$CONNS" "$@" \
	    -H ":authority: $HOST:$OPORT" "https://127.0.0.1:$port$PATH_" 2>&1)
	t1=$(cpu_ticks "$pid") b1=$(box_ticks)
	printf '%s\n' "$out" >"$TMP/$name.h2load"
	RPS[$name]=$(printf '%s\n' "$out" |
	    sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
	OK[$name]=$(printf '%s\n' "$out" |
	    sed -n 's/^status codes: \([0-9]*\) 2xx.*/\1/p')
	FAIL[$name]=$(printf '%s\n' "$out" |
	    sed -n 's/^requests: .* \([0-9]*\) failed, \([0-9]*\) errored.*/\1+\2/p')
	CPU[$name]=$(awk -v a="${t0:-}" -v b="${t1:-}" -v n="${OK[$name]:-0}" \
	    -v hz="$TICK" 'BEGIN { if (a == "" || n + 0 == 0) print "";
	    else printf "%.1f", (b - a) * 1e6 / hz / n }')
	# what the rest of the box spent per request: with no proxy cost
	# at all, the box could not serve more than cores x 1e6 / REST
	REST[$name]=$(awk -v a="${t0:-0}" -v b="${t1:-0}" -v x="$b0" -v y="$b1" \
	    -v n="${OK[$name]:-0}" -v hz="$TICK" 'BEGIN { if (n + 0 == 0) print "";
	    else printf "%.1f", ((y - x) - (b - a)) * 1e6 / hz / n }')
	log "$name: ${RPS[$name]:-?} req/s (2xx ${OK[$name]:-?}, failed+errored ${FAIL[$name]:-?})"
}

LOAD_BEFORE=$(uptime)
if [ "$OKIND" = h2 ]; then
	run direct "$OPORT" "" -m "$STREAMS"
	DIRECT="h2, $CONNS conns × $STREAMS streams"
	OTXT="nghttpd $(nghttpd --version 2>/dev/null | awk '{print $2}') (h2 only, a 1 KiB file), spoken to in h2"
else
	run direct "$OPORT" "" --h1
	DIRECT="HTTP/1.1, $CONNS conns"
	OTXT="tests/harness/origin (HTTP/1.1 over TLS)"
fi
round_mitm() { [ -n "$MR" ] && run "mitmdump_h2.$1" "$MR" "$MPID" -m "$STREAMS"; }
for r in $(seq 1 "$ROUNDS"); do
	[ $((r % 2)) = 0 ] && round_mitm "$r"
	run "airlockd_h2.$r" "$AR" "$APID" -m "$STREAMS"
	[ $((r % 2)) = 1 ] && round_mitm "$r"
	run "airlockd_h1.$r" "$AR" "$APID" --h1
done
LOAD_AFTER=$(uptime)

# median VALUES...: the middle one (the lower middle of an even count)
median() { printf '%s\n' "$@" | awk 'NF' | sort -g |
	awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
# of_rounds NAME: NAME's figures, one per round (RPS unless told)
of_rounds() {
	local r
	for r in $(seq 1 "$ROUNDS"); do
		case ${2:-rps} in
		rps) printf '%s\n' "${RPS[$1.$r]:-}" ;;
		cpu) printf '%s\n' "${CPU[$1.$r]:-}" ;;
		rest) printf '%s\n' "${REST[$1.$r]:-}" ;;
		esac
	done
}
# the medians are the rows of the report; the ratios are the median of
# each round's own ratio
for n in airlockd_h2 airlockd_h1 mitmdump_h2; do
	RPS[$n]=$(median $(of_rounds "$n"))
	CPU[$n]=$(median $(of_rounds "$n" cpu))
	REST[$n]=$(median $(of_rounds "$n" rest))
	ok=0 fa=0 fe=0
	for r in $(seq 1 "$ROUNDS"); do
		f=${FAIL[$n.$r]:-0+0}
		ok=$((ok + ${OK[$n.$r]:-0})) fa=$((fa + ${f%+*})) fe=$((fe + ${f#*+}))
	done
	OK[$n]=$ok FAIL[$n]=$fa+$fe
done
RSS=$(awk '/^VmHWM:/ { print $2 }' "/proc/$APID/status")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {
	if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.1f", a / b }'; }
yes_no() { awk -v a="$1" -v b="$2" 'BEGIN {
	if (a == "" || b == "") print "n/a"; else print (a + 0 >= b + 0 ? "met" : "missed") }'; }

report() {
	echo "### HTTP/2 (h2load), h2 to $OKIND, $(date -u +%FT%RZ)"
	echo
	echo "\`bench/h2bench.sh\`: h2load -D $DURATION -c $CONNS -m $STREAMS" \
	    "(after a ${WARMUP} s warm-up), GET $PATH_ over TLS, socat doing" \
	    "the CONNECT; origin $OTXT;" \
	    "airlockd 2 workers, an audit record per request; mitmdump" \
	    "$(mitmdump --version 2>/dev/null | head -1 | sed 's/Mitmproxy: //')," \
	    "defaults. $(nproc) cores; load before: \`${LOAD_BEFORE# }\`," \
	    "after: \`${LOAD_AFTER# }\`."
	echo
	echo "Medians of $ROUNDS rounds (2xx and failures: all rounds):"
	echo
	echo "| row | protocol to the proxy | req/s | 2xx | failed+errored | proxy CPU µs/req | rest of the box CPU µs/req |"
	echo "|---|---|---|---|---|---|---|"
	echo "| direct (no proxy) | $DIRECT | ${RPS[direct]:-} | ${OK[direct]:-} | ${FAIL[direct]:-} | ${CPU[direct]:-} | ${REST[direct]:-} |"
	echo "| airlockd | h2, $CONNS conns × $STREAMS streams | ${RPS[airlockd_h2]:-} | ${OK[airlockd_h2]:-} | ${FAIL[airlockd_h2]:-} | ${CPU[airlockd_h2]:-} | ${REST[airlockd_h2]:-} |"
	echo "| airlockd | HTTP/1.1 keep-alive, $CONNS conns | ${RPS[airlockd_h1]:-} | ${OK[airlockd_h1]:-} | ${FAIL[airlockd_h1]:-} | ${CPU[airlockd_h1]:-} | ${REST[airlockd_h1]:-} |"
	if [ -n "$MR" ]; then
		echo "| mitmdump | h2, $CONNS conns × $STREAMS streams | ${RPS[mitmdump_h2]:-} | ${OK[mitmdump_h2]:-} | ${FAIL[mitmdump_h2]:-} | ${CPU[mitmdump_h2]:-} | ${REST[mitmdump_h2]:-} |"
	else
		echo "| mitmdump | not installed (apt-get install mitmproxy) | | | | | |"
	fi
	echo
	echo "Each round, back to back (req/s; the ratio is the round's own):"
	echo
	echo "| round | airlockd h2 | mitmdump h2 | airlockd h2 ÷ mitmdump h2 | airlockd HTTP/1.1 | airlockd h2 ÷ HTTP/1.1 |"
	echo "|---|---|---|---|---|---|"
	local r vm=() vh=()
	for r in $(seq 1 "$ROUNDS"); do
		vm+=("$(ratio "${RPS[airlockd_h2.$r]:-}" "${RPS[mitmdump_h2.$r]:-}")")
		vh+=("$(ratio "${RPS[airlockd_h2.$r]:-}" "${RPS[airlockd_h1.$r]:-}")")
		echo "| $r | ${RPS[airlockd_h2.$r]:-} | ${RPS[mitmdump_h2.$r]:-} | ${vm[-1]} × | ${RPS[airlockd_h1.$r]:-} | ${vh[-1]} × |"
	done
	MM=$(median $(printf '%s\n' "${vm[@]}" | grep -v n/a))
	MH=$(median $(printf '%s\n' "${vh[@]}" | grep -v n/a))
	echo
	echo "| target (the median round) | value | result |"
	echo "|---|---|---|"
	echo "| airlockd h2 ≥ 30 × mitmdump h2 | ${MM:-n/a} × (rounds: ${vm[*]}) | $(yes_no "${MM:-}" 30) |"
	echo "| CPU per request: mitmdump h2 / airlockd h2 | $(ratio "${CPU[mitmdump_h2]:-}" "${CPU[airlockd_h2]:-}") × | (not a target: the load-independent view) |"
	CEIL=$(awk -v r="${REST[airlockd_h2]:-}" -v c="$(nproc)" 'BEGIN {
	    if (r + 0 > 0) printf "%.0f", c * 1e6 / r }')
	echo "| the box's ceiling: $(nproc) cores ÷ the rest of the box's CPU per request in the airlockd h2 row (a proxy that cost nothing) | ${CEIL:-n/a} req/s = $(ratio "${CEIL:-}" "${RPS[mitmdump_h2]:-}") × mitmdump h2 | (not a target: above 30 × or not, what this machine allows) |"
	echo "| airlockd h2 ≥ its HTTP/1.1 keep-alive | ${MH:-n/a} × (rounds: ${vh[*]}) | $(yes_no "${MH:-}" 1) |"
	echo "| airlockd peak RSS < 32 MiB | $((RSS / 1024)) MiB ($RSS kB) | $(yes_no 32768 "$RSS") |"
}
if [ -n "${BENCH_OUT:-}" ]; then
	report | tee "$BENCH_OUT"
else
	report
fi
