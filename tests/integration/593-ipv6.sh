#!/bin/sh
# IPv6 parity (issue 23 point 3): the explicit and SOCKS5 listeners on
# [::1]; upstreams over IPv6 (plain and HTTPS, audited as [IP]:PORT);
# every IPv6 deny range of SPEC refused, the IPv4-embedding ones by the
# IPv4 address they carry; a name with both families (a DNS server of
# this test as upstream.resolver) reaches an origin that listens on only
# one of them, whichever it is, the families tried in turn.
. "$top_srcdir/tests/integration/lib.sh"

"$PYTHON" -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null ||
    skip "no IPv6 loopback on this machine"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
P=$T/pki
# start_origin6 NAME [ARGS]: the origin on [::1] (start_origin waits on
# 127.0.0.1); its port file is written once it listens
start_origin6()
{
	rm -f "$T/$1.port"
	_n=$1
	shift
	"$ORIGIN" -a ::1 -p 0 -P "$T/$_n.port" -l "$T/$_n.log" "$@" 2>"$T/$_n.err" &
	track_pid $!
	_i=0
	while [ ! -s "$T/$_n.port" ]; do
		_i=$((_i + 1))
		[ "$_i" -le 200 ] || hard_error "origin on [::1] did not start: $(cat "$T/$_n.err")"
		sleep 0.05
	done
	ORIGIN_PORT=$(cat "$T/$_n.port")
}
start_origin6 tls6 -C "$P/good.crt" -K "$P/good.key"
TLS6=$ORIGIN_PORT
start_origin6 plain6
PLAIN6=$ORIGIN_PORT
start_origin plain4 -a 127.0.0.1
PLAIN4=$ORIGIN_PORT
start_py_upstream dns dns_dual.py "dual.test=::1,127.0.0.1" "dual64.test=127.0.0.1,::1"
DNSP=$PY_PORT
AP=$(free_port)
S5=$(free_port)
{
	echo "listen: {proxy: \"[::1]:$AP\", socks5: \"[::1]:$S5\"}"
	echo "state_dir: $T/state"
	echo "workers: 2"
	echo "audit: {file: $T/audit.jsonl}"
	cat <<YAML
upstream:
  ca_file: $P/ca.crt
  resolver: "127.0.0.1:$DNSP"
  allow_networks: ["::1/128", "127.0.0.1/32"]
  hosts: {"api.test": "::1", "v6.test": "::1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS6]}
      - {host: "v6.test", ports: [$PLAIN6]}
      - {host: "dual.test", ports: [$PLAIN4, $PLAIN6]}
      - {host: "dual64.test", ports: [$PLAIN4, $PLAIN6]}
      - {host: "*", ports: [80]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
"$AIRLOCKD" -c "$T/airlock.yaml" >>"$T/airlockd.out" 2>>"$T/airlockd.log" &
AIRLOCK_PID=$!
track_pid $AIRLOCK_PID
"$PYTHON" -c '
import socket, sys, time
end = time.time() + 20
while time.time() < end:
    try:
        socket.create_connection(("::1", int(sys.argv[1])), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)' "$AP" || hard_error "airlockd did not listen on [::1]:$AP"
X="http://a:tok-a@[::1]:$AP"
CA=$T/state/ca/a/ca.crt

code=$(curl -sS -x "$X" -o "$T/b1" -w '%{http_code}' "http://v6.test:$PLAIN6/echo" 2>"$T/b1.err")
code2=$(curl -sS -x "$X" --cacert "$CA" -o "$T/b2" -w '%{http_code}' "https://api.test:$TLS6/json/9" 2>"$T/b2.err")
sleep 0.3
if [ "$code" = 200 ] && [ "$code2" = 200 ] &&
    grep -q "\"client\":\"\[::1\]:[0-9]*\".*\"path\":\"/json/9\".*\"upstream\":\"\[::1\]:$TLS6\"" "$T/audit.jsonl"; then
	ok "[::1] listener to [::1] upstreams: plain and HTTPS 200, audited as [::1]:PORT"
else
	check_fail "IPv6 both ways: '$code' '$code2' $(cat "$T/b1.err" "$T/b2.err")"
fi

code=$(curl -sS --socks5-hostname "a:tok-a@[::1]:$S5" -o "$T/b3" -w '%{http_code}' \
    "http://v6.test:$PLAIN6/echo" 2>"$T/b3.err")
if [ "$code" = 200 ]; then
	ok "the SOCKS5 listener on [::1]: 200"
else
	check_fail "SOCKS5 on [::1]: '$code' $(cat "$T/b3.err")"
fi

# both families in the answer, the origin on one: the other is refused at
# once and the next address, of the other family, serves
code=$(curl -sS -x "$X" -o /dev/null -w '%{http_code}' "http://dual.test:$PLAIN4/size/4" 2>"$T/b4.err")
code2=$(curl -sS -x "$X" -o /dev/null -w '%{http_code}' "http://dual.test:$PLAIN6/size/5" 2>"$T/b5.err")
code3=$(curl -sS -x "$X" -o /dev/null -w '%{http_code}' "http://dual64.test:$PLAIN6/size/6" 2>"$T/b6.err")
sleep 0.3
if [ "$code" = 200 ] && [ "$code2" = 200 ] && [ "$code3" = 200 ] &&
    grep -q "\"path\":\"/size/4\".*\"upstream\":\"127.0.0.1:$PLAIN4\"" "$T/audit.jsonl" &&
    grep -q "\"path\":\"/size/5\".*\"upstream\":\"\[::1\]:$PLAIN6\"" "$T/audit.jsonl" &&
    grep -q "\"path\":\"/size/6\".*\"upstream\":\"\[::1\]:$PLAIN6\"" "$T/audit.jsonl"; then
	ok "a name with A and AAAA: the origin reached on whichever family it listens on"
else
	check_fail "dual-stack fallback: '$code' '$code2' '$code3' $(cat "$T/b4.err" "$T/b5.err")"
fi

# every IPv6 deny range of SPEC, literal in the request (rule "*" port 80)
AP=$AP "$PYTHON" - <<'PY' || check_fail "IPv6 deny ranges"
import base64, os, socket, itlib
t = itlib.Checks()
ap = int(os.environ["AP"])
auth = base64.b64encode(b"a:tok-a").decode()
cases = ["::", "100::1", "2001:db8::1", "fc00::1", "fd12:3456::1", "fe80::1",
         "ff02::1", "::ffff:10.0.0.1", "::ffff:192.168.1.1", "::10.0.0.1",
         "64:ff9b::a00:1", "2002:a00:1::1", "2001:0:4136:e378:8000:63bf:f5ff:fffe",
         "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe"]
bad = []
for a in cases:
    s = socket.create_connection(("::1", ap), timeout=10)
    s.sendall(("GET http://[%s]/ HTTP/1.1\r\nHost: [%s]\r\nProxy-Authorization: Basic %s\r\n"
               "Connection: close\r\n\r\n" % (a, a, auth)).encode())
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    if not (data.startswith(b"HTTP/1.1 403") and b"denied network" in data):
        bad.append((a, data[:200]))
t.ok(not bad, "%d IPv6 destinations in denied ranges (IPv4-embedding ones included): all 403 denied network" % len(cases), bad)
t.done()
PY
finish
