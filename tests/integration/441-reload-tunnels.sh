#!/bin/sh
# Reloads reach tunnels and WebSockets (issue 14, point 8): they have no
# next request to judge, so limits.reload_grace (1s here) after a reload,
# those the new config no longer allows are closed and audited with a
# reason "reload_revoked: ...". Sandbox a (policy p, whose rules the reload
# removes) and sandbox b (policy q, unchanged) each hold open:
#   - a spliced CONNECT tunnel (intercept: false) with TLS end to end
#   - a WebSocket on the plain explicit proxy
#   - a WebSocket inside an intercepted TLS session (CONNECT, then upgrade)
# a's three are closed within the grace (plus a margin for a loaded
# machine); b's still carry bytes after it. Also: the key's syntax.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin splice -C "$T/pki/good.crt" -K "$T/pki/good.key"
SPLICE_PORT=$ORIGIN_PORT
start_origin wss -C "$T/pki/good.crt" -K "$T/pki/good.key"
WSS_PORT=$ORIGIN_PORT
start_origin
WS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT SPLICE_PORT WSS_PORT WS_PORT T

# --- the key: a duration, 0s allowed, errors at their position
printf 'limits: {reload_grace: soon}\npolicies: []\n' >"$T/bad.yaml"
out=$("$AIRLOCKD" -c "$T/bad.yaml" -t 2>&1) &&
    check_fail "reload_grace: soon accepted"
echo "$out" | grep -q "bad.yaml:1:[0-9]*:.*reload_grace" &&
    ok "reload_grace: soon refused at its position ($out)" ||
    check_fail "reload_grace: soon: $out"
printf 'limits: {reload_grace: 0s}\npolicies: []\n' >"$T/zero.yaml"
"$AIRLOCKD" -c "$T/zero.yaml" -t >/dev/null 2>&1 &&
    ok "reload_grace: 0s accepted" || check_fail "reload_grace: 0s refused"

# write_config STEP: 0 both policies allow the three streams; 1 policy p
# only allows /echo on the plain origin
write_config()
{
	rules="      - {host: \"api.test\", ports: [$SPLICE_PORT], intercept: false}
      - {host: \"api.test\", ports: [$WS_PORT], paths: [\"/ws\"]}
      - {host: \"api.test\", ports: [$WSS_PORT], paths: [\"/ws\"]}"
	if [ "$1" = 1 ]; then
		rules_p="      - {host: \"api.test\", ports: [$WS_PORT], paths: [\"/echo\"]}"
	else
		rules_p=$rules
	fi
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
$rules_p
  - name: q
    rules:
$rules
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: b, policy: q, token: "literal:tok-b"}
YAML
	} >"$T/airlock.yaml.tmp"
	mv "$T/airlock.yaml.tmp" "$T/airlock.yaml"
}
write_config 0
start_airlockd "$T/airlock.yaml"
wait_admin
export AIRLOCK_PID

"$PYTHON" - <<'PY' >"$T/streams.out" 2>&1 &
import base64, os, socket, ssl, sys, time
import adminlib as A
import itlib
from itlib import Reader, read_response

T = os.environ["T"]
ap = itlib.env_int("AIRLOCK_PORT")
sp, wsp, wssp = (itlib.env_int(x) for x in ("SPLICE_PORT", "WS_PORT",
                                             "WSS_PORT"))
addr = "unix:%s/state/admin.sock" % T
tok = A.token(T + "/state")


def auth(sid):
    return b"Proxy-Authorization: Basic " + base64.b64encode(
        ("%s:tok-%s" % (sid, sid)).encode()) + b"\r\n"


def connect(sid, port):
    s = itlib.connect(ap)
    ta = b"api.test:%d" % port
    s.sendall(b"CONNECT " + ta + b" HTTP/1.1\r\nHost: " + ta + b"\r\n" +
              auth(sid) + b"\r\n")
    rd = Reader(s)
    r = read_response(rd, "CONNECT")
    assert r.status == 200 and not rd.buf, r
    return s


def upgrade(sock, sid, target, host):
    sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\n" +
                 (auth(sid) if sid else b"") +
                 b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 b"Sec-WebSocket-Version: 13\r\n\r\n")
    rd = Reader(sock)
    r = read_response(rd)
    assert r.status == 101 and not rd.buf, r
    return sock


def echo(sock, what):
    """Bytes through the WebSocket come back (the origin echoes)."""
    data = os.urandom(1000)
    sock.sendall(data)
    got = b""
    sock.settimeout(5)
    while len(got) < len(data):
        d = sock.recv(65536)
        if not d:
            return False
        got += d
    return got == data


def tls_get(sock, what):
    sock.sendall(b"GET /echo HTTP/1.1\r\nHost: api.test\r\n\r\n")
    sock.settimeout(5)
    r = read_response(Reader(sock))
    return r.status == 200 and r.body.startswith(b"GET /echo ")


def open_streams(sid):
    out = {}
    s = connect(sid, sp)
    ctx = ssl.create_default_context(cafile=T + "/pki/ca.crt")
    out["splice"] = (ctx.wrap_socket(s, server_hostname="api.test"),
                     tls_get)
    ha = b"api.test:%d" % wsp
    out["ws"] = (upgrade(itlib.connect(ap), sid, b"http://" + ha + b"/ws",
                         ha), echo)
    s = connect(sid, wssp)
    ctx = ssl.create_default_context(cafile="%s/state/ca/%s/ca.crt" %
                                     (T, sid))
    ts = ctx.wrap_socket(s, server_hostname="api.test")
    out["wss"] = (upgrade(ts, None, b"/ws", b"api.test:%d" % wssp), echo)
    return out


def closed_within(sock, limit):
    """Seconds until the peer closed <sock>, or None if still open."""
    t0 = time.time()
    sock.settimeout(0.1)
    while time.time() - t0 < limit:
        try:
            d = sock.recv(65536)
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except (OSError, ssl.SSLError):
            return time.time() - t0
        if not d:
            return time.time() - t0
    return None


streams = {sid: open_streams(sid) for sid in "ab"}
for sid in "ab":
    for kind, (sock, probe) in streams[sid].items():
        print("%s %s works before %s" % (sid, kind, probe(sock, kind)))
ok0 = A.call(addr, "GET", "/v1/status", token=tok)[2]["reloads"]["ok"]
print("ready", flush=True)
# the shell rewrites the config and sends SIGHUP
while A.call(addr, "GET", "/v1/status", token=tok)[2]["reloads"]["ok"] == ok0:
    time.sleep(0.02)
t0 = time.time()
print("reloaded", flush=True)
limit = 1.0 + 5.0	# reload_grace, plus a loaded machine's margin
for kind, (sock, probe) in streams["a"].items():
    d = closed_within(sock, max(0.1, limit - (time.time() - t0)))
    print("a %s closed %s" % (kind, "after %.2fs" % (time.time() - t0)
                              if d is not None else "never"), flush=True)
time.sleep(max(0, 2.5 - (time.time() - t0)))
for kind, (sock, probe) in streams["b"].items():
    try:
        res = probe(sock, kind)
    except Exception as e:
        res = "error %r" % e
    print("b %s works after the grace %s" % (kind, res), flush=True)
PY
PY_PID=$!
track_pid "$PY_PID"
i=0
until grep -q '^ready' "$T/streams.out" 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -le 400 ] || { cat "$T/streams.out"; fail "streams did not open"; }
	kill -0 "$PY_PID" 2>/dev/null || { cat "$T/streams.out"; fail "stream script ended"; }
	sleep 0.05
done
write_config 1
kill -HUP "$AIRLOCK_PID"
wait_exit "$PY_PID" 60
cat "$T/streams.out"
[ "$WAIT_STATUS" = 0 ] || fail "stream script failed ($WAIT_STATUS)"

for s in a b; do
	for k in splice ws wss; do
		grep -q "^$s $k works before True" "$T/streams.out" &&
		    ok "sandbox $s: $k works before the reload" ||
		    check_fail "sandbox $s: $k did not work before the reload"
	done
done
for k in splice ws wss; do
	grep -q "^a $k closed after" "$T/streams.out" &&
	    ok "sandbox a: $k closed within reload_grace after its rule went" ||
	    check_fail "sandbox a: $k not closed after the reload removed its rule"
	grep -q "^b $k works after the grace True" "$T/streams.out" &&
	    ok "sandbox b: $k still allowed, still open and working" ||
	    check_fail "sandbox b: $k broken by a reload that did not touch it"
done

# each closed stream has its audit record, reason reload_revoked
"$PYTHON" - <<'PY' || check_fail "audit of the closed streams"
import os, itlib
T = os.environ["T"]
audit = T + "/audit.jsonl"
sp, wsp, wssp = (itlib.env_int(x) for x in ("SPLICE_PORT", "WS_PORT",
                                             "WSS_PORT"))
t = itlib.Checks()


def revoked(pred):
    return itlib.audit_wait(audit, lambda r: r.get("sandbox") == "a" and
                            (r.get("reason") or "").startswith(
                                "reload_revoked") and pred(r), 10)


r = revoked(lambda r: r.get("port") == sp)
t.ok(r is not None and r.get("proto") == "tunnel" and
     r.get("tls") == "splice" and r.get("method") == "CONNECT" and
     r.get("bytes_in", 0) > 0, "spliced tunnel audited as reload_revoked", r)
r = revoked(lambda r: r.get("port") == wsp)
t.ok(r is not None and r.get("path") == "/ws" and r.get("status") == 101 and
     r.get("bytes_in", 0) > 1000, "WebSocket audited as reload_revoked", r)
r = revoked(lambda r: r.get("port") == wssp)
t.ok(r is not None and r.get("path") == "/ws" and r.get("status") == 101 and
     r.get("tls") == "intercept",
     "intercepted WebSocket audited as reload_revoked", r)
t.ok(r is not None and "not allowed" in r.get("reason", ""),
     "the reason says what the new config refuses", r)
t.ok(not any(x.get("sandbox") == "b" and
             "reload_revoked" in (x.get("reason") or "")
             for x in itlib.audit_records(audit)),
     "nothing of sandbox b was revoked")
t.done()
PY
stop_airlockd
finish
