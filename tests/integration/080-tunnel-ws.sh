#!/bin/sh
# CONNECT to an allowed host:port opens a tunnel (audited as proto
# "tunnel"); a TLS session to a TLS upstream runs through it end to end
# (rule intercept: false where the daemon knows the key, i.e. splice);
# denied CONNECTs get their 403 inside TLS, malformed ones are refused; a
# WebSocket upgrade passes after policy and then carries bytes both ways.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin tls -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT TLS_PORT T

# Does this airlockd know "intercept" (TLS interception) yet?
cat >"$T/probe.yaml" <<'YAML'
policies:
  - name: p
    rules:
      - {host: "a.test", intercept: false}
YAML
SPLICE=
"$AIRLOCKD" -c "$T/probe.yaml" -t >/dev/null 2>&1 && SPLICE=", intercept: false"
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT], paths: ["/ws", "/echo", "/size/*"]}
      - {host: "api.test", ports: [$TLS_PORT]$SPLICE}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || fail "tunnel and websocket checks"
import base64, hashlib, os, socket, time, itlib
from itlib import req, connect, Reader, read_response, roundtrip
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
audit = os.environ["T"] + "/audit.jsonl"
olog = os.environ["T"] + "/origin.log"
t = itlib.Checks()
A = b"api.test:%d" % op

# CONNECT, then TLS end to end and HTTP inside it
import ssl
tp = itlib.env_int("TLS_PORT")
TA = b"api.test:%d" % tp
s = connect(ap)
s.sendall(b"CONNECT " + TA + b" HTTP/1.1\r\nHost: " + TA + b"\r\n\r\n")
rd = Reader(s)
r = read_response(rd, "CONNECT")
rid = r.header("X-Airlock-Request-Id")
if t.ok(r.status == 200 and not rd.buf, "CONNECT to an allowed host:port",
        repr(r)):
    ctx = ssl.create_default_context(cafile=os.environ["T"] + "/pki/ca.crt")
    ts = ctx.wrap_socket(s, server_hostname="api.test")
    t.ok(ts.getpeercert()["subjectAltName"][0] == ("DNS", "api.test"),
         "the upstream's own certificate arrives through the tunnel")
    trd = Reader(ts)
    ts.sendall(b"GET /echo?via=tunnel HTTP/1.1\r\nHost: " + TA + b"\r\n\r\n")
    r2 = read_response(trd)
    t.ok(r2.status == 200 and r2.body.startswith(b"GET /echo?via=tunnel "),
         "HTTP inside TLS through the tunnel", repr(r2))
    ts.sendall(b"GET /size/1000000 HTTP/1.1\r\nHost: " + TA + b"\r\n\r\n")
    r3 = read_response(trd)
    t.ok(r3.status == 200 and len(r3.body) == 1000000,
         "1 MB through the tunnel", len(r3.body))
    ts.close()
s.close()
rec = itlib.audit_wait(audit, lambda a: a.get("method") == "CONNECT" and
                       a.get("decision") == "allow", 10)
if t.ok(rec is not None, "tunnel audited"):
    t.ok(rec.get("proto") == "tunnel", "audit proto tunnel", rec)
    t.ok(rec.get("host") == "api.test" and rec.get("port") == tp,
         "audit host and port", rec)
    t.ok(rid is None or rec.get("id") == rid, "audit id matches the header",
         (rid, rec.get("id")))
    bi, bo = rec.get("bytes_in"), rec.get("bytes_out")
    t.ok(isinstance(bi, int) and isinstance(bo, int) and bi > 1000000 and
         bo > 60, "audit bytes_in/bytes_out count the tunnel", (bi, bo))
    t.ok(rec.get("sandbox") == "local" and
         rec.get("tls") in ("none", "splice") and
         rec.get("upstream") == "127.0.0.1:%d" % tp,
         "audit sandbox, tls, upstream", rec)
    t.ok(rec.get("status") == 200, "audit status 200", rec)
    t.ok("path" not in rec or rec["path"] in (None, ""),
         "no path for a tunnel", rec)

# CONNECTs policy denies: 200, then the 403 inside TLS under the
# sandbox's CA, with the reason (406-connect-deny-tls has the rest)
import tlslib
sbca = os.environ["T"] + "/state/ca/local/ca.crt"
for target, why in (
        (b"api.test:1", "port 1 is not allowed for host api.test"),
        (b"other.test:%d" % op, "host other.test is not allowed")):
    try:
        c = tlslib.TLSConn(ap, target.decode(), tlslib.context(sbca),
                           target.split(b":")[0].decode())
        r = c.get("/ws")
        c.close()
    except Exception as e:
        r = None
        t.ok(False, "CONNECT %s: TLS session" % target.decode(), repr(e))
    if t.error(r, 403, "denied", "CONNECT %s → 403 inside TLS" %
               target.decode()):
        t.ok(r.json()["reason"] == why, "reason: " + why, r.json())

# refused CONNECTs before any TLS
for target, status, code, what in (
        (b"127.0.0.2:%d" % op, 403, "denied", "denied network"),
        (b"api.test", 400, "bad_request", "no port"),
        (b"api.test:99999", 400, "bad_request", "port out of range"),
        (b"http://api.test:%d/" % op, 400, "bad_request", "URI, not authority")):
    r = roundtrip(ap, b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target +
                  b"\r\n\r\n", method="CONNECT")
    t.error(r, status, code, "CONNECT %s (%s) → %d" % (target.decode(), what,
                                                      status))

# WebSocket
key = base64.b64encode(os.urandom(16))
acc = base64.b64encode(hashlib.sha1(
    key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
s = connect(ap)
s.sendall(b"GET http://" + A + b"/ws HTTP/1.1\r\nHost: " + A + b"\r\n"
          b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: " + key + b"\r\n"
          b"Sec-WebSocket-Version: 13\r\n\r\n")
rd = Reader(s)
r = read_response(rd)
if t.ok(r.status == 101, "WebSocket upgrade → 101", repr(r)):
    t.ok((r.header("Upgrade") or "").lower() == "websocket" and
         "upgrade" in (r.header("Connection") or "").lower(),
         "101 keeps Upgrade/Connection", r.headers)
    t.ok(r.header("Sec-WebSocket-Accept") == acc.decode(),
         "Sec-WebSocket-Accept relayed", r.headers)
    payload = os.urandom(200000)
    s.sendall(payload)
    got = rd.buf
    rd.buf = b""
    s.settimeout(10)
    while len(got) < len(payload):
        d = s.recv(65536)
        if not d:
            break
        got += d
    t.ok(got == payload, "bytes echoed after the upgrade", len(got))
s.close()
rec = itlib.audit_wait(audit, lambda a: a.get("path") == "/ws", 10)
t.ok(rec is not None and rec.get("status") == 101 and
     rec.get("decision") == "allow", "upgrade audited", rec)
# the upgrade is still subject to policy
r = roundtrip(ap, b"GET http://" + A + b"/wsx HTTP/1.1\r\nHost: " + A +
              b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\n"
              b"Sec-WebSocket-Version: 13\r\n\r\n")
t.error(r, 403, "denied", "upgrade to a denied path → 403")
t.ok(not any(b"/wsx" in x for x in itlib.origin_records(olog)),
     "denied upgrade never reached the origin")
t.done()
PY
stop_airlockd
