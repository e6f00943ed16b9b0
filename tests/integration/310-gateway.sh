#!/bin/sh
# Gateway mode end to end (issue 7): airlockd as root with
# launcher.backend netns launches sandboxes whose only route leads to the
# gateway. Inside one, with no proxy settings, curl and python reach an
# allowed HTTPS upstream (on the host's loopback, allowed through
# allow_networks) by name through the DNS stub, with the secret attached;
# other addresses, ports and UDP go nowhere; a name outside the policy is
# NXDOMAIN; no secret value is in the environment or any file; the admin
# socket is unreachable; claim/delete cycles leave nothing behind. Own
# address range (10.233.0.0/16), interface prefix (t310-) and nft table.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (namespaces, nftables); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
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
# the gateway drops root to 65533 after setup: its state_dir must be
# reachable for it (and the CA files readable for the test's checks)
chmod 0711 "$T"

_gw_cleanup()
{
	_grc=$?
	[ -n "${AIRLOCK_PID:-}" ] && kill -TERM "$AIRLOCK_PID" 2>/dev/null &&
	    wait_exit "$AIRLOCK_PID" 20
	nft delete table inet airlock_t310 2>/dev/null
	(exit "$_grc")
	_it_cleanup
}
trap _gw_cleanup EXIT

{
	cat <<YAML
listen:
  proxy: "127.0.0.1:$AIRLOCK_PORT"
  transparent: "10.233.0.1:$TPORT"
  dns: "10.233.0.1:$DPORT"
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
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
  backend: netns
  network: 10.233.0.0/16
  interface_prefix: "t310-"
  pool: {warm: 2, max: 8}
policies:
  - name: default
    rules:
      - {host: "api.test", ports: [$TLS_PORT], secrets: [k]}
YAML
} >"$T/airlock.yaml"
"$AIRLOCKD" -c "$T/airlock.yaml" >>"$T/airlockd.out" 2>>"$T/airlockd.log" &
AIRLOCK_PID=$!
track_pid "$AIRLOCK_PID"
wait_port "$AIRLOCK_PORT" 20 "$AIRLOCK_PID" || hard_error "airlockd did not start"
ctl() { "$AIRLOCKCTL" -c "$T/airlock.yaml" "$@"; }

# the host side: one static table, the gateway address, no forwarding
nft list table inet airlock_t310 >"$T/nft.txt" 2>&1 || fail "no nft table: $(cat "$T/nft.txt")"
grep -q 'iifname "t310-' "$T/nft.txt" || fail "rules do not match t310-*: $(cat "$T/nft.txt")"
ok "host rules and gateway address set up"

# inside: by name, no proxy settings, the secret attached by the gateway
ctl run -- sh -c "env | grep -ci proxy; curl -sS -m 10 https://api.test:$TLS_PORT/echo" >"$T/run1.out" 2>"$T/run1.err" ||
    fail "airlockctl run (curl): $(cat "$T/run1.err")"
[ "$(head -1 "$T/run1.out")" = 0 ] || fail "proxy variables inside the sandbox: $(cat "$T/run1.out")"
grep -qi '^x-api-key: \[airlock:redacted' "$T/run1.out" ||
    fail "secret not attached (or not redacted on the way back): $(cat "$T/run1.out")"
grep -q "$SECRET" "$T/run1.out" && fail "the secret value reached the sandbox"
ok "curl inside: https://api.test by name, secret attached, no proxy settings"

ctl run -- python3 -c "
import json, ssl, urllib.request
r = urllib.request.urlopen('https://api.test:$TLS_PORT/size/10', timeout=10)
print(r.status)" >"$T/run2.out" 2>"$T/run2.err" || fail "python inside: $(cat "$T/run2.err")"
[ "$(cat "$T/run2.out")" = 200 ] || fail "python urllib inside: $(cat "$T/run2.out")"
ok "python urllib inside: 200 through the sandbox CA bundle"

# what must not work from inside
ctl run -- python3 - >"$T/run3.out" 2>"$T/run3.err" <<'PY' || fail "probes: $(cat "$T/run3.err")"
import os, socket, struct

def tcp(host, port):
    try:
        s = socket.create_connection((host, port), timeout=3)
        s.sendall(b"hello\r\n")
        data = s.recv(100)
        return "open:%r" % data if data else "closed"
    except OSError as e:
        return "err:%s" % e.__class__.__name__

def dns(name, qtype=1):
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", qtype, 1)
    ns = open("/etc/resolv.conf").read().split()[1]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (ns, 53))
    r = s.recv(512)
    return r[3] & 0x0F, struct.unpack(">H", r[6:8])[0]

print("direct-ip", tcp("203.0.113.10", 9))
print("gateway-other-port", tcp(open("/etc/resolv.conf").read().split()[1], 22))
print("nx", dns("evil.test"))
print("allowed", dns("api.test"))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"x" * 10, ("203.0.113.10", 9999))
PY
cat "$T/run3.out"
grep -q '^direct-ip \(closed\|err:\)' "$T/run3.out" || fail "direct TCP to an address no rule names"
grep -q '^gateway-other-port \(closed\|err:\)' "$T/run3.out" || fail "gateway ports other than the listeners"
grep -q '^nx (3, 0)' "$T/run3.out" || fail "NXDOMAIN for a name outside the policy"
grep -q '^allowed (0, 1)' "$T/run3.out" || fail "A answer for an allowed name"
ok "inside: other addresses and ports closed, NXDOMAIN outside the policy"

# no secret value anywhere the sandbox can read; no admin socket
ctl run -- sh -c "env; cat /proc/self/environ; grep -rslF -- '$SECRET' /etc /home /tmp /run /var /root 2>/dev/null; ls -d '$T/state' 2>&1; ls '$T' 2>&1; python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('$T/state/admin.sock')\" 2>/dev/null && echo ADMIN-REACHABLE" >"$T/run4.out" 2>&1
grep -q ADMIN-REACHABLE "$T/run4.out" && fail "the admin socket is reachable inside"
grep -q -- "$SECRET" "$T/run4.out" && fail "a secret value is readable inside: $(grep -- "$SECRET" "$T/run4.out" | head -3)"
grep -q 'admin.sock' "$T/run4.out" && fail "the admin socket is visible inside"
ok "no secret value in the environment or files; state_dir and admin socket hidden"

# claim/delete cycles leave no link, namespace or process behind: every
# t310- link belongs to a sandbox the gateway still has (warm or claimed;
# the forecast may keep one more warm after a burst)
for i in $(seq 1 30); do
	ctl run -- true >/dev/null 2>&1 || fail "run cycle $i"
done
sandboxes_with_links()
{
	ctl --json sandbox list | "$PYTHON" -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)["sandboxes"]
          if s["state"] in ("warm", "launched")))'
}
i=0
while links=$(ip -o link | grep -c 't310-'); sbx=$(sandboxes_with_links);
    [ "$links" != "$sbx" ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "$links t310- links for $sbx sandboxes"
	sleep 0.1
done
ok "30 run cycles: $links links for $sbx sandboxes, nothing else left"

# audit: DNS queries and transparent connections are recorded
kill -TERM "$AIRLOCK_PID"; wait_exit "$AIRLOCK_PID" 30; AIRLOCK_PID=
"$PYTHON" - <<'PY' || fail "audit"
import json, os
recs = [json.loads(l) for l in open(os.environ["T"] + "/audit.jsonl")]
dns = [r for r in recs if r.get("proto") == "dns"]
assert any(r["host"] == "evil.test" and r["decision"] == "deny" for r in dns), dns
assert any(r["host"] == "api.test" and r["decision"] == "allow" for r in dns), dns
tr = [r for r in recs if r.get("mode") == "transparent" and r.get("proto") == "https"]
assert any(r["status"] == 200 and r["secrets"] == ["k"] for r in tr), tr
assert not any(os.environ["SECRET"] in json.dumps(r) for r in recs)
print("ok - audit: dns and transparent records, no secret value")
PY
[ "$(ip -o link | grep -c 't310-')" = 0 ] || sleep 2
[ "$(ip -o link | grep -c 't310-')" = 0 ] || fail "links left after shutdown"
nft list table inet airlock_t310 >/dev/null 2>&1 && fail "nft table left after shutdown"
ok "shutdown removed every sandbox and the host rules"
finish
