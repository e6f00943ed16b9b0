#!/bin/sh
# airlockctl against the real daemon: every command, tables and --json,
# finding the gateway and its token, and the exit codes scripts rely on
# (0 done, 1 refused or failed, 2 usage error, 3 gateway unreachable).
. "$top_srcdir/tests/integration/lib.sh"

CTL=$top_builddir/src/airlockctl
[ -x "$CTL" ] || hard_error "$CTL not built"
unset AIRLOCK_ADMIN AIRLOCK_ADMIN_TOKEN_FILE 2>/dev/null || true

start_origin
AIRLOCK_PORT=$(free_port)
mkdir -p "$T/conf" "$T/elsewhere" || hard_error "mkdir"
CONF=$T/conf/airlock.yaml
SOCK=$T/state/admin.sock
TOKEN_FILE=$T/state/admin.token

# Relative paths on purpose: resolved against the config's directory, by
# the daemon and by airlockctl alike. No listen.admin and no admin.token:
# both take their defaults under state_dir.
cat >"$CONF" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT"}
state_dir: ../state
workers: 2
audit: {file: ../audit.jsonl, hash_chain: true}
upstream:
  allow_networks: ["127.0.0.1/32"]
policies:
  - name: default
    rules:
      - {host: "127.0.0.1", ports: [$ORIGIN_PORT], methods: [GET], paths: ["/size/*"]}
sandboxes:
  - {id: demo, policy: default, token: "literal:demo-token-1"}
YAML
cp "$CONF" "$T/good.yaml"

# run_ctl NAME COMMAND...: stdout to $T/NAME.out, stderr to $T/NAME.err,
# exit status in RC; a sanitizer report fails the check.
run_ctl()
{
	_n=$1
	shift
	"$@" >"$T/$_n.out" 2>"$T/$_n.err"
	RC=$?
	if grep -E -q 'runtime error:|AddressSanitizer|LeakSanitizer' \
	    "$T/$_n.err"; then
		check_fail "$_n: sanitizer report: $(head -n 5 "$T/$_n.err")"
	fi
}

# ctl NAME ARGS...: airlockctl ARGS from the build directory
ctl()
{
	_cn=$1
	shift
	run_ctl "$_cn" "$CTL" "$@"
}

# in_dir DIR NAME ARGS...: airlockctl ARGS run from DIR
in_dir()
{
	_d=$1
	_cn=$2
	shift 2
	run_ctl "$_cn" sh -c 'cd "$1" && shift && exec "$@"' sh "$_d" \
	    "$CTL" "$@"
}

# rc_is NAME CODE
rc_is()
{
	if [ "$RC" -eq "$2" ]; then
		ok "$1: exit $2"
	else
		check_fail "$1: exit $RC, wanted $2; stderr: $(head -c 400 "$T/$1.err")"
	fi
}

# out_has NAME ERE / err_has NAME FIXED-STRING
out_has()
{
	if grep -E -q -- "$2" "$T/$1.out"; then
		ok "$1: output has /$2/"
	else
		check_fail "$1: no /$2/ in: $(head -c 600 "$T/$1.out")"
	fi
}

err_has()
{
	if grep -F -q -- "$2" "$T/$1.err"; then
		ok "$1: stderr has \"$2\""
	else
		check_fail "$1: no \"$2\" on stderr: $(head -c 600 "$T/$1.err")"
	fi
}

# json_is NAME PYTHON-EXPR: stdout is JSON (d) and EXPR holds
json_is()
{
	if "$PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
' "$T/$1.out" "$2" 2>"$T/$1.pyerr"; then
		ok "$1: JSON: $2"
	else
		check_fail "$1: JSON fails $2: $(head -c 600 "$T/$1.out") $(tail -n 1 "$T/$1.pyerr")"
	fi
}

# json_get FILE KEY: a string member of the JSON in FILE
json_get()
{
	"$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
	    "$1" "$2" 2>/dev/null
}

# proxy_get URL PROXY: HTTP status of a GET through airlock
proxy_get()
{
	curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "$2" "$1"
}

# ---- usage errors and local commands need no gateway ----
ctl noargs; rc_is noargs 2; err_has noargs "usage: airlockctl"
ctl help --help; rc_is help 0; out_has help '^usage: airlockctl'
out_has help 'audit verify'
ctl version --version; rc_is version 0; out_has version '^airlockctl [0-9]+\.[0-9]+'
ctl unknown frobnicate; rc_is unknown 2; err_has unknown 'unknown command "frobnicate"'
ctl badopt -c "$CONF" status --frob; rc_is badopt 2; err_has badopt 'unknown option "--frob"'
ctl noverb -c "$CONF" sandbox; rc_is noverb 2; err_has noverb "sandbox show ID"
ctl noid -c "$CONF" sandbox show; rc_is noid 2; err_has noid "usage: airlockctl sandbox show ID"
ctl twoids -c "$CONF" usage a b; rc_is twoids 2
ctl noval -c "$CONF" sandbox create --policy; rc_is noval 2
ctl badaddr -a nowhere status; rc_is badaddr 2; err_has badaddr 'bad gateway address "nowhere"'
ctl run_nodash -c "$CONF" run true; rc_is run_nodash 2; err_has run_nodash '"--"'
ctl run_nocmd -c "$CONF" run --; rc_is run_nocmd 2
ctl run_badopt -c "$CONF" run --frob -- true; rc_is run_badopt 2
ctl nofiles audit verify; rc_is nofiles 2
ctl badprev audit verify --prev 1234 "$CONF"; rc_is badprev 2
ctl noconf -c "$T/missing.yaml" status; rc_is noconf 2; err_has noconf "missing.yaml"
in_dir "$T/elsewhere" nodefault status; rc_is nodefault 2
err_has nodefault "conf/airlock.yaml"
in_dir "$T/elsewhere" notoken -a "unix:$SOCK" status; rc_is notoken 2
err_has notoken "no admin token"

# ---- the gateway is not there: 3 ----
echo "not-the-token" >"$T/wrong.token"
chmod 600 "$T/wrong.token"
ctl nosock -a "unix:$T/nope.sock" -k "$T/wrong.token" status
rc_is nosock 3; err_has nosock "gateway not reachable at unix:$T/nope.sock"
ctl down_before -c "$CONF" status; rc_is down_before 3
# state_dir ../state: the daemon's own spelling of the path
err_has down_before "gateway not reachable at unix:$T/conf/../state/admin.sock"
DEADPORT=$(free_port)
ctl refused -a "127.0.0.1:$DEADPORT" -k "$T/wrong.token" sandbox list
rc_is refused 3; err_has refused "Connection refused"

# ---- start the gateway ----
start_airlockd "$CONF"
_i=0
until curl -s --max-time 2 --unix-socket "$SOCK" http://x/healthz 2>/dev/null |
    grep -q '"ok"'; do
	_i=$((_i + 1))
	[ "$_i" -le 200 ] || hard_error "admin API did not come up on $SOCK"
	sleep 0.05
done
[ -s "$TOKEN_FILE" ] || hard_error "no admin token in $TOKEN_FILE"
ADMIN_TOKEN=$(cat "$TOKEN_FILE")

# ---- status ----
ctl status -c "$CONF" status; rc_is status 0
out_has status '^status +ok$'
out_has status '^version +[0-9]+\.[0-9]+'
out_has status '^sandboxes +1$'
out_has status '^audit\.available +true$'
ctl status_json -c "$CONF" --json status; rc_is status_json 0
json_is status_json 'd["status"] == "ok" and d["sandboxes"] == 1 and d["audit"]["available"] is True'
# the default config, found from the current directory
in_dir "$T" status_default status; rc_is status_default 0
out_has status_default '^status +ok$'
# --json after the command, AIRLOCK_ADMIN and AIRLOCK_ADMIN_TOKEN_FILE
run_ctl status_env env "AIRLOCK_ADMIN=unix:$SOCK" \
    "AIRLOCK_ADMIN_TOKEN_FILE=$TOKEN_FILE" "$CTL" status --json
rc_is status_env 0; json_is status_env 'd["status"] == "ok"'
in_dir "$T/elsewhere" status_ak -a "unix:$SOCK" -k "$TOKEN_FILE" status
rc_is status_ak 0

# ---- the admin token ----
ctl badtoken -c "$CONF" -k "$T/wrong.token" status; rc_is badtoken 1
err_has badtoken "admin token rejected"
run_ctl badtoken_env env "AIRLOCK_ADMIN_TOKEN_FILE=$T/wrong.token" "$CTL" \
    -c "$CONF" sandbox list
rc_is badtoken_env 1; err_has badtoken_env "admin token rejected"
ctl notokenfile -c "$CONF" -k "$T/no-such.token" status; rc_is notokenfile 1
err_has notokenfile "cannot read the admin token"
err_has notokenfile "no-such.token"
# a config that names the token as a literal (exit 1 when it is wrong)
sed 's/^workers: 2$/workers: 2\nadmin: {token: "literal:nope-nope"}/' "$CONF" \
    >"$T/conf/literal.yaml"
ctl literal -c "$T/conf/literal.yaml" status; rc_is literal 1
err_has literal "admin token rejected"

# configs read by airlockctl only: other token sources, same gateway
cat >"$T/conf/exec.yaml" <<YAML
listen: {admin: "unix:../state/admin.sock"}
admin: {token: "exec:cat '$TOKEN_FILE'"}
YAML
ctl exec_token -c "$T/conf/exec.yaml" status; rc_is exec_token 0
cat >"$T/conf/env.yaml" <<YAML
state_dir: ../state
admin: {token: "env:CTL_TEST_TOKEN"}
YAML
run_ctl env_token env "CTL_TEST_TOKEN=$ADMIN_TOKEN" "$CTL" \
    -c "$T/conf/env.yaml" status
rc_is env_token 0
ctl env_unset -c "$T/conf/env.yaml" status; rc_is env_unset 1
err_has env_unset '"CTL_TEST_TOKEN" is not set'
printf 'listen: [unclosed\n' >"$T/conf/broken.yaml"
ctl conf_broken -c "$T/conf/broken.yaml" status; rc_is conf_broken 2
err_has conf_broken "broken.yaml:"

# ---- sandbox list ----
ctl list -c "$CONF" sandbox list; rc_is list 0
out_has list '^ID +POLICY +KIND +STATE +CREATED +CONNS$'
out_has list '^demo +default +static +- +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z +0$'
ctl list_json -c "$CONF" sandbox list --json; rc_is list_json 0
json_is list_json '[s["id"] for s in d["sandboxes"]] == ["demo"] and d["sandboxes"][0]["static"] is True'

# ---- sandbox create ----
ctl create -c "$CONF" sandbox create --policy default --id box1
rc_is create 0
json_is create 'd["id"] == "box1" and d["token"] and d["proxy_url"].startswith("http://box1:") and d["ca_cert"].startswith("-----BEGIN CERTIFICATE-----")'
BOX_TOKEN=$(json_get "$T/create.out" token)
BOX_URL=$(json_get "$T/create.out" proxy_url)
ctl create_dup -c "$CONF" sandbox create --id box1; rc_is create_dup 1
err_has create_dup "HTTP 409)"
ctl create_nopol -c "$CONF" sandbox create --policy nosuch; rc_is create_nopol 1
err_has create_nopol '(bad_request, HTTP 400)'
err_has create_nopol 'nosuch'
ctl create_anon -c "$CONF" sandbox create; rc_is create_anon 0
json_is create_anon 'd["policy"] == "default" and len(d["id"]) > 0'
ANON_ID=$(json_get "$T/create_anon.out" id)

ctl list2 -c "$CONF" sandbox list; rc_is list2 0
out_has list2 '^box1 +default +dynamic +created +[0-9T:Z-]+ +0$'
out_has list2 '^demo +default +static '

# ---- sandbox show / ca ----
ctl show -c "$CONF" sandbox show box1; rc_is show 0
out_has show '^id +box1$'
out_has show '^kind +dynamic$'
out_has show "^token +$BOX_TOKEN\$"
out_has show '^ca_cert:$'
out_has show '^-----END CERTIFICATE-----$'
ctl show_json -c "$CONF" --json sandbox show box1; rc_is show_json 0
json_is show_json "d['token'] == '$BOX_TOKEN' and d['static'] is False"
ctl show_404 -c "$CONF" sandbox show nosuchbox; rc_is show_404 1
err_has show_404 "(not_found, HTTP 404)"
ctl show_404j -c "$CONF" --json sandbox show nosuchbox; rc_is show_404j 1
json_is show_404j 'd["error"] == "not_found" and d["request_id"]'
ctl ca -c "$CONF" sandbox ca box1; rc_is ca 0
if cmp -s "$T/ca.out" "$T/state/ca/box1/ca.crt"; then
	ok "sandbox ca prints state_dir/ca/box1/ca.crt exactly"
else
	check_fail "sandbox ca differs from $T/state/ca/box1/ca.crt"
fi

# ---- traffic with the created sandbox, then usage ----
st=$(proxy_get "http://127.0.0.1:$ORIGIN_PORT/size/100" "$BOX_URL")
[ "$st" = 200 ] && ok "proxy_url of box1 works (200)" ||
    check_fail "GET through box1's proxy_url: $st"
st=$(proxy_get "http://127.0.0.1:$ORIGIN_PORT/size/10" \
    "http://demo:demo-token-1@127.0.0.1:$AIRLOCK_PORT")
[ "$st" = 200 ] || check_fail "GET through demo: $st"
st=$(proxy_get "http://127.0.0.1:$ORIGIN_PORT/other" \
    "http://demo:demo-token-1@127.0.0.1:$AIRLOCK_PORT")
[ "$st" = 403 ] || check_fail "denied GET through demo: $st"
_i=0
while :; do
	ctl usage_json -c "$CONF" --json usage box1
	"$PYTHON" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["requests"] != 1)' \
	    "$T/usage_json.out" 2>/dev/null && break
	_i=$((_i + 1))
	[ "$_i" -le 50 ] || break
	sleep 0.1
done
rc_is usage_json 0
json_is usage_json 'd["sandbox"] == "box1" and d["requests"] == 1 and d["bytes_in"] >= 100 and d["bytes_out"] > 0 and "caps" in d and "spend_microusd" in d'
ctl usage -c "$CONF" usage box1; rc_is usage 0
out_has usage '^sandbox +box1$'
out_has usage '^requests +1$'
out_has usage '^bytes_in +[1-9][0-9]+$'
out_has usage '^caps +none$'
ctl usage_404 -c "$CONF" usage nosuchbox; rc_is usage_404 1
err_has usage_404 "HTTP 404)"
ctl reset -c "$CONF" usage reset box1; rc_is reset 0
out_has reset '^requests +0$'
ctl usage0 -c "$CONF" --json usage box1; rc_is usage0 0
json_is usage0 'd["requests"] == 0 and d["bytes_in"] == 0 and d["bytes_out"] == 0'
ctl status2 -c "$CONF" --json status; rc_is status2 0
json_is status2 'd["requests"] >= 3 and d["sandboxes"] == 3'

# ---- sandbox delete ----
ctl delete -c "$CONF" sandbox delete box1; rc_is delete 0
out_has delete '^deleted box1$'
st=$(proxy_get "http://127.0.0.1:$ORIGIN_PORT/size/10" "$BOX_URL")
[ "$st" = 407 ] && ok "deleted sandbox's token gets 407" ||
    check_fail "GET with a deleted sandbox's token: $st, wanted 407"
ctl delete_again -c "$CONF" sandbox delete box1; rc_is delete_again 1
err_has delete_again "(not_found, HTTP 404)"
ctl delete_static -c "$CONF" sandbox delete demo; rc_is delete_static 1
err_has delete_static "HTTP 409)"
ctl delete_json -c "$CONF" --json sandbox delete "$ANON_ID"; rc_is delete_json 0
json_is delete_json "d['id'] == '$ANON_ID' and d['deleted'] is True"
ctl list3 -c "$CONF" --json sandbox list; rc_is list3 0
json_is list3 '[s["id"] for s in d["sandboxes"]] == ["demo"]'

# ---- run ----
# A gateway without a launcher answers 501: exit 1 with its reason, and the
# command is not run. With launcher.backend none (a sandbox is an
# identity) the command runs here with the sandbox's environment only, its
# exit status passes through, and the sandbox is released afterwards.
ctl run_nopol -c "$CONF" run --policy nosuch -- true; rc_is run_nopol 1
err_has run_nopol "HTTP 400)"
run_ctl run env CALLER_ONLY=leak "$CTL" -c "$CONF" run --policy default -- \
    sh -c 'echo "id=$AIRLOCK_SANDBOX_ID"; echo "caller=${CALLER_ONLY:-unset}"
	cp "$SSL_CERT_FILE" "$0/bundle.pem"
	cp "$1/ca/$AIRLOCK_SANDBOX_ID/ca.crt" "$0/run-ca.pem"
	curl -s -o /dev/null -w "code=%{http_code}\n" --max-time 10 "$2"
	exit 7' "$T" "$T/state" "http://127.0.0.1:$ORIGIN_PORT/size/10"
if grep -q "(not_implemented, HTTP 501)" "$T/run.err"; then
	rc_is run 1
	if grep -q '^id=' "$T/run.out"; then
		check_fail "run ran the command although the gateway has no launcher"
	fi
	note "gateway has no launcher: run checked for 501 only"
else
	rc_is run 7
	out_has run '^id=sbx-[0-9a-f]+$'
	out_has run '^caller=unset$'
	out_has run '^code=200$'
	RUN_ID=$(sed -n 's/^id=//p' "$T/run.out")
	if [ -s "$T/run-ca.pem" ] && "$PYTHON" -c '
import sys
b, c = open(sys.argv[1]).read(), open(sys.argv[2]).read()
sys.exit(0 if c.strip() in b else 1)' "$T/bundle.pem" "$T/run-ca.pem"; then
		ok "run: SSL_CERT_FILE bundle holds the sandbox CA"
	else
		check_fail "run: the CA bundle lacks the sandbox's CA"
	fi
	ctl run_list -c "$CONF" --json sandbox list; rc_is run_list 0
	json_is run_list "'$RUN_ID' not in [s['id'] for s in d['sandboxes']]"
	ctl run_true -c "$CONF" run -- true; rc_is run_true 0
	ctl run_nocmd2 -c "$CONF" run -- "$T/no-such-command"; rc_is run_nocmd2 127
fi

# ---- reload ----
ctl reload -c "$CONF" reload; rc_is reload 0
out_has reload 'reloaded'
ctl reload_json -c "$CONF" --json reload; rc_is reload_json 0
json_is reload_json 'd["status"] == "ok"'
BADLINE=$(($(wc -l <"$T/good.yaml") + 1))
{ cat "$T/good.yaml"; echo "bogus_key: 1"; } >"$CONF"
ctl reload_bad -c "$CONF" reload; rc_is reload_bad 1
err_has reload_bad "$CONF:$BADLINE:1: "
err_has reload_bad "bogus_key"
err_has reload_bad "(bad_config, HTTP 400)"
ctl reload_badj -c "$CONF" --json reload; rc_is reload_badj 1
json_is reload_badj 'd["error"] == "bad_config" and any("bogus_key" in e for e in d["errors"])'
cp "$T/good.yaml" "$CONF"
ctl reload_again -c "$CONF" reload; rc_is reload_again 0
ctl status3 -c "$CONF" --json status; rc_is status3 0
json_is status3 'd["reloads"]["ok"] == 3 and d["reloads"]["failed"] == 2'

# ---- a gateway that accepts but never answers: 3 after 10 s ----
"$PYTHON" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(5)
c = s.accept()
time.sleep(60)
' "$T/mute.sock" &
MUTE_PID=$!
track_pid "$MUTE_PID"
_i=0
while [ ! -S "$T/mute.sock" ] && [ "$_i" -lt 100 ]; do
	sleep 0.05
	_i=$((_i + 1))
done
ctl mute -a "unix:$T/mute.sock" -k "$TOKEN_FILE" status; rc_is mute 3
err_has mute "no answer from the gateway"

# ---- gateway stopped: 3 ----
stop_airlockd
ctl down -c "$CONF" status; rc_is down 3
err_has down "gateway not reachable"

# ---- audit verify (local) ----
AUDIT=$T/audit.jsonl
N=$(wc -l <"$AUDIT")
[ "$N" -ge 4 ] || check_fail "only $N audit lines"
ctl verify audit verify "$AUDIT"; rc_is verify 0
out_has verify "^$AUDIT: OK \\($N records\\)\$"
run_ctl verify_stdin sh -c 'exec "$1" audit verify - <"$2"' sh "$CTL" "$AUDIT"
rc_is verify_stdin 0; out_has verify_stdin "^-: OK \\($N records\\)\$"
ctl verify_json --json audit verify "$AUDIT"; rc_is verify_json 0
json_is verify_json "d['ok'] is True and d['files'][0]['records'] == $N"
"$PYTHON" - "$AUDIT" "$T/altered.jsonl" <<'PY' || hard_error "cannot alter the audit file"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
old = lines[1]
lines[1] = re.sub(r'"ts":"([^"]*)(\d)Z"',
    lambda m: '"ts":"%s%dZ"' % (m.group(1), (int(m.group(2)) + 1) % 10),
    old, count=1)
assert lines[1] != old
open(sys.argv[2], "w").write("\n".join(lines))
PY
ctl altered audit verify "$T/altered.jsonl"; rc_is altered 1
out_has altered "^$T/altered.jsonl:2: "
ctl altered_json --json audit verify "$T/altered.jsonl"; rc_is altered_json 1
json_is altered_json 'd["ok"] is False and d["files"][0]["line"] == 2'
# one chain in two files: in order OK, alone or swapped it breaks
K=$((N / 2))
head -n "$K" "$AUDIT" >"$T/part1.jsonl"
tail -n +"$((K + 1))" "$AUDIT" >"$T/part2.jsonl"
ctl chain audit verify "$T/part1.jsonl" "$T/part2.jsonl"; rc_is chain 0
out_has chain "^$T/part1.jsonl: OK \\($K records\\)\$"
out_has chain "^$T/part2.jsonl: OK \\($((N - K)) records\\)\$"
ctl chain_swapped audit verify "$T/part2.jsonl" "$T/part1.jsonl"
rc_is chain_swapped 1; out_has chain_swapped "^$T/part2.jsonl:1: "
ctl part2_alone audit verify "$T/part2.jsonl"; rc_is part2_alone 1
PREV=$(tail -n 1 "$T/part1.jsonl" | "$PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.read())["hash"])')
ctl part2_prev audit verify --prev "$PREV" "$T/part2.jsonl"; rc_is part2_prev 0
ctl verify_missing audit verify "$T/no-such.jsonl"; rc_is verify_missing 1
err_has verify_missing "no-such.jsonl"

# ---- the admin token is never printed ----
if grep -F -l -- "$ADMIN_TOKEN" "$T"/*.out "$T"/*.err 2>/dev/null; then
	check_fail "the admin token appears in airlockctl's output"
else
	ok "admin token never printed"
fi

finish
