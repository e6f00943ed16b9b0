#!/bin/sh
# Reloads reach open connections on the transparent listener (issue 14,
# point 8), where the sandbox is the source address, identified once per
# connection. uid 65534's connections to the test's ports are redirected
# (nftables output rule, as in 285-transparent). From 127.0.0.1 (sandbox
# t1) and 127.0.0.2 (sandbox t2) it keeps open: a keep-alive plain HTTP
# connection, an intercepted TLS keep-alive session and a raw TCP tunnel
# to an echo server. A SIGHUP then gives t1 another address: t1's next
# HTTP and HTTPS requests are 403 (inside TLS for HTTPS), its raw tunnel
# is closed within limits.reload_grace (1s) and audited reload_revoked;
# t2's three go on.
. "$top_srcdir/tests/integration/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (nftables, setpriv)"
command -v nft >/dev/null 2>&1 || skip "nft not installed"
command -v setpriv >/dev/null 2>&1 || skip "setpriv (util-linux) not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin
HTTP_PORT=$ORIGIN_PORT
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
TPORT=$(free_port)
TABLE=airlock_it_$$
export T HTTP_PORT TLS_PORT TPORT

# the raw TCP upstream: echoes what it gets
"$PYTHON" - "$T/echo.port" <<'PY' 2>"$T/echo.err" &
import socket, sys, threading
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(ls.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])


def serve(c):
    while True:
        try:
            d = c.recv(65536)
        except OSError:
            break
        if not d:
            break
        c.sendall(d)
    c.close()


while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
track_pid $!
i=0
until [ -s "$T/echo.port" ]; do
	i=$((i + 1))
	[ "$i" -le 200 ] || hard_error "echo server: $(cat "$T/echo.err")"
	sleep 0.05
done
RAW_PORT=$(cat "$T/echo.port")
export RAW_PORT

nft -f - <<NFT || fail "nft rules"
table ip $TABLE {
	chain out {
		type nat hook output priority -100; policy accept;
		meta skuid 65534 ip daddr 127.0.0.0/8 tcp dport { $HTTP_PORT, $TLS_PORT, $RAW_PORT } redirect to :$TPORT
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
NB=$T/nobody
mkdir "$NB" && chmod 0777 "$NB" && chmod 0711 "$T" || hard_error "mkdir $NB"

# write_config T1_ADDRESS
write_config()
{
	{
		config_common "$AIRLOCK_PORT"
		cat <<YAML
limits: {reload_grace: 1s}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$HTTP_PORT, $TLS_PORT], paths: ["/echo"]}
      - {host: "127.0.0.0/24", ports: [$RAW_PORT]}
sandboxes:
  - {id: t1, policy: p, token: "literal:unused-1", addresses: ["$1"]}
  - {id: t2, policy: p, token: "literal:unused-2", addresses: ["127.0.0.2"]}
YAML
	} | sed "s|^listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\"}|listen: {proxy: \"127.0.0.1:$AIRLOCK_PORT\", transparent: \"127.0.0.1:$TPORT\"}|" \
	    >"$T/airlock.yaml.tmp"
	mv "$T/airlock.yaml.tmp" "$T/airlock.yaml"
}
write_config 127.0.0.1
grep -q "transparent: \"127.0.0.1:$TPORT\"" "$T/airlock.yaml" || fail "config"
start_airlockd "$T/airlock.yaml"
wait_port "$TPORT" 10 || fail "transparent listener not up"
wait_admin
export AIRLOCK_PID
for s in t1 t2; do
	cp "$T/state/ca/$s/ca.crt" "$NB/$s.crt" && chmod 0644 "$NB/$s.crt"
done

# the sandboxes' side, as uid 65534; coordinated through files in $NB
cat >"$NB/client.py" <<'PY'
import os, socket, ssl, sys, time
NB = sys.argv[1]
hp, tp, rp = (int(os.environ[x]) for x in ("HTTP_PORT", "TLS_PORT",
                                           "RAW_PORT"))


def conn(src, port):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def response(s):
    """status, body of one response (Content-Length framed)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, b""
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return int(head.split()[1]), body


def get(s, port):
    s.sendall(b"GET /echo HTTP/1.1\r\nHost: api.test:%d\r\n\r\n" % port)
    return response(s)


def echo(s):
    s.sendall(b"ping, not http\n")
    s.settimeout(5)
    got = b""
    while len(got) < 15:
        d = s.recv(100)
        if not d:
            return False
        got += d
    return got == b"ping, not http\n"


def closed_within(s, limit):
    t0 = time.time()
    s.settimeout(0.1)
    while time.time() - t0 < limit:
        try:
            d = s.recv(100)
        except socket.timeout:
            continue
        except OSError:
            return True
        if not d:
            return True
    return False


streams = {}
for sid, src in (("t1", "127.0.0.1"), ("t2", "127.0.0.2")):
    h = conn(src, hp)
    ctx = ssl.create_default_context(cafile="%s/%s.crt" % (NB, sid))
    ts = ctx.wrap_socket(conn(src, tp), server_hostname="api.test")
    r = conn(src, rp)
    streams[sid] = (h, ts, r)
    print("%s before: http %s https %s raw %s" % (
        sid, get(h, hp)[0], get(ts, tp)[0], echo(r)), flush=True)
open(NB + "/ready", "w").close()
while not os.path.exists(NB + "/reloaded"):
    time.sleep(0.02)
t0 = time.time()
print("t1 raw closed within the grace: %s" %
      closed_within(streams["t1"][2], 6.0), flush=True)
for sid in ("t1", "t2"):
    h, ts, r = streams[sid]
    st, body = get(h, hp)
    print("%s after: http %s %s" % (sid, st, body[:200]), flush=True)
    st, body = get(ts, tp)
    print("%s after: https %s %s" % (sid, st, body[:200]), flush=True)
time.sleep(max(0, 2.5 - (time.time() - t0)))
print("t2 raw after the grace: %s" % echo(streams["t2"][2]), flush=True)
PY
chmod 0644 "$NB/client.py"
setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$SYSPY" "$NB/client.py" "$NB" >"$T/client.out" 2>&1 &
CL=$!
track_pid "$CL"
i=0
until [ -e "$NB/ready" ]; do
	i=$((i + 1))
	[ "$i" -le 400 ] || { cat "$T/client.out"; fail "client not ready"; }
	kill -0 "$CL" 2>/dev/null || { cat "$T/client.out"; fail "client ended"; }
	sleep 0.05
done
write_config 127.0.0.9
"$PYTHON" - <<'PY' || fail "reload not taken"
import os, signal, time
import adminlib as A
T = os.environ["T"]
addr, tok = "unix:%s/state/admin.sock" % T, A.token(T + "/state")
ok0 = A.call(addr, "GET", "/v1/status", token=tok)[2]["reloads"]["ok"]
os.kill(int(os.environ["AIRLOCK_PID"]), signal.SIGHUP)
end = time.time() + 15
while A.call(addr, "GET", "/v1/status", token=tok)[2]["reloads"]["ok"] == ok0:
    assert time.time() < end
    time.sleep(0.02)
time.sleep(0.3)
PY
touch "$NB/reloaded"
wait_exit "$CL" 60
cat "$T/client.out"
[ "$WAIT_STATUS" = 0 ] || fail "client failed ($WAIT_STATUS)"

expect()
{
	grep -q "^$1" "$T/client.out" && ok "$2" || check_fail "$2 (want '$1')"
}
expect "t1 before: http 200 https 200 raw True" "t1: HTTP, HTTPS and raw TCP work before the reload"
expect "t2 before: http 200 https 200 raw True" "t2: the same"
expect "t1 raw closed within the grace: True" "t1: raw tunnel closed within reload_grace once its address is another's"
expect "t1 after: http 403 .*source address no longer belongs" "t1: next plain HTTP request on the open connection 403"
expect "t1 after: https 403 .*source address no longer belongs" "t1: next request in the open TLS session 403 inside TLS"
expect "t2 after: http 200" "t2: its open HTTP connection goes on"
expect "t2 after: https 200" "t2: its open TLS session goes on"
expect "t2 raw after the grace: True" "t2: its raw tunnel goes on"
"$PYTHON" - <<'PY' || check_fail "audit of the raw tunnel"
import os, itlib
r = itlib.audit_wait(os.environ["T"] + "/audit.jsonl", lambda r:
                     r.get("sandbox") == "t1" and r.get("proto") == "tunnel"
                     and (r.get("reason") or "").startswith("reload_revoked"),
                     10)
assert r is not None and r["mode"] == "transparent" and \
    r["port"] == int(os.environ["RAW_PORT"]) and r["bytes_out"] > 0, r
print("ok - t1's raw tunnel audited as reload_revoked: %s" % r["reason"])
PY
stop_airlockd
finish
