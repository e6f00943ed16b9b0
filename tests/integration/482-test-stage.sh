#!/bin/sh
# Adding a stage is one file plus one table row (issue 16, point 9):
# tests/harness/stage_stamp.c is a stage that exists only in the test
# build's airlockd-stage (src/pipe/stages.c lists it under
# AIRLOCK_TEST_STAGE; nothing else changes). Through that binary every
# request reaches the origin stamped with X-Airlock-Test-Stage (the
# exchange's id and rule, from its req_fields hook) and
# X-Airlock-Test-Stage-Done counting the exchanges its done hook saw end
# (0, then 1); a field whose value carries CR LF is dropped by the driver,
# never written. The daemon itself (src/airlockd) has no such stage: the
# same request reaches the origin without the field.
. "$top_srcdir/tests/integration/lib.sh"

STAGED=$top_builddir/tests/harness/airlockd-stage
[ -x "$STAGED" ] || hard_error "$STAGED not built"
start_origin
AIRLOCK_PORT=$(free_port)
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"

get()
{
	curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
	    -x "http://127.0.0.1:$AIRLOCK_PORT" "http://api.test:$ORIGIN_PORT/$1"
}

_real=$AIRLOCKD
AIRLOCKD=$STAGED
start_airlockd "$T/airlock.yaml"
[ "$(get size/10)" = 200 ] || fail "first request through airlockd-stage"
[ "$(get size/20)" = 200 ] || fail "second request through airlockd-stage"
stop_airlockd
AIRLOCKD=$_real

grep -E -q '^X-Airlock-Test-Stage: [0-9a-f]{24} p#0' "$T/origin.log" ||
    fail "no X-Airlock-Test-Stage field (id, rule) at the origin"
[ "$(grep -c '^X-Airlock-Test-Stage:' "$T/origin.log")" -eq 2 ] ||
    fail "want the stamp on both requests"
grep '^X-Airlock-Test-Stage-Done:' "$T/origin.log" | tr -d '\r' |
    awk '{print $2}' | tr '\n' ' ' >"$T/done.txt"
[ "$(cat "$T/done.txt")" = "0 1 " ] ||
    fail "the done hook's count: want '0 1 ', got '$(cat "$T/done.txt")'"
if grep -q -i '^X-Injected\|^X-Airlock-Test-Bad' "$T/origin.log"; then
	fail "a field with CR LF in its value was written"
fi
ok "airlockd-stage: the test stage's fields reach the origin"

start_airlockd "$T/airlock.yaml"
[ "$(get size/30)" = 200 ] || fail "request through airlockd"
stop_airlockd
[ "$(grep -c '^X-Airlock-Test-Stage:' "$T/origin.log")" -eq 2 ] ||
    fail "src/airlockd stamped a request: the test stage leaked into it"
[ "$(origin_count)" -eq 3 ] || fail "want 3 requests at the origin"
ok "airlockd: no test stage"
finish
