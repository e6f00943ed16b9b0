#!/bin/sh
# Secrets never come back, in any form (issue 14 points 1-3). A reflecting
# upstream (secret_upstream.py) echoes what it received in every encoding
# (percent-encoded in both hex cases, '+' for space, twice; JSON with "\/"
# and "\u00XX"; base64, base64url), in a header name, a header value, the
# status line and the body; a login redirect carries the query secret
# double-encoded in next=; the SigV4 signature and session token are echoed;
# values are stored and read back later by requests that carry no secret,
# through a rule without secrets; a Range-honouring resource hands out
# pieces; a splice (intercept: false) towards a secret's host is refused. The client must receive no form of any secret bound to the host,
# not even a run of reflect_min_run (12) bytes of one; Range/If-Range never
# reach the upstream with a secret; a 206 or multipart/byteranges answer to
# a request that carried one is refused (502, JSON, audited).
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"

HOSTS="api.test query.test basic.test sqs.test spl.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
echo '{}' >"$T/cases.json"
start_secup ups -c "$T/cases.json" -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

rnd() { "$PYTHON" -c 'import secrets; print(secrets.token_hex(6))'; }
# reserved characters: every encoder differs on them; a random part of
# its own in each (a run shared by two would be a run of both)
SEC_HDR="sk-LEAK/$(rnd)+tok=a b&c?d#e%f~g"
SEC_Q="q-LEAK/$(rnd)+v=1&w x;y,z@!"
SEC_PH="ph-LEAK/$(rnd)+(s)'t*u"
SEC_BASIC="pw-LEAK/$(rnd)+= x&y"
SEC_SIG="AKIDREFL$(rnd):sigsk-LEAK/$(rnd)+b=:tok-LEAK/$(rnd)+="
PH="airlock-ph-enc-$(rnd)"
export SEC_HDR SEC_Q SEC_PH SEC_BASIC SEC_SIG PH AIRLOCK_PORT UPS_PORT T

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
    inject: {header: Authorization, value: "Bearer \${secret}"}
  - name: ph
    source: env:SEC_PH
    hosts: ["api.test"]
    placeholder: "$PH"
  - name: qkey
    source: env:SEC_Q
    hosts: ["query.test"]
    inject: {query: api_key}
  - name: basicu
    source: env:SEC_BASIC
    hosts: ["basic.test"]
    inject: {basic: {username: alice}}
  - name: splk
    source: env:SEC_PH
    hosts: ["spl.test"]
    placeholder: "airlock-spl-$(rnd)"
  - name: sig
    source: env:SEC_SIG
    hosts: ["sqs.test"]
    inject: {aws_sigv4: {region: us-east-1, service: sqs}}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UPS_PORT], paths: ["/nosec/*"]}
      - {host: "api.test", ports: [$UPS_PORT], secrets: [hdr]}
      - {host: "query.test", ports: [$UPS_PORT], paths: ["/nosec/*"]}
      - {host: "query.test", ports: [$UPS_PORT], secrets: [qkey]}
      - {host: "basic.test", ports: [$UPS_PORT], secrets: [basicu]}
      - {host: "sqs.test", ports: [$UPS_PORT], secrets: [sig]}
      - {host: "spl.test", ports: [$UPS_PORT], intercept: false}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "encoded reflection checks"
import base64, json, os, re, urllib.parse
import itlib, seclib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
port = int(E["UPS_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
audit = T + "/audit.jsonl"
up = seclib.Upstream(T + "/ups.jsonl")
t = itlib.Checks()
HDR, Q, PHV, BASIC, SIG, PH = (E[k] for k in ("SEC_HDR", "SEC_Q", "SEC_PH",
                                              "SEC_BASIC", "SEC_SIG", "PH"))
AKID, SK, TOK = SIG.split(":")
RUN = 12


def q(v):
    return urllib.parse.quote(v, safe="-_.~")


def forms(v):
    """Every form of <v> the client must not see (computed here)."""
    b = v.encode("latin-1")
    ju = "".join(c if c.isalnum() else "\\u%04X" % ord(c) for c in v)
    out = [v, q(v), re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                           q(v)),
           urllib.parse.quote_plus(v, safe="-_.~"), q(q(v)),
           json.dumps(v)[1:-1].replace("/", "\\/"), ju,
           re.sub(r"\\u00[0-9A-F]{2}", lambda m: m.group(0).lower(), ju),
           base64.b64encode(b).decode(),
           base64.urlsafe_b64encode(b).decode()]
    return sorted(set(x.encode("latin-1") for x in out))


def leaks(raw, vals):
    """Forms of <vals>, or runs of RUN bytes of them, found in <raw> (each
    redaction marker counted as one byte that is in no secret)."""
    clean = re.sub(rb"\[airlock:redacted:[a-z]+\]", b"\x01", raw)
    bad = []
    for v in vals:
        for f in forms(v):
            for k in range(0, max(1, len(f) - RUN + 1)):
                piece = f[k:k + RUN] if len(f) >= RUN else f
                if piece in clean:
                    bad.append((v[:6], f[:20], k))
                    break
    return bad


ALL = [HDR, Q, PHV, BASIC, SK, TOK, "alice:" + BASIC]

cases = {}


def put(name, **c):
    cases[name] = c


FILTERS = ["pct", "pctl", "plus", "pct2", "jslash", "ju", "jul", "b64",
           "b64url"]


def every(src):
    return ";".join("%s=%s" % (f, "{{%s|%s}}" % (src, f)) for f in FILTERS)


A = "req:authorization|after:Bearer "
put("echo_all", body="raw={{%s}};" % A + every(A),
    headers=[["X-Echo-{{%s|pct}}" % A, "name"],
             ["X-Echo", "{{%s|jslash}}" % A]],
    reason="Bad {{%s|pct}}" % A, framing="chunked", chunks=[7],
    delay=0.001)
put("echo_len", body="raw={{%s}};" % A + every(A))
# PHP's json_encode of the whole request head: "\/" for every "/"
put("echo_php", body='{"head":"{{head|jslash}}"}',
    headers=[["Content-Type", "application/json"]])
# a login redirect: next= is the request target, encoded twice
put("redirect", status=302, reason="Found",
    headers=[["Location", "/login?next={{target|pct2}}"]],
    body="see /login?next={{target|pct}}")
# placeholder substituted into path and query, echoed back
put("ph_echo", body="t={{target}};u={{target|unpct}};p={{target|pct}}")
# basic: the header as received, and what it carries decoded
put("basic_echo", body="a={{req:authorization}};"
    "p={{req:authorization|after:Basic |slice:3:40}}")
put("sig_echo", body="a={{req:authorization}};t={{req:x-amz-security-token}}"
    ";tj={{req:x-amz-security-token|jslash}}",
    headers=[["X-Sig", "{{req:authorization|after:Signature=}}"]])
# stored: kept from a request that carried the secret...
put("store_a", store="a", body="{{%s}}" % A)
put("store_q", store="q", body="{{query:api_key}}")
# ...read back by requests that carry none
put("read_a", body="last={{stored:a}};e=" + every("stored:a"))
put("read_q", body="last={{stored:q}};d={{stored:q|unpct}};e=" +
    every("stored:q|unpct"))
# pieces: 8 bytes at a time from a Range-honouring resource, and longer
# runs straight away
put("ranged", ranged=True, body="{{%s}}" % A)
put("force206", status=206, reason="Partial Content",
    headers=[["Content-Range", "bytes 0-7/40"]],
    body="{{%s|slice:0:8}}" % A)
put("byteranges", headers=[["Content-Type",
                            "multipart/byteranges; boundary=x"]],
    body="--x\r\nContent-Range: bytes 0-7/40\r\n\r\n{{%s|slice:0:8}}\r\n"
         "--x--\r\n" % A)
put("pieces", body="p1={{%s|slice:0:12}};p2={{%s|slice:5:19}};"
    "p3={{%s|slice:-13:}};short={{%s|slice:0:11}}" % (A, A, A, A))
put("read_pieces", body="p1={{stored:a|slice:7:19}};p2={{stored:a|slice:9:30|pct}}")
with open(T + "/cases.json.tmp", "w") as f:
    json.dump(cases, f)
os.rename(T + "/cases.json.tmp", T + "/cases.json")


def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    if not rid:
        return None
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid, 10)


n = [0]


def call(host, case, path="/r", extra=()):
    n[0] += 1
    m = "m-%d" % n[0]
    c = Client(ap, "https", host, port, CA)
    try:
        r = c.request("GET", path, ["X-Test-Case: " + case,
                                    "X-Mark: " + m] + list(extra))
    except Exception as e:
        r = None
        t.ok(False, case + ": response read", repr(e))
    raw = c.received()
    c.close()
    return r, raw, up.by_mark(m, wait=2.0)


# control: the upstream really echoes (straight, no gateway)
import socket, ssl
s = socket.create_connection(("127.0.0.1", port))
ctx = ssl.create_default_context(cafile=T + "/pki/ca.crt")
s = ctx.wrap_socket(s, server_hostname="api.test")
s.sendall(("GET /r HTTP/1.1\r\nHost: api.test\r\nX-Test-Case: echo_len\r\n"
           "Authorization: Bearer %s\r\nConnection: close\r\n\r\n" % HDR)
          .encode("latin-1"))
ctl = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    ctl += d
s.close()
t.ok(len(leaks(ctl, [HDR])) > 0 and q(q(HDR)).encode() in ctl,
     "control: the upstream echoes every form when nobody redacts")

# ---- point 1: every encoding, every place
for case in ("echo_all", "echo_len", "echo_php", "redirect"):
    r, raw, rec = call("api.test", case, "/r/%s?x=1" % case)
    t.ok(rec and rec[0].header("Authorization") == "Bearer " + HDR,
         case + ": the secret went upstream")
    t.ok(r is not None and r.status in (200, 302), case + ": answered",
         repr(r))
    bad = leaks(raw, [HDR])
    t.ok(not bad, case + ": no form or run of the secret reached the "
         "client", repr(bad) + repr(raw[:600]))
    if case != "redirect":
        t.ok(b"[airlock:redacted:hdr]" in raw, case + ": redaction markers",
             repr(raw[:300]))

r, raw, rec = call("query.test", "redirect", "/r/login?x=1")
t.ok(rec and ("api_key", q(Q)) in rec[0].params(),
     "redirect: query secret went upstream", repr(rec))
t.ok(r is not None and r.status == 302, "redirect: 302 relayed", repr(r))
bad = leaks(raw, [Q])
t.ok(not bad, "redirect: next= double-encoded query secret redacted",
     repr(bad) + repr(raw[:500]))

r, raw, rec = call("api.test", "ph_echo", "/r/%s/x" % PH,
                   ["X-Ph: %s" % PH])
t.ok(rec and rec[0].path == "/r/%s/x" % q(PHV),
     "placeholder substituted into the path percent-encoded",
     rec[0].path if rec else None)
bad = leaks(raw, [PHV])
t.ok(r is not None and r.status == 200 and not bad,
     "placeholder value echoed from path (raw, decoded, encoded) redacted",
     repr(bad) + repr(raw[:400]))

r, raw, rec = call("basic.test", "basic_echo")
t.ok(rec and rec[0].header("Authorization") == "Basic " +
     base64.b64encode(("alice:" + BASIC).encode()).decode(),
     "basic: credentials went upstream")
bad = leaks(raw, [BASIC, "alice:" + BASIC])
t.ok(r is not None and not bad, "basic: base64 of user:secret and its "
     "pieces redacted", repr(bad) + repr(raw[:300]))

r, raw, rec = call("sqs.test", "sig_echo")
sig = None
if rec:
    m = re.search(r"Signature=([0-9a-f]{64})",
                  rec[0].header("Authorization") or "")
    sig = m.group(1) if m else None
t.ok(sig is not None, "sigv4: signed upstream", repr(rec))
clean = re.sub(rb"\[airlock:redacted:[a-z]+\]", b"\x01", raw)
t.ok(sig is not None and not any(sig[k:k + RUN].encode() in clean
                                 for k in range(len(sig) - RUN + 1)),
     "sigv4: the echoed signature is redacted", repr(raw[:500]))
bad = leaks(raw, [SK, TOK])
t.ok(not bad, "sigv4: the echoed session token is redacted", repr(bad))

# ---- point 2: stored, then read back without the secret
r, raw, rec = call("api.test", "store_a", "/r/store")
t.ok(r is not None and r.status == 200, "stored: header value stored")
r, raw, rec = call("api.test", "read_a", "/nosec/last")
t.ok(rec and rec[0].header("Authorization") is None,
     "stored: the reading request carries no secret (rule without secrets)",
     repr(rec))
t.ok(r is not None and r.status == 200 and not leaks(raw, [HDR]),
     "stored: the value read back later is redacted in every form",
     repr(leaks(raw, [HDR])) + repr(raw[:400]))
r, raw, rec = call("query.test", "store_q", "/r/store?x=1")
r, raw, rec = call("query.test", "read_q", "/nosec/last")
t.ok(rec and "api_key" not in rec[0].query, "stored: query read back "
     "without the secret", repr(rec))
t.ok(r is not None and not leaks(raw, [Q]),
     "stored: query secret read back later is redacted",
     repr(leaks(raw, [Q])) + repr(raw[:400]))

# ---- point 3: no secret in pieces
r, raw, rec = call("api.test", "ranged", "/r/ranged",
                   ["Range: bytes=0-7", "If-Range: \"e1\""])
t.ok(rec and rec[0].header("Range") is None and
     rec[0].header("If-Range") is None,
     "range: Range and If-Range removed from a request with a secret",
     repr(rec))
t.ok(r is not None and r.status == 200 and not leaks(raw, [HDR]),
     "range: whole answer, redacted", repr(r))
for case in ("force206", "byteranges"):
    r, raw, rec = call("api.test", case, "/r/" + case, ["Range: bytes=0-7"])
    if t.error(r, 502, "upstream_unreachable",
               case + ": partial answer to a secret-bearing request "
               "refused"):
        t.ok("partial" in r.json().get("reason", ""),
             case + ": reason says why", r.json())
    a = audit_of(r)
    t.ok(a is not None and a.get("status") == 502, case + ": audited",
         repr(a))
    t.ok(not leaks(raw, [HDR]) and HDR[:8].encode() not in raw,
         case + ": not even the 8-byte piece reached the client")
r, raw, rec = call("api.test", "pieces", "/r/pieces")
bad = leaks(raw, [HDR])
t.ok(r is not None and not bad, "runs: pieces of 12+ bytes of the secret "
     "redacted", repr(bad) + repr(raw[:400]))
t.ok(r is not None and ("short=" + HDR[:11]).encode() in r.body,
     "runs: a piece shorter than reflect_min_run passes (the guard is not "
     "blanket)", repr(raw[:400]))
r, raw, rec = call("api.test", "read_pieces", "/nosec/pieces")
t.ok(r is not None and not leaks(raw, [HDR]),
     "runs: pieces of a stored value redacted on a request without it",
     repr(raw[:400]))

# a splice towards a secret's host would hand back whatever it stored,
# unscanned: refused
import tlslib
try:
    sock, _ = tlslib.proxy_connect(ap, "spl.test:%d" % port)
    sock.close()
    t.ok(False, "splice towards a secret's host refused")
except tlslib.ProxyRefused as e:
    r = e.resp
    t.ok(r is not None and r.status == 403 and b"spliced" in r.body,
         "splice towards a secret's host: 403 denied, says why",
         repr(r))

# nothing leaked into the audit log either
with open(audit, "rb") as f:
    log = f.read()
bad = leaks(log, [HDR, Q, PHV, BASIC, SK, TOK])
t.ok(not bad, "audit holds no form of any secret", repr(bad))
t.done()
PY

stop_airlockd
finish
