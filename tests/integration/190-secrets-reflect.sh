#!/bin/sh
# Secrets: the reflection guard. The upstream sends the real secret back —
# in response headers, in a Content-Length body, in a chunked body with the
# value split across chunk boundaries at many offsets, close-delimited, in
# the Basic base64 form, URL-encoded, the SigV4 secret key and session
# token — over plain HTTP and intercepted HTTPS. The client never receives
# a value or an encoding of it (raw bytes checked), gets
# [airlock:redacted:NAME] instead, and every response is framed right:
# python's http.client reads it whole and the next request on the same
# connection works (HEAD, 204 and 304 included).
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"


HOSTS="api.test basic.test query.test sqs.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
echo '{}' >"$T/cases.json"
start_secup up -c "$T/cases.json"
UP_PORT=$SECUP_PORT
start_secup ups -c "$T/cases.json" -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
SEC_HDR="sk-LEAK-refl-$R-0123456789"
SEC_BASIC="pw-LEAK-$R"
SEC_Q="q-LEAK-$R/+= x&y"
SEC_SIG="AKIDREFL$R:sigsk-LEAK-$R/K7+b:tok-LEAK-$R/+="
SEC_PH="ph-LEAK-$R"
PH="airlock-ph-refl-$R"
export SEC_HDR SEC_BASIC SEC_Q SEC_SIG SEC_PH PH AIRLOCK_PORT UP_PORT UPS_PORT T

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts:
YAML
	for h in $HOSTS; do
		echo "    \"$h\": \"127.0.0.1\""
	done
	cat <<YAML
secrets:
  - name: hdr
    source: env:SEC_HDR
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: Authorization, value: "Bearer \${secret}"}
  - name: ph
    source: env:SEC_PH
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    placeholder: "$PH"
  - name: basicu
    source: env:SEC_BASIC
    hosts: ["basic.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {basic: {username: alice}}
  - name: qkey
    source: env:SEC_Q
    hosts: ["query.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {query: api_key}
  - name: sig
    source: env:SEC_SIG
    hosts: ["sqs.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {aws_sigv4: {region: us-east-1, service: sqs}}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], paths: ["/nosec/*"]}
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], secrets: [hdr]}
      - {host: "basic.test", ports: [$UP_PORT, $UPS_PORT], secrets: [basicu]}
      - {host: "query.test", ports: [$UP_PORT, $UPS_PORT], secrets: [qkey]}
      - {host: "sqs.test", ports: [$UP_PORT, $UPS_PORT], secrets: [sig]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "reflection checks"
import base64, http.client, json, os, urllib.parse
import itlib, seclib, tlslib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
t = itlib.Checks()
HDR, BASIC, Q, SIG, PHV, PH = (E[k] for k in ("SEC_HDR", "SEC_BASIC",
                                              "SEC_Q", "SEC_SIG", "SEC_PH",
                                              "PH"))
AKID, SK, TOK = SIG.split(":")
B64 = base64.b64encode(("alice:" + BASIC).encode()).decode()
QENC = urllib.parse.quote(Q, safe="-_.~")
FORBIDDEN = sorted(set(
    seclib.encodings(HDR) + seclib.encodings(BASIC, "alice") +
    seclib.encodings(Q) + seclib.encodings(SIG) + seclib.encodings(PHV) +
    [SK.encode(), TOK.encode(), QENC.encode(), B64.encode()]))

def red(name):
    return "[airlock:redacted:%s]" % name

# ---- the cases the upstream answers with; (upstream text, expected text)
cases = {}
expect = {}

def case(name, body_parts, headers=(), **kw):
    """body_parts / header values: lists of str (sent as is) or
    (secret text, secret name) (must arrive redacted)."""
    def build(parts):
        up, want = "", ""
        for p in parts:
            if isinstance(p, tuple):
                up += p[0]
                want += red(p[1])
            else:
                up += p
                want += p
        return up, want
    b_up, b_want = build(body_parts)
    hs_up, hs_want = [], []
    for k, parts in headers:
        u, w = build(parts)
        hs_up.append([k, u])
        hs_want.append((k, w))
    c = dict(kw)
    c["body"] = b_up
    c["headers"] = hs_up
    cases[name] = c
    expect[name] = (b_want, hs_want)

H = (HDR, "hdr")
case("hdr_headers", ["plain"], [("X-Reflect", ["token=", H]),
                                ("Set-Cookie", ["s=", H, "; Path=/"]),
                                ("X-Twice", [H, ",", H])])
case("hdr_cl", ["a", H, "b", H, "c"])
case("hdr_cl_only", [H])
case("hdr_eof", ["eof:", H, ":end"], framing="eof")
for size in (1, 3, 7):
    for off in (0, 1, 2, 5):
        case("hdr_chunk_%d_%d" % (size, off),
             ["x" * off, H, "y" * 5, H, "z"], framing="chunked",
             chunks=[size], delay=0.001)
case("hdr_chunk_mixed", ["<", H, "|", H, ">" * 9], framing="chunked",
     chunks=[1, 3, 7], delay=0.001)
# a prefix of the value shorter than reflect_min_run (12) at the very end,
# and one interrupted: kept as is (longer runs are redacted: 420-reflect-*)
case("hdr_tail_chunked", ["end:", HDR[:11]], framing="chunked", chunks=[3],
     delay=0.001)
case("hdr_tail_cl", ["end:", HDR[:11]])
case("hdr_almost", [HDR[:11] + "!", H, HDR[:5] + "?"], framing="chunked",
     chunks=[2], delay=0.001)
# the injected header as the upstream saw it, in a header and the body
case("hdr_echo", ["auth={{req:authorization}}"],
     [("X-Echo", ["{{req:authorization}}"])])
big = []
for i in range(20):
    big += ["." * 9973, H]
case("hdr_big", big, framing="chunked", chunks=[4093])
case("hdr_500", ["error: key ", H, " rejected"], status=500,
     reason="Internal Server Error")
case("hdr_404_chunked", ["no such key ", H], status=404, reason="Not Found",
     framing="chunked", chunks=[5])
case("hdr_head", [], [("X-Reflect", [H])])
case("hdr_204", [], [("X-Reflect", [H])], status=204, reason="No Content",
     framing="none")
case("hdr_304", [], [("X-Reflect", [H]), ("ETag", ['"e1"']),
                     ("Content-Length", ["42"])],
     status=304, reason="Not Modified", framing="none")
case("ph_echo", ["x={{req:x-custom}};v=", (PHV, "ph")],
     [("X-Echo", ["{{req:x-custom}}"])], framing="chunked", chunks=[4],
     delay=0.001)
# Basic: the base64 form that was sent, and the raw password
case("basic_b64", ["auth={{req:authorization}};raw=", (BASIC, "basicu"),
                   ";b64=", (B64, "basicu")],
     [("X-Echo", ["{{req:authorization}}"]),
      ("WWW-Authenticate", ['Basic realm="', (B64, "basicu"), '"'])],
     framing="chunked", chunks=[7], delay=0.001)
# query: the URL-encoded value as received, and the raw value
case("q_url", ["got={{query:api_key}};raw=", (Q, "qkey"), ";enc=",
               (QENC, "qkey")],
     [("Location", ["/next?api_key={{query:api_key}}"])],
     framing="chunked", chunks=[3], delay=0.001)
# SigV4: the secret key and the session token
case("sig_parts", ["sk=", (SK, "sig"), ";tok=", (TOK, "sig"), ";all=",
                   (SIG, "sig")],
     [("X-Token-Echo", ["{{req:x-amz-security-token}}"])],
     framing="chunked", chunks=[6], delay=0.001)
# the status line's reason phrase, an interim 103's headers, trailers
case("hdr_reason", ["r"], reason="Bad token {{req:authorization}}")
case("hdr_103", ["early"], framing="length",
     pre="HTTP/1.1 103 Early Hints\r\nLink: </s?k={{req:authorization}}>"
         "\r\n\r\n")
case("hdr_trailer", ["t"], framing="chunked", chunks=[1],
     trailers=[["X-Sig", "{{req:authorization}}"]])
# an upstream that compresses although asked for identity
import gzip
GZ = gzip.compress(("token=" + HDR + ";again=" + HDR).encode(), mtime=0)
assert b"{{" not in GZ
cases["hdr_gzip"] = {"headers": [["Content-Encoding", "gzip"]],
                     "body": GZ.decode("latin-1")}
# a WebSocket upgrade: the upstream sends the value in a text frame
cases["hdr_ws"] = {"raw": "HTTP/1.1 101 Switching Protocols\r\n"
                   "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                   "\r\n\x81%c{{req:authorization}}" % (7 + len(HDR))}
with open(T + "/cases.json.tmp", "w") as f:
    json.dump(cases, f)
os.rename(T + "/cases.json.tmp", T + "/cases.json")

# expected header echoes (the upstream fills these in from the request)
ECHO = {
    "hdr_echo": ("auth=Bearer " + red("hdr"),
                 [("X-Echo", "Bearer " + red("hdr"))]),
    "ph_echo": ("x=%s;v=%s" % (red("ph"), red("ph")),
                [("X-Echo", red("ph"))]),
    "basic_b64": ("auth=Basic %s;raw=%s;b64=%s" % ((red("basicu"),) * 3),
                  [("X-Echo", "Basic " + red("basicu")),
                   ("WWW-Authenticate", 'Basic realm="%s"' % red("basicu"))]),
    "q_url": ("got=%s;raw=%s;enc=%s" % ((red("qkey"),) * 3),
              [("Location", "/next?api_key=" + red("qkey"))]),
    "sig_parts": ("sk=%s;tok=%s;all=%s" % ((red("sig"),) * 3),
                  [("X-Token-Echo", red("sig"))]),
    # only the value must go from these; checked on the raw bytes below
    "hdr_reason": ("r", []),
    "hdr_103": ("early", []),
    "hdr_trailer": ("t", []),
}
for k, (b, hs) in ECHO.items():
    expect[k] = (b, hs)

HOST = {"hdr": "api.test", "ph": "api.test", "basic": "basic.test",
        "q": "query.test", "sig": "sqs.test"}

def check_resp(S, name, r, method="GET"):
    want_body, want_hdrs = expect[name]
    st = cases[name].get("status", 200)
    if not t.ok(r is not None and r.status == st, S + name + ": status %d"
                % st, repr(r)):
        return
    if method != "HEAD" and st not in (204, 304):
        t.ok(r.body == want_body.encode("latin-1"),
             S + name + ": body redacted exactly",
             repr(r.body[:300]) + " want " + repr(want_body[:300]))
    for k, v in want_hdrs:
        if k == "Content-Length":
            continue
        t.ok(r.header_all(k) == [v], S + name + ": header %s redacted" % k,
             r.header_all(k))
    te, cl = r.header("Transfer-Encoding"), r.header("Content-Length")
    t.ok(not (te and cl), S + name + ": not both Transfer-Encoding and "
         "Content-Length", r.headers)
    if cl is not None and method != "HEAD" and st not in (204, 304):
        t.ok(int(cl) == len(r.body), S + name + ": Content-Length matches",
             cl)

def send(c, name, method="GET", path=None, extra=()):
    key = name.split("_")[0]
    if path is None:
        path = "/r/" + name
    hdrs = ["X-Test-Case: " + name, "Accept-Encoding: gzip"] + list(extra)
    if key == "ph":
        hdrs.append("X-Custom: " + PH)
    return c.request(method, path, hdrs)

# control: straight from the upstream (no proxy), the values are there
for name, path, hdrs, needles in (
        ("hdr_chunk_1_0", "/", "", [HDR]),
        ("basic_b64", "/", "Authorization: Basic %s\r\n" % B64, [B64, BASIC]),
        ("q_url", "/?api_key=" + QENC, "", [QENC, Q]),
        ("sig_parts", "/", "", [SK, TOK])):
    s = itlib.connect(int(E["UP_PORT"]))
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nX-Test-Case: %s\r\n%s"
               "Connection: close\r\n\r\n" % (path, name, hdrs)).encode())
    r = itlib.read_response(itlib.Reader(s))
    s.close()
    t.ok(all(n.encode() in r.body + r.raw_head for n in needles),
         "control: the upstream itself sends the values for " + name)

for scheme in ("http", "https"):
    port = int(E["UPS_PORT"] if scheme == "https" else E["UP_PORT"])
    S = scheme + ": "
    conns = {}

    def conn(key):
        host = HOST[key]
        if host not in conns:
            conns[host] = Client(ap, scheme, host, port, CA)
        return conns[host]

    order = [n for n in cases if n not in ("hdr_head", "hdr_eof", "hdr_ws",
                                           "hdr_gzip")]
    for name in order:
        key = name.split("_")[0]
        c = conn(key)
        method = "GET"
        before = len(c.rd.raw)
        try:
            r = send(c, name, method)
            got = bytes(c.rd.raw[before:])
            bad = [f for f in FORBIDDEN if f in got]
            t.ok(not bad, S + name + ": no value or encoding in the raw "
                 "answer", repr(bad) + " in " + repr(got[:400]))
        except Exception as e:
            r = None
            t.ok(False, S + name + ": response read", repr(e))
            c.close()
            del conns[HOST[key]]
            continue
        check_resp(S, name, r, method)
        # the connection is still in step: a plain request answers
        try:
            r2 = c.request("GET", "/r/after-" + name, ["X-Mark: after"])
            ok = r2.status == 200 and r2.json().get("seq") is not None
        except Exception as e:
            ok, r2 = False, e
        if not t.ok(ok, S + name + ": next request on the same connection",
                    repr(r2)):
            c.close()
            del conns[HOST[key]]
    # HEAD with a reflected header, then a GET on the same connection
    c = conn("hdr")
    r = send(c, "hdr_head", "HEAD", "/r/hdr_head")
    check_resp(S, "hdr_head", r, "HEAD")
    try:
        r2 = c.request("GET", "/r/after-head", ["X-Mark: after"])
        ok = r2.status == 200 and r2.json().get("seq") is not None
    except Exception as e:
        ok, r2 = False, e
    t.ok(ok, S + "hdr_head: next request on the same connection", repr(r2))
    # close-delimited answer: complete, on a connection of its own
    c2 = Client(ap, scheme, "api.test", port, CA)
    try:
        r = send(c2, "hdr_eof")
        check_resp(S, "hdr_eof", r)
    except Exception as e:
        t.ok(False, S + "hdr_eof: close-delimited answer read whole", repr(e))
    raw = c2.received()
    c2.close()
    for cc in list(conns.values()):
        raw += cc.received()
        cc.close()
    bad = [f for f in FORBIDDEN if f in raw]
    t.ok(not bad, S + "no value or encoding in any byte the client got "
         "(%d bytes)" % len(raw), repr(bad))
    t.ok(raw.count(b"[airlock:redacted:") >= 60,
         S + "redaction markers arrived", raw.count(b"[airlock:redacted:"))

    # WebSocket: after the 101 the upstream's frames carry the value;
    # refusing the upgrade or redacting, the value must not arrive
    c = Client(ap, scheme, "api.test", port, CA)
    try:
        c.raw_request(c.build("GET", "/ws", [
            "X-Test-Case: hdr_ws", "Upgrade: websocket",
            "Connection: Upgrade", "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="]))
        c.sock.settimeout(1.5)
        c.rd.read_all()         # until the upstream closes, or 1.5s
    except Exception:
        pass
    bad = [f for f in FORBIDDEN if f in c.received()]
    t.ok(not bad, S + "WebSocket upgrade carrying a secret: the value does "
         "not reach the client through the frames", repr(c.received()[:300]))
    c.close()

    # Content-Encoding: gzip although identity was asked for: what the
    # client decodes must not hold the value (refused, or decoded and
    # redacted)
    c = Client(ap, scheme, "api.test", port, CA)
    try:
        r = c.request("GET", "/gz", ["X-Test-Case: hdr_gzip",
                                     "Accept-Encoding: gzip"])
        body = r.body
        if "gzip" in (r.header("Content-Encoding") or "") and r.status < 300:
            try:
                body = gzip.decompress(body)
            except Exception:
                pass
        bad = [f for f in FORBIDDEN if f in body or f in r.raw_head]
        t.ok(not bad, S + "gzip answer to a request with a secret: the "
             "decoded body holds no value", repr((r.status, r.headers,
                                                  body[:200])))
    except Exception as e:
        t.ok(True, S + "gzip answer: connection refused/closed (%r)" % e)
    c.close()

    # HTTP/1.0 client: the body ends with the connection
    c = Client(ap, scheme, "api.test", port, CA)
    if scheme == "https":
        target, extra = "/r/x", ""
    else:
        target, extra = "http://api.test:%d/r/x" % port, ""
    c.raw_request(("GET %s HTTP/1.0\r\nHost: api.test:%d\r\nX-Test-Case: "
                   "hdr_chunk_3_1\r\n\r\n" % (target, port)).encode())
    try:
        r = itlib.read_response(c.rd)
        check_resp(S + "HTTP/1.0 ", "hdr_chunk_3_1", r)
        t.ok(r.header("Transfer-Encoding") is None,
             S + "HTTP/1.0: no chunked coding towards an HTTP/1.0 client",
             r.headers)
    except Exception as e:
        t.ok(False, S + "HTTP/1.0 response", repr(e))
    bad = [f for f in FORBIDDEN if f in c.received()]
    t.ok(not bad, S + "HTTP/1.0: no value in the raw bytes", repr(bad))
    c.close()

    # python's http.client: reads each answer whole and keeps the
    # connection (no silent reconnect)
    class RecFile:
        def __init__(self, f, rec):
            self.f, self.rec = f, rec

        def read(self, *a):
            d = self.f.read(*a)
            self.rec += d
            return d

        def readline(self, *a):
            d = self.f.readline(*a)
            self.rec += d
            return d

        def readinto(self, b):
            n = self.f.readinto(b)
            if n:
                self.rec += bytes(b[:n])
            return n

        def close(self):
            self.f.close()

        def __getattr__(self, k):
            return getattr(self.f, k)

    class RecSock:
        def __init__(self, s):
            self._s = s
            self.rec = bytearray()

        def makefile(self, *a, **k):
            return RecFile(self._s.makefile(*a, **k), self.rec)

        def __getattr__(self, k):
            return getattr(self._s, k)

    if scheme == "https":
        hc = http.client.HTTPSConnection("127.0.0.1", ap, timeout=15,
                                         context=tlslib.context(CA))
        hc.set_tunnel("api.test", port)
        pre = ""
    else:
        hc = http.client.HTTPConnection("127.0.0.1", ap, timeout=15)
        pre = "http://api.test:%d" % port
    hc.connect()
    rs = RecSock(hc.sock)
    hc.sock = rs
    for name in ("hdr_cl", "hdr_chunk_1_0", "hdr_chunk_7_5", "hdr_big",
                 "hdr_500", "hdr_204", "hdr_304", "hdr_tail_chunked"):
        try:
            hc.request("GET", pre + "/hc/" + name,
                       headers={"X-Test-Case": name,
                                "Host": "api.test:%d" % port})
            resp = hc.getresponse()
            body = resp.read()
            st = cases[name].get("status", 200)
            want = expect[name][0].encode() if st not in (204, 304) else b""
            t.ok(resp.status == st and body == want and
                 hc.sock is rs and not resp.will_close,
                 S + "http.client " + name + ": whole answer, connection "
                 "kept", (resp.status, body[:200], resp.will_close))
        except Exception as e:
            t.ok(False, S + "http.client " + name, repr(e))
            break
    bad = [f for f in FORBIDDEN if f in rs.rec]
    t.ok(not bad and len(rs.rec) > 0,
         S + "http.client: no value in the raw bytes", repr(bad))
    hc.close()
t.done()
PY

stop_airlockd
finish
