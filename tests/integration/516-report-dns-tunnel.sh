#!/bin/sh
# Report mode (issue 21.2) on the DNS stub and on raw transparent tunnels:
# a name no rule names is answered (decision allow, would_deny), a raw
# TCP connection no rule allows is relayed (to that name, to an IP
# literal, to a host whose rule limits methods), TLS to such a name is
# intercepted and its request forwarded, a SOCKS5 CONNECT no rule
# allows is let in (its HTTP request forwarded), each audited allow with
# would_deny and counted in airlock_would_deny_total. Still refused: a
# destination in a denied network (the guard) and a tunnel past the
# requests cap. Under on_unmatched: ask a raw tunnel is held (issue
# 21.1) and relayed once approved. Connections uid 65534 makes are redirected by nftables
# to the transparent listener as in 285; the DNS pool is in 127/8 so the
# test needs no route.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (nftables, setpriv); CI runs as root"
command -v nft >/dev/null 2>&1 || fail "nft not installed (scripts/install-deps.sh --test)"
command -v setpriv >/dev/null 2>&1 || fail "setpriv (util-linux) not found"
curl --help all 2>/dev/null | grep -q -- --unix-socket ||
    hard_error "curl without --unix-socket"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin
OPORT=$ORIGIN_PORT
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
TPORT=$(free_port)
DPORT=$(free_port)
S5=$(free_port)
POOL=127.77.$(($$ % 200 + 10))
TABLE=airlock_it_$$
export T OPORT DPORT POOL TLS_PORT

nft -f - <<NFT || fail "nft rules"
table ip $TABLE {
	chain out {
		type nat hook output priority -100; policy accept;
		meta skuid 65534 ip daddr 127.0.0.0/8 tcp dport { $OPORT, $TLS_PORT } redirect to :$TPORT
	}
}
NFT
_nft_cleanup()
{
	_nrc=$?
	nft delete table ip "$TABLE" 2>/dev/null
	(exit "$_nrc")
	_it_cleanup
}
trap _nft_cleanup EXIT
CTL=$top_builddir/src/airlockctl
[ -x "$CTL" ] || hard_error "$CTL not built"
NB=$T/nobody
mkdir "$NB" && chmod 0777 "$NB" && chmod 0711 "$T" || hard_error "mkdir $NB"

cat >"$T/airlock.yaml" <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", transparent: "127.0.0.1:$TPORT",
         dns: "127.0.0.1:$DPORT", socks5: "127.0.0.1:$S5"}
state_dir: $T/state
workers: 2
audit: {file: $T/audit.jsonl}
launcher: {dns_pool: $POOL.0/24, pool: {warm: 0}}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "evil.test": "127.0.0.1", "localhost": "127.0.0.1",
          "guard.test": "127.0.0.2"}
policies:
  - name: watch
    mode: report
    rules:
      - {host: "api.test", ports: [$OPORT], methods: [GET]}
  - name: asking
    on_unmatched: ask
    rules:
      - {host: "api.test", ports: [$OPORT], methods: [GET]}
  - name: capped
    mode: report
    caps: {requests: 1}
    rules:
      - {host: "api.test", ports: [$OPORT], methods: [GET]}
sandboxes:
  - {id: t1, policy: watch, token: "literal:unused-1", addresses: ["127.0.0.1"]}
  - {id: t2, policy: capped, token: "literal:unused-2", addresses: ["127.0.0.3"]}
  - {id: t3, policy: asking, token: "literal:unused-3", addresses: ["127.0.0.4"]}
YAML
start_airlockd "$T/airlock.yaml"
wait_admin
wait_port "$TPORT" 10 || fail "transparent listener not up"
metric()
{
	curl -sS --unix-socket "$T/state/admin.sock" -H "Authorization: Bearer $(cat "$T/state/admin.token")" \
	    http://airlock/metrics | sed -n 's/^airlock_would_deny_total //p'
}
wd0=$(metric)

# the DNS queries (as root, from 127.0.0.1: sandbox t1), then the raw
# tunnels as uid 65534 (redirected); "NAME ADDRESS" lines in $T/dns.out
"$PYTHON" - >"$T/dns.out" <<'PY' || fail "DNS queries"
import os, socket, struct
def q(name, qtype=1):
    m = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        m += bytes([len(label)]) + label.encode()
    m += b"\x00" + struct.pack(">HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(m, ("127.0.0.1", int(os.environ["DPORT"])))
    r = s.recv(512)
    rc, an = r[3] & 0x0F, struct.unpack(">H", r[6:8])[0]
    return rc, socket.inet_ntoa(r[-4:]) if an else "-"
for n in ("evil.test", "api.test", "guard.test"):
    rc, a = q(n)
    print(n, rc, a)
PY
cat "$T/dns.out"
EVIL=$(awk '$1 == "evil.test" && $2 == 0 {print $3}' "$T/dns.out")
API=$(awk '$1 == "api.test" && $2 == 0 {print $3}' "$T/dns.out")
GUARD=$(awk '$1 == "guard.test" && $2 == 0 {print $3}' "$T/dns.out")
case $EVIL in "$POOL".*) ok "DNS: a name no rule names is answered ($EVIL)" ;;
    *) check_fail "DNS evil.test: $(cat "$T/dns.out")" ;; esac
case $API$GUARD in "$POOL".*"$POOL".*) ;; *) check_fail "DNS: $(cat "$T/dns.out")" ;; esac

# raw tunnels (bytes neither TLS nor HTTP) as uid 65534, all from one
# process: "SRC DST first-line-back" (or "closed", "error ...") each; the
# last one, from sandbox t3 (on_unmatched: ask), waits for an approval
cat >"$NB/tun.py" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
for pair in sys.argv[2:]:
    src, dst = pair.split(",")
    t0 = time.time()
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    try:
        s.connect((dst, port))
        s.sendall(b"ping, not http\r\n\r\n")
        d = s.recv(200)
        r = d.decode("latin-1").split("\r\n")[0] if d else "closed"
    except OSError as e:
        r = "error %s" % e
    print(src, dst, r, "(%.1f s)" % (time.time() - t0), flush=True)
PY
chmod 0644 "$NB/tun.py"
setpriv --reuid=65534 --regid=65534 --clear-groups timeout 30 "$SYSPY" "$NB/tun.py" "$OPORT" \
    127.0.0.1,"$EVIL" 127.0.0.1,127.0.0.1 127.0.0.1,"$API" 127.0.0.1,"$GUARD" \
    127.0.0.3,127.0.0.1 127.0.0.3,127.0.0.1 127.0.0.4,"$EVIL" >"$T/tun.out" 2>&1 &
TUN_PID=$!
track_pid "$TUN_PID"
# the held tunnel: in the pending list as CONNECT, no path; approved
i=0
until "$CTL" -c "$T/airlock.yaml" --json pending >"$T/pending.json" 2>/dev/null &&
    grep -q '"sandbox": *"t3"' "$T/pending.json"; do
	i=$((i + 1)); [ $i -le 100 ] || break; sleep 0.1
done
HID=$("$PYTHON" -c 'import json, sys
p = [e for e in json.load(open(sys.argv[1]))["pending"] if e["sandbox"] == "t3"]
print(p[0]["id"] if p and p[0]["host"] == "evil.test" and not p[0].get("path") else "")' "$T/pending.json")
[ -n "$HID" ] && ok "on_unmatched: ask holds a raw tunnel (pending: evil.test, no path)" ||
    check_fail "raw tunnel not held: $(cat "$T/pending.json")"
[ -n "$HID" ] && "$CTL" -c "$T/airlock.yaml" approve "$HID" >/dev/null
wait_exit "$TUN_PID" 30
cat "$T/tun.out"
res() { awk -v s="$1" -v d="$2" -v n="${3:-1}" '$1 == s && $2 == d { if (++k == n) { $1 = $2 = ""; sub(/ \([0-9.]+ s\)$/, ""); print substr($0, 3) } }' "$T/tun.out"; }
for dst in "$EVIL" 127.0.0.1 "$API"; do
	case "$(res 127.0.0.1 "$dst")" in HTTP/1.1\ 4*) ok "report: raw tunnel to $dst relayed (the origin answered)" ;;
	    *) check_fail "raw tunnel to $dst: $(res 127.0.0.1 "$dst")" ;; esac
done
case "$(res 127.0.0.1 "$GUARD")" in closed|error*) ok "report: raw tunnel to a denied network closed" ;;
    *) check_fail "raw tunnel to guard.test: $(res 127.0.0.1 "$GUARD")" ;; esac
case "$(res 127.0.0.3 127.0.0.1 1)" in HTTP/1.1\ 4*) ;; *) check_fail "capped sandbox, first tunnel: $(res 127.0.0.3 127.0.0.1 1)" ;; esac
case "$(res 127.0.0.3 127.0.0.1 2)" in closed|error*|HTTP/1.1\ 402*) ok "report: the requests cap still refuses a tunnel ($(res 127.0.0.3 127.0.0.1 2))" ;;
    *) check_fail "capped sandbox, second tunnel: $(res 127.0.0.3 127.0.0.1 2)" ;; esac
case "$(res 127.0.0.4 "$EVIL")" in HTTP/1.1\ 4*) ok "approved raw tunnel relayed" ;;
    *) check_fail "approved raw tunnel: $(res 127.0.0.4 "$EVIL")" ;; esac

# TLS on the transparent listener to a host no rule names (localhost: a
# name the origin's certificate holds): intercepted with the sandbox's
# CA, the request in it forwarded
cp "$T/state/ca/t1/ca.crt" "$NB/ca.crt" && chmod 0644 "$NB/ca.crt"
code=$(setpriv --reuid=65534 --regid=65534 --clear-groups curl -sS -o /dev/null -w '%{http_code}' \
    --cacert "$NB/ca.crt" --resolve "localhost:$TLS_PORT:127.0.0.1" \
    "https://localhost:$TLS_PORT/tls" 2>"$T/tls.err")
case $code in 404|200) ok "report: transparent TLS to a host no rule names is intercepted ($code)" ;;
    *) check_fail "transparent TLS localhost: '$code' $(cat "$T/tls.err")" ;; esac

# SOCKS5: a CONNECT no rule allows gets the success reply, and the HTTP
# request in it is forwarded (judged again, in report mode too)
code=$(curl -sS --socks5-hostname "t1:unused-1@127.0.0.1:$S5" -o /dev/null \
    -w '%{http_code}' "http://evil.test:$OPORT/s5" 2>"$T/s5.err")
case $code in 404|200) ok "report: SOCKS5 to a host no rule allows is let in ($code)" ;;
    *) check_fail "SOCKS5 evil.test: '$code' $(cat "$T/s5.err")" ;; esac

wd1=$(metric)
[ -n "$wd1" ] && [ $((wd1 - ${wd0:-0})) -ge 10 ] &&
    ok "airlock_would_deny_total counts them ($wd0 -> $wd1)" ||
    check_fail "airlock_would_deny_total $wd0 -> $wd1"

"$PYTHON" - <<'PY' || check_fail "audit records"
import json, os, time
path = os.environ["T"] + "/audit.jsonl"
port = int(os.environ["OPORT"])
def recs():
    return [json.loads(l) for l in open(path)]
def want(pred, what):
    end = time.time() + 5
    while time.time() < end:
        m = [r for r in recs() if pred(r)]
        if m:
            return m
        time.sleep(0.1)
    raise SystemExit("no record: %s\n%s" % (what, "\n".join(map(json.dumps, recs()))))
d = want(lambda r: r.get("proto") == "dns" and r.get("host") == "evil.test", "dns")[0]
assert d["decision"] == "allow" and d["would_deny"] == "host evil.test is not allowed", d
d = want(lambda r: r.get("proto") == "dns" and r.get("host") == "api.test", "dns api")[0]
assert d["decision"] == "allow" and "would_deny" not in d, d
tun = lambda h, sb="t1": want(lambda r: r.get("proto") == "tunnel" and r.get("host") == h
                              and r.get("sandbox") == sb and r.get("port") == port, h)
r = tun("evil.test")[0]
assert r["decision"] == "allow" and r["would_deny"] == "host evil.test is not allowed" \
    and r["bytes_out"] > 0 and "rule" not in r, r
r = tun("127.0.0.1")[0]
assert r["decision"] == "allow" and "is not allowed" in r["would_deny"] and r["bytes_out"] > 0, r
r = tun("api.test")[0]
assert r["decision"] == "allow" and "limits methods or paths" in r["would_deny"] \
    and r["bytes_out"] > 0 and "rule" not in r, r
r = tun("guard.test")[0]
assert r["decision"] == "deny" and "denied network" in r.get("reason", ""), r
c = tun("127.0.0.1", "t2")
# records come in the order the tunnels ended, not began
assert len(c) == 2 and sorted(r["decision"] for r in c) == ["allow", "deny"], c
r = want(lambda r: r.get("mode") == "socks5" and r.get("path") == "/s5", "socks5")[0]
assert r["decision"] == "allow" and r["would_deny"] == "host evil.test is not allowed", r
r = want(lambda r: r.get("proto") == "https" and r.get("path") == "/tls", "tls")[0]
assert r["mode"] == "transparent" and r["tls"] == "intercept" and \
    r["decision"] == "allow" and r["would_deny"] == "host localhost is not allowed", r
r = tun("evil.test", "t3")[0]
assert r["decision"] == "allow" and "would_deny" not in r and r["bytes_out"] > 0, r
print("ok - audit: DNS and tunnels allow + would_deny; guard and cap deny; "
      "the approved tunnel allow")
PY
stop_airlockd
finish
