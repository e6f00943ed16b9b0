#!/bin/sh
# Issue 24, points 5 and 6: DNS names per sandbox. Each sandbox's names
# hold their synthetic addresses for as long as it lives (another sandbox
# filling its own share cannot repoint them), launcher.dns.max_names
# bounds its distinct names (REFUSED past it, audited), and under a
# wildcard rule launcher.dns.new_names_per_minute bounds the new names it
# may invent (each new one audited). Own range 10.243.0.0/16, prefix
# t463-, table airlock_t463.
. "$top_srcdir/tests/integration/lib.sh"
CT_NUM=463
CT_POOL='{warm: 2, max: 6}'
CT_LAUNCHER_EXTRA='  dns_pool: 198.51.100.0/28
  dns: {max_names: 8, new_names_per_minute: 5}'
CT_RULES_EXTRA='      - {host: "a1.test"}
      - {host: "a2.test"}
      - {host: "a3.test"}
      - {host: "e1.test"}
      - {host: "e2.test"}
      - {host: "e3.test"}
      - {host: "e4.test"}
      - {host: "*.wild.test"}'
. "$top_srcdir/tests/integration/contain-lib.sh"
ct_start
# q.py NAME...: one A query each, "NAME RCODE ADDRESS"; with -w first,
# waits for a line on stdin and asks again
cat >"$T/q.py" <<'PY'
import socket, struct, sys
def q(name):
    m = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        m += bytes([len(label)]) + label.encode()
    m += b"\x00" + struct.pack(">HH", 1, 1)
    ns = open("/etc/resolv.conf").read().split()[1]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(m, (ns, 53))
    r = s.recv(512)
    rc, an = r[3] & 0x0F, struct.unpack(">H", r[6:8])[0]
    addr = socket.inet_ntoa(r[-4:]) if an else "-"
    print(name, rc, addr, flush=True)
args = sys.argv[1:]
wait = args and args[0] == "-w"
if wait:
    args = args[1:]
for n in args:
    q(n)
if wait:
    print("waiting", flush=True)
    sys.stdin.readline()
    for n in args:
        q(n)
PY
Q=$(cat "$T/q.py")

# sandbox A: three names, kept while B works
mkfifo "$T/a.fifo"
exec 8<>"$T/a.fifo"
"$AIRLOCKCTL" -c "$T/airlock.yaml" run -- python3 -c "$Q" -w a1.test a2.test a3.test <"$T/a.fifo" >"$T/a.out" 2>"$T/a.err" &
A_PID=$!
track_pid "$A_PID"
i=0
until grep -q waiting "$T/a.out"; do
	i=$((i + 1)); [ $i -le 200 ] || fail "sandbox A: $(cat "$T/a.err")"; sleep 0.1
done
grep -c ' 0 198\.51\.100\.' "$T/a.out" | grep -q '^3$' || fail "A's answers: $(cat "$T/a.out")"

# sandbox B: 5 new wildcard names pass, the 6th is over the rate; then
# exact names up to max_names 8, the 9th is over the bound
ctl run -- python3 -c "$Q" w1.wild.test w2.wild.test w3.wild.test w4.wild.test w5.wild.test secret-data-abc123.wild.test e1.test e2.test e3.test e4.test w1.wild.test >"$T/b.out" 2>"$T/b.err" ||
    fail "sandbox B: $(cat "$T/b.err")"
cat "$T/b.out"
for n in 1 2 3 4 5; do
	grep -q "^w$n.wild.test 0 198\.51\.100\." "$T/b.out" || fail "w$n: $(grep "^w$n\." "$T/b.out")"
done
grep -q '^secret-data-abc123.wild.test 5 -$' "$T/b.out" || fail "the 6th new wildcard name in a minute was not REFUSED"
for n in 1 2 3; do
	grep -q "^e$n.test 0 198\.51\.100\." "$T/b.out" || fail "e$n: $(grep "^e$n\." "$T/b.out")"
done
grep -q '^e4.test 5 -$' "$T/b.out" || fail "the 9th distinct name was not REFUSED (max_names 8)"
grep -q '^w1.wild.test 0 198\.51\.100\.' "$T/b.out" || fail "a name B has was refused"
ok "sandbox B: 5 new wildcard names, the 6th REFUSED (rate); 8 names, the 9th REFUSED (bound); known names still answered"

# sandbox C is not bound by B's share
ctl run -- python3 -c "$Q" e4.test >"$T/c.out" 2>&1 || fail "sandbox C: $(cat "$T/c.out")"
grep -q '^e4.test 0 198\.51\.100\.' "$T/c.out" || fail "C refused: $(cat "$T/c.out")"
ok "another sandbox still gets answers"

# A's names still map to their own addresses
echo go >&8
wait "$A_PID"; untrack_pid "$A_PID"
exec 8>&-
cat "$T/a.out"
for n in a1 a2 a3; do
	[ "$(grep -c "^$n.test 0 " "$T/a.out")" = 2 ] || fail "$n: $(grep "^$n\." "$T/a.out")"
	[ "$(grep "^$n.test 0 " "$T/a.out" | awk '{print $3}' | sort -u | wc -l)" = 1 ] ||
	    fail "$n changed address: $(grep "^$n\." "$T/a.out")"
done
# and no address stands for two names at once
awk '$2 == 0 {print $3, $1}' "$T/a.out" "$T/b.out" "$T/c.out" | sort -u | awk '{print $1}' | uniq -d >"$T/dup.out"
[ -s "$T/dup.out" ] && fail "an address given to two names: $(cat "$T/dup.out")"
ok "A's addresses unchanged after B and C, no address shared by two names"

# audit: each new wildcard name, the refusals with their reasons
ct_stop
"$PYTHON" - <<'PY' || fail "audit"
import json, os
recs = [json.loads(l) for l in open(os.environ["T"] + "/audit.jsonl")]
dns = [r for r in recs if r.get("proto") == "dns"]
new = [r for r in dns if "new name under a wildcard rule" in (r.get("reason") or "")]
assert sorted(r["host"] for r in new) == ["w%d.wild.test" % i for i in range(1, 6)], new
rate = [r for r in dns if r["host"] == "secret-data-abc123.wild.test"]
assert rate and rate[0]["decision"] == "deny" and "new_names_per_minute" in rate[0]["reason"], rate
bound = [r for r in dns if r["host"] == "e4.test" and r["decision"] == "deny"]
assert bound and "max_names" in bound[0]["reason"], bound
print("ok - audit: 5 new wildcard names, the rate and bound refusals with reasons")
PY
finish
