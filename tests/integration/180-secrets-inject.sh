#!/bin/sh
# Secrets: each inject form (header template, Basic with and without a
# username, query parameter, AWS SigV4 for S3 and for another service with a
# signed body) over plain HTTP and intercepted HTTPS, proven by what the
# upstream received; the sandbox's own header is replaced, not duplicated;
# no secret towards a host outside its binding or under a rule that does not
# list it; SigV4 bodies over limits.body_bytes are 413; audit "secrets".
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"


HOSTS="api.test other.test basic.test basic2.test query.test bkt.s3.test sqs.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"

start_secup up
UP_PORT=$SECUP_PORT
start_secup ups -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
SEC_HDR="sk-LEAK-hdr-$R"
SEC_KEY="key-LEAK-$R"
SEC_BASICU="pw-LEAK-$R/+="
SEC_BASICP="bob:pw2-LEAK-$R"
SEC_Q="q-LEAK-$R/+&= ~x"
SEC_S3="AKIDS3$R:s3sk-LEAK-$R/K7+bPxR"
SEC_SQS="ASIASQS$R:sqssk-LEAK-$R/Zz+9:tok-LEAK-$R//+=="
export SEC_HDR SEC_KEY SEC_BASICU SEC_BASICP SEC_Q SEC_S3 SEC_SQS
export AIRLOCK_PORT UP_PORT UPS_PORT T

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
limits: {body_bytes: 64KiB}
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
  - name: apikey
    source: "literal:$SEC_KEY"
    hosts: ["api.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {header: X-Api-Key, value: "k=\${secret};v=1"}
  - name: basicu
    source: env:SEC_BASICU
    hosts: ["basic.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {basic: {username: alice}}
  - name: basicp
    source: env:SEC_BASICP
    hosts: ["basic2.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {basic: {}}
  - name: qkey
    source: env:SEC_Q
    hosts: ["query.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {query: api_key}
  - name: s3
    source: env:SEC_S3
    hosts: ["*.s3.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {aws_sigv4: {region: us-east-1, service: s3}}
  - name: sqs
    source: env:SEC_SQS
    hosts: ["sqs.test"]
    allow_plaintext: true   # also checked over plain HTTP
    inject: {aws_sigv4: {region: eu-west-1, service: sqs}}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], paths: ["/plain/*"]}
      - {host: "api.test", ports: [$UP_PORT, $UPS_PORT], secrets: [hdr, apikey]}
      - {host: "basic.test", ports: [$UP_PORT, $UPS_PORT], secrets: [basicu]}
      - {host: "basic2.test", ports: [$UP_PORT, $UPS_PORT], secrets: [basicp]}
      - {host: "query.test", ports: [$UP_PORT, $UPS_PORT], secrets: [qkey]}
      - {host: "*.s3.test", ports: [$UP_PORT, $UPS_PORT], secrets: [s3]}
      - {host: "sqs.test", ports: [$UP_PORT, $UPS_PORT], secrets: [sqs]}
      - {host: "*", ports: [$UP_PORT, $UPS_PORT]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
"$AIRLOCKD" -c "$T/airlock.yaml" -t >"$T/t.out" 2>&1 ||
    fail "config rejected: $(cat "$T/t.out")"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "inject checks"
import base64, hashlib, json, os, urllib.parse
import itlib, seclib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
audit = T + "/audit.jsonl"
t = itlib.Checks()
V = {k: E["SEC_" + k.upper()] for k in
     ("hdr", "key", "basicu", "basicp", "q", "s3", "sqs")}
FORBIDDEN = []          # every value and encoding: never anywhere else
for k, v in V.items():
    FORBIDDEN += seclib.encodings(v, "alice" if k == "basicu" else None)
for v in (V["s3"], V["sqs"]):
    FORBIDDEN += [p.encode() for p in v.split(":")[1:]]

def audit_of(r):
    rid = r.header("X-Airlock-Request-Id") if r is not None else None
    if not rid:
        return None
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid, 10)

def check_audit(r, names, what):
    a = audit_of(r)
    if not t.ok(a is not None, what + ": audit record"):
        return
    got = a.get("secrets")
    if names:
        t.ok(isinstance(got, list) and sorted(got) == sorted(names),
             what + ": audit secrets = %s" % names, repr(a))
    else:
        t.ok(got in (None, []), what + ": audit has no secrets", repr(a))
    line = json.dumps(a).encode()
    t.ok(not any(f in line for f in FORBIDDEN),
         what + ": no secret value in the audit record", repr(a))

def no_secret_in(rec, what, allow=()):
    bad = [f for f in FORBIDDEN if f in rec.raw and f not in allow]
    t.ok(not bad, what, repr(bad))

for scheme in ("http", "https"):
    port = int(E["UPS_PORT"] if scheme == "https" else E["UP_PORT"])
    up = seclib.Upstream(T + ("/ups.jsonl" if scheme == "https"
                              else "/up.jsonl"))
    S = scheme + ": "
    n = [0]

    def mark():
        n[0] += 1
        return "%s-%d" % (scheme, n[0])

    def conn(host):
        return Client(ap, scheme, host, port, CA)

    # --- header template, two secrets on one host; the sandbox's own
    # Authorization (twice, any case) and X-Api-Key are replaced
    c = conn("api.test")
    m = mark()
    r = c.request("GET", "/v1/models?x=1", [
        "X-Mark: " + m, "Authorization: Bearer sandbox-own-token",
        "authorization: Basic c2FuZGJveDpvd24=",
        "X-API-KEY: sandbox-own-key", "Accept-Encoding: gzip, br"])
    rec = up.one(m)
    if t.ok(r.status == 200 and rec is not None,
            S + "header inject: request reached the upstream", repr(r)):
        t.ok(rec.header_all("Authorization") == ["Bearer " + V["hdr"]],
             S + "header inject: exactly one Authorization, the template "
             "with the secret", rec.header_all("Authorization"))
        t.ok(rec.header_all("X-Api-Key") == ["k=%s;v=1" % V["key"]],
             S + "header inject: exactly one X-Api-Key, templated",
             rec.header_all("X-Api-Key"))
        t.ok(b"sandbox-own" not in rec.raw and b"c2FuZGJveDpvd24=" not in
             rec.raw, S + "header inject: the sandbox's own values are gone",
             repr(rec))
        t.ok(rec.header_all("Accept-Encoding") == ["identity"],
             S + "header inject: Accept-Encoding: identity upstream",
             rec.header_all("Accept-Encoding"))
        t.ok(rec.target == "/v1/models?x=1", S + "header inject: target "
             "unchanged", rec.target)
    check_audit(r, ["hdr", "apikey"], S + "header inject")
    # same connection, keep-alive: injected again
    m = mark()
    r = c.request("POST", "/v1/chat", ["X-Mark: " + m,
                                       "Content-Type: application/json"],
                  b'{"q": 1}')
    rec = up.one(m)
    t.ok(r.status == 200 and rec is not None and
         rec.header_all("Authorization") == ["Bearer " + V["hdr"]] and
         rec.body == b'{"q": 1}',
         S + "header inject: second request on the connection, POST body "
         "intact", repr(rec))
    # a rule for the same host that does not list the secrets: nothing
    m = mark()
    r = c.request("GET", "/plain/x", ["X-Mark: " + m,
                                      "Authorization: Bearer sandbox-own"])
    rec = up.one(m)
    if t.ok(r.status == 200 and rec is not None,
            S + "rule without secrets: reached the upstream", repr(r)):
        t.ok(rec.header_all("Authorization") == ["Bearer sandbox-own"],
             S + "rule without secrets: the sandbox's header passes as is",
             rec.header_all("Authorization"))
        no_secret_in(rec, S + "rule without secrets: no secret value sent")
    check_audit(r, [], S + "rule without secrets")
    c.close()

    # --- Basic with a username
    c = conn("basic.test")
    m = mark()
    r = c.request("GET", "/b", ["X-Mark: " + m,
                                "Authorization: Basic c2FuZGJveDpvd24="])
    rec = up.one(m)
    want = "Basic " + base64.b64encode(
        ("alice:" + V["basicu"]).encode()).decode()
    if t.ok(r.status == 200 and rec is not None,
            S + "basic (username): reached the upstream", repr(r)):
        t.ok(rec.header_all("Authorization") == [want],
             S + "basic (username): Authorization: Basic b64(alice:secret),"
             " the sandbox's replaced", rec.header_all("Authorization"))
    check_audit(r, ["basicu"], S + "basic (username)")
    c.close()

    # --- Basic without a username: the secret is user:pass
    c = conn("basic2.test")
    m = mark()
    r = c.request("GET", "/b", ["X-Mark: " + m])
    rec = up.one(m)
    want = "Basic " + base64.b64encode(V["basicp"].encode()).decode()
    if t.ok(r.status == 200 and rec is not None,
            S + "basic (user:pass): reached the upstream", repr(r)):
        t.ok(rec.header_all("Authorization") == [want],
             S + "basic (user:pass): Authorization: Basic b64(secret)",
             rec.header_all("Authorization"))
    check_audit(r, ["basicp"], S + "basic (user:pass)")
    c.close()

    # --- query parameter: the sandbox's own api_key (valued or bare) goes,
    # api_key2 stays, the value is URL-encoded
    c = conn("query.test")
    for path, keep in (("/search?api_key=sandbox-own&x=1&api_key2=keep"
                        "&api_key&y=%2F", [("x", "1"), ("api_key2", "keep"),
                                            ("y", "%2F")]),
                       ("/search", []),
                       ("/search?", [])):
        m = mark()
        r = c.request("GET", path, ["X-Mark: " + m])
        rec = up.one(m)
        what = S + "query %s" % path
        if not t.ok(r.status == 200 and rec is not None,
                    what + ": reached the upstream", repr(r)):
            continue
        ps = rec.params()
        keys = [k for k, _ in ps if k == "api_key"]
        t.ok(len(keys) == 1, what + ": exactly one api_key", rec.target)
        vals = [v for k, v in ps if k == "api_key"]
        t.ok(vals and urllib.parse.unquote(vals[0]) == V["q"],
             what + ": api_key is the URL-encoded secret", rec.target)
        t.ok([p for p in ps if p[0] != "api_key"] == keep,
             what + ": the other parameters are kept, in order", rec.target)
        t.ok(b"sandbox-own" not in rec.raw and rec.path == "/search",
             what + ": sandbox's value gone, path unchanged", rec.target)
    check_audit(r, ["qkey"], S + "query")
    c.close()

    # --- SigV4 for S3: UNSIGNED-PAYLOAD; the sandbox's own signature
    # headers are dropped; x-amz-* headers are signed
    akid, sk = V["s3"].split(":")
    c = conn("bkt.s3.test")
    m = mark()
    r = c.request("GET", "/photos/a%20b:c.jpg?list-type=2&prefix=a%2Fb&b=",
                  ["X-Mark: " + m, "X-Amz-Date: 20000101T000000Z",
                   "Authorization: AWS4-HMAC-SHA256 Credential=FAKE/2000",
                   "X-Amz-Content-Sha256: deadbeef",
                   "x-amz-meta-color:  blue   sky "])
    rec = up.one(m)
    if t.ok(r.status == 200 and rec is not None,
            S + "sigv4 s3 GET: reached the upstream", repr(r)):
        probs = seclib.sigv4_check(rec, akid, sk, "us-east-1", "s3",
                                   body_signed=False)
        t.ok(not probs, S + "sigv4 s3 GET: UNSIGNED-PAYLOAD, signature "
             "verifies", probs)
        t.ok(b"FAKE/2000" not in rec.raw and b"20000101T" not in rec.raw
             and b"deadbeef" not in rec.raw,
             S + "sigv4 s3 GET: the sandbox's signature headers are gone",
             repr(rec))
        auth = (rec.header_all("Authorization") or [""])[0]
        t.ok("x-amz-meta-color" in auth,
             S + "sigv4 s3 GET: x-amz-meta-* header is signed", auth)
        t.ok(rec.target == "/photos/a%20b:c.jpg?list-type=2&prefix=a%2Fb&b=",
             S + "sigv4 s3 GET: target sent as the sandbox wrote it",
             rec.target)
    check_audit(r, ["s3"], S + "sigv4 s3")
    body = bytes(range(256)) * 40
    m = mark()
    r = c.request("PUT", "/photos/obj", ["X-Mark: " + m,
                                         "Content-Type: image/jpeg"], body)
    rec = up.one(m)
    if t.ok(r.status == 200 and rec is not None,
            S + "sigv4 s3 PUT: reached the upstream", repr(r)):
        t.ok(rec.body == body, S + "sigv4 s3 PUT: body intact",
             len(rec.body))
        probs = seclib.sigv4_check(rec, akid, sk, "us-east-1", "s3",
                                   body_signed=False)
        t.ok(not probs, S + "sigv4 s3 PUT: UNSIGNED-PAYLOAD, signature "
             "verifies", probs)
    c.close()

    # --- SigV4 for another service: the body is buffered and its SHA-256
    # signed; the session token goes in X-Amz-Security-Token
    akid, sk, tok = V["sqs"].split(":")
    c = conn("sqs.test")
    cases = [
        ("POST", "/v1/queue/a%20b:c/./d?Version=2012-11-05&Action=Send",
         ["Content-Type: application/x-www-form-urlencoded",
          "X-Amz-Security-Token: sandbox-own-token"],
         b"MessageBody=hello%20world&DelaySeconds=0", None, "POST body"),
        ("POST", "/", ["Content-Type: application/json"], None,
         [b'{"a":', b' "chunked', b' body"}'], "POST chunked body"),
        ("GET", "/?Action=List", [], b"", None, "GET no body"),
        ("PUT", "/big", [], b"z" * 60000, None, "PUT 60000 bytes"),
    ]
    for method, path, hdrs, body, chunks, what in cases:
        m = mark()
        r = c.request(method, path, ["X-Mark: " + m] + hdrs, body or b"",
                      chunks)
        rec = up.one(m)
        what = S + "sigv4 sqs " + what
        if not t.ok(r.status == 200 and rec is not None,
                    what + ": reached the upstream", repr(r)):
            continue
        want = body if chunks is None else b"".join(chunks)
        t.ok(rec.body == want, what + ": body intact", rec.body[:80])
        ph = rec.header_all("X-Amz-Content-Sha256")
        t.ok(ph == [hashlib.sha256(want).hexdigest()],
             what + ": X-Amz-Content-Sha256 = sha256(body)", ph)
        probs = seclib.sigv4_check(rec, akid, sk, "eu-west-1", "sqs",
                                   token=tok, body_signed=True)
        t.ok(not probs, what + ": signature verifies (session token)",
             probs)
        if not probs and rec.body:
            # the verifier is no rubber stamp: a changed body or query fails
            orig = rec.body, rec.query
            rec.body = rec.body[:-1] + b"!"
            bad1 = seclib.sigv4_check(rec, akid, sk, "eu-west-1", "sqs",
                                      token=tok)
            rec.body, rec.query = orig[0], orig[1] + "&extra=1"
            bad2 = seclib.sigv4_check(rec, akid, sk, "eu-west-1", "sqs",
                                      token=tok)
            rec.body, rec.query = orig
            t.ok(bad1 and bad2, what + ": a tampered body or query does "
                 "not verify (control)", (bad1, bad2))
        t.ok(b"sandbox-own-token" not in rec.raw,
             what + ": the sandbox's security token is gone")
        te = rec.header_all("Transfer-Encoding")
        cl = rec.header_all("Content-Length")
        if chunks is not None or body:
            t.ok(cl == [str(len(want))] and not te,
                 what + ": sent with Content-Length", (cl, te))
    check_audit(r, ["sqs"], S + "sigv4 sqs")
    # Expect: 100-continue while airlock holds the body for signing: the
    # client is told to go on (100) rather than left waiting
    m = mark()
    body = b"Action=Send&Expect=yes"
    head = c.build("POST", "/expect", ["X-Mark: " + m,
                                       "Expect: 100-continue"], body)
    c.raw_request(head[:-len(body)])
    c.sock.settimeout(1.5)
    try:
        r1 = itlib.read_response(c.rd, "POST", skip_1xx=False)
    except Exception as e:
        r1 = e
    c.sock.settimeout(15)
    t.ok(isinstance(r1, itlib.Response) and r1.status == 100,
         S + "sigv4 sqs Expect: 100-continue answered with 100 within 1.5s "
         "(the body is held for signing)", repr(r1))
    try:
        c.raw_request(body)
        r = itlib.read_response(c.rd, "POST")
        if isinstance(r1, itlib.Response) and r1.status != 100:
            r = r1      # a final answer came first
    except Exception:
        r = None
    rec = up.one(m)
    t.ok(r is not None and r.status == 200 and rec is not None and
         rec.body == body and not seclib.sigv4_check(
             rec, akid, sk, "eu-west-1", "sqs", token=tok),
         S + "sigv4 sqs Expect: 100-continue: signed body arrives", repr(r))
    # over limits.body_bytes (64KiB): 413 body_too_large, nothing sent
    m = mark()
    n0 = up.count()
    try:
        r = c.request("POST", "/big", ["X-Mark: " + m], b"y" * 70000)
    except (itlib.Closed, OSError):
        r = None
    t.error(r, 413, "body_too_large", S + "sigv4 body over body_bytes → 413")
    t.ok(not up.by_mark(m, 0.3) and up.count() == n0,
         S + "sigv4 body over body_bytes: nothing reached the upstream")
    c.close()
    # a chunked body over the limit, on a new connection
    c = conn("sqs.test")
    m = mark()
    try:
        r = c.request("POST", "/big", ["X-Mark: " + m], None,
                      [b"w" * 16384] * 5)
    except (itlib.Closed, OSError):
        r = None
    t.error(r, 413, "body_too_large",
            S + "sigv4 chunked body over body_bytes → 413")
    t.ok(not up.by_mark(m, 0.3),
         S + "sigv4 chunked body over the limit: nothing reached the "
         "upstream")
    c.close()

    # --- a host outside every binding (allowed by the "*" rule): no
    # secret at all; sandbox headers untouched
    c = conn("other.test")
    m = mark()
    r = c.request("GET", "/v1/models?api_key=mine", [
        "X-Mark: " + m, "Authorization: Bearer sandbox-own",
        "Accept-Encoding: gzip"])
    rec = up.one(m)
    if t.ok(r.status == 200 and rec is not None,
            S + "unbound host: reached the upstream", repr(r)):
        no_secret_in(rec, S + "unbound host: no secret value or encoding "
                     "sent")
        t.ok(rec.header_all("Authorization") == ["Bearer sandbox-own"] and
             rec.header_all("Accept-Encoding") == ["gzip"] and
             rec.target == "/v1/models?api_key=mine",
             S + "unbound host: the request is as the sandbox sent it",
             repr(rec))
    check_audit(r, [], S + "unbound host")
    c.close()

    # one client connection, a bound host and then another host: the
    # second request carries nothing (plain: absolute-form to either host;
    # https: a Host header naming the bound host inside a session with the
    # other one, and the reverse)
    if scheme == "http":
        c = conn("api.test")
        m1, m2 = mark(), mark()
        c.request("GET", "/v1/a", ["X-Mark: " + m1])
        c.raw_request(b"GET http://other.test:%d/b HTTP/1.1\r\nHost: "
                      b"other.test:%d\r\nX-Mark: %s\r\n\r\n"
                      % (port, port, m2.encode()))
        r = itlib.read_response(c.rd)
        rec1, rec2 = up.one(m1), up.one(m2)
        t.ok(rec1 is not None and rec1.header_all("Authorization") ==
             ["Bearer " + V["hdr"]] and rec2 is not None and r.status == 200,
             S + "same connection: bound host then other host both answered",
             (repr(rec1), repr(rec2)))
        if rec2 is not None:
            no_secret_in(rec2, S + "same connection: nothing for the other "
                         "host")
        c.close()
    else:
        for outer, inner in (("other.test", "api.test"),
                             ("api.test", "other.test")):
            c = conn(outer)
            m = mark()
            c.raw_request(b"GET /front HTTP/1.1\r\nHost: %s:%d\r\nX-Mark: "
                          b"%s\r\n\r\n" % (inner.encode(), port, m.encode()))
            try:
                r = itlib.read_response(c.rd)
            except Exception:
                r = None
            recs = up.by_mark(m, 0.3)
            leaked = [x for x in recs if x.sni != "api.test" and
                      any(f in x.raw for f in FORBIDDEN)]
            t.ok(not leaked, S + "Host %s inside a session with %s: no "
                 "secret towards a server other than api.test" % (inner,
                                                                 outer),
                 repr(recs))
            c.close()

    # the TLS upstream saw SNI for every name
    if scheme == "https":
        snis = set(x.sni for x in up.records())
        t.ok(snis == {"api.test", "basic.test", "basic2.test", "query.test",
                      "bkt.s3.test", "sqs.test", "other.test"},
             "https: upstream TLS sessions carry the host as SNI", snis)
    # whatever went out went to its own host only
    for rec in up.records():
        host = rec.header_all("Host")
        own = {"api.test": ("hdr", "key"), "basic.test": ("basicu",),
               "basic2.test": ("basicp",), "query.test": ("q",),
               "bkt.s3.test": ("s3",), "sqs.test": ("sqs",)}.get(
                   host[0].split(":")[0] if host else "", ())
        mine = []
        for k in own:
            mine += seclib.encodings(V[k], "alice" if k == "basicu" else
                                     None)
            if k in ("s3", "sqs"):
                mine += [p.encode() for p in V[k].split(":")[1:]]
        bad = [f for f in FORBIDDEN if f in rec.raw and f not in mine]
        t.ok(not bad, S + "request %d to %s carries no other host's secret"
             % (rec.seq, host), repr(bad))
t.done()
PY

# nothing airlockd wrote holds a value
for v in "$SEC_HDR" "$SEC_KEY" "$SEC_BASICU" "$SEC_BASICP" "$SEC_Q" \
    "${SEC_S3#*:}" "${SEC_SQS#*:}"; do
	for f in "$T/airlockd.log" "$T/airlockd.out" "$T/audit.jsonl"; do
		grep -qF -e "$v" "$f" && check_fail "$(basename "$f") holds a secret value"
	done
done
stop_airlockd
finish
