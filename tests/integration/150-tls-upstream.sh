#!/bin/sh
# The upstream side of interception: the real host's certificate is
# verified against upstream.ca_file (system store by default) with its
# hostname checked; an expired, wrong-host, self-signed or untrusted
# certificate gives 502 upstream_tls_failed inside the client's TLS
# session, audited with the verification error.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
P=$T/pki
start_origin origin -C "$P/good.crt" -K "$P/good.key"
GOOD_PORT=$ORIGIN_PORT
start_origin expired -C "$P/expired.crt" -K "$P/expired.key"
EXPIRED_PORT=$ORIGIN_PORT
start_origin wronghost -C "$P/wronghost.crt" -K "$P/wronghost.key"
WRONG_PORT=$ORIGIN_PORT
start_origin selfsigned -C "$P/selfsigned.crt" -K "$P/selfsigned.key"
SELF_PORT=$ORIGIN_PORT
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT GOOD_PORT EXPIRED_PORT WRONG_PORT SELF_PORT T

# write_config FILE PORT AUDIT CA-LINE
write_config()
{
	{
		echo "listen: {proxy: \"127.0.0.1:$2\", default_sandbox: a}"
		echo "state_dir: $T/state"
		echo "workers: 2"
		echo "audit: {file: $3}"
		cat <<YAML
upstream:
$4
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - host: "api.test"
        ports: [$GOOD_PORT, $EXPIRED_PORT, $WRONG_PORT, $SELF_PORT]
        paths: ["/json/*"]
      - host: "127.0.0.1"
        ports: [$GOOD_PORT, $WRONG_PORT]
        paths: ["/json/*"]
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
	} >"$1"
}
write_config "$T/airlock.yaml" "$AIRLOCK_PORT" "$T/audit.jsonl" \
    "  ca_file: $P/ca.crt"
start_airlockd "$T/airlock.yaml"

# curl: the 502 arrives as a normal HTTPS response
code=$(curl -sS -x "http://127.0.0.1:$AIRLOCK_PORT" --cacert "$T/state/ca/a/ca.crt" \
    -o "$T/b1" -w '%{http_code}' "https://api.test:$EXPIRED_PORT/json/8") ||
    check_fail "curl to the expired upstream: curl failed"
if [ "$code" = 502 ] && [ "$(json_field "$(cat "$T/b1")" error)" = upstream_tls_failed ]; then
	ok "curl: expired upstream certificate → 502 upstream_tls_failed inside TLS"
else
	check_fail "curl to the expired upstream: $code $(cat "$T/b1")"
fi

"$PYTHON" - <<'PY' || check_fail "upstream verification checks"
import os, re, itlib, tlslib
ap = itlib.env_int("AIRLOCK_PORT")
T = os.environ["T"]
audit = T + "/audit.jsonl"
ctx = tlslib.context(T + "/state/ca/a/ca.crt")
t = itlib.Checks()

def fetch(host, port, path):
    c = tlslib.TLSConn(ap, "%s:%d" % (host, port), ctx, host)
    r = c.get(path)
    cl = c.client
    c.close()
    return r, cl

def origin_requests(name):
    return len(itlib.origin_records(T + "/%s.log" % name))

for name, port, verr in (
        ("expired", "EXPIRED_PORT", r"certificate has expired"),
        ("wronghost", "WRONG_PORT", r"hostname mismatch|host ?name"),
        ("selfsigned", "SELF_PORT", r"self[- ]signed")):
    p = itlib.env_int(port)
    r, cl = fetch("api.test", p, "/json/8?m=" + name)
    what = "%s upstream certificate" % name
    if t.error(r, 502, "upstream_tls_failed", what + " → 502 "
               "upstream_tls_failed inside TLS"):
        t.ok(r.header("X-Airlock-Request-Id") == r.json()["request_id"],
             what + ": request id header")
    rec = itlib.audit_wait(audit, lambda a: a.get("client") == cl and
                           a.get("path") == "/json/8", 10)
    if t.ok(rec is not None, what + ": audited"):
        t.ok(rec.get("status") == 502 and rec.get("proto") == "https" and
             rec.get("tls") == "intercept", what + ": audit status 502, "
             "https, intercept", rec)
        t.ok(re.search(verr, rec.get("reason") or "", re.I),
             what + ": audit reason has the verification error /%s/" % verr,
             rec.get("reason"))
    t.ok(origin_requests(name) == 0, what + ": no request reached the "
         "origin", origin_requests(name))

# IP-literal upstreams: checked against the certificate's IP SANs
r, cl = fetch("127.0.0.1", itlib.env_int("GOOD_PORT"), "/json/8")
t.ok(r.status == 200, "IP-literal upstream with an IP SAN → 200", repr(r))
r, cl = fetch("127.0.0.1", itlib.env_int("WRONG_PORT"), "/json/8")
t.error(r, 502, "upstream_tls_failed", "IP-literal upstream whose "
        "certificate has no such IP → 502")
# the good upstream, several times (also reused from the pool)
for i in range(3):
    r, cl = fetch("api.test", itlib.env_int("GOOD_PORT"), "/json/8")
    t.ok(r.status == 200 and len(r.body) == 8, "good upstream → 200", repr(r))
# a failed upstream does not poison the session: 502, then 200 on the
# same client connection for another allowed port
c = tlslib.TLSConn(ap, "api.test:%d" % itlib.env_int("EXPIRED_PORT"), ctx,
                   "api.test")
r = c.get("/json/8")
t.error(r, 502, "upstream_tls_failed", "502 on a kept-alive session")
if not c.closed_after(0.3):
    r = c.get("/json/8")
    t.error(r, 502, "upstream_tls_failed", "and again 502 (not cached as good)")
c.close()
t.done()
PY
stop_airlockd

# ca_file unset: the system store does not know the test CA
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT
write_config "$T/airlock-sys.yaml" "$AIRLOCK_PORT" "$T/audit-sys.jsonl" ""
start_airlockd "$T/airlock-sys.yaml"
"$PYTHON" - <<'PY' || check_fail "system trust store checks"
import os, re, itlib, tlslib
ap, gp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("GOOD_PORT")
T = os.environ["T"]
t = itlib.Checks()
n = len(itlib.origin_records(T + "/origin.log"))
c = tlslib.TLSConn(ap, "api.test:%d" % gp,
                   tlslib.context(T + "/state/ca/a/ca.crt"), "api.test")
r = c.get("/json/8?m=sys")
cl = c.client
c.close()
t.error(r, 502, "upstream_tls_failed", "ca_file unset (system store): the "
        "test CA's certificate → 502")
rec = itlib.audit_wait(T + "/audit-sys.jsonl", lambda a: a.get("client") == cl
                       and a.get("path") == "/json/8", 10)
t.ok(rec is not None and rec.get("status") == 502 and
     re.search(r"local issuer|unable to get|self[- ]signed|verify",
               rec.get("reason") or "", re.I),
     "system store: audited with the verification error", rec)
t.ok(len(itlib.origin_records(T + "/origin.log")) == n,
     "system store: the request never reached the origin")
t.done()
PY
stop_airlockd
finish
