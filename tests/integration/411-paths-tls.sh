#!/bin/sh
# The path and framing rules of 410 inside an intercepted TLS session
# (origin-form requests, the session names host and port): encoded slashes
# allowed and sent as written, two-way paths and "..;" refused, overrides
# judged, a request line refused before its target was read still audited
# with the session's host and port, and the connection closed after each
# 400. curl and python's ssl as clients, the TLS origin's log as witness.
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
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - host: "api.test"
        ports: [$TLS_PORT]
        methods: [GET, POST]
        paths: ["/@scope/*", "/v1/*"]
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PROXY=http://a:tok-a@127.0.0.1:$AIRLOCK_PORT
CA_A=$T/state/ca/a/ca.crt

code=$(curl -sS -x "$PROXY" --cacert "$CA_A" -o /dev/null -w '%{http_code}' \
    "https://api.test:$TLS_PORT/@scope%2fcurl?m=curl") ||
    fail "curl through the intercepted session failed"
[ "$code" = 404 ] || fail "curl https /@scope%2fcurl: status $code, want the origin's 404"
grep -q '^GET /@scope%2fcurl?m=curl HTTP/1.1' "$T/origin.log" ||
    fail "the TLS origin did not see /@scope%2fcurl byte for byte"
ok "curl over intercepted TLS: /@scope%2fcurl allowed and sent as written"

"$PYTHON" - <<'PY' || fail "TLS path checks"
import os, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
olog, alog = T + "/origin.log", T + "/audit.jsonl"
ctx = tlslib.context(T + "/state/ca/a/ca.crt")
target = "api.test:%d" % tp
t = itlib.Checks()

def session():
    return tlslib.TLSConn(ap, target, ctx, "api.test", auth="a:tok-a")

def records(marker):
    return [r for r in itlib.origin_records(olog) if marker.encode() in r]

def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    return itlib.audit_wait(alog, lambda a: a.get("id") == rid) \
        if rid else None

c = session()
for path, m in (("/@scope%2fname", "a1"), ("/@scope%2Fname", "a2")):
    r = c.get(path + "?m=" + m)
    t.ok(r.status == 404 and r.header("Server") == "airlock-origin",
         "https %s allowed by /@scope/*" % path, repr(r))
    t.ok(any(x.startswith(b"GET %s?m=%s HTTP/1.1\r\n" % (path.encode(),
             m.encode())) for x in itlib.origin_records(olog)),
         "TLS origin saw %s byte for byte" % path)
    a = audit_of(r)
    t.ok(a is not None and a.get("path") == path and
         a.get("tls") == "intercept" and a.get("rule") == "p#0",
         "audit of https %s" % path, repr(a))
c.close()

# refused paths: 400 inside TLS, connection closed, audited, never upstream
for path, m, status in (("/@scope/..%2F..%2Fadmin", "b1", 400),
                        ("/v1/..;/admin", "b2", 400),
                        ("/v1/%252e%252e/admin", "b3", 400),
                        ("/@other%2Fname", "b4", 403)):
    c = session()
    r = c.get(path + "?m=" + m)
    t.error(r, status, "bad_request" if status == 400 else "denied",
            "https %s → %d" % (path, status))
    t.ok(not records("m=%s " % m), "https %s never reached the origin" % path)
    a = audit_of(r)
    t.ok(a is not None and a.get("host") == "api.test" and
         a.get("port") == tp and a.get("path") == path and
         (status != 400 or m != "b3" or a.get("rule") == "p#0"),
         "audit of refused https %s: host, port, path" % path, repr(a))
    if status == 400:
        t.ok(c.closed_after(3), "the session closes after the 400")
    c.close()

# overrides: judged inside TLS too
c = session()
r = c.request("POST", "/v1/x?m=c1", headers=["X-HTTP-Method-Override: PUT",
                                              "Content-Length: 0"])
t.error(r, 403, "denied", "https POST overridden to PUT → 403")
t.ok(not records("m=c1 "), "overridden request never reached the origin")
c.close()

# framing inside TLS: refused, audited with the session's host and port
for m, raw in (("e1", b"GET  /v1/e1 HTTP/1.1\r\nHost: %s\r\n\r\n"),
               ("e2", b"POST /v1/e2 HTTP/1.1\r\nHost: %s\r\nConnection: "
                b"Content-Length\r\nContent-Length: 2\r\n\r\nhi"),
               ("e3", b"GET /v1/e3 HTTP/1.1\r\nHost: u@%s\r\n\r\n")):
    c = session()
    c.send(raw % target.encode())
    try:
        r = itlib.read_response(c.rd)
    except Exception as e:
        r = None
    t.error(r, 400, "bad_request", "https %s → 400" % m)
    t.ok(c.closed_after(3), "https %s: the session closes after the 400" % m)
    c.close()
    t.ok(not records("/v1/%s " % m), "https %s never reached the origin" % m)
    a = audit_of(r)
    t.ok(a is not None and a.get("host") == "api.test" and
         a.get("port") == tp, "https %s audited with the session's host and "
         "port" % m, repr(a))
t.done()
PY
stop_airlockd
finish
