# shellcheck shell=bash
# bench/ab.sh: sourced by bench/run.sh when BENCH_AB_ROUNDS is above 0
# and BENCH_AIRLOCKD_BASE names a binary. The before and after builds
# run side by side: in each round of each test, one loadgen through
# airlockd and one through airlockd-base start together for the same
# seconds against the same origin, so both see the same machine. On a
# shared VM the figures of one binary drift by tens of per cent from one
# minute to the next (direct alone: 12.4k to 28.4k req/s in four runs in
# a row), which the sequential sections cannot tell from a change of
# code. Ratios are airlockd / airlockd-base, per round; the summary
# takes the median round and the pooled CPU (all rounds' CPU over all
# rounds' requests). Uses run.sh's start_proxy, cpu_ticks, json_get, div.

declare -A AB
AB_TESTS=""	# "mode name" pairs, in the order they ran

# ab_start MODE FIRST: both proxies for MODE (http|https), FIRST (a:
# airlockd, b: airlockd-base) started first; sets AB_PID_A/B,
# AB_PORT_A/B, AB_CA_A/B. Returns 1 (with a note) when either is missing.
ab_start() {
	local order="airlockd airlockd-base" name
	[ "$2" = b ] && order="airlockd-base airlockd"
	AB_PID_A="" AB_PID_B=""
	for name in $order; do
		if ! start_proxy "$name" "$1"; then
			AB_NOTE="$name: $PNOTE"
			[ -n "$AB_PID_A" ] && stop_pid "$AB_PID_A"
			[ -n "$AB_PID_B" ] && stop_pid "$AB_PID_B"
			return 1
		fi
		if [ "$name" = airlockd ]; then
			AB_PID_A=$PPID_ AB_PORT_A=$PPORT AB_CA_A=$PCA
		else
			AB_PID_B=$PPID_ AB_PORT_B=$PPORT AB_CA_B=$PCA
		fi
	done
	PPID_="" PPORT=""
}

# ab_lg PORT CA URL CONNS OUT [ARGS...]: one loadgen in the background.
ab_lg() {
	local port=$1 ca=$2 url=$3 conns=$4 out=$5 tls=""
	shift 5
	case $url in https:*) tls="--cafile $ca" ;; esac
	# shellcheck disable=SC2086
	"$LOADGEN" -u "$url" -x "127.0.0.1:$port" -c "$conns" \
	    -t "$LG_THREADS" -o json $tls "$@" >"$out" 2>"$out.err" &
}

# ab_round MODE NAME URL CONNS ROUND [LOADGEN ARGS...]: both loadgens at
# once; the one started first alternates with the round, as the proxy
# started first does.
ab_round() {
	local mode=$1 t=$2 url=$3 conns=$4 r=$5 a0 b0 a1 b1 k s l1 l2
	shift 5
	a0=$(cpu_ticks "$AB_PID_A") b0=$(cpu_ticks "$AB_PID_B")
	if [ $((r % 2)) = 1 ]; then
		ab_lg "$AB_PORT_A" "$AB_CA_A" "$url" "$conns" "$TMP/ab.a" "$@"
		l1=$!
		ab_lg "$AB_PORT_B" "$AB_CA_B" "$url" "$conns" "$TMP/ab.b" "$@"
		l2=$!
	else
		ab_lg "$AB_PORT_B" "$AB_CA_B" "$url" "$conns" "$TMP/ab.b" "$@"
		l1=$!
		ab_lg "$AB_PORT_A" "$AB_CA_A" "$url" "$conns" "$TMP/ab.a" "$@"
		l2=$!
	fi
	wait "$l1" "$l2"
	a1=$(cpu_ticks "$AB_PID_A") b1=$(cpu_ticks "$AB_PID_B")
	for s in a b; do
		k="$mode/$t/$r/$s"
		AB[$k/rps]=$(json_get rps "$(cat "$TMP/ab.$s")")
		AB[$k/req]=$(json_get requests "$(cat "$TMP/ab.$s")")
		AB[$k/err]=$(json_get errors "$(cat "$TMP/ab.$s")")
	done
	AB[$mode/$t/$r/a/ticks]=$((a1 - a0))
	AB[$mode/$t/$r/b/ticks]=$((b1 - b0))
	for s in a b; do
		k="$mode/$t/$r/$s"
		AB[$k/cpureq]=$(div "$((AB[$k/ticks] * 1000000 / HZ))" \
		    "${AB[$k/req]:-0}" "%.1f")
	done
	log "ab $mode $t round $r: airlockd ${AB[$mode/$t/$r/a/rps]} req/s" \
	    "${AB[$mode/$t/$r/a/cpureq]} us/req, base" \
	    "${AB[$mode/$t/$r/b/rps]} req/s ${AB[$mode/$t/$r/b/cpureq]} us/req"
}

# ab_mode MODE URL_PREFIX TESTS: BENCH_AB_ROUNDS rounds; each starts
# both proxies anew (the one started first alternates: a long-lived
# process keeps its placement luck, 2-3 % between two copies of the
# same binary), warms both up together, then runs every test once.
ab_mode() {
	local mode=$1 prefix=$2 tests=$3 t path conns lgm r
	log "== airlockd and airlockd-base side by side ($mode)"
	for r in $(seq 1 "$AB_ROUNDS"); do
		if ! ab_start "$mode" "$([ $((r % 2)) = 1 ] && echo a ||
		    echo b)"; then
			log "side by side ($mode) skipped: $AB_NOTE"
			ABNOTES="$ABNOTES- $mode: skipped: $AB_NOTE
"
			return
		fi
		ab_round "$mode" warmup "$prefix/json/1024" 8 "$r" \
		    -d "$WARMUP"
		while read -r t path conns lgm; do
			[ -n "$t" ] || continue
			[ "$r" = 1 ] && AB_TESTS="$AB_TESTS $mode/$t"
			# shellcheck disable=SC2086  # lgm is a flag or empty
			ab_round "$mode" "$t" "$prefix$path" "$conns" "$r" \
			    -d "$DURATION" $lgm
		done <<EOF
$tests
EOF
		stop_pid "$AB_PID_A"
		stop_pid "$AB_PID_B"
	done
}

# median of the words on stdin
ab_median() {
	sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "n/a"; exit }
	    if (NR % 2) printf "%.3f", v[(NR + 1) / 2]
	    else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ab_report() {
	local mt mode t r k ra rc ta tb qa qb rr cr
	[ -n "$AB_TESTS$ABNOTES" ] || return 0
	echo
	echo "## Before and after, side by side"
	echo
	echo "airlockd and airlockd-base (\`$AIRLOCKD_BASE\`) at once: in" \
	    "each of $AB_ROUNDS rounds both are started anew and warmed" \
	    "up together, then every test runs a loadgen through each," \
	    "started together, ${DURATION}s, the same origin and the same" \
	    "tests as above (which proxy and loadgen start first" \
	    "alternates by round). Ratios are" \
	    "airlockd / airlockd-base; CPU is each proxy's user+system" \
	    "time over its own requests."
	echo
	echo "| test | round | req/s | req/s base | CPU us/req | CPU us/req base | errors | req/s ratio | CPU ratio |"
	echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|"
	for mt in $AB_TESTS; do
		mode=${mt%%/*} t=${mt#*/}
		for r in $(seq 1 "$AB_ROUNDS"); do
			k="$mode/$t/$r"
			echo "| $mode $t | $r | ${AB[$k/a/rps]:-} |" \
			    "${AB[$k/b/rps]:-} | ${AB[$k/a/cpureq]:-} |" \
			    "${AB[$k/b/cpureq]:-} |" \
			    "${AB[$k/a/err]:-}+${AB[$k/b/err]:-} |" \
			    "$(div "${AB[$k/a/rps]:-}" "${AB[$k/b/rps]:-}" \
			    "%.3f") | $(div "${AB[$k/a/cpureq]:-}" \
			    "${AB[$k/b/cpureq]:-}" "%.3f") |"
		done
	done
	echo
	echo "| test | median req/s ratio | median CPU ratio | pooled CPU ratio | req/s at least 0.95 | CPU not higher |"
	echo "|---|--:|--:|--:|---|---|"
	for mt in $AB_TESTS; do
		mode=${mt%%/*} t=${mt#*/}
		ta=0 tb=0 qa=0 qb=0 rr="" cr=""
		for r in $(seq 1 "$AB_ROUNDS"); do
			k="$mode/$t/$r"
			ta=$((ta + ${AB[$k/a/ticks]:-0}))
			tb=$((tb + ${AB[$k/b/ticks]:-0}))
			qa=$((qa + ${AB[$k/a/req]:-0}))
			qb=$((qb + ${AB[$k/b/req]:-0}))
			rr="$rr $(div "${AB[$k/a/rps]:-}" "${AB[$k/b/rps]:-}" "%.4f")"
			cr="$cr $(div "${AB[$k/a/cpureq]:-}" \
			    "${AB[$k/b/cpureq]:-}" "%.4f")"
		done
		# shellcheck disable=SC2086  # lists of words
		ra=$(printf '%s\n' $rr | grep -v n/a | ab_median)
		# shellcheck disable=SC2086
		rc=$(printf '%s\n' $cr | grep -v n/a | ab_median)
		k=$(awk -v ta="$ta" -v tb="$tb" -v qa="$qa" -v qb="$qb" 'BEGIN {
		    if (qa == 0 || qb == 0 || tb == 0) print "n/a"
		    else printf "%.3f", (ta / qa) / (tb / qb) }')
		echo "| $mode $t | $ra | $rc | $k |" \
		    "$(verdict "$(cmp_ "$ra" '>=' 0.95)") |" \
		    "$(verdict "$(cmp_ "$rc" '<' 1.0001)") |"
	done
	if [ -n "$ABNOTES" ]; then
		echo
		echo "Notes:"
		echo
		printf '%s' "$ABNOTES"
	fi
}
