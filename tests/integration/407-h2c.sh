#!/bin/sh
# h2c (issue 15 point 7). The HTTP/2 connection preface ("PRI * HTTP/2.0",
# prior knowledge) → 505 version_not_supported with the JSON body and an
# audit record: on the plain listener, inside a plain CONNECT tunnel and
# inside intercepted TLS; nothing reaches the upstream. "Upgrade: h2c" is
# not passed through: the request is served as the HTTP/1.1 request it
# also is (RFC 9110 section 7.8), without Upgrade or HTTP2-Settings
# upstream, its body relayed, and the connection stays usable (keep-alive,
# pipelining). curl --http2 through a tunnel ends up on HTTP/1.1, and so
# do curl --http2 and --http2-prior-knowledge to the proxy itself.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T

{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT

# curl --http2 on an http:// URL offers "Upgrade: h2c"; through the tunnel
# (-p) it sends the request as to the origin itself
code=$(curl -sS -v -p --http2 -x "$PROXY" -o "$T/c1" -w '%{http_code} %{http_version}' \
    "http://api.test:$ORIGIN_PORT/echo?m=curl-h2c" 2>"$T/e1")
if [ "$code" = "200 1.1" ] && grep -qi '^> Upgrade: h2c' "$T/e1" &&
    grep -q '^GET /echo?m=curl-h2c HTTP/1.1' "$T/c1" &&
    ! grep -qi -e '^upgrade' -e '^http2-settings' "$T/c1"; then
	ok "curl --http2 (Upgrade: h2c offered) → 200 over HTTP/1.1, no Upgrade upstream"
else
	check_fail "curl --http2: '$code' $(cat "$T/c1") $(grep -i -E 'upgrade|curl:' "$T/e1")"
fi

# curl --http2-prior-knowledge and --http2 on an http:// URL through the
# proxy without a tunnel: curl speaks HTTP/1.1 to an HTTP proxy (it does
# no h2 there); served as HTTP/1.1, nothing of h2 upstream
for opt in --http2-prior-knowledge --http2; do
	code=$(curl -sS -v $opt -x "$PROXY" -o "$T/c3" \
	    -w '%{http_code} %{http_version}' \
	    "http://api.test:$ORIGIN_PORT/echo?m=curl$opt" 2>"$T/e3")
	if [ "$code" = "200 1.1" ] &&
	    grep -q "^GET /echo?m=curl$opt HTTP/1.1" "$T/c3" &&
	    ! grep -qi -e '^upgrade' -e '^http2-settings' -e '^PRI' "$T/c3"; then
		ok "curl $opt -x (forward proxy) → 200 over HTTP/1.1, no h2 upstream"
	else
		check_fail "curl $opt -x: '$code' $(cat "$T/c3") $(grep -i -E 'curl:|^> ' "$T/e3")"
	fi
done

"$PYTHON" - <<'PY' || check_fail "h2c checks"
import os, ssl, itlib, tlslib
from itlib import Reader, read_response
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
audit, olog = T + "/audit.jsonl", T + "/origin.log"
t = itlib.Checks()
A = b"api.test:%d" % op
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"    # an empty SETTINGS


def upstream_saw(marker):
    return [x for x in itlib.origin_records(olog) if marker in x]


def refused_505(what, sock, rd, cl):
    sock.sendall(PREFACE + SETTINGS)
    try:
        r = read_response(rd)
    except Exception as e:
        r = None
        t.ok(False, what + ": an answer", repr(e))
    if t.error(r, 505, "version_not_supported", what + " → 505"):
        t.ok("h2c" in r.json()["reason"], what + ": the reason names h2c",
             r.json())
        t.ok(r.header("Connection") == "close" and rd.closed_after(3),
             what + ": closed after the 505")
    rec = tlslib.audit_client(audit, cl, lambda a: a.get("status") == 505)
    t.ok(rec is not None and rec.get("decision") == "deny" and
         "h2c" in (rec.get("reason") or ""), what + ": audited 505 deny",
         rec)


# the preface on the plain listener
s = itlib.connect(ap)
refused_505("h2c preface on the plain listener", s, Reader(s),
            tlslib.client_addr(s))
s.close()
# inside a plain CONNECT tunnel
s, r = tlslib.proxy_connect(ap, A)
refused_505("h2c preface inside a CONNECT tunnel", s, Reader(s),
            tlslib.client_addr(s))
s.close()
# inside intercepted TLS (the client insists on h2 without ALPN)
c = tlslib.TLSConn(ap, A.decode(), tlslib.context(
    T + "/state/ca/a/ca.crt"), "api.test")
refused_505("h2c preface inside intercepted TLS", c.tls, c.rd, c.client)
c.close()
t.ok(not upstream_saw(b"PRI *"), "no preface reached the upstream")

# Upgrade: h2c → served as HTTP/1.1; the connection goes on
s = itlib.connect(ap)
rd = Reader(s)
s.sendall(b"GET http://%s/echo?m=up1 HTTP/1.1\r\nHost: %s\r\n"
          b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
          b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" % (A, A))
r = read_response(rd)
t.ok(r.status == 200 and r.version == "HTTP/1.1" and
     r.header("Upgrade") is None, "GET with Upgrade: h2c → 200 HTTP/1.1, "
     "no switch", repr(r))
seen = upstream_saw(b"m=up1")
t.ok(len(seen) == 1 and b"upgrade" not in seen[0].lower() and
     b"http2-settings" not in seen[0].lower(),
     "upstream got the request without Upgrade, Connection: Upgrade or "
     "HTTP2-Settings", seen)
# HTTP2-Settings not named in Connection: still hop-by-hop
s.sendall(b"GET http://%s/echo?m=up2 HTTP/1.1\r\nHost: %s\r\n"
          b"Connection: Upgrade\r\nUpgrade: h2c\r\n"
          b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n" % (A, A))
r = read_response(rd)
seen = upstream_saw(b"m=up2")
t.ok(r.status == 200 and len(seen) == 1 and
     b"http2-settings" not in seen[0].lower(), "same connection: served "
     "again, HTTP2-Settings dropped even when Connection does not name it",
     (r, seen))
# a body and a pipelined request behind it
s.sendall(b"POST http://%s/echo?m=up3 HTTP/1.1\r\nHost: %s\r\n"
          b"Connection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 5\r\n\r\n"
          b"hello"
          b"GET http://%s/echo?m=up4 HTTP/1.1\r\nHost: %s\r\n\r\n" %
          (A, A, A, A))
r3 = read_response(rd, "POST")
r4 = read_response(rd)
t.ok(r3.status == 200 and r3.header("X-Body-Bytes") == "5",
     "POST with Upgrade: h2c: its 5-byte body relayed", repr(r3))
t.ok(r4.status == 200 and b"m=up4" in r4.body,
     "the request pipelined behind it is served", repr(r4))
s.close()
rec = itlib.audit_wait(audit, lambda a: a.get("path") == "/echo" and
                       a.get("method") == "POST")
t.ok(rec is not None and rec.get("status") == 200 and
     rec.get("decision") == "allow", "the h2c-upgrade POST audited 200",
     rec)
t.done()
PY

stop_airlockd
finish
