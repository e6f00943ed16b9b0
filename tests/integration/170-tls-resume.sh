#!/bin/sh
# Session resumption on the intercepted side: TLS tickets (keys shared by
# all workers) resume a returning client's session, in TLS 1.3 and 1.2;
# the session context is per (sandbox, host), so a session from sandbox a
# is not resumed for sandbox b, nor for another host.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
TLS_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT TLS_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT], paths: ["/json/*"]}
      - {host: "other.test", ports: [$TLS_PORT], paths: ["/json/*"]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: b, policy: p, token: "literal:tok-b"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "openssl s_client resumption"
import os, re, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
t = itlib.Checks()
CA = {s: T + "/state/ca/%s/ca.crt" % s for s in "ab"}
AUTH = {"a": "a:tok-a", "b": "b:tok-b"}

def run(sandbox, host, sess_arg, sess_file, extra=()):
    req = (b"GET /json/8 HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
           (host.encode(), tp))
    rc, out, err = tlslib.s_client(
        ap, "%s:%d" % (host, tp), host, AUTH[sandbox],
        ["-CAfile", CA[sandbox], sess_arg, sess_file] + list(extra),
        stdin=req, hold=0.7)
    m = re.search(r"^(New|Reused), (TLSv1\.[23])", out, re.M)
    return (m.group(1), m.group(2)) if m else None, out, err

for ver, extra in (("TLSv1.3", []), ("TLSv1.2", ["-tls1_2"])):
    sess = T + "/sess-%s.pem" % ver
    st, out, err = run("a", "api.test", "-sess_out", sess, extra)
    t.ok(st == ("New", ver), "%s: first session is new" % ver, st)
    t.ok("HTTP/1.1 200" in out and "Verify return code: 0 (ok)" in out,
         "%s: first session verified, 200" % ver, out[-300:] + err[-300:])
    t.ok(os.path.exists(sess) and os.path.getsize(sess) > 0,
         "%s: session saved (ticket received)" % ver)
    # several returns, so that both workers see it
    for i in range(4):
        st, out, err = run("a", "api.test", "-sess_in", sess, extra)
        t.ok(st == ("Reused", ver), "%s: return %d through a new CONNECT is "
             "resumed" % (ver, i + 1), st or out[-300:] + err[-300:])
        t.ok("HTTP/1.1 200" in out, "%s: resumed session serves requests"
             % ver, out[-300:])
    # sandbox b may not resume sandbox a's session
    st, out, err = run("b", "api.test", "-sess_in", sess, extra)
    t.ok(st == ("New", ver), "%s: sandbox b does not resume sandbox a's "
         "session" % ver, st)
    t.ok("HTTP/1.1 200" in out and "Verify return code: 0 (ok)" in out,
         "%s: sandbox b gets a full handshake with its own CA" % ver,
         out[-300:])
t.done()
PY

"$PYTHON" - <<'PY' || check_fail "python ssl resumption"
import os, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
t = itlib.Checks()
A, B = "a:tok-a", "b:tok-b"
tgt = "api.test:%d" % tp

for ver in ("1.3", "1.2"):
    # one context (python resumes only within it) trusting both CAs
    ca = tlslib.context(T + "/state/ca/a/ca.crt", max_version=ver)
    ca.load_verify_locations(T + "/state/ca/b/ca.crt")
    cb = ca
    c = tlslib.TLSConn(ap, tgt, ca, "api.test", A)
    r = c.get("/json/8")      # the TLS 1.3 ticket arrives with it
    sess = c.tls.session
    t.ok(r.status == 200 and sess is not None and sess.has_ticket,
         "TLS %s: session with a ticket" % ver)
    c.close()
    for i in range(4):
        c = tlslib.TLSConn(ap, tgt, ca, "api.test", A, session=sess)
        t.ok(c.tls.session_reused, "TLS %s: python resumes (%d)" % (ver, i))
        r = c.get("/json/8")
        t.ok(r.status == 200, "TLS %s: request on a resumed session" % ver,
             repr(r))
        c.close()
    # sandbox b, same host: no resumption
    c = tlslib.TLSConn(ap, tgt, cb, "api.test", B, session=sess)
    t.ok(not c.tls.session_reused, "TLS %s: sandbox b does not resume a's "
         "session" % ver)
    t.ok("sandbox b" in tlslib.cert_info(c.peer_pem())["issuer"],
         "TLS %s: sandbox b gets a leaf from its own CA" % ver)
    t.ok(c.get("/json/8").status == 200, "TLS %s: sandbox b served" % ver)
    c.close()
    # sandbox a, another host: no resumption
    c = tlslib.TLSConn(ap, "other.test:%d" % tp, ca, "other.test", A,
                       session=sess)
    t.ok(not c.tls.session_reused, "TLS %s: a session for api.test is not "
         "resumed for other.test" % ver)
    t.ok(tlslib.cert_info(c.peer_pem())["san"] == ["DNS:other.test"],
         "TLS %s: other.test gets its own leaf" % ver)
    c.close()
t.done()
PY
stop_airlockd
finish
