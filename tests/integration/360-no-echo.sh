#!/bin/sh
# Error pages never echo (issue #8 point 5). Every status of SPEC's table
# of answers the gateway gives itself (and the "more statuses" 413, 414,
# 501, 505, plus 408) is provoked over plain HTTP, on the CONNECT itself
# and inside intercepted HTTPS, by requests carrying distinctive canaries:
# Cookie, Authorization, Proxy-Authorization (the sandbox token), User-
# Agent, a custom header, the query, a secret's placeholder, the secret's
# real value, and inside TLS a Host header naming another host. The
# complete raw answer (head and body) must hold none of them, nor their
# base64 or percent-encoded forms; each answer has SPEC's JSON body (exactly
# error, reason, request_id; an allowlist denial also rule_hint, itself
# free of every canary) and X-Airlock-Request-Id; a status of the
# table that was not produced fails the test. The daemon's log and the
# audit never hold the secret, the tokens or the credentials.
#
# The request path carries a canary too; a 403 for a path rule names the
# (normalised) path by design (020-allow-deny), so none is provoked here.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
P=$T/pki
start_origin origin
OP=$ORIGIN_PORT
start_origin tlsorigin -C "$P/good.crt" -K "$P/good.key"
TP=$ORIGIN_PORT
start_origin selfsigned -C "$P/selfsigned.crt" -K "$P/selfsigned.key"
SP=$ORIGIN_PORT
DP=$(free_port)	# nothing listens there: upstream_unreachable
AIRLOCK_PORT=$(free_port)
mkdir -p "$T/adir"
export AIRLOCK_PORT OP TP SP DP T

rules()
{
	cat <<YAML
    rules:
      - {host: "api.test", ports: [$OP, $TP], methods: [POST], paths: ["/v1/*"], meter: openai}
      - {host: "api.test", ports: [$OP, $TP, $SP], methods: [GET, POST, HEAD], secrets: [key]}
      - {host: "other.test", ports: [$OP, $TP], methods: [GET]}
      - {host: "down.test", ports: [$DP], secrets: [key]}
YAML
}
{
	cat <<YAML
listen: {proxy: "127.0.0.1:$AIRLOCK_PORT", default_sandbox: local}
state_dir: $T/state
workers: 2
audit: {file: $T/adir/audit.jsonl}
limits: {header_bytes: 16KiB, header_timeout: 1s, upstream_timeout: 1s, body_bytes: 1KiB, max_connections_per_sandbox: 6}
upstream:
  ca_file: $P/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "other.test": "127.0.0.1", "down.test": "127.0.0.1"}
pricing:
  - {model: "*", input: 1, output: 1}
secrets:
  - name: key
    source: "literal:REAL-secret-9c1e7d0a"
    hosts: ["api.test", "down.test"]
    allow_plaintext: true   # also checked over plain HTTP
    placeholder: "airlock:ph-canary-51b0"
    inject: {header: X-Api-Key, value: "Key \${secret}"}
policies:
  - name: p
YAML
	rules
	echo "  - name: capped"
	rules
	echo "    caps: {requests: 1}"
	echo "  - name: rated"
	rules
	echo "    caps: {rate: 1/h}"
	cat <<YAML
sandboxes:
  - {id: local, policy: p, token: "literal:tok-local-canary-77aa"}
  - {id: cap, policy: capped, token: "literal:tok-cap-canary-88bb"}
  - {id: rate, policy: rated, token: "literal:tok-rate-canary-99cc"}
  - {id: ov, policy: p, token: "literal:tok-ov-canary-aadd"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "no-echo checks"
import base64, json, os, shutil, socket, ssl, time, urllib.parse
import itlib
from itlib import Reader, read_response, connect, Closed

ap, OP, TP, SP, DP = (itlib.env_int(k) for k in
                      ("AIRLOCK_PORT", "OP", "TP", "SP", "DP"))
T = os.environ["T"]
t = itlib.Checks()

SECRET = "REAL-secret-9c1e7d0a"
PH = "airlock:ph-canary-51b0"
TOK = {"local": "tok-local-canary-77aa", "cap": "tok-cap-canary-88bb",
       "rate": "tok-rate-canary-99cc", "ov": "tok-ov-canary-aadd"}
CANARY = {
    "cookie": "ck-cookie-canary-a1b2",
    "authz": "az-authz-canary-c3d4",
    "ua": "ua-agent-canary-e5f6",
    "custom": "xc-custom-canary-0718",
    "query": "qv-query-canary-293a",
    "host": "hh-host-canary-4b5c.test",
}
WRONG = "wrong-token-canary-6d7e"


def b64(s):
    return base64.b64encode(s.encode()).decode()


def forms():
    """Every canary in every form an answer could carry it."""
    vals = list(CANARY.values()) + [SECRET, PH, WRONG] + list(TOK.values())
    out = set()
    for v in vals:
        out |= {v, b64(v), urllib.parse.quote(v, safe=""),
                urllib.parse.quote_plus(v), json.dumps(v)[1:-1]}
    for sb, tok in TOK.items():
        out |= {b64("%s:%s" % (sb, tok)), b64("%s:%s" % (sb, WRONG))}
    out |= {b64("Key " + SECRET), "Bearer " + CANARY["authz"]}
    # a form shorter than this would match by chance
    return sorted(f for f in out if len(f) >= 12)


FORMS = [f.lower().encode() for f in forms()]
PATH = "/n/pth-canary-8e9f"
QUERY = "?q=%s&k=%s" % (CANARY["query"], urllib.parse.quote(PH))


def heads(sb="local", tok=None, auth=True):
    h = ("Cookie: sid=%s; theme=dark\r\n"
         "Authorization: Bearer %s\r\n"
         "User-Agent: %s\r\n"
         "X-Custom: %s\r\n"
         "X-Placeholder: %s\r\n"
         "X-Real-Secret: %s\r\n" % (CANARY["cookie"], CANARY["authz"],
                                    CANARY["ua"], CANARY["custom"], PH,
                                    SECRET))
    if auth:
        h += "Proxy-Authorization: Basic %s\r\n" % b64(
            "%s:%s" % (sb, tok if tok is not None else TOK[sb]))
    return h.encode()


def request(method, url, sb="local", tok=None, extra=b"", body=b"",
            version=b"HTTP/1.1", host=None, auth=True, end=True):
    u = urllib.parse.urlsplit(url)
    if host is None:
        host = u.netloc
    out = b"%s %s %s\r\nHost: %s\r\n" % (method.encode(), url.encode(),
                                         version, host.encode())
    out += heads(sb, tok, auth) + extra
    if end:
        out += b"\r\n" + body
    return out


produced = {}   # (status, code) -> set of modes


def check(what, mode, r, raw, status, code):
    err = itlib.check_error(r, status, code)
    t.ok(err is None, "%s [%s] → %d %s" % (what, mode, status, code), err)
    if r is None:
        return
    try:
        keys = set(r.json())
    except ValueError:
        keys = None
    # an allowlist denial adds rule_hint (issue 21.6): host, port,
    # method and path only, and the canary check below covers it too
    want = {"error", "reason", "request_id"}
    if code == "denied" and keys is not None and "rule_hint" in keys:
        want = want | {"rule_hint"}
    t.ok(keys == want,
         "%s [%s]: body has exactly error, reason, request_id%s" %
         (what, mode, " (and rule_hint)" if "rule_hint" in want else ""),
         keys)
    low = raw.lower()
    hits = [f.decode() for f in FORMS if f in low]
    t.ok(not hits, "%s [%s]: no canary in the %d-byte answer" %
         (what, mode, len(raw)), "%r in %r" % (hits, raw[:600]))
    if err is None:
        produced.setdefault((status, code), set()).add(mode)


def raw_of(r):
    return r.raw_head + r.body if r is not None else b""


def plain(data, method="GET", shut=False):
    """Send <data> on a new connection; the answer and its raw bytes."""
    s = connect(ap, 15)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        rd = Reader(s)
        try:
            r = read_response(rd, method)
        except (Closed, OSError, ValueError) as e:
            return None, repr(e).encode()
        # and whatever follows before the gateway closes
        try:
            rd.closed_after(0.2)
        except OSError:
            pass
        return r, raw_of(r) + rd.buf
    finally:
        s.close()


def ctx(sb):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.load_verify_locations("%s/state/ca/%s/ca.crt" % (T, sb))
    return c


class Tunnel:
    """CONNECT (with the canary headers), then TLS with the sandbox CA."""

    def __init__(self, host, port, sb="local"):
        self.host = "%s:%d" % (host, port)
        self.s = connect(ap, 15)
        h = self.host.encode()
        self.s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n" % (h, h) +
                       heads(sb) + b"\r\n")
        rd = Reader(self.s)
        r = read_response(rd, "CONNECT")
        if r.status != 200:
            raise RuntimeError("CONNECT %s: %r" % (self.host, r))
        self.tls = ctx(sb).wrap_socket(self.s, server_hostname=host)
        self.rd = Reader(self.tls)

    def send(self, data, method="GET"):
        self.tls.sendall(data)
        try:
            r = read_response(self.rd, method)
        except (Closed, OSError, ValueError) as e:
            return None, repr(e).encode()
        return r, raw_of(r)

    def close(self):
        try:
            self.tls.close()
        except OSError:
            pass


def inner(method, path, host, extra=b"", body=b"", version=b"HTTP/1.1",
          end=True):
    """A request inside TLS: origin-form, all canaries (Proxy-Authorization
    too: it must simply go nowhere)."""
    out = b"%s %s %s\r\nHost: %s\r\n" % (method.encode(), path.encode(),
                                         version, host.encode())
    out += heads() + extra
    if end:
        out += b"\r\n" + body
    return out


def tls_case(what, host, port, data, status, code, method="GET", sb="local",
             shut=False):
    try:
        c = Tunnel(host, port, sb)
    except Exception as e:
        t.ok(False, "%s [https]: tunnel" % what, repr(e))
        return
    if shut:
        # a head that never ends: the gateway's header timeout answers
        c.tls.sendall(data)
        try:
            r = read_response(c.rd, method)
            raw = raw_of(r)
        except (Closed, OSError, ValueError) as e:
            r, raw = None, repr(e).encode()
    else:
        r, raw = c.send(data, method)
    c.close()
    check(what, "https", r, raw, status, code)


def connect_case(what, target, status, code, sb="local", tok=None):
    data = b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n" % (target.encode(),
                                                    target.encode())
    data += heads(sb, tok) + b"\r\n"
    r, raw = plain(data, "CONNECT")
    check(what, "connect", r, raw, status, code)


A = "api.test:%d" % OP
AT = "api.test:%d" % TP
U = "http://%s%s%s" % (A, PATH, QUERY)
IP = PATH + QUERY

# --- 400 bad_request
r, raw = plain(request("POST", U, extra=b"Content-Length: 5\r\n"
                       b"Transfer-Encoding: chunked\r\n", body=b"0\r\n\r\n"))
check("Content-Length with Transfer-Encoding", "http", r, raw, 400,
      "bad_request")
tls_case("Content-Length with Transfer-Encoding", "api.test", TP,
         inner("POST", IP, AT, b"Content-Length: 5\r\nTransfer-Encoding: "
               b"chunked\r\n", b"0\r\n\r\n"), 400, "bad_request")
connect_case("CONNECT without a port", "api.test", 400, "bad_request")

# --- 403 denied: host, method; inside TLS also a Host naming another host
r, raw = plain(request("GET", "http://evil.test%s%s" % (PATH, QUERY)))
check("host not allowed", "http", r, raw, 403, "denied")
r, raw = plain(request("DELETE", U))
check("method not allowed", "http", r, raw, 403, "denied")
connect_case("CONNECT to an address in a denied network", "127.0.0.2:443",
             403, "denied")
# a denied host's 403 comes inside TLS, right after the handshake
tls_case("CONNECT to a host not allowed", "evil.test", 443,
         inner("GET", IP, "evil.test:443"), 403, "denied")
tls_case("method not allowed", "api.test", TP, inner("DELETE", IP, AT),
         403, "denied")
tls_case("Host header naming another host", "api.test", TP,
         inner("GET", IP, CANARY["host"] + ":%d" % TP), 403, "denied")
tls_case("Host header that is no authority", "api.test", TP,
         inner("GET", IP, CANARY["host"] + "/x y"), 403, "denied")

# --- 403 secret_misuse: the placeholder towards a host it is not bound to
r, raw = plain(request("GET", "http://other.test:%d%s%s" % (OP, PATH, QUERY)))
check("placeholder towards another host", "http", r, raw, 403,
      "secret_misuse")
tls_case("placeholder towards another host", "other.test", TP,
         inner("GET", IP, "other.test:%d" % TP), 403, "secret_misuse")

# --- 407 proxy_auth_required: a wrong token (a canary itself)
r, raw = plain(request("GET", U, tok=WRONG))
check("wrong proxy credentials", "http", r, raw, 407,
      "proxy_auth_required")
connect_case("CONNECT with wrong proxy credentials", AT, 407,
             "proxy_auth_required", tok=WRONG)

# --- 431, 414, 413, 501, 505
big = b"X-Big: " + (CANARY["custom"] * 1200).encode() + b"\r\n"
r, raw = plain(request("GET", U, extra=big))
check("header block over limits.header_bytes", "http", r, raw, 431,
      "headers_too_large")
tls_case("header block over limits.header_bytes", "api.test", TP,
         inner("GET", IP, AT, big), 431, "headers_too_large")
longq = "&pad=" + CANARY["query"] * 500
r, raw = plain(request("GET", U + longq))
check("target over 8 KiB", "http", r, raw, 414, "uri_too_long")
tls_case("target over 8 KiB", "api.test", TP, inner("GET", IP + longq, AT),
         414, "uri_too_long")
cl = b"Content-Type: application/json\r\nContent-Length: 5000\r\n"
r, raw = plain(request("POST", "http://%s/v1/chat%s" % (A, QUERY), extra=cl))
check("metered body over limits.body_bytes", "http", r, raw, 413,
      "body_too_large")
tls_case("metered body over limits.body_bytes", "api.test", TP,
         inner("POST", "/v1/chat" + QUERY, AT, cl), 413, "body_too_large")
r, raw = plain(request("TRACE", U))
check("TRACE", "http", r, raw, 501, "not_implemented")
r, raw = plain(request("POST", U, extra=b"Transfer-Encoding: gzip, chunked"
                       b"\r\n", body=b"0\r\n\r\n"))
check("unknown transfer coding", "http", r, raw, 501, "not_implemented")
tls_case("TRACE", "api.test", TP, inner("TRACE", IP, AT), 501,
         "not_implemented")
r, raw = plain(request("GET", U, version=b"HTTP/2.0"))
check("HTTP/2.0 request line", "http", r, raw, 505, "version_not_supported")
tls_case("HTTP/2.0 request line", "api.test", TP,
         inner("GET", IP, AT, version=b"HTTP/2.0"), 505,
         "version_not_supported")

# --- 408 request_timeout: a head that never ends
r, raw = plain(request("GET", U, end=False))
check("head not finished in limits.header_timeout", "http", r, raw, 408,
      "request_timeout")
tls_case("head not finished in limits.header_timeout", "api.test", TP,
         inner("GET", IP, AT, end=False), 408, "request_timeout", shut=True)

# --- 502 upstream_unreachable, upstream_tls_failed; 504 upstream_timeout
r, raw = plain(request("GET", "http://down.test:%d%s%s" % (DP, PATH, QUERY)))
check("nothing listens upstream", "http", r, raw, 502,
      "upstream_unreachable")
tls_case("nothing listens upstream", "down.test", DP,
         inner("GET", IP, "down.test:%d" % DP), 502, "upstream_unreachable")
tls_case("self-signed upstream certificate", "api.test", SP,
         inner("GET", IP, "api.test:%d" % SP), 502, "upstream_tls_failed")
r, raw = plain(request("GET", "http://%s/delay/4000%s" % (A, QUERY)))
check("upstream silent past limits.upstream_timeout", "http", r, raw, 504,
      "upstream_timeout")
tls_case("upstream silent past limits.upstream_timeout", "api.test", TP,
         inner("GET", "/delay/4000" + QUERY, AT), 504, "upstream_timeout")

# --- 402 budget_exceeded (requests: 1), 429 rate_limited (rate: 1/h)
for sb, status, code in (("cap", 402, "budget_exceeded"),
                         ("rate", 429, "rate_limited")):
    r, _ = plain(request("GET", "http://%s/json/10" % A, sb=sb))
    t.ok(r is not None and r.status == 200, "%s: first request served" % sb,
         repr(r))
    r, raw = plain(request("GET", U, sb=sb))
    check("%s cap spent" % sb, "http", r, raw, status, code)
    tls_case("%s cap spent" % sb, "api.test", TP, inner("GET", IP, AT),
             status, code, sb=sb)

# --- 503 overloaded: max_connections_per_sandbox (6) kept busy
kept = []
for i in range(6):
    s = connect(ap, 15)
    s.sendall(request("GET", "http://%s/json/10" % A, sb="ov"))
    rr = read_response(Reader(s))
    t.ok(rr.status == 200, "ov: connection %d served" % i, repr(rr))
    kept.append(s)
r, raw = plain(request("GET", U, sb="ov"))
check("sandbox connection limit reached", "http", r, raw, 503, "overloaded")
connect_case("CONNECT past the sandbox connection limit", AT, 503,
             "overloaded", sb="ov")
for s in kept:
    s.close()
time.sleep(0.3)

# --- 503 audit_unavailable: the audit directory removed
keep = Tunnel("api.test", TP)
r, raw = keep.send(inner("GET", "/json/10", AT))
t.ok(r is not None and r.status == 200, "https session open and served",
     repr(r))
time.sleep(0.3)
shutil.copy(T + "/adir/audit.jsonl", T + "/audit-before.jsonl")
shutil.rmtree(T + "/adir")
r = None
for i in range(40):
    r, raw = plain(request("GET", U))
    if r is not None and r.status == 503:
        break
    time.sleep(0.1)
check("audit file gone", "http", r, raw, 503, "audit_unavailable")
connect_case("CONNECT while the audit file is gone", AT, 503,
             "audit_unavailable")
r, raw = keep.send(inner("GET", IP, AT))
keep.close()
check("audit file gone", "https", r, raw, 503, "audit_unavailable")
os.mkdir(T + "/adir")
for i in range(60):
    r, _ = plain(request("GET", "http://%s/json/10" % A))
    if r is not None and r.status == 200:
        break
    time.sleep(0.1)
t.ok(r is not None and r.status == 200, "audit back: requests pass again",
     repr(r))

# --- every status of SPEC's table (and the "more statuses") was produced
table = [(400, "bad_request"), (403, "denied"), (403, "secret_misuse"),
         (402, "budget_exceeded"), (407, "proxy_auth_required"),
         (429, "rate_limited"), (431, "headers_too_large"),
         (502, "upstream_unreachable"), (502, "upstream_tls_failed"),
         (503, "audit_unavailable"), (503, "overloaded"),
         (504, "upstream_timeout"),
         (413, "body_too_large"), (414, "uri_too_long"),
         (501, "not_implemented"), (505, "version_not_supported"),
         (408, "request_timeout")]
missing = [x for x in table if x not in produced]
t.ok(not missing, "every status of the table produced (%d)" % len(table),
     missing)
for k in table:
    print("# %d %-22s %s" % (k[0], k[1], ",".join(sorted(produced.get(k,
                                                                    ())))))
t.done()
PY

stop_airlockd
# Nothing the daemon wrote holds the secret, a token or the credentials.
"$PYTHON" - "$T/airlockd.log" "$T/airlockd.out" "$T/audit-before.jsonl" \
    "$T/adir/audit.jsonl" <<'PY' || check_fail "log and audit hygiene"
import base64, sys
vals = ["REAL-secret-9c1e7d0a", "tok-local-canary-77aa",
        "tok-cap-canary-88bb", "tok-rate-canary-99cc", "tok-ov-canary-aadd",
        "wrong-token-canary-6d7e", "ck-cookie-canary-a1b2",
        "az-authz-canary-c3d4"]
forms = set()
for v in vals:
    forms |= {v, base64.b64encode(v.encode()).decode()}
for sb in ("local", "cap", "rate", "ov"):
    for tok in vals[1:6]:
        forms.add(base64.b64encode(("%s:%s" % (sb, tok)).encode()).decode())
bad = 0
seen = 0
for path in sys.argv[1:]:
    try:
        data = open(path, "rb").read().decode("latin-1").lower()
    except FileNotFoundError:
        continue
    seen += len(data)
    for f in forms:
        if f.lower() in data:
            print("not ok - %s holds %r" % (path, f))
            bad += 1
if seen == 0:
    print("not ok - no log or audit to check")
    sys.exit(1)
if bad:
    sys.exit(1)
print("ok - log and audit (%d bytes) hold no secret, token or credential"
      % seen)
PY
finish
