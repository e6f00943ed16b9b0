#!/bin/sh
# TLS interception edge cases: no SNI, IP-literal hosts, TLS 1.2-only
# clients and tls.min_version, ALPN offers (h2 chosen when offered since
# issue 19; an offer of neither h2 nor HTTP/1.x is refused), a client
# that does not trust the CA (the daemon goes on serving), domain fronting
# (SNI != CONNECT host, Host != SNI) → 403 inside TLS, a CONNECT to a
# denied port or host → 403 inside TLS, bytes that are neither TLS nor
# HTTP after CONNECT → closed (plain HTTP there: 405-connect-plain-http).
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT TLS_PORT T

# write_config FILE PORT AUDIT [TLS-LINE]
write_config()
{
	{
		echo "listen: {proxy: \"127.0.0.1:$2\", default_sandbox: a}"
		echo "state_dir: $T/state"
		echo "workers: 2"
		echo "audit: {file: $3}"
		[ -n "${4:-}" ] && echo "$4"
		cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1", "evil.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT], paths: ["/json/*", "/echo"]}
      - {host: "other.test", ports: [$TLS_PORT], paths: ["/json/*", "/echo"]}
      - {host: "127.0.0.1", ports: [$TLS_PORT], paths: ["/json/*"]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
	} >"$1"
}
write_config "$T/airlock.yaml" "$AIRLOCK_PORT" "$T/audit.jsonl"
start_airlockd "$T/airlock.yaml"

PROXY=http://127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt

# --- curl: IP literal (no SNI is sent for it), TLS 1.2 only
code=$(curl -sS -x "$PROXY" --cacert "$CA" -o "$T/b1" -w '%{http_code}' \
    "https://127.0.0.1:$TLS_PORT/json/33" 2>"$T/e1")
[ "$code" = 200 ] && [ "$(wc -c <"$T/b1")" -eq 33 ] &&
    ok "curl https://127.0.0.1:PORT through the proxy (IP SAN verified)" ||
    check_fail "curl to an IP literal: status '$code' $(cat "$T/e1")"

code=$(curl -sS -v --tls-max 1.2 -x "$PROXY" --cacert "$CA" -o "$T/b2" \
    -w '%{http_code}' "https://api.test:$TLS_PORT/json/10" 2>"$T/e2")
if [ "$code" = 200 ] && grep -q 'SSL connection using TLSv1\.2' "$T/e2"; then
	ok "curl --tls-max 1.2: TLS 1.2 session, 200"
else
	check_fail "curl --tls-max 1.2: status '$code' $(grep -E 'SSL connection|curl:' "$T/e2")"
fi

# --- untrusting client: fails, audited; everyone else is served
LPORT=$(free_port)
curl -sS --local-port "$LPORT" -x "$PROXY" -o /dev/null \
    "https://api.test:$TLS_PORT/json/10" 2>"$T/e3"
rc=$?
[ "$rc" = 60 ] && ok "curl without the sandbox CA: exit 60" ||
    check_fail "curl without the sandbox CA: exit $rc, want 60 ($(cat "$T/e3"))"
code=$(curl -sS -x "$PROXY" --cacert "$CA" -o /dev/null -w '%{http_code}' \
    "https://api.test:$TLS_PORT/json/10")
[ "$code" = 200 ] && ok "the next client is served" ||
    check_fail "after an untrusting client: status '$code'"
LPORT=$LPORT "$PYTHON" - <<'PY' || check_fail "untrusting client audit"
import os, itlib, tlslib
t = itlib.Checks()
rec = tlslib.audit_client(os.environ["T"] + "/audit.jsonl",
                          "127.0.0.1:" + os.environ["LPORT"])
t.ok(rec is not None and "handshake failed" in (rec.get("reason") or ""),
     "untrusting client audited with 'handshake failed'", rec)
if rec:
    # the CONNECT was allowed and answered 200; the client went away
    t.ok(rec.get("decision") == "allow" and rec.get("status") == 200 and
         rec.get("sandbox") == "a" and
         rec.get("host") == "api.test" and rec.get("tls") == "intercept",
         "audit: allow, 200, sandbox, host, tls intercept", rec)
    t.ok("unknown ca" in rec["reason"].lower(), "audit reason carries the "
         "client's alert (unknown ca)", rec["reason"])
t.done()
PY
grep -q 'handshake failed' "$T/airlockd.log" && ok "untrusting client logged" ||
    check_fail "untrusting client not in the daemon log"

# --- openssl s_client: no SNI, IP literal, TLS 1.2
"$PYTHON" - <<'PY' || check_fail "s_client checks"
import os, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
req = b"GET /json/12 HTTP/1.1\r\nHost: api.test:%d\r\nConnection: close\r\n\r\n" % tp

rc, out, err = tlslib.s_client(ap, "api.test:%d" % tp, False,
                               args=["-CAfile", ca, "-ign_eof"], stdin=req)
certs = tlslib.pem_certs(out)
if t.ok(certs, "s_client -noservername gets a certificate", out[-600:] + err[-600:]):
    i = tlslib.cert_info(certs[0])
    t.ok(i["san"] == ["DNS:api.test"], "no SNI: SAN is the CONNECT host",
         i["san"])
    t.ok(tlslib.verify(certs[0], ca)[0], "no SNI: leaf verifies")
t.ok("Verify return code: 0 (ok)" in out, "no SNI: s_client verifies the "
     "chain", out[-600:])
t.ok("HTTP/1.1 200" in out, "no SNI: request answered 200", out[-400:])

rc, out, err = tlslib.s_client(ap, "127.0.0.1:%d" % tp, None,
                               args=["-CAfile", ca])
certs = tlslib.pem_certs(out)
if t.ok(certs, "s_client to 127.0.0.1 gets a certificate", out[-600:] + err[-600:]):
    i = tlslib.cert_info(certs[0])
    t.ok(i["san"] == ["IP Address:127.0.0.1"], "IP literal: SAN is exactly "
         "IP:127.0.0.1", i["san"])

rc, out, err = tlslib.s_client(ap, "api.test:%d" % tp, "api.test",
                               args=["-CAfile", ca, "-tls1_2", "-ign_eof"],
                               stdin=req)
t.ok("Protocol  : TLSv1.2" in out or "Protocol: TLSv1.2" in out,
     "s_client -tls1_2: TLS 1.2 session", out[-800:] + err[-400:])
t.ok("Verify return code: 0 (ok)" in out and "HTTP/1.1 200" in out,
     "s_client -tls1_2: verified, request answered 200", out[-400:])
t.done()
PY

# --- python ssl: no SNI, IP literal, TLS 1.2, ALPN, fronting, Host
"$PYTHON" - <<'PY' || check_fail "python ssl checks"
import os, ssl, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit, olog = T + "/audit.jsonl", T + "/origin.log"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
tgt = "api.test:%d" % tp

def seen(marker):
    return any(marker.encode() in r for r in itlib.origin_records(olog))

# no SNI: the certificate names the CONNECT host; requests work
c = tlslib.TLSConn(ap, tgt, tlslib.context(ca, check_hostname=False), None)
t.ok(tlslib.cert_info(c.peer_pem())["san"] == ["DNS:api.test"],
     "python, no SNI: SAN DNS:api.test")
r = c.get("/json/9")
t.ok(r.status == 200 and len(r.body) == 9, "python, no SNI: 200", repr(r))
c.close()

# IP literal, hostname (IP) checked by python
c = tlslib.TLSConn(ap, "127.0.0.1:%d" % tp, tlslib.context(ca), "127.0.0.1")
t.ok(tlslib.cert_info(c.peer_pem())["san"] == ["IP Address:127.0.0.1"],
     "python, IP literal: IP SAN")
r = c.get("/json/9")
t.ok(r.status == 200, "python, IP literal: 200", repr(r))
r = c.get("/echo?m=ip1")
t.error(r, 403, "denied", "python, IP literal: the 127.0.0.1 rule's paths "
        "apply")
c.close()

# TLS 1.2 only
c = tlslib.TLSConn(ap, tgt, tlslib.context(ca, max_version="1.2"), "api.test")
t.ok(c.tls.version() == "TLSv1.2", "python TLS 1.2 only: TLSv1.2",
     c.tls.version())
r = c.get("/json/9")
t.ok(r.status == 200, "python TLS 1.2 only: 200", repr(r))
c.close()
c = tlslib.TLSConn(ap, tgt, tlslib.context(ca), "api.test")
t.ok(c.tls.version() == "TLSv1.3", "default: TLSv1.3", c.tls.version())
c.close()

# ALPN: h2 when offered (550-h2-client speaks it), else http/1.1
for offer, want in ((["h2", "http/1.1"], "h2"), (["http/1.1"], "http/1.1"),
                    (["http/1.1", "h2"], "h2"), (["h2"], "h2")):
    c = tlslib.TLSConn(ap, tgt, tlslib.context(ca, alpn=offer), "api.test")
    t.ok(c.tls.selected_alpn_protocol() == want,
         "ALPN %s → %s" % (offer, want), c.tls.selected_alpn_protocol())
    if want == "http/1.1":
        r = c.get("/json/9")
        t.ok(r.status == 200, "ALPN %s: 200" % offer, repr(r))
    c.close()
c, e, cl = tlslib.TLSConn.attempt(ap, tgt, tlslib.context(ca, alpn=["spdy/3"]),
                                  "api.test")
if t.ok(isinstance(e, ssl.SSLError), "ALPN [spdy/3] only: handshake refused",
        c and c.tls.selected_alpn_protocol()):
    t.ok("NO_APPLICATION_PROTOCOL" in str(e).upper().replace(" ", "_"),
         "ALPN [spdy/3] only: the "
         "refusal is a no_application_protocol alert", repr(e))
    rec = tlslib.audit_client(audit, cl)
    t.ok(rec is not None and "neither h2 nor HTTP/1.x" in
         (rec.get("reason") or "") and
         (rec.get("reason") or "").startswith("client TLS handshake failed")
         and rec.get("decision") == "allow" and rec.get("status") == 200 and
         rec.get("host") == "api.test",
         "ALPN [spdy/3] only: audited as a failed handshake, reason says "
         "what was missing", rec)
r = tlslib.TLSConn(ap, tgt, tlslib.context(ca), "api.test").get("/json/9")
t.ok(r.status == 200, "served after the refused client", repr(r))

# a client with the wrong trust anchor: fails, audited, others served
c, e, cl = tlslib.TLSConn.attempt(ap, tgt, tlslib.context(T + "/pki/ca.crt"),
                                  "api.test")
if t.ok(isinstance(e, ssl.SSLCertVerificationError),
        "python trusting another CA: handshake fails", e):
    rec = tlslib.audit_client(audit, cl)
    t.ok(rec is not None and rec.get("decision") == "allow" and
         rec.get("status") == 200 and
         "handshake failed" in (rec.get("reason") or ""),
         "python untrusting client audited (allow, 200)", rec)
r = tlslib.TLSConn(ap, tgt, tlslib.context(ca), "api.test").get("/json/9")
t.ok(r.status == 200, "served after the untrusting client", repr(r))

# fronting: SNI != CONNECT host, whether or not the SNI is allowed
for sni in ("other.test", "evil.test"):
    c = tlslib.TLSConn(ap, tgt, tlslib.context(ca), sni)
    t.ok(tlslib.cert_info(c.peer_pem())["san"] == ["DNS:" + sni],
         "fronting %s: the handshake completes with a cert for the SNI" % sni)
    for host in (sni, "api.test"):
        m = "m=front-%s-%s" % (sni, host)
        r = c.get("/json/9?" + m, host="%s:%d" % (host, tp))
        if t.error(r, 403, "denied", "SNI %s, CONNECT api.test, Host %s → "
                   "403 inside TLS" % (sni, host)):
            t.ok("fronting" in r.json().get("reason", ""),
                 "reason mentions domain fronting", r.json())
        t.ok(not seen(m), "fronting request never reached the origin")
        if c.closed_after(0.2):
            c = tlslib.TLSConn(ap, tgt, tlslib.context(ca), sni)
    c.close()
rec = itlib.audit_wait(audit, lambda a: "fronting" in (a.get("reason") or ""))
t.ok(rec is not None and rec.get("decision") == "deny" and
     rec.get("status") == 403 and rec.get("tls") == "intercept",
     "fronting audited: deny 403", rec)

# Host header != SNI
for host in ("other.test:%d" % tp, "evil.test:%d" % tp, "other.test"):
    c = tlslib.TLSConn(ap, tgt, tlslib.context(ca), "api.test")
    m = "m=host-" + host.replace(":", "-")
    r = c.get("/json/9?" + m, host=host)
    t.error(r, 403, "denied", "SNI api.test, Host %s → 403" % host)
    t.ok(not seen(m), "Host mismatch never reached the origin")
    c.close()
# an absolute-form target naming another host inside TLS
c = tlslib.TLSConn(ap, tgt, tlslib.context(ca), "api.test")
r = c.get("https://other.test:%d/json/9?m=absform" % tp)
t.ok(r.status in (400, 403) and itlib.is_gateway_error(r),
     "absolute-form target for another host inside TLS → 400/403", repr(r))
t.ok(not any(b"m=absform" in x for x in itlib.origin_records(olog)),
     "absolute-form fronting never reached the origin")
c.close()
rec = itlib.audit_wait(audit, lambda a: a.get("status") == 403 and
                       (a.get("path") or "").startswith("/json/9") and
                       "Host header does not" in (a.get("reason") or "") and
                       "fronting" not in (a.get("reason") or ""))
t.ok(rec is not None and rec.get("decision") == "deny",
     "Host mismatch audited", rec)

# CONNECT to a denied port, a denied host: 200, then the 403 inside TLS
# (a leaf for the name from the sandbox's CA), then the connection closes
for target, sni, why in (
        ("api.test:1", "api.test", "port 1 is not allowed"),
        ("evil.test:%d" % tp, "evil.test", "host evil.test is not allowed"),
        ("api.test:%d" % (tp + 1 if tp < 65535 else tp - 1), "api.test",
         "is not allowed")):
    c, e, cl = tlslib.TLSConn.attempt(ap, target, tlslib.context(ca), sni)
    if not t.ok(c is not None, "CONNECT %s: handshake verified with the "
                "sandbox CA" % target, repr(e)):
        continue
    t.ok(tlslib.cert_info(c.peer_pem())["san"] == ["DNS:" + sni],
         "CONNECT %s: the leaf names %s" % (target, sni))
    r = c.get("/json/9?m=deny-" + target.replace(":", "-"))
    if t.error(r, 403, "denied", "CONNECT %s → 403 inside TLS" % target):
        t.ok(why in r.json()["reason"], "reason says " + why, r.json())
        t.ok(r.header("Connection") == "close" and c.closed_after(3),
             "CONNECT %s: closed after the 403" % target)
    c.close()
    rec = tlslib.audit_client(audit, cl)
    t.ok(rec is not None and rec.get("decision") == "deny" and
         rec.get("status") == 403 and rec.get("method") == "CONNECT" and
         why in (rec.get("reason") or "") and
         rec.get("tls") == "intercept", "CONNECT %s audited deny 403" %
         target, rec)
    t.ok(not seen("m=deny-" + target.replace(":", "-")),
         "denied CONNECT %s never reached the origin" % target)

# bytes that are neither TLS nor HTTP after the CONNECT: closed, audited
s, r = tlslib.proxy_connect(ap, tgt)
cl = tlslib.client_addr(s)
s.sendall(b"\x00\x01\x02\x03 binary, not a request line\r\n")
rd = itlib.Reader(s)
t.ok(rd.closed_after(3) and not rd.buf, "neither TLS nor HTTP after "
     "CONNECT: connection closed, nothing answered", rd.buf)
s.close()
rec = tlslib.audit_client(audit, cl)
t.ok(rec is not None and rec.get("decision") == "deny" and
     rec.get("method") == "CONNECT" and
     "neither TLS nor HTTP" in (rec.get("reason") or ""),
     "neither TLS nor HTTP after CONNECT audited deny with that reason", rec)
t.done()
PY

stop_airlockd

# --- tls.min_version "1.3": TLS 1.2-only clients fail
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT
write_config "$T/airlock13.yaml" "$AIRLOCK_PORT" "$T/audit13.jsonl" \
    'tls: {min_version: "1.3"}'
start_airlockd "$T/airlock13.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT
curl -sS --tls-max 1.2 -x "$PROXY" --cacert "$CA" -o /dev/null \
    "https://api.test:$TLS_PORT/json/10" 2>"$T/e4"
rc=$?
[ "$rc" = 35 ] && ok "min_version 1.3: curl --tls-max 1.2 fails (35)" ||
    check_fail "min_version 1.3: curl --tls-max 1.2 exit $rc, want 35 ($(cat "$T/e4"))"
code=$(curl -sS -x "$PROXY" --cacert "$CA" -o /dev/null -w '%{http_code}' \
    "https://api.test:$TLS_PORT/json/10")
[ "$code" = 200 ] && ok "min_version 1.3: a TLS 1.3 client is served" ||
    check_fail "min_version 1.3: TLS 1.3 curl status '$code'"
"$PYTHON" - <<'PY' || check_fail "min_version 1.3 checks"
import os, ssl, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()
c, e, cl = tlslib.TLSConn.attempt(ap, "api.test:%d" % tp,
                                  tlslib.context(ca, max_version="1.2"),
                                  "api.test")
if t.ok(isinstance(e, ssl.SSLError),
        "min_version 1.3: python TLS 1.2-only refused", c):
    t.ok("VERSION" in str(e).upper(), "min_version 1.3: a protocol_version "
         "alert", repr(e))
    rec = tlslib.audit_client(T + "/audit13.jsonl", cl)
    t.ok(rec is not None and rec.get("decision") == "allow" and
         rec.get("status") == 200 and
         "handshake failed" in (rec.get("reason") or ""),
         "min_version 1.3: refused handshake audited (allow, 200)", rec)
rc, out, err = tlslib.s_client(ap, "api.test:%d" % tp, "api.test",
                               args=["-CAfile", ca, "-tls1_2"])
t.ok(rc != 0 and not tlslib.pem_certs(out), "min_version 1.3: s_client "
     "-tls1_2 fails", out[-400:] + err[-400:])
c = tlslib.TLSConn(ap, "api.test:%d" % tp, tlslib.context(ca), "api.test")
t.ok(c.tls.version() == "TLSv1.3" and c.get("/json/9").status == 200,
     "min_version 1.3: TLS 1.3 python client served")
t.done()
PY
stop_airlockd
finish
