#!/bin/sh
# Issue 24, point 7: the escape canary. `airlockctl sandbox probe ID`
# (POST /v1/sandboxes/ID/probe) runs the fixed containment checks inside a
# netns sandbox: TCP and UDP (a DNS query) to canaries the launcher
# listens on at the gateway address outside the transparent and DNS
# ports, TCP to one on the host's loopback, TCP and UDP to canaries in
# another sandbox (on its address), unshare, raw sockets, the masked host
# paths (config dir, state_dir, secret file). All pass; then
# the test loosens the sandbox's nft rules on purpose (UDP to the gateway
# accepted) and the UDP check fails: reported in the JSON, by airlockctl's
# exit status, in airlock_canary_failures_total, in the audit (proto
# canary, decision deny) and in the log at error level. Own range
# 10.244.0.0/16, prefix t464-, table airlock_t464. Also launcher.io_uring.
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=464
# (and launcher.io_uring: the filter leaves io_uring alone; 460 checks the
# default, EPERM)
CT_LAUNCHER_EXTRA='  io_uring: true'
# two warm sandboxes: the probe puts canaries in the other one too
CT_POOL='{warm: 2, max: 4}'
. "$top_srcdir/tests/integration/contain-lib.sh"
ct_start

ctl run -- python3 -c '
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(425, 1, 0)
for l in open("/proc/self/status"):
    if l.startswith("Seccomp:"):
        print(l.strip())
print("io_uring_setup", errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok")
' >"$T/uring.out" 2>&1 || fail "io_uring probe: $(cat "$T/uring.out")"
grep -q '^Seccomp:.*2$' "$T/uring.out" || fail "no filter: $(cat "$T/uring.out")"
grep -q '^io_uring_setup EPERM$' "$T/uring.out" && fail "io_uring refused with launcher.io_uring: true"
ok "launcher.io_uring: true: io_uring_setup reaches the kernel ($(grep io_uring_setup "$T/uring.out")), the rest of the filter stays"
SOCK=$T/state/admin.sock

metric()
{
	curl -sS --unix-socket "$SOCK" \
	    -H "Authorization: Bearer $(cat "$T/state/admin.token")" \
	    http://airlock/metrics | awk -v m="$1" '$1 == m {print $2}'
}

# a sandbox of the pool, once there are two
i=0
until id=$(ctl --json sandbox list | "$PYTHON" -c '
import json, sys
s = [x["id"] for x in json.load(sys.stdin)["sandboxes"] if x["state"] in ("warm", "launched")]
print(s[0]) if len(s) >= 2 else sys.exit(1)') 2>/dev/null; do
	i=$((i + 1)); [ $i -le 100 ] || fail "no warm sandbox"; sleep 0.2
done

ctl sandbox probe "$id" >"$T/p1.out" 2>&1 || fail "probe of a sound sandbox failed: $(cat "$T/p1.out")"
cat "$T/p1.out"
for c in tcp_gateway_canary udp_gateway_canary tcp_host_loopback unshare raw_socket host_paths tcp_other_sandbox udp_other_sandbox; do
	grep -q "^$c  *pass$" "$T/p1.out" || fail "check $c: $(cat "$T/p1.out")"
done
[ "$(metric airlock_canary_failures_total)" = 0 ] || fail "failures counted for a sound sandbox"
ok "probe: all eight containment checks pass (canaries in another sandbox too); airlock_canary_failures_total 0"

# loosen the rules on purpose: UDP from sandboxes to the gateway accepted
nft insert rule inet airlock_t464 from_sandbox meta l4proto udp accept ||
    hard_error "cannot loosen the nft rules"
ctl --json sandbox probe "$id" >"$T/p2.json" 2>"$T/p2.err" && fail "probe passed with a loosened rule: $(cat "$T/p2.json")"
cat "$T/p2.json"
"$PYTHON" - "$T/p2.json" <<'PY' || fail "probe JSON"
import json, sys
o = json.load(open(sys.argv[1]))
res = {c["name"]: c["pass"] for c in o["checks"]}
assert res["udp_gateway_canary"] is False, res
assert all(v for k, v in res.items() if k != "udp_gateway_canary"), res
assert o["failures"] == 1 and o["passed"] is False, o
PY
[ "$(metric airlock_canary_failures_total)" = 1 ] || fail "airlock_canary_failures_total: $(metric airlock_canary_failures_total)"
grep -q "error: sandbox $id: containment check udp_gateway_canary FAILED" "$T/airlockd.log" ||
    fail "no error line in the log"
ok "loosened nft rule: udp_gateway_canary fails, reported in JSON, exit status, metrics and log"

# the rule back: passes again
h=$(nft -a list chain inet airlock_t464 from_sandbox | awk '/meta l4proto udp accept/ {print $NF}')
nft delete rule inet airlock_t464 from_sandbox handle "$h" || hard_error "cannot restore the rules"
ctl sandbox probe "$id" >"$T/p3.out" 2>&1 || fail "probe after the fix: $(cat "$T/p3.out")"
ok "rule restored: all checks pass again"

# a bad id, an unknown sandbox
ctl sandbox probe nosuch >"$T/p4.out" 2>&1 && fail "probe of an unknown sandbox succeeded"
ct_stop
"$PYTHON" - "$id" <<'PY' || fail "audit"
import json, os, sys
recs = [json.loads(l) for l in open(os.environ["T"] + "/audit.jsonl")]
c = [r for r in recs if r.get("proto") == "canary"]
assert [r["decision"] for r in c] == ["allow", "deny", "allow"], c
assert all(r["sandbox"] == sys.argv[1] for r in c), c
assert "udp_gateway_canary" in c[1]["reason"], c[1]
print("ok - audit: one canary record per probe, the failure named")
PY
finish
