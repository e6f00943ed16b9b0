#!/bin/sh
# Splice: a rule with intercept: false passes TLS through undecrypted once
# the ClientHello's SNI names the allowed CONNECT host; the client sees
# the origin's own certificate; audited as proto tunnel, tls splice, with
# bytes and duration. SNI != CONNECT host, or no SNI at all → closed
# before any byte reaches the upstream, audited deny.
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
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$TLS_PORT], intercept: false}
      - {host: "other.test", ports: [$TLS_PORT], intercept: false}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://127.0.0.1:$AIRLOCK_PORT

# curl trusting the ORIGIN's CA only: TLS is end to end
LPORT=$(free_port)
code=$(curl -sS -v --local-port "$LPORT" -x "$PROXY" --cacert "$T/pki/ca.crt" \
    -o "$T/b1" -w '%{http_code}' "https://api.test:$TLS_PORT/size/200000" 2>"$T/e1")
if [ "$code" = 200 ] && [ "$(wc -c <"$T/b1")" -eq 200000 ]; then
	ok "curl with the origin's CA through a spliced tunnel: 200, 200000 bytes"
else
	check_fail "curl through splice: status '$code' $(grep -E 'curl:|SSL' "$T/e1")"
fi
grep -q 'issuer: CN=airlock test upstream CA' "$T/e1" &&
    ok "curl sees the origin's certificate (issuer airlock test upstream CA)" ||
    check_fail "curl did not see the origin's certificate: $(grep -E 'issuer|subject' "$T/e1")"
# the sandbox CA does not fit: nothing is minted for a spliced host
curl -sS -x "$PROXY" --cacert "$T/state/ca/a/ca.crt" -o /dev/null \
    "https://api.test:$TLS_PORT/json/8" 2>"$T/e2"
rc=$?
[ "$rc" = 60 ] && ok "curl trusting only the sandbox CA fails on a spliced host" ||
    check_fail "curl with the sandbox CA on a spliced host: exit $rc, want 60"

LPORT=$LPORT "$PYTHON" - <<'PY' || check_fail "splice checks"
import os, ssl, time, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
pki_ca = T + "/pki/ca.crt"
t = itlib.Checks()
tgt = "api.test:%d" % tp

rec = tlslib.audit_client(audit, "127.0.0.1:" + os.environ["LPORT"])
if t.ok(rec is not None, "curl's spliced tunnel audited"):
    t.ok(rec.get("proto") == "tunnel" and rec.get("tls") == "splice" and
         rec.get("method") == "CONNECT" and rec.get("decision") == "allow" and
         rec.get("host") == "api.test" and rec.get("port") == tp and
         rec.get("rule") == "p#0" and rec.get("sandbox") == "a",
         "audit proto tunnel, tls splice, CONNECT, allow, host, port, rule",
         rec)
    bi, bo = rec.get("bytes_in"), rec.get("bytes_out")
    t.ok(isinstance(bi, int) and isinstance(bo, int) and bi > 200000 and
         bo > 100, "audit bytes_in > 200000 (download), bytes_out > 100",
         (bi, bo))
    t.ok(isinstance(rec.get("duration_ms"), int), "audit duration_ms",
         rec.get("duration_ms"))
    t.ok("path" not in rec, "no path for a spliced tunnel", rec)

# python: the origin's certificate through the splice, with its own SANs
c = tlslib.TLSConn(ap, tgt, tlslib.context(pki_ca), "api.test")
i = tlslib.cert_info(c.peer_pem())
t.ok(i["issuer"].endswith("CN = airlock test upstream CA") and
     "DNS:localhost" in i["san"], "python sees the origin's good.crt",
     (i["issuer"], i["san"]))
t.ok(c.tls.version() == "TLSv1.3", "end-to-end TLS 1.3", c.tls.version())
cl = c.client
t0 = time.time()
r = c.get("/json/50")
time.sleep(0.3)
r2 = c.get("/echo?m=inside")
t.ok(r.status == 200 and len(r.body) == 50 and r2.status == 200 and
     r.header("X-Airlock-Request-Id") is None,
     "requests inside the splice reach the origin untouched", (r, r2))
c.close()
rec = tlslib.audit_client(audit, cl)
t.ok(rec is not None and rec.get("tls") == "splice" and
     rec.get("duration_ms", 0) >= 250, "splice duration covers the session",
     rec)

# the denied cases: the upstream must not see a connection
def origin_conns():
    return tlslib.origin_stats_direct(tp, pki_ca)["connections"]

before = origin_conns()
for what, sni in (("SNI other.test != CONNECT api.test", "other.test"),
                  ("no SNI", None)):
    c, e, cl = tlslib.TLSConn.attempt(ap, tgt, tlslib.context(
        pki_ca, check_hostname=sni is not None), sni)
    t.ok(c is None and isinstance(e, (ssl.SSLError, OSError)),
         "splice, %s: handshake fails" % what, e)
    rec = tlslib.audit_client(audit, cl)
    t.ok(rec is not None and rec.get("decision") == "deny" and
         rec.get("tls") == "splice" and rec.get("method") == "CONNECT",
         "splice, %s: audited deny" % what, rec)
    t.ok(rec is not None and ("SNI" in (rec.get("reason") or "") or
                              "server name" in (rec.get("reason") or "")),
         "splice, %s: reason names the server name" % what, rec)
after = origin_conns()
t.ok(after == before + 1, "denied splices never connected upstream",
     (before, after))

# openssl s_client: SNI matching → the origin's chain; -noservername → no
# certificate at all
rc, out, err = tlslib.s_client(ap, tgt, "api.test",
                               args=["-CAfile", pki_ca, "-showcerts"])
certs = tlslib.pem_certs(out)
t.ok(certs and "Verify return code: 0 (ok)" in out and
     "airlock test upstream CA" in tlslib.cert_info(certs[0])["issuer"],
     "s_client through splice: origin's certificate, verified", out[-500:])
rc, out, err = tlslib.s_client(ap, tgt, False, args=["-CAfile", pki_ca])
t.ok(not tlslib.pem_certs(out), "s_client -noservername through splice: "
     "no certificate", out[-500:])
rc, out, err = tlslib.s_client(ap, tgt, "other.test", args=["-CAfile", pki_ca])
t.ok(not tlslib.pem_certs(out), "s_client -servername other.test through "
     "splice to api.test: no certificate", out[-500:])
t.done()
PY
stop_airlockd
finish
