#!/bin/sh
# launcher.backend qemu end to end (issue 9): airlockd as root launches
# qemu microVMs (TCG here: /dev/kvm on these machines is paravirtual and
# accel auto must find that out) booting the project's guest image, behind
# the same scheduler, pool, admin API and airlockctl run as netns. Inside a
# VM, with no proxy settings, curl reaches an allowed HTTPS upstream by name
# through the gateway with the secret attached; other addresses, ports and
# names go nowhere; exit codes and stderr come back; a warm VM waits paused
# and a claim resumes it; a claimed VM left idle is paused, keeps its state
# and is resumed on its next run; memory pressure evicts a paused VM; a VM
# that never gets ready is killed at boot_timeout with nothing left behind.
# Own address range (10.235/16, 10.236/16), interface prefixes (t325-,
# t326-) and nft tables.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (taps, nftables); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
    skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh installs qemu-system-x86)"
GUEST=$top_builddir/guest
if [ ! -f "$GUEST/vmlinux" ] || [ ! -f "$GUEST/initramfs.cpio" ]; then
	make -C "$top_builddir" guest-image >"$T/guest.log" 2>&1 ||
	    hard_error "make guest-image: $(tail -5 "$T/guest.log")"
fi
AIRLOCKCTL=$top_builddir/src/airlockctl
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
TPORT=$(free_port)
DPORT=$(free_port)
SECRET=real-secret-$$-$(date +%s)
export T TLS_PORT SECRET
chmod 0711 "$T"

_vm_cleanup()
{
	_grc=$?
	[ -n "${AIRLOCK_PID:-}" ] && kill -TERM "$AIRLOCK_PID" 2>/dev/null &&
	    wait_exit "$AIRLOCK_PID" 30
	nft delete table inet airlock_t325 2>/dev/null
	nft delete table inet airlock_t326 2>/dev/null
	(exit "$_grc")
	_it_cleanup
}
trap _vm_cleanup EXIT

# config PREFIX NET INITRD BOOT_TIMEOUT
config()
{
	cat <<YAML
listen:
  proxy: "127.0.0.1:$AIRLOCK_PORT"
  transparent: "$2.0.1:$TPORT"
  dns: "$2.0.1:$DPORT"
state_dir: $T/state-$1
workers: 2
audit: {file: $T/audit-$1.jsonl}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
secrets:
  - name: k
    source: literal:$SECRET
    hosts: ["api.test"]
    inject: {header: X-Api-Key, value: "\${secret}"}
    placeholder: "airlock:k"
    sandbox_env: API_KEY
launcher:
  backend: qemu
  network: $2.0.0/16
  interface_prefix: "$1-"
  pool: {warm: 1, max: 4, idle_timeout: 3s}
  qemu: {kernel: "$GUEST/vmlinux", initrd: "$3", memory: 256MiB,
         accel: auto, boot_timeout: $4}
policies:
  - name: default
    rules:
      - {host: "api.test", ports: [$TLS_PORT], secrets: [k]}
YAML
}

config t325 10.235 "$GUEST/initramfs.cpio" 120s >"$T/airlock.yaml"
"$AIRLOCKD" -c "$T/airlock.yaml" >>"$T/airlockd.out" 2>>"$T/airlockd.log" &
AIRLOCK_PID=$!
track_pid "$AIRLOCK_PID"
wait_port "$AIRLOCK_PORT" 30 "$AIRLOCK_PID" || hard_error "airlockd did not start: $(tail -5 "$T/airlockd.log")"
ctl() { "$AIRLOCKCTL" -c "$T/airlock.yaml" "$@"; }
grep -q "qemu accel auto: .*TCG\|qemu accel auto: KVM probe passed" "$T/airlockd.log" ||
    fail "accel auto made no decision: $(grep -i accel "$T/airlockd.log")"
note "$(grep 'accel auto' "$T/airlockd.log" | tail -1)"

# the warm VM boots, then waits paused
"$PYTHON" - <<'PY' || fail "warm pool: $(tail -5 "$T/airlockd.log")"
import os, time
import adminlib as A
T = os.environ["T"]
addr, tok = "unix:%s/state-t325/admin.sock" % T, A.token(T + "/state-t325")
deadline = time.time() + 180
while time.time() < deadline:
    st, h, b = A.call(addr, "GET", "/v1/sandboxes", token=tok)
    warm = [s for s in b["sandboxes"] if s["state"] == "warm"]
    if warm and warm[0].get("paused"):
        break
    time.sleep(0.2)
else:
    raise SystemExit("no paused warm VM after 180 s: %r" % b)
print("ok - a warm VM booted and waits paused")
PY
link=$(ip -o link show | grep -o 't325-[0-9]*' | head -1)
[ -n "$link" ] || fail "no t325- tap"
ip -d link show "$link" | grep -q 'tun type tap' || fail "$link is not a tap: $(ip -d link show "$link")"
qpid=$(pgrep -f 'qemu-system-x86_64.*airlock_t325' | head -1)
[ -n "$qpid" ] || fail "no qemu process"
[ "$(ps -o uid= -p "$qpid" | tr -d ' ')" = 65534 ] || fail "qemu runs as uid $(ps -o uid= -p "$qpid")"
ok "VM on tap $link, qemu as uid 65534"

# inside: by name, no proxy settings, the secret attached by the gateway
ctl run -- sh -c "env | grep -ci proxy; curl -sS -m 30 https://api.test:$TLS_PORT/echo" >"$T/run1.out" 2>"$T/run1.err" ||
    fail "airlockctl run (curl): $(cat "$T/run1.err")"
[ "$(head -1 "$T/run1.out")" = 0 ] || fail "proxy variables inside the VM: $(cat "$T/run1.out")"
grep -qi '^x-api-key: \[airlock:redacted' "$T/run1.out" ||
    fail "secret not attached (or not redacted on the way back): $(cat "$T/run1.out")"
grep -q "$SECRET" "$T/run1.out" && fail "the secret value reached the VM"
ok "curl inside a VM: https://api.test by name, secret attached, no proxy settings"

# what must not work from inside; exit codes and stderr come back
ctl run -- sh -c "
curl -sSf -m 5 http://203.0.113.10:9/ >/dev/null 2>&1; echo direct=\$?
curl -sSf -m 5 http://10.235.0.1:22/ >/dev/null 2>&1; echo gwport=\$?
curl -sS -m 10 https://evil.test/ >/dev/null 2>&1; echo nx=\$?
ip route | grep -c default
echo to-stderr >&2; exit 7" >"$T/run2.out" 2>"$T/run2.err"
rc=$?
cat "$T/run2.out"
[ "$rc" = 7 ] || fail "exit code $rc, wanted 7: $(cat "$T/run2.err")"
grep -q '^to-stderr$' "$T/run2.err" || fail "stderr not relayed: $(cat "$T/run2.err")"
grep -q '^direct=0$' "$T/run2.out" && fail "direct egress to 203.0.113.10 worked"
grep -q '^direct=[0-9]' "$T/run2.out" || fail "no result for direct egress"
grep -q '^gwport=0$' "$T/run2.out" && fail "gateway port 22 reachable"
grep -q '^nx=6$' "$T/run2.out" || fail "an unlisted name resolved (curl: $(grep nx= "$T/run2.out"))"
[ "$(sed -n 4p "$T/run2.out")" = 1 ] || fail "not exactly one default route"
ok "inside: direct egress and other gateway ports fail, unlisted names do not resolve, exit 7 and stderr relayed"

# a claimed VM left idle is paused, keeps its state, resumes on next use;
# then memory pressure (min_free above what any machine has) evicts it
"$PYTHON" - <<'PY' || fail "pause/resume: $(tail -5 "$T/airlockd.log")"
import os, subprocess, time
import adminlib as A
T = os.environ["T"]
addr, tok = "unix:%s/state-t325/admin.sock" % T, A.token(T + "/state-t325")
ctl = [os.environ["top_builddir"] + "/src/airlockctl", "-c", T + "/airlock.yaml"]

def warm_ready():
    st, h, b = A.call(addr, "GET", "/v1/sandboxes", token=tok)
    return any(s["state"] == "warm" and s.get("paused") for s in b["sandboxes"])
deadline = time.time() + 180
while not warm_ready():
    assert time.time() < deadline, "the pool did not refill"
    time.sleep(0.2)
t0 = time.monotonic()
st, h, b = A.call(addr, "POST", "/v1/sandboxes/claim", {"policy": "default"}, token=tok)
claim_ms = (time.monotonic() - t0) * 1000
assert st == 200 and b["backend"] == "qemu" and b["ctl_socket"] and b["warm"], (st, b)
sid = b["id"]
print("# claim: warm=%s in %.1f ms" % (b["warm"], claim_ms))

def run(*cmd):
    p = subprocess.run(ctl + ["run", "--sandbox", sid, "--"] + list(cmd),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr

# the agent kills the command's process group when it ends: a process of
# its own session stays (once it runs sleep, setsid is done)
rc, out, err = run("sh", "-c", "echo state-42 > /tmp/state; setsid sleep 9999 </dev/null >/dev/null 2>&1 & "
                   "until pidof sleep >/dev/null; do :; done; cat /proc/uptime")
assert rc == 0, (rc, out, err)
up1 = float(out.split()[0])

def show():
    st, h, b = A.call(addr, "GET", "/v1/sandboxes/" + sid, token=tok)
    assert st == 200, (st, b)
    return b

deadline = time.time() + 30
while not show().get("paused"):
    assert time.time() < deadline, "not paused 30 s after idle_timeout 3s"
    time.sleep(0.2)
qpid = show()["pid"]
def cpu():
    f = open("/proc/%d/stat" % qpid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
c1 = cpu(); time.sleep(2); c2 = cpu()
assert c2 - c1 <= 10, "a paused VM used %d ticks in 2 s" % (c2 - c1)
print("ok - idle claimed VM paused (%d CPU ticks in 2 s)" % (c2 - c1))

t0 = time.monotonic()
rc, out, err = run("sh", "-c", "cat /tmp/state; pidof sleep >/dev/null && echo sleeper-alive; cat /proc/uptime")
resume_ms = (time.monotonic() - t0) * 1000
assert rc == 0, (rc, out, err)
lines = out.split("\n")
assert lines[0] == "state-42" and lines[1] == "sleeper-alive", out
up2 = float(lines[2].split()[0])
assert not show().get("paused"), "still paused after the run"
print("ok - resumed on next use in %.0f ms: file and process kept (guest uptime %.1f -> %.1f s)"
      % (resume_ms, up1, up2))
PY

# memory pressure: a reload with min_free far above this machine's memory
sed 's/accel: auto, boot_timeout: 120s}/accel: auto, boot_timeout: 120s, min_free: 64TiB}/' \
    "$T/airlock.yaml" >"$T/airlock.yaml.new" && mv "$T/airlock.yaml.new" "$T/airlock.yaml"
grep -q 'min_free: 64TiB' "$T/airlock.yaml" || hard_error "sed"
ctl reload >/dev/null || fail "reload with min_free"
i=0
until grep -q 'evicted (memory pressure)' "$T/airlockd.log"; do
	i=$((i + 1))
	[ $i -le 150 ] || fail "no paused VM evicted under memory pressure"
	sleep 0.2
done
ok "memory pressure evicts the paused VM"

kill -TERM "$AIRLOCK_PID"; wait_exit "$AIRLOCK_PID" 60; AIRLOCK_PID=
"$PYTHON" - <<'PY' || fail "audit"
import json, os
recs = [json.loads(l) for l in open(os.environ["T"] + "/audit-t325.jsonl")]
dns = [r for r in recs if r.get("proto") == "dns"]
assert any(r["host"] == "evil.test" and r["decision"] == "deny" for r in dns), dns
tr = [r for r in recs if r.get("mode") == "transparent" and r.get("proto") == "https"]
assert any(r["status"] == 200 and r["secrets"] == ["k"] for r in tr), tr
direct = [r for r in recs if r.get("host") == "203.0.113.10"]
assert direct and all(r["decision"] == "deny" and "upstream" not in r for r in direct), direct
assert not any(os.environ["SECRET"] in json.dumps(r) for r in recs)
print("ok - audit: the VM's DNS and HTTPS recorded, direct egress denied, no secret value")
PY
sleep 0.5
[ "$(ip -o link | grep -c 't325-')" = 0 ] || fail "taps left after shutdown"
pgrep -f 'qemu-system-x86_64.*airlock_t325' && fail "qemu left after shutdown"
[ -e /run/airlock/airlock_t325 ] && fail "run directory left: $(ls -R /run/airlock/airlock_t325)"
nft list table inet airlock_t325 >/dev/null 2>&1 && fail "nft table left after shutdown"
ok "shutdown removed every VM, tap, run directory and the host rules"

# a guest that never gets ready: killed at boot_timeout, nothing left
mkdir -p "$T/hang/bin"
cp /bin/busybox "$T/hang/bin/busybox" 2>/dev/null || hard_error "no /bin/busybox (busybox-static)"
ln -s busybox "$T/hang/bin/sh"
ln -s busybox "$T/hang/bin/sleep"
printf '#!/bin/sh\nexec /bin/sleep 100000\n' >"$T/hang/init"
chmod 755 "$T/hang/init"
(cd "$T/hang" && find . | cpio -o -H newc --quiet >"$T/hang.cpio") || hard_error "cpio"
config t326 10.236 "$T/hang.cpio" 5s >"$T/hang.yaml"
sed -i 's/pool: {warm: 1,/pool: {warm: 0,/' "$T/hang.yaml"
"$AIRLOCKD" -c "$T/hang.yaml" >>"$T/airlockd-hang.out" 2>>"$T/airlockd-hang.log" &
AIRLOCK_PID=$!
track_pid "$AIRLOCK_PID"
wait_port "$AIRLOCK_PORT" 30 "$AIRLOCK_PID" || hard_error "airlockd (hang) did not start"
t0=$(date +%s)
"$AIRLOCKCTL" -c "$T/hang.yaml" run -- true >"$T/hang.out" 2>&1 &
RUNPID=$!
# while that cold claim waits for its VM, the admin API answers at once
sleep 1
"$PYTHON" - <<'PY' || fail "the admin API stalled during a cold VM claim"
import os, time
import adminlib as A
T = os.environ["T"]
t0 = time.monotonic()
st, h, b = A.call("unix:%s/state-t326/admin.sock" % T, "GET", "/healthz")
ms = (time.monotonic() - t0) * 1000
assert st == 200 and ms < 1000, (st, ms)
print("ok - /healthz answered in %.1f ms during a cold VM claim" % ms)
PY
wait "$RUNPID" && fail "a VM that never got ready ran a command"
t1=$(date +%s)
[ $((t1 - t0)) -ge 5 ] || fail "claim failed before boot_timeout ($((t1 - t0)) s): $(cat "$T/hang.out")"
grep -q 'not ready after 5000 ms' "$T/airlockd-hang.log" || fail "no boot timeout reported: $(tail -3 "$T/airlockd-hang.log")"
sleep 0.5
[ "$(ip -o link | grep -c 't326-')" = 0 ] || fail "tap left after a boot timeout"
pgrep -f 'qemu-system-x86_64.*airlock_t326' && fail "qemu left after a boot timeout"
[ -z "$(ls /run/airlock/airlock_t326 2>/dev/null)" ] || fail "files left: $(ls /run/airlock/airlock_t326)"
ok "a VM not ready within boot_timeout is killed: no tap, process or file left ($((t1 - t0)) s)"
kill -TERM "$AIRLOCK_PID"; wait_exit "$AIRLOCK_PID" 30; AIRLOCK_PID=
finish
