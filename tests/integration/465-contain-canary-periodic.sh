#!/bin/sh
# Issue 24, point 7: with launcher.canary the gateway probes one warm
# sandbox per policy on its own: passing probes are logged and audited;
# a deliberately loosened nft rule (UDP to the gateway accepted) shows up
# within a few periods as an error-level log line, a counted failure in
# /metrics and a "deny" canary record in the audit. Own range
# 10.245.0.0/16, prefix t465-, table airlock_t465.
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=465
CT_LAUNCHER_EXTRA='  canary: 1s'
. "$top_srcdir/tests/integration/contain-lib.sh"
ct_start

i=0
until grep -q 'canary: sandbox .*: every containment check passes' "$T/airlockd.log"; do
	i=$((i + 1)); [ $i -le 300 ] || fail "no periodic canary within 30 s"; sleep 0.1
done
ok "periodic canary on a warm sandbox: every check passes"

nft insert rule inet airlock_t465 from_sandbox meta l4proto udp accept ||
    hard_error "cannot loosen the nft rules"
i=0
until grep -q 'error: sandbox .*: containment check udp_gateway_canary FAILED' "$T/airlockd.log"; do
	i=$((i + 1)); [ $i -le 300 ] || fail "the loosened rule was not reported within 30 s"; sleep 0.1
done
n=$(curl -sS --unix-socket "$T/state/admin.sock" \
    -H "Authorization: Bearer $(cat "$T/state/admin.token")" \
    http://airlock/metrics | awk '$1 == "airlock_canary_failures_total" {print $2}')
[ "${n:-0}" -ge 1 ] || fail "airlock_canary_failures_total: $n"
ok "loosened rule: reported by the periodic canary (log, $n failure(s) counted)"

ct_stop
"$PYTHON" - <<'PY' || fail "audit"
import json, os
recs = [json.loads(l) for l in open(os.environ["T"] + "/audit.jsonl")]
c = [r for r in recs if r.get("proto") == "canary"]
assert any(r["decision"] == "allow" for r in c), c
assert any(r["decision"] == "deny" and "udp_gateway_canary" in r["reason"] for r in c), c
print("ok - audit: passing and failing periodic canary records")
PY
finish
