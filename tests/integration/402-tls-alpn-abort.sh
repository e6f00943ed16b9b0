#!/bin/sh
# Intercepted TLS, two client behaviours of issue 15.7, with ALPN
# restricted to HTTP/1.x (tls.alpn: [http/1.1]; h2 is offered by default
# since issue 19, 550-h2-client): ALPN "http/1.0" (curl -0) is accepted
# and answered over HTTP/1.0, as are clients with no ALPN, while an offer
# with no HTTP/1.x protocol is refused with a reason that names what was
# offered; and a client that aborts the handshake
# after the CONNECT (EOF after its ClientHello, garbage after it, an
# untrusting client's alert) is audited as what it was: status 200,
# decision allow, reason "client TLS handshake failed: ...".
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT TLS_PORT T
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
tls: {alpn: ["http/1.1"]}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT], paths: ["/json/*", "/echo"]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt

# curl -0 and curl -0 -p: an HTTP/1.0 request inside intercepted TLS
for p in "" "-p"; do
	code=$(curl -sSv -0 $p -x "$PROXY" --cacert "$CA" -o "$T/b0" \
	    -w '%{http_code}' "https://api.test:$TLS_PORT/json/7" 2>"$T/e0")
	[ "$code" = 200 ] && [ "$(wc -c <"$T/b0")" -gt 0 ] ||
	    fail "curl -0 $p over intercepted TLS: '$code' $(cat "$T/e0")"
	grep -q "ALPN.*accepted http/1.0" "$T/e0" ||
	    fail "curl -0 $p: ALPN http/1.0 not selected: $(grep ALPN "$T/e0")"
	grep -q "^> GET /json/7 HTTP/1.0" "$T/e0" ||
	    fail "curl -0 $p did not send HTTP/1.0"
	ok "curl -0 $p: ALPN http/1.0, 200"
done
code=$(curl -sS -0 -x "$PROXY" --cacert "$CA" -o "$T/echo" -w '%{http_code}' \
    "https://api.test:$TLS_PORT/echo" 2>"$T/e0")
[ "$code" = 200 ] || fail "curl -0 /echo: $code $(cat "$T/e0")"
grep -q "^GET /echo HTTP/1" "$T/echo" || fail "the upstream saw: $(head -3 "$T/echo")"

"$PYTHON" - <<'PY' || fail "ALPN and aborted handshakes"
import os, socket, ssl, time, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit, ca = T + "/audit.jsonl", T + "/state/ca/a/ca.crt"
tgt = "api.test:%d" % tp
t = itlib.Checks()

# offers with an HTTP/1.x protocol, and none at all
for offer, want in ((["http/1.0"], "http/1.0"), (["h2", "http/1.0"], "http/1.0"),
                    (["http/1.0", "http/1.1"], "http/1.1"), (None, None)):
    c = tlslib.TLSConn(ap, tgt, tlslib.context(ca, alpn=offer), "api.test")
    t.ok(c.tls.selected_alpn_protocol() == want, "ALPN %s → %s" % (offer, want),
         c.tls.selected_alpn_protocol())
    c.send(b"GET /json/3 HTTP/1.0\r\nHost: %s\r\n\r\n" % tgt.encode())
    r = itlib.read_response(c.rd)
    t.ok(r.status == 200 and r.body, "ALPN %s: HTTP/1.0 request → 200" % offer,
         repr(r))
    c.close()

def refused_rec(cl):
    return tlslib.audit_client(audit, cl)

def is_failed_handshake(rec, detail, what):
    t.ok(rec is not None and rec.get("status") == 200 and
         rec.get("decision") == "allow" and rec.get("tls") == "intercept" and
         rec.get("host") == "api.test" and
         (rec.get("reason") or "").startswith("client TLS handshake failed")
         and detail in rec["reason"], what + ": audited status 200, allow, "
         "'client TLS handshake failed'", rec)

# no HTTP/1.x in the offer: refused, and the reason says what it was
for offer, detail in ((["h2"], "only h2"),
                      (["spdy/3", "h2"], "no HTTP/1.x protocol")):
    c, e, cl = tlslib.TLSConn.attempt(ap, tgt, tlslib.context(ca, alpn=offer),
                                      "api.test")
    t.ok(isinstance(e, ssl.SSLError), "ALPN %s: refused" % offer, repr(e))
    is_failed_handshake(refused_rec(cl), detail, "ALPN %s" % offer)

def client_hello():
    """The bytes of a real ClientHello for api.test."""
    ctx = tlslib.context(ca)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname="api.test")
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()

# ClientHello, then EOF; ClientHello, then garbage; ClientHello, then RST
for after, detail in ((b"", "client closed"),
                      (b"\x16\x03\x03\x00\x04garbage-not-a-handshake" * 4, ""),
                      (None, "")):
    s, _ = tlslib.proxy_connect(ap, tgt)
    cl = tlslib.client_addr(s)
    s.sendall(client_hello())
    time.sleep(0.2)
    if after is None:
        import struct
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                     struct.pack("ii", 1, 0))
    elif after:
        try:
            s.sendall(after)
        except OSError:
            pass
        time.sleep(0.2)
    else:
        # a FIN, having read what came (else the close would be an RST)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass
    s.close()
    is_failed_handshake(refused_rec(cl), detail,
                        "ClientHello, then %s" % ("RST" if after is None else
                                                  "garbage" if after else
                                                  "EOF"))

# an untrusting client's alert (python trusting another CA)
c, e, cl = tlslib.TLSConn.attempt(ap, tgt, tlslib.context(T + "/pki/ca.crt"),
                                  "api.test")
t.ok(isinstance(e, ssl.SSLCertVerificationError), "untrusting client fails", e)
is_failed_handshake(refused_rec(cl), "", "untrusting client")

# still serving
r = tlslib.TLSConn(ap, tgt, tlslib.context(ca), "api.test").get("/json/9")
t.ok(r.status == 200, "served after the failed handshakes", repr(r))
t.done()
PY
grep -q "only h2" "$T/airlockd.log" || fail "h2-only refusal not logged"
[ "$(grep -c "only h2" "$T/airlockd.log")" = 1 ] ||
    fail "'only h2' logged for clients that offered more: $(grep 'only h2' "$T/airlockd.log")"
stop_airlockd
