#!/bin/sh
# Denials reach the agent (issue 15 point 4). A CONNECT policy denies is
# answered "200", the TLS handshake completes with a leaf from the
# sandbox's CA (cached like any other), and the JSON 403 (denied, the
# reason) comes inside TLS, then the connection closes; curl prints the
# body and exits 0, python requests gets the 403 and its reason; without
# the CA the client fails verification (audited: the denial and the failed
# handshake). CONNECT-level 403 instead: an IP literal in a denied network
# (at once), a name that cannot be a certificate subject, past the per-
# sandbox bound of such handshakes (20 at once, then 10 a second); a client
# that sends nothing after the 200 gets the 403 as plain HTTP, and one
# that sends an HTTP request gets its 403 in plain HTTP.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T

{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
      - {host: "127.0.0.1", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: b, policy: p, token: "literal:tok-b"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://a:tok-a@127.0.0.1:$AIRLOCK_PORT
CA=$T/state/ca/a/ca.crt

# --- curl with the sandbox CA: the JSON body, exit 0
LPORT=$(free_port)
code=$(curl -sS -p --local-port "$LPORT" -x "$PROXY" --cacert "$CA" \
    -D "$T/h1" -o "$T/b1" -w '%{http_code}' https://denied.test/ 2>"$T/e1")
rc=$?
if [ "$rc" = 0 ] && [ "$code" = 403 ] &&
    grep -q '^{"error":"denied","reason":"host denied.test is not allowed","request_id":"' "$T/b1"; then
	ok "curl -p https://denied.test/ with the CA: exit 0, JSON 403 with the reason"
else
	check_fail "curl denied.test: exit $rc status '$code' $(cat "$T/b1" "$T/e1")"
fi
grep -qi '^Connection: close' "$T/h1" && ok "the 403 says Connection: close" ||
    check_fail "no Connection: close on the in-TLS 403: $(cat "$T/h1")"
RID=$(sed -n 's/^X-Airlock-Request-Id: *\([0-9a-f]*\).*/\1/p' "$T/h1")
LPORT=$LPORT RID=$RID "$PYTHON" - <<'PY' || check_fail "curl denial audit"
import os, itlib, tlslib
t = itlib.Checks()
rec = tlslib.audit_client(os.environ["T"] + "/audit.jsonl",
                          "127.0.0.1:" + os.environ["LPORT"])
t.ok(rec is not None and rec.get("id") == os.environ["RID"] and
     rec.get("decision") == "deny" and rec.get("status") == 403 and
     rec.get("reason") == "host denied.test is not allowed" and
     rec.get("host") == "denied.test" and rec.get("port") == 443 and
     rec.get("method") == "CONNECT" and rec.get("sandbox") == "a" and
     rec.get("tls") == "intercept",
     "one audit record: id = X-Airlock-Request-Id, deny 403, reason, host, "
     "port, CONNECT, tls intercept", rec)
t.done()
PY

# --- curl without the CA: verification fails (expected), audited
LPORT=$(free_port)
curl -sS --local-port "$LPORT" -x "$PROXY" -o /dev/null \
    https://denied.test/ 2>"$T/e2"
rc=$?
[ "$rc" = 60 ] && ok "curl without the sandbox CA: exit 60 (not verified)" ||
    check_fail "curl without the CA: exit $rc, want 60 ($(cat "$T/e2"))"
LPORT=$LPORT "$PYTHON" - <<'PY' || check_fail "untrusting client audit"
import os, itlib, tlslib
t = itlib.Checks()
rec = tlslib.audit_client(os.environ["T"] + "/audit.jsonl",
                          "127.0.0.1:" + os.environ["LPORT"])
r = (rec or {}).get("reason") or ""
t.ok(rec is not None and rec.get("decision") == "deny" and
     r.startswith("host denied.test is not allowed; client TLS handshake "
                  "failed") and "unknown ca" in r.lower(),
     "audited deny: the denial, then the failed handshake", rec)
t.done()
PY

# --- python requests (the system python's python3-requests)
if "$SYS_PYTHON" -c 'import requests' 2>/dev/null; then
	"$SYS_PYTHON" - <<'PY' || check_fail "python requests checks"
import os, sys, requests
sys.path.insert(0, os.environ["top_srcdir"] + "/tests/integration")
import itlib
ap = itlib.env_int("AIRLOCK_PORT")
T = os.environ["T"]
t = itlib.Checks()
px = {"https": "http://a:tok-a@127.0.0.1:%d" % ap}
r = requests.get("https://denied.test/v1/x", proxies=px,
                 verify=T + "/state/ca/a/ca.crt", timeout=20)
t.ok(r.status_code == 403 and r.json().get("error") == "denied" and
     r.json().get("reason") == "host denied.test is not allowed",
     "requests: 403 with the JSON reason", (r.status_code, r.text))
t.ok(r.headers.get("X-Airlock-Request-Id") == r.json().get("request_id"),
     "requests: X-Airlock-Request-Id = request_id", r.headers)
try:
    requests.get("https://denied.test/", proxies=px, timeout=20)
    t.ok(False, "requests without the sandbox CA must fail verification")
except requests.exceptions.SSLError as e:
    t.ok("CERTIFICATE_VERIFY_FAILED" in str(e),
         "requests without the CA: SSLError, certificate verify failed", e)
t.done()
PY
else
	note "$SYS_PYTHON has no requests module (python3-requests): requests part not run"
fi

# --- raw clients: leaf cache, what is refused on the CONNECT, silence,
# plain HTTP, the rate bound
"$PYTHON" - <<'PY' || check_fail "denial checks"
import os, socket, ssl, time, itlib, tlslib
from itlib import Reader, read_response
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
ca = T + "/state/ca/a/ca.crt"
t = itlib.Checks()


def denied_in_tls(target, sni, auth="a:tok-a", cafile=ca):
    """CONNECT, handshake, one request: (peer cert DER, response)."""
    c = tlslib.TLSConn(ap, target, tlslib.context(cafile), sni, auth=auth)
    der = c.tls.getpeercert(True)
    r = c.get("/x")
    closed = c.closed_after(3)
    c.close()
    return der, r, closed


# the leaf for a denied name is minted once and cached
d1, r1, closed = denied_in_tls("denied2.test:443", "denied2.test")
d2, r2, _ = denied_in_tls("denied2.test:443", "denied2.test")
t.error(r1, 403, "denied", "denied2.test → 403 inside TLS")
t.ok(closed, "the connection closes after the in-TLS 403")
pem = ssl.DER_cert_to_PEM_cert(d1)
t.ok(tlslib.cert_info(pem)["san"] == ["DNS:denied2.test"] and
     tlslib.verify(pem, ca)[0], "the leaf names denied2.test and verifies "
     "with the sandbox CA")
t.ok(d1 == d2, "the same leaf comes back (cached)")

# an IP literal policy denies (not a denied network): an IP SAN leaf
c = tlslib.TLSConn(ap, "127.0.0.1:1", tlslib.context(ca), "127.0.0.1",
                   auth="a:tok-a")
t.ok(tlslib.cert_info(c.peer_pem())["san"] == ["IP Address:127.0.0.1"],
     "127.0.0.1:1: IP SAN leaf")
r = c.get("/x")
c.close()
if t.error(r, 403, "denied", "127.0.0.1:1 → 403 inside TLS"):
    t.ok(r.json()["reason"] == "port 1 is not allowed for host 127.0.0.1",
         "reason names the port", r.json())

# refused on the CONNECT itself
for target, why in (
        ("10.1.2.3:443", "destination 10.1.2.3 is in denied network "
         "10.0.0.0/8"),
        ("169.254.169.254:80", "destination 169.254.169.254 is in denied "
         "network 169.254.0.0/16"),
        ("[::1]:443", "destination ::1 is in denied network ::1/128"),
        ("bad_name.test:443", "host bad_name.test is not allowed"),
        ("-lead.test:443", "host -lead.test is not allowed")):
    t0 = time.time()
    try:
        s, r = tlslib.proxy_connect(ap, target, "a:tok-a")
        s.close()
        t.ok(False, "CONNECT %s → 403 on the CONNECT" % target, repr(r))
        continue
    except tlslib.ProxyRefused as e:
        r = e.resp
    if t.error(r, 403, "denied", "CONNECT %s → 403 on the CONNECT" % target):
        t.ok(r.json()["reason"] == why, "reason: " + why, r.json())
    if target.startswith("1"):
        t.ok(time.time() - t0 < 2, "CONNECT %s refused at once" % target)

# nothing after the 200: the 403 as plain HTTP once the short wait is over
s, r = tlslib.proxy_connect(ap, "denied3.test:443", "a:tok-a")
cl = tlslib.client_addr(s)
rd = Reader(s)
s.settimeout(20)
t0 = time.time()
try:
    r = read_response(rd)
except Exception as e:
    r = None
waited = time.time() - t0
if t.error(r, 403, "denied", "silent client: the 403 in plain HTTP"):
    t.ok(r.json()["reason"] == "host denied3.test is not allowed",
         "silent client: the reason", r.json())
t.ok(2.5 <= waited < 15, "silent client: answered after the ~3 s wait",
     waited)
t.ok(rd.closed_after(3), "silent client: closed after the 403")
s.close()
rec = tlslib.audit_client(audit, cl)
t.ok(rec is not None and rec.get("status") == 403 and
     rec.get("decision") == "deny" and rec.get("proto") == "tunnel" and
     "tls" not in rec and rec.get("method") == "CONNECT",
     "silent client audited: CONNECT, tunnel, 403, deny", rec)

# an HTTP request after a denied CONNECT: its 403 in plain HTTP
s, r = tlslib.proxy_connect(ap, "denied4.test:80", "a:tok-a")
cl = tlslib.client_addr(s)
rd = Reader(s)
s.sendall(b"GET /plain HTTP/1.1\r\nHost: denied4.test\r\n\r\n")
r = read_response(rd)
if t.error(r, 403, "denied", "HTTP after a denied CONNECT → JSON 403"):
    t.ok(r.json()["reason"] == "host denied4.test is not allowed",
         "plain 403 reason", r.json())
s.close()
rec = tlslib.audit_client(audit, cl)
t.ok(rec is not None and rec.get("status") == 403 and
     rec.get("proto") == "http" and rec.get("method") == "GET" and
     rec.get("path") == "/plain" and rec.get("decision") == "deny",
     "audited as the http request it was", rec)

# the handshake bound, per sandbox: sandbox b spends its burst
n200 = n403 = 0
reasons = set()
t0 = time.time()
for i in range(60):
    try:
        s, r = tlslib.proxy_connect(ap, "flood%d.test:443" % i, "b:tok-b")
        s.close()
        n200 += 1
    except tlslib.ProxyRefused as e:
        n403 += 1
        if e.resp.status == 403:
            reasons.add(e.resp.json()["reason"])
elapsed = time.time() - t0
t.ok(20 <= n200 <= 20 + 10 * elapsed + 1 and n403 == 60 - n200,
     "60 denied CONNECTs at once: the burst of 20 (+10/s) get TLS, the "
     "rest a CONNECT-level 403", (n200, n403, elapsed))
t.ok(reasons and all(x.endswith("(answered on the CONNECT: over 10 denied "
                                "TLS sessions a second)") for x in reasons),
     "past the bound the reason says so", reasons)
der, r, _ = denied_in_tls("denied5.test:443", "denied5.test")
t.error(r, 403, "denied", "another sandbox keeps its own bound (TLS 403)")
time.sleep(1.5)
try:
    s, r = tlslib.proxy_connect(ap, "flood-later.test:443", "b:tok-b")
    s.close()
    t.ok(r.status == 200, "1.5 s later sandbox b gets TLS again")
except tlslib.ProxyRefused as e:
    t.ok(False, "1.5 s later sandbox b gets TLS again", repr(e.resp))

# everyone else is still served
r = itlib.roundtrip(ap, b"GET http://api.test:%d/echo HTTP/1.1\r\nHost: "
                    b"api.test:%d\r\nProxy-Authorization: Basic YTp0b2stYQ=="
                    b"\r\n\r\n" % (op, op))
t.ok(r is not None and r.status == 200, "an allowed request is served",
     repr(r))
t.done()
PY

stop_airlockd
finish
