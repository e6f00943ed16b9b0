#!/bin/sh
# TLS interception: a CONNECT to an allowed host is decrypted with a leaf
# certificate minted by the sandbox's own CA, and the requests inside go
# through the usual policy and audit. Four clients: curl, openssl s_client,
# python ssl/urllib, node https. The leaf's SAN, issuer and validity; it
# verifies with this sandbox's CA and not with another's; file modes of the
# CA; method/path policy inside TLS; idle upstream TLS connections reused.
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
tls: {leaf_validity: 2d}
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
        paths: ["/json/*", "/echo", "/stats", "/size/*"]
sandboxes:
  - {id: a, policy: p, token: "literal:tok-a"}
  - {id: b, policy: p, token: "literal:tok-b"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

PROXY=http://a:tok-a@127.0.0.1:$AIRLOCK_PORT
CA_A=$T/state/ca/a/ca.crt
CA_B=$T/state/ca/b/ca.crt
U=https://api.test:$TLS_PORT

# --- the CA files (created at start for static sandboxes)
for s in a b; do
	for f in ca.crt ca.key; do
		[ -s "$T/state/ca/$s/$f" ] || fail "no $T/state/ca/$s/$f"
	done
	m=$(stat -c %a "$T/state/ca/$s/ca.key")
	[ "$m" = 600 ] && ok "sandbox $s: ca.key mode 600" ||
	    check_fail "sandbox $s: ca.key mode $m, want 600"
	m=$(stat -c %a "$T/state/ca/$s/ca.crt")
	[ "$m" = 644 ] && ok "sandbox $s: ca.crt mode 644" ||
	    check_fail "sandbox $s: ca.crt mode $m, want 644"
done
cmp -s "$CA_A" "$CA_B" && check_fail "sandboxes a and b share a CA certificate"

# --- curl
code=$(curl -sS -x "$PROXY" --cacert "$CA_A" -D "$T/h1" -o "$T/b1" \
    -w '%{http_code}' "$U/json/64") || fail "curl through the proxy to $U/json/64 failed"
[ "$code" = 200 ] || fail "curl $U/json/64: status $code"
[ "$(wc -c <"$T/b1")" -eq 64 ] || fail "curl: body $(cat "$T/b1")"
grep -q '^{"' "$T/b1" || fail "curl: body is not the origin's JSON: $(cat "$T/b1")"
grep -qi '^Server: airlock-origin' "$T/h1" || fail "curl: not the origin's response: $(cat "$T/h1")"
rid=$(sed -n 's/^[Xx]-[Aa]irlock-[Rr]equest-[Ii]d: *//p' "$T/h1" | tr -d '\r')
[ -n "$rid" ] || fail "curl: no X-Airlock-Request-Id in $(cat "$T/h1")"
ok "curl: 200 and the origin's body through interception"
rec=$(audit_wait_id "$rid") || fail "no audit record $rid"
for kv in proto=https tls=intercept method=GET path=/json/64 status=200 \
    decision=allow rule=p#0 sandbox=a host=api.test port=$TLS_PORT \
    upstream=127.0.0.1:$TLS_PORT mode=explicit; do
	k=${kv%%=*}
	v=${kv#*=}
	got=$(audit_field "$rec" "$k")
	[ "$got" = "$v" ] && ok "curl audit $k=$v" ||
	    check_fail "curl audit $k='$got', want '$v' ($rec)"
done

# a CA of another sandbox does not make the handshake succeed
curl -sS -x "$PROXY" --cacert "$CA_B" -o /dev/null "$U/json/8" 2>"$T/e1"
rc=$?
[ "$rc" = 60 ] && ok "curl trusting only sandbox b's CA fails (60) for a's session" ||
    check_fail "curl with sandbox b's CA for sandbox a: exit $rc, want 60 ($(cat "$T/e1"))"
# and curl with b's credentials is served with b's CA
code=$(curl -sS -x "http://b:tok-b@127.0.0.1:$AIRLOCK_PORT" --cacert "$CA_B" \
    -o /dev/null -w '%{http_code}' "$U/json/8") || true
[ "$code" = 200 ] && ok "curl as sandbox b with b's CA" ||
    check_fail "curl as sandbox b with b's CA: status $code"

# curl: denied path and method inside TLS, as the gateway's JSON
code=$(curl -sS -x "$PROXY" --cacert "$CA_A" -o "$T/b2" -w '%{http_code}' \
    "$U/forbidden?m=curl403") || fail "curl denied path: curl failed"
body=$(cat "$T/b2")
if [ "$code" = 403 ] && [ "$(json_field "$body" error)" = denied ]; then
	ok "curl: denied path → 403 denied inside TLS"
else
	check_fail "curl denied path: $code $body"
fi
grep -q 'm=curl403' "$T/origin.log" && check_fail "denied path reached the origin"

# --- the leaf certificate as openssl s_client sees it, checked in python
"$PYTHON" - <<'PY' || check_fail "leaf certificate checks"
import os, re, time, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
ca_a, ca_b = T + "/state/ca/a/ca.crt", T + "/state/ca/b/ca.crt"
t = itlib.Checks()

def leaf(auth):
    rc, out, err = tlslib.s_client(ap, "api.test:%d" % tp, "api.test", auth,
                                   ["-showcerts"])
    certs = tlslib.pem_certs(out)
    t.ok(rc == 0 and certs, "s_client (%s) through the proxy gets a "
         "certificate" % auth.split(":")[0], (rc, out[-800:], err[-800:]))
    t.ok(len(certs) == 1, "the chain is the leaf alone (the CA is the "
         "client's trust anchor)", len(certs))
    return certs[0] if certs else None

now = time.time()
pa = leaf("a:tok-a")
pb = leaf("b:tok-b")
if pa and pb:
    for who, pem, mine, other in (("a", pa, ca_a, ca_b), ("b", pb, ca_b, ca_a)):
        i = tlslib.cert_info(pem)
        ca = tlslib.cert_info(tlslib.read(mine))
        t.ok(i["san"] == ["DNS:api.test"], "%s: SAN exactly DNS:api.test" % who,
             i["san"])
        t.ok(i["issuer"] == ca["subject"], "%s: issuer is the sandbox CA's "
             "subject" % who, (i["issuer"], ca["subject"]))
        t.ok(re.search(r"\b%s\b" % who, ca["subject"]),
             "%s: the CA subject names the sandbox" % who, ca["subject"])
        nb, na = i["not_before"], i["not_after"]
        t.ok(abs(nb - (now - 3600)) <= 300, "%s: notBefore is now-1h (±5 min)"
             % who, time.ctime(nb))
        t.ok(abs(na - (now + 2 * 86400)) <= 300, "%s: notAfter is now+2d "
             "(leaf_validity) ±5 min" % who, time.ctime(na))
        t.ok("prime256v1" in i["text"] or "P-256" in i["text"],
             "%s: ECDSA P-256 key" % who)
        t.ok(not ("CA:TRUE" in i["text"]), "%s: the leaf is not a CA" % who)
        good, out = tlslib.verify(pem, mine, strict=True)
        t.ok(good, "%s: leaf verifies with its sandbox's CA (x509_strict)" %
             who, out)
        bad, out = tlslib.verify(pem, other)
        t.ok(not bad, "%s: leaf does not verify with the other sandbox's CA"
             % who, out)
        ct = ca["text"]
        t.ok("CA:TRUE, pathlen:0" in ct, "%s: CA basicConstraints CA:TRUE, "
             "pathlen:0" % who)
        t.ok("Certificate Sign, CRL Sign" in ct, "%s: CA keyUsage "
             "keyCertSign, cRLSign" % who)
        t.ok("prime256v1" in ct or "P-256" in ct, "%s: CA key is P-256" % who)
    # random serials: the two leaves and the two CAs differ
    sa, sb = tlslib._x509(pa, "-serial"), tlslib._x509(pb, "-serial")
    t.ok(sa != sb, "leaf serials differ", (sa, sb))
    sa = tlslib._x509(tlslib.read(ca_a), "-serial")
    sb = tlslib._x509(tlslib.read(ca_b), "-serial")
    t.ok(sa != sb, "CA serials differ", (sa, sb))
# the private keys never show up in the log or the audit
for s in ("a", "b"):
    key = tlslib.read(T + "/state/ca/%s/ca.key" % s)
    body = "".join(l for l in key.splitlines() if not l.startswith("-----"))
    for f in ("airlockd.log", "airlockd.out", "audit.jsonl"):
        try:
            data = tlslib.read(T + "/" + f).replace("\n", "")
        except FileNotFoundError:
            continue
        t.ok(body[12:60] not in data, "ca.key of %s not in %s" % (s, f))
t.done()
PY

# --- python urllib with an ssl context, through the proxy (urllib sends
# Connection: close)
"$PYTHON" - <<'PY' || check_fail "urllib checks"
import json, os, ssl, urllib.error, urllib.request, itlib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
t = itlib.Checks()

def opener(ca):
    ctx = ssl.create_default_context(cafile=T + "/state/ca/%s/ca.crt" % ca)
    return urllib.request.build_opener(
        urllib.request.ProxyHandler(
            {"https": "http://a:tok-a@127.0.0.1:%d" % ap}),
        urllib.request.HTTPSHandler(context=ctx))

def fetch(o, req):
    """(status, headers, body) or (None, None, exception)"""
    try:
        with o.open(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        try:
            return e.code, e.headers, e.read()
        except Exception as e2:
            return None, None, e2
    except Exception as e:
        return None, None, e

oa = opener("a")
U = "https://api.test:%d" % tp
st, h, body = fetch(oa, U + "/json/100")
if t.ok(st == 200 and len(body) == 100 and json.loads(body),
        "urllib GET through the proxy → 200, whole body", (st, body)):
    rid = h["X-Airlock-Request-Id"]
    rec = itlib.audit_wait(T + "/audit.jsonl", lambda a: a.get("id") == rid)
    t.ok(rec is not None and rec.get("proto") == "https" and
         rec.get("tls") == "intercept" and rec.get("path") == "/json/100",
         "urllib request audited as https/intercept", rec)
st, h, body = fetch(oa, urllib.request.Request(U + "/echo", data=b"x=1" * 10,
                                               method="POST"))
t.ok(st == 200 and body.startswith(b"POST /echo HTTP/1.1\r\n") and
     h["X-Body-Bytes"] == "30", "urllib POST → 200, body relayed",
     (st, body))
st, h, body = fetch(oa, urllib.request.Request(U + "/echo", method="DELETE"))
try:
    j = json.loads(body)
except Exception:
    j = {}
t.ok(st == 403 and j.get("error") == "denied" and
     "DELETE" in j.get("reason", ""), "urllib DELETE → 403 denied",
     (st, body))
# the other sandbox's CA is not trusted for this session
st, h, e = fetch(opener("b"), U + "/json/8")
t.ok(st is None and isinstance(getattr(e, "reason", None),
                               ssl.SSLCertVerificationError),
     "urllib with sandbox b's CA fails certificate verification", e)
t.done()
PY

# --- node https over a CONNECT socket
if command -v node >/dev/null 2>&1; then
	cat >"$T/client.js" <<'JS'
'use strict';
const http = require('http'), https = require('https'), tls = require('tls');
const fs = require('fs');
// mode: keepalive (what an https.Agent with keepAlive, the default since
// node 19, sends) or close (node's Connection: close without an agent)
const [ap, tp, auth, caFile, path, mode] = process.argv.slice(2);
const ca = fs.readFileSync(caFile);
const target = 'api.test:' + tp;
const creq = http.request({
  host: '127.0.0.1', port: +ap, method: 'CONNECT', path: target,
  headers: {Host: target,
            'Proxy-Authorization': 'Basic ' + Buffer.from(auth).toString('base64')},
});
creq.on('connect', (res, socket, head) => {
  if (res.statusCode !== 200 || head.length) {
    console.log(JSON.stringify({connect: res.statusCode}));
    process.exit(3);
  }
  let ts = null;
  const req = https.request({
    host: 'api.test', port: +tp, path, method: 'GET', ca, servername: 'api.test',
    headers: mode === 'close' ? {} : {Connection: 'keep-alive'},
    createConnection: () => (ts = tls.connect({socket, servername: 'api.test', ca})),
  }, (r) => {
    const chunks = [];
    const s = ts;
    r.on('data', (d) => chunks.push(d));
    r.on('end', () => {
      console.log(JSON.stringify({status: r.statusCode, headers: r.headers,
        body: Buffer.concat(chunks).toString(),
        issuer: s.getPeerCertificate().issuer,
        alpn: s.alpnProtocol, authorized: s.authorized}));
      process.exit(0);
    });
  });
  req.on('error', (e) => { console.log(JSON.stringify({error: e.code || String(e)})); process.exit(4); });
  req.end();
});
creq.on('error', (e) => { console.log(JSON.stringify({error: String(e)})); process.exit(5); });
creq.end();
setTimeout(() => { console.log(JSON.stringify({error: 'timeout'})); process.exit(6); }, 5000);
JS
	node_client()
	{
		node "$T/client.js" "$AIRLOCK_PORT" "$TLS_PORT" a:tok-a "$@" 2>&1
	}
	NODE_OUT_OK=$(node_client "$CA_A" /json/77 keepalive)
	NODE_OUT_403=$(node_client "$CA_A" "/nope?m=node" keepalive)
	NODE_OUT_B=$(node_client "$CA_B" /json/8 keepalive)
	NODE_OUT_CLOSE=$(node_client "$CA_A" /json/77 close)
	NODE_OUT_CLOSE403=$(node_client "$CA_A" "/nope?m=node2" close)
	export NODE_OUT_OK NODE_OUT_403 NODE_OUT_B NODE_OUT_CLOSE NODE_OUT_CLOSE403
	"$PYTHON" - <<'PY' || check_fail "node checks"
import json, os, itlib
t = itlib.Checks()
def load(k):
    try:
        return json.loads(os.environ[k].strip().splitlines()[-1])
    except Exception:
        return {"unparsed": os.environ[k]}
ok, den, b = load("NODE_OUT_OK"), load("NODE_OUT_403"), load("NODE_OUT_B")
cl, cl403 = load("NODE_OUT_CLOSE"), load("NODE_OUT_CLOSE403")
t.ok(ok.get("status") == 200 and len(ok.get("body", "")) == 77 and
     ok.get("authorized") is True, "node https through CONNECT → 200", ok)
t.ok(ok.get("alpn") in (False, None, "http/1.1"), "node: no h2", ok.get("alpn"))
t.ok("sandbox a" in json.dumps(ok.get("issuer")), "node sees sandbox a's CA "
     "as issuer", ok.get("issuer"))
t.ok(den.get("status") == 403 and
     json.loads(den.get("body") or "{}").get("error") == "denied",
     "node: denied path → 403 denied", den)
t.ok(b.get("error") in ("UNABLE_TO_VERIFY_LEAF_SIGNATURE",
                        "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
                        "SELF_SIGNED_CERT_IN_CHAIN"),
     "node with sandbox b's CA: certificate rejected", b)
t.ok(cl.get("status") == 200 and len(cl.get("body", "")) == 77,
     "node https without an agent (Connection: close) → 200, whole body", cl)
t.ok(cl403.get("status") == 403 and
     json.loads(cl403.get("body") or "{}").get("error") == "denied",
     "node without an agent (Connection: close): denied path → 403", cl403)
t.done()
PY
else
	note "node not found: node client skipped"
fi

# --- policy inside TLS and upstream reuse, raw python ssl
"$PYTHON" - <<'PY' || check_fail "policy inside TLS and upstream reuse"
import os, itlib, tlslib
ap, tp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("TLS_PORT")
T = os.environ["T"]
audit, olog = T + "/audit.jsonl", T + "/origin.log"
t = itlib.Checks()
ctx = tlslib.context(T + "/state/ca/a/ca.crt")
A = "a:tok-a"
tgt = "api.test:%d" % tp

def seen(marker):
    return any(marker.encode() in r for r in itlib.origin_records(olog))

c = tlslib.TLSConn(ap, tgt, ctx, "api.test", A)
t.ok(c.tls.selected_alpn_protocol() is None, "no ALPN offered, none chosen")
r = c.get("/secret?m=p1")
if t.error(r, 403, "denied", "denied path inside TLS → 403 JSON"):
    t.ok("/secret" in r.json().get("reason", ""), "reason names the path",
         r.json())
    t.ok(r.header("X-Airlock-Request-Id") == r.json().get("request_id"),
         "request id header and body agree")
r = c.request("DELETE", "/echo?m=p2")
if t.error(r, 403, "denied", "denied method inside TLS → 403 JSON"):
    t.ok("DELETE" in r.json().get("reason", ""), "reason names the method",
         r.json())
r = c.request("TRACE", "/echo?m=p3")
t.error(r, 501, "not_implemented", "TRACE inside TLS → 501")
r = c.get("/json/10?m=p4")
t.ok(r is not None and r.status == 200 and len(r.body) == 10,
     "the session goes on after denials", repr(r))
c.close()
t.ok(not seen("m=p1") and not seen("m=p2") and not seen("m=p3"),
     "denied requests never reached the origin")
rec = itlib.audit_wait(audit, lambda a: (a.get("path") or "").startswith(
    "/secret"), 10)
t.ok(rec is not None and rec.get("decision") == "deny" and
     rec.get("status") == 403 and rec.get("proto") == "https" and
     rec.get("tls") == "intercept", "denial audited as https/intercept", rec)

# Connection: close and HTTP/1.0 inside TLS: the whole response, then
# the end of the session
for what, data, status, n in (
        ("Connection: close, origin's response",
         b"GET /json/100?m=c1 HTTP/1.1\r\nHost: %s\r\nConnection: close"
         b"\r\n\r\n" % tgt.encode(), 200, 100),
        ("Connection: close, 100 KB",
         b"GET /size/100000?m=c2 HTTP/1.1\r\nHost: %s\r\nConnection: "
         b"close\r\n\r\n" % tgt.encode(), 200, 100000),
        ("HTTP/1.0, origin's response",
         b"GET /json/100?m=c3 HTTP/1.0\r\nHost: %s\r\n\r\n" % tgt.encode(),
         200, 100),
        ("Connection: close, the gateway's 403",
         b"GET /nope?m=c4 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
         % tgt.encode(), 403, None)):
    c = tlslib.TLSConn(ap, tgt, ctx, "api.test", A)
    c.send(data)
    try:
        r = itlib.read_response(c.rd)
        err = None
    except Exception as e:
        r, err = None, repr(e)
    if t.ok(r is not None and r.status == status and
            (n is None or len(r.body) == n) and
            (status != 403 or r.json().get("error") == "denied"),
            what + ": complete response inside TLS", err or repr(r)):
        t.ok(c.closed_after(3), what + ": then the session ends")
    c.close()

# the certificate cache (shared by the workers): every connection of a
# sandbox to a host gets the same leaf
pems = set()
for i in range(6):
    c = tlslib.TLSConn(ap, tgt, ctx, "api.test", A)
    pems.add(c.peer_pem())
    c.close()
t.ok(len(pems) == 1, "6 connections (2 workers) get one cached leaf",
     len(pems))

# several requests on one client connection: one upstream connection
c = tlslib.TLSConn(ap, tgt, ctx, "api.test", A)
conns = []
for i in range(5):
    r = c.get("/json/20?m=k%d" % i)
    t.ok(r.status == 200, "keep-alive request %d" % i, repr(r))
    conns.append(r.header("X-Origin-Conn"))
c.close()
t.ok(len(set(conns)) == 1, "5 requests on one client connection share one "
     "upstream connection", conns)

# new client connections one after the other: the idle upstream TLS
# connection is handed to the next one (a pool per worker at most)
st0 = tlslib.origin_stats_direct(tp, T + "/pki/ca.crt")
seq = []
for i in range(8):
    c = tlslib.TLSConn(ap, tgt, ctx, "api.test", A)
    r = c.get("/json/20?m=n%d" % i)
    t.ok(r.status == 200, "request on new client connection %d" % i, repr(r))
    seq.append(r.header("X-Origin-Conn"))
    c.close()
st1 = tlslib.origin_stats_direct(tp, T + "/pki/ca.crt")
newconns = st1["connections"] - st0["connections"] - 1
t.ok(len(set(seq)) <= 2, "8 client connections in turn use at most 2 "
     "upstream connections (2 workers)", seq)
t.ok(newconns <= 2 and st1["requests"] - st0["requests"] == 9,
     "origin /stats: at most 2 new upstream connections for 8 requests",
     (st0, st1))
t.done()
PY

stop_airlockd
finish
