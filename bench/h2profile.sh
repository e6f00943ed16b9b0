#!/usr/bin/env bash
#
# bench/h2profile.sh BUILD_DIR MODE [N]: the h2 scenario of
# bench/h2bench.sh (h2load, 10 connections x 10 streams, GET /json/1024
# through socat's CONNECT, interception, tests/harness/origin over TLS in
# HTTP/1.1; H2PROFILE_ORIGIN=h2: nghttpd, spoken to in h2) with a fixed
# request count, for figures a loaded machine does not spoil.
# AIRLOCKD=path runs another airlockd binary (a baseline).
#
# MODE cg   instructions per request (valgrind --tool=callgrind, collection
#           switched on after a warm-up of 2,000 requests; N=5000); the
#           profile is copied to $CG_OUT (default $TMPDIR/h2profile.cg)
#      cpu  airlockd's user+sys CPU us per request (N=50000; noisy under load)
#      strace  its system calls per request, by name (strace -c -f, N=10000)
#      perf    where its CPU time goes (perf record -e cpu-clock -g at
#              1 kHz during the run, N=30000); perf.data is copied to
#              $PERF_OUT (default $TMPDIR/h2profile.perf)
# The 10 client handshakes of each run are in the figures.

set -u
B=$(cd "$1" && pwd) || exit 2
MODE=$2
srcdir=$(cd "$(dirname "$0")/.." && pwd)
case $MODE in
cg) N=${3:-5000} ;;
cpu) N=${3:-50000} ;;
strace) N=${3:-10000} ;;
perf) N=${3:-30000} ;;
*) echo "usage: $0 BUILD_DIR cg|cpu|strace|perf [N]" >&2; exit 2 ;;
esac
AD=${AIRLOCKD:-$B/src/airlockd}
T=$(mktemp -d "${TMPDIR:-/tmp}/h2profile.XXXXXX") || exit 2
PIDS=""
trap 'for p in $PIDS; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$T"' EXIT
fport() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wport() {
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

sh "$srcdir/tests/harness/mkpki.sh" "$T/pki" >/dev/null 2>&1 || exit 1
if [ "${H2PROFILE_ORIGIN:-h1}" = h2 ]; then
	# bench/h2bench.sh's BENCH_ORIGIN=h2: nghttpd, h2 only, the same
	# 1 KiB as a file
	mkdir -p "$T/www/json"
	head -c 1024 /dev/zero | tr '\0' 'x' >"$T/www/json/1024"
	OP=$(fport)
	nghttpd -n 2 --address=127.0.0.1 -d "$T/www" "$OP" \
	    "$T/pki/good.key" "$T/pki/good.crt" 2>"$T/origin.err" &
	PIDS="$!"
	wport "$OP" || exit 1
else
	"$B/tests/harness/origin" -p 0 -P "$T/oport" -C "$T/pki/good.crt" \
	    -K "$T/pki/good.key" 2>"$T/origin.err" &
	PIDS="$!"
	for _ in $(seq 50); do [ -s "$T/oport" ] && break; sleep 0.1; done
	OP=$(cat "$T/oport")
fi
PP=$(fport)
cat >"$T/a.yaml" <<EOC
listen: {proxy: "127.0.0.1:$PP", default_sandbox: bench}
workers: 2
state_dir: "$T/state"
upstream: {ca_file: "$T/pki/ca.crt", allow_networks: ["127.0.0.1/32"], hosts: {"localhost": "127.0.0.1"}}
policies:
  - name: p
    rules:
      - host: "localhost"
        ports: [$OP]
sandboxes:
  - {id: bench, policy: p}
audit: {file: "$T/audit.jsonl"}
EOC
if [ "$MODE" = cg ]; then
	(cd "$T" && exec valgrind --tool=callgrind --instr-atstart=no \
	    --callgrind-out-file="$T/cg.out" "$AD" -c "$T/a.yaml") \
	    >"$T/out" 2>"$T/err" &
else
	(cd "$T" && exec "$AD" -c "$T/a.yaml") >"$T/out" 2>"$T/err" &
fi
APID=$!
PIDS="$APID $PIDS"
wport "$PP" || { echo "airlockd did not start" >&2; exit 1; }
RP=$(fport)
socat "TCP-LISTEN:$RP,bind=127.0.0.1,reuseaddr,fork,backlog=512,nodelay" \
    "PROXY:127.0.0.1:localhost:$OP,proxyport=$PP,nodelay" >/dev/null 2>&1 &
PIDS="$! $PIDS"
wport "$RP" || exit 1
H2="h2load -c 10 -m 10 -H :authority:localhost:$OP https://127.0.0.1:$RP/json/1024"
$H2 -n 2000 >"$T/warm.txt" 2>&1

ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$APID/stat"; }
case $MODE in
cg)
	callgrind_control -i on "$APID" >/dev/null 2>&1
	$H2 -n "$N" >"$T/run.txt" 2>&1
	callgrind_control -d "$APID" >/dev/null 2>&1
	sleep 1
	awk -v n="$N" '/^summary:/ { printf "Ir_per_req %.0f\n", $2 / n }' \
	    "$T/cg.out.1"
	cp "$T/cg.out.1" "${CG_OUT:-${TMPDIR:-/tmp}/h2profile.cg}"
	;;
cpu)
	t0=$(ticks)
	$H2 -n "$N" >"$T/run.txt" 2>&1
	t1=$(ticks)
	awk -v a="$t0" -v b="$t1" -v n="$N" -v hz="$(getconf CLK_TCK)" \
	    'BEGIN { printf "cpu_us_per_req %.1f\n", (b - a) / hz * 1e6 / n }'
	;;
strace)
	strace -c -f -p "$APID" -o "$T/strace.txt" 2>/dev/null &
	SP=$!
	sleep 1
	$H2 -n "$N" >"$T/run.txt" 2>&1
	kill -INT "$SP"
	wait "$SP"
	awk -v n="$N" '/ total$/ { printf "syscalls_per_req %.2f\n", $4 / n }
	    NR > 2 && !/total$|^-/ { printf "  %-14s %.3f\n", $NF, $4 / n }' \
	    "$T/strace.txt" | sort -k2 -nr | head -12
	;;
perf)
	perf record -q -e cpu-clock -F 1000 -g -p "$APID" -o "$T/perf.data" &
	SP=$!
	sleep 1
	$H2 -n "$N" >"$T/run.txt" 2>&1
	kill -INT "$SP"
	wait "$SP"
	cp "$T/perf.data" "${PERF_OUT:-${TMPDIR:-/tmp}/h2profile.perf}"
	;;
esac
grep -E '^requests:|^status codes:' "$T/run.txt"
