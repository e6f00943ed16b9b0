#!/usr/bin/env bash
#
# bench/kaprofile.sh BUILD_DIR MODE [N] [https|http]: the HTTPS keep-alive
# scenario of bench/run.sh (1 KiB JSON, 32 connections, interception, the
# TLS origin harness), or with "http" its plain-HTTP one (absolute-form
# GETs to the plain origin harness), with a fixed request count, for measurements that a loaded
# machine does not spoil. airlockd runs with 2 workers; a warm-up of 2,000
# requests fills the leaf cache and the upstream pool first.
#
# MODE cpu     airlockd's user+sys CPU per request (/proc/PID/stat, N=20000)
#      strace  its system calls per request, by name (strace -c -f, N=5000)
#      perf    where its CPU time goes (perf record -e cpu-clock -g, at
#              1 kHz, during the run; N=20000); perf.data is copied to
#              $PERF_OUT (default $TMPDIR/kaprofile.perf)
#      cg      its instructions per request (valgrind --tool=callgrind,
#              collection switched on after the warm-up; N=3000); the
#              profile is copied to $CG_OUT (default $TMPDIR/kaprofile.cg)
# Each run opens its 32 client connections anew: with https, 32 client
# handshakes are in the figures (about 2.4M instructions each).
# AIRLOCKD=path runs another airlockd binary (a baseline); KAPROFILE_PATH
# another origin path (default /json/1024; /size/1048576 is bench/run.sh's
# dl1m); KAPROFILE_NEW=1 bench/run.sh's new_json1k instead of keep-alive
# (16 connections, each request its own CONNECT and TLS handshake).

set -u
B=$(cd "$1" && pwd) || exit 2
MODE=$2
srcdir=$(cd "$(dirname "$0")/.." && pwd)
AD=${AIRLOCKD:-$B/src/airlockd}
case $MODE in
cpu|perf) N=${3:-20000} ;;
strace) N=${3:-5000} ;;
cg) N=${3:-3000} ;;
*) echo "usage: $0 BUILD_DIR cpu|perf|strace|cg [N] [https|http]" >&2; exit 2 ;;
esac
SCHEME=${4:-https}
RPATH=${KAPROFILE_PATH:-/json/1024}
case $SCHEME in https|http) ;; *) echo "$0: scheme https or http" >&2; exit 2 ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/kaprofile.XXXXXX") || exit 2
PIDS=""
trap 'for p in $PIDS; do kill -TERM $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$T"' EXIT

sh "$srcdir/tests/harness/mkpki.sh" "$T/pki" >/dev/null 2>&1 || exit 1
if [ "$SCHEME" = https ]; then
	"$B/tests/harness/origin" -p 0 -P "$T/oport" -C "$T/pki/good.crt" \
	    -K "$T/pki/good.key" 2>"$T/origin.err" &
else
	"$B/tests/harness/origin" -p 0 -P "$T/oport" 2>"$T/origin.err" &
fi
PIDS="$!"
for _ in $(seq 50); do [ -s "$T/oport" ] && break; sleep 0.1; done
OP=$(cat "$T/oport")
PP=$((20000 + RANDOM % 30000))
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
for _ in $(seq 300); do
	(exec 3<>"/dev/tcp/127.0.0.1/$PP") 2>/dev/null && break
	sleep 0.1
done
for _ in $(seq 100); do [ -s "$T/state/ca/bench/ca.crt" ] && break; sleep 0.1; done
LGMODE="-k -c 32"
[ "${KAPROFILE_NEW:-0}" = 1 ] && LGMODE="-K -c 16"
if [ "$SCHEME" = https ]; then
	LG="$B/bench/loadgen -u https://localhost:$OP$RPATH -x 127.0.0.1:$PP
	    --cafile $T/state/ca/bench/ca.crt -o json $LGMODE"
else
	LG="$B/bench/loadgen -u http://localhost:$OP$RPATH -x 127.0.0.1:$PP
	    -o json $LGMODE"
fi
$LG -n 2000 >"$T/warm.json" 2>&1

ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$APID/stat"; }
case $MODE in
cpu)
	t0=$(ticks)
	$LG -n "$N" >"$T/run.json" 2>&1
	t1=$(ticks)
	awk -v a="$t0" -v b="$t1" -v n="$N" -v hz="$(getconf CLK_TCK)" \
	    'BEGIN { printf "cpu_us_per_req %.1f\n", (b - a) / hz * 1e6 / n }'
	;;
perf)
	perf record -q -e cpu-clock -F 1000 -g -p "$APID" -o "$T/perf.data" &
	SP=$!
	sleep 1
	$LG -n "$N" >"$T/run.json" 2>&1
	kill -INT "$SP"
	wait "$SP"
	cp "$T/perf.data" "${PERF_OUT:-${TMPDIR:-/tmp}/kaprofile.perf}"
	;;
strace)
	strace -c -f -p "$APID" -o "$T/strace.txt" 2>/dev/null &
	SP=$!
	sleep 1
	$LG -n "$N" >"$T/run.json" 2>&1
	kill -INT "$SP"
	wait "$SP"
	awk -v n="$N" '/ total$/ { printf "syscalls_per_req %.2f\n", $4 / n }
	    NR > 2 && !/total$|^-/ { printf "  %-14s %.3f\n", $NF, $4 / n }' \
	    "$T/strace.txt" | sort -k2 -nr | head -12
	;;
cg)
	callgrind_control -i on "$APID" >/dev/null 2>&1
	$LG -n "$N" >"$T/run.json" 2>&1
	callgrind_control -d "$APID" >/dev/null 2>&1
	sleep 1
	awk -v n="$N" '/^summary:/ { printf "Ir_per_req %.0f\n", $2 / n }' \
	    "$T/cg.out.1"
	cp "$T/cg.out.1" "${CG_OUT:-${TMPDIR:-/tmp}/kaprofile.cg}"
	;;
esac
grep -o '"requests":[0-9]*,"rps":[0-9.]*,"errors":[0-9]*' "$T/run.json"
