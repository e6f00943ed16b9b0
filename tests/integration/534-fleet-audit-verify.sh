#!/bin/sh
# Fleet mode (issue 18.5): airlockctl audit verify --by gateway checks
# each gateway's hash chain, from one file per gateway or from a merged
# file (records of two gateways interleaved, told apart by "gateway").
# A record of gateway 2 altered in the merged file: gateway 2 is reported
# (its file and line), gateway 1 stays OK, the exit status is 1. Without
# --by, the merged file is one chain and does not verify.
. "$top_srcdir/tests/integration/lib.sh"
AIRLOCKCTL=$top_builddir/src/airlockctl
[ -x "$AIRLOCKCTL" ] || hard_error "$AIRLOCKCTL not built"

start_origin
for i in 1 2; do
	eval "GW_PORT_$i=\$(free_port)"
	eval "_p=\$GW_PORT_$i"
	cat >"$T/gw$i.yaml" <<YAML
listen: {proxy: "127.0.0.1:$_p"}
state_dir: $T/state$i
workers: 1
gateway: gw$i
audit: {file: $T/audit$i.jsonl, hash_chain: true}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: s, policy: p, token: "literal:tok"}
YAML
	"$AIRLOCKD" -c "$T/gw$i.yaml" >"$T/gw$i.out" 2>"$T/gw$i.log" &
	eval "GW_PID_$i=\$!"
	track_pid "$!"
	wait_port "$_p" 20 "$!" || hard_error "gateway $i did not start"
done
for n in 1 2 3 4; do
	for i in 1 2; do
		eval "_p=\$GW_PORT_$i"
		curl -sS -o /dev/null -x "http://s:tok@127.0.0.1:$_p" \
		    "http://api.test:$ORIGIN_PORT/echo?n=$n" ||
		    fail "request $n through gateway $i"
	done
done
for i in 1 2; do
	_w=0
	until [ "$(grep -c . "$T/audit$i.jsonl" 2>/dev/null)" -ge 4 ]; do
		_w=$((_w + 1)); [ $_w -le 100 ] || fail "audit $i: too few records"
		sleep 0.05
	done
done
"$PYTHON" - "$T" <<'PY' || fail "merging"
import sys
t = sys.argv[1]
a = open(t + "/audit1.jsonl").read().splitlines()
b = open(t + "/audit2.jsonl").read().splitlines()
m = []
for i in range(max(len(a), len(b))):
    m += a[i:i + 1] + b[i:i + 1]
open(t + "/merged.jsonl", "w").write("\n".join(m) + "\n")
# gateway 2's third record altered (a path changed)
bad = list(m)
k = [i for i, l in enumerate(bad) if '"gateway":"gw2"' in l][2]
assert "n=3" in bad[k] or "/echo" in bad[k], bad[k][:200]
bad[k] = bad[k].replace("/echo", "/ECHO", 1)
open(t + "/bad.jsonl", "w").write("\n".join(bad) + "\n")
open(t + "/badline", "w").write(str(k + 1))
PY

"$AIRLOCKCTL" audit verify --by gateway "$T/audit1.jsonl" "$T/audit2.jsonl" \
    >"$T/v1.out" 2>&1 || check_fail "one file per gateway: $(cat "$T/v1.out")"
grep -q '^gateway gw1: OK (4 records)$' "$T/v1.out" &&
    grep -q '^gateway gw2: OK (4 records)$' "$T/v1.out" ||
    check_fail "per-file output: $(cat "$T/v1.out")"
ok "one file per gateway: both chains verify"

"$AIRLOCKCTL" audit verify --by gateway "$T/merged.jsonl" >"$T/v2.out" 2>&1 ||
    check_fail "merged file: $(cat "$T/v2.out")"
grep -q '^gateway gw1: OK (4 records)$' "$T/v2.out" &&
    grep -q '^gateway gw2: OK (4 records)$' "$T/v2.out" ||
    check_fail "merged output: $(cat "$T/v2.out")"
if "$AIRLOCKCTL" audit verify "$T/merged.jsonl" >/dev/null 2>&1; then
	check_fail "the merged file verified as one chain"
fi
ok "merged file: each gateway's chain verifies (and not as one chain)"

"$AIRLOCKCTL" audit verify --by gateway "$T/bad.jsonl" >"$T/v3.out" 2>&1
rc=$?
[ "$rc" = 1 ] || check_fail "tampered: exit $rc"
grep -q "^gateway gw2: $T/bad.jsonl:$(cat "$T/badline"): hash does not match" \
    "$T/v3.out" || check_fail "gateway 2 not reported: $(cat "$T/v3.out")"
grep -q '^gateway gw1: OK (4 records)$' "$T/v3.out" ||
    check_fail "gateway 1 not OK: $(cat "$T/v3.out")"
"$AIRLOCKCTL" --json audit verify --by gateway "$T/bad.jsonl" >"$T/v4.out" 2>&1
"$PYTHON" - "$T/v4.out" <<'PY' || check_fail "JSON: $(cat "$T/v4.out")"
import json, sys
o = json.load(open(sys.argv[1]))
g = {x["gateway"]: x for x in o["gateways"]}
assert o["ok"] is False and g["gw1"]["ok"] and not g["gw2"]["ok"], o
assert g["gw2"]["records"] == 2 and "line" in g["gw2"], o
PY
ok "a record of gateway 2 altered: gateway 2 reported, gateway 1 OK"
finish
