#!/bin/sh
# Tamper-evident audit (hash_chain: true): the chain continues across a
# restart and a SIGUSR1 reopen after rotation; `airlockctl audit verify`
# says OK on the intact files (exit 0) and names the first altered, removed,
# reordered, inserted or cut line (exit 1).
. "$top_srcdir/tests/integration/lib.sh"

AIRLOCKCTL=$top_builddir/src/airlockctl
[ -x "$AIRLOCKCTL" ] || hard_error "$AIRLOCKCTL not built"

start_origin
AIRLOCK_PORT=$(free_port)
cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", default_sandbox: local}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl, hash_chain: true}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: pol
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/size/*"]}
sandboxes:
  - {id: local, policy: pol}
YAML

# get PATH: one request through the proxy (any status)
get()
{
	curl -sS -o /dev/null -x "http://127.0.0.1:$AIRLOCK_PORT" \
	    "http://api.test:$ORIGIN_PORT$1" || fail "curl $1"
}

# wait_lines FILE N: until FILE has N lines (the writer is asynchronous)
wait_lines()
{
	_i=0
	while [ "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" ] && [ $_i -lt 200 ]; do
		sleep 0.05
		_i=$((_i + 1))
	done
	[ "$(wc -l <"$1")" -eq "$2" ] ||
	    fail "$1: $(wc -l <"$1") lines, want $2"
}

# hash_of FILE LINE / prev_of FILE LINE: a line's "hash" / "prev"
hash_of()
{
	sed -n "${2}p" "$1" | sed 's/.*,"hash":"\([0-9a-f]*\)"}$/\1/'
}
prev_of()
{
	sed -n "${2}p" "$1" | sed 's/.*"prev":"\([0-9a-f]*\)",.*/\1/'
}

# verify EXPECT-EXIT PATTERN FILE...: airlockctl audit verify
verify()
{
	_want=$1
	_pat=$2
	shift 2
	"$AIRLOCKCTL" audit verify "$@" >"$T/verify.out" 2>&1
	_st=$?
	if [ "$_st" -ne "$_want" ]; then
		check_fail "audit verify $*: exit $_st, want $_want: $(cat "$T/verify.out")"
	elif ! grep -q -e "$_pat" "$T/verify.out"; then
		check_fail "audit verify $*: no \"$_pat\" in: $(cat "$T/verify.out")"
	else
		ok "audit verify: $(head -n 1 "$T/verify.out")"
	fi
}

# five records, a restart, three more
start_airlockd "$T/airlock.yaml"
for i in 1 2 3 4; do
	get "/size/$i"
done
get /denied
wait_lines "$T/audit.jsonl" 5
stop_airlockd
start_airlockd "$T/airlock.yaml"
for i in 5 6 7; do
	get "/size/$i"
done
wait_lines "$T/audit.jsonl" 8
[ "$(prev_of "$T/audit.jsonl" 6)" = "$(hash_of "$T/audit.jsonl" 5)" ] ||
    check_fail "after a restart, prev of the first new record is not the last hash"
[ "$(prev_of "$T/audit.jsonl" 1)" = \
    0000000000000000000000000000000000000000000000000000000000000000 ] ||
    check_fail "prev of the first record is not 64 zeros"

# rotation: mv, SIGUSR1, three more in the new file
mv "$T/audit.jsonl" "$T/audit.jsonl.1"
kill -USR1 "$AIRLOCK_PID"
i=0
while [ ! -f "$T/audit.jsonl" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
[ -f "$T/audit.jsonl" ] || fail "SIGUSR1 did not create a new audit file"
for i in 8 9 10; do
	get "/size/$i"
done
wait_lines "$T/audit.jsonl" 3
stop_airlockd
wait_lines "$T/audit.jsonl.1" 8
last=$(hash_of "$T/audit.jsonl.1" 8)
[ "$(prev_of "$T/audit.jsonl" 1)" = "$last" ] ||
    check_fail "after a reopen, prev of the first new record is not the last hash"

# intact: each file, both in order, the new one after the old one's hash
verify 0 "OK (8 records)" "$T/audit.jsonl.1"
verify 0 "OK (3 records)" --prev "$last" "$T/audit.jsonl"
verify 0 "audit.jsonl: OK (3 records)" "$T/audit.jsonl.1" "$T/audit.jsonl"
verify 1 "audit.jsonl:1: .*prev" "$T/audit.jsonl"
cat "$T/audit.jsonl.1" "$T/audit.jsonl" >"$T/all.jsonl"
verify 0 "OK (11 records)" "$T/all.jsonl"

# tampering; each names the first bad line
A=$T/all.jsonl
sed '4s/"status":200/"status":201/' "$A" >"$T/altered.jsonl"
verify 1 "altered.jsonl:4: hash does not match its content (line altered)" \
    "$T/altered.jsonl"
sed '6d' "$A" >"$T/removed.jsonl"
verify 1 "removed.jsonl:6: prev does not match line 5's hash" \
    "$T/removed.jsonl"
{ sed -n '1,2p' "$A"; sed -n '4p' "$A"; sed -n '3p' "$A"; sed -n '5,$p' "$A"; } \
    >"$T/reordered.jsonl"
verify 1 "reordered.jsonl:3: prev does not match line 2's hash" \
    "$T/reordered.jsonl"
{ sed -n '1,7p' "$A"; sed -n '2p' "$A"; sed -n '8,$p' "$A"; } \
    >"$T/inserted.jsonl"
verify 1 "inserted.jsonl:8: prev does not match line 7's hash" \
    "$T/inserted.jsonl"
sed '1d' "$A" >"$T/head-removed.jsonl"
verify 1 "head-removed.jsonl:1: prev is not 64 zeros" "$T/head-removed.jsonl"
head -c $(($(wc -c <"$A") - 40)) "$A" >"$T/cut.jsonl"
verify 1 "cut.jsonl:11: truncated" "$T/cut.jsonl"
sed '9s/"prev":"[0-9a-f]*"/"prev":"'"$(printf '%064d' 0)"'"/' "$A" \
    >"$T/prev-edited.jsonl"
verify 1 "prev-edited.jsonl:9: hash does not match" "$T/prev-edited.jsonl"
finish
