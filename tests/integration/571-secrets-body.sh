#!/bin/sh
# Placeholders in request bodies (issue 20.1, 20.5): a secret with
# placeholder_in: [.., body] has its placeholder replaced in bodies towards
# its hosts, by its value encoded for where it lands: JSON-escaped in a
# JSON body (python requests), percent-encoded in a form body (requests),
# as it is in a multipart part (curl -F); a declared length within
# limits.body_bytes goes with its new Content-Length, a chunked body cut
# at every offset (the placeholder split across chunks) and a body over
# limits.body_bytes go chunked; the upstream sees exactly the expected
# bytes. Towards another host the placeholder is 403 secret_misuse with
# nothing of the body upstream; a gzip body towards the bound host is 415
# encoded_body_refused; a secret without body in placeholder_in refuses
# its placeholder in a body. The audit names "slack@body"; nothing
# airlockd wrote holds a value in any encoding.
. "$top_srcdir/tests/integration/lib.sh"

command -v openssl >/dev/null 2>&1 || skip "openssl CLI not found"
command -v curl >/dev/null 2>&1 || skip "curl not found"

HOSTS="api.test other.test"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
# shellcheck disable=SC2086
"$PYTHON" -m seclib mkleaf "$T/pki" "$T/pki/multi" $HOSTS >"$T/mkleaf.log" 2>&1 ||
    hard_error "mkleaf: $(cat "$T/mkleaf.log")"
start_secup ups -C "$T/pki/multi.crt" -K "$T/pki/multi.key"
UPS_PORT=$SECUP_PORT
AIRLOCK_PORT=$(free_port)

R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
PH_S="airlock:slack:$R"
PH_H="airlock-hdr-$R"
# a value with what JSON and forms must escape
printf 'xoxb-LEAK/%s+"q\\&=v' "$R" >"$T/slack.val"
printf 'hdr-LEAK-%s' "$R" >"$T/hdr.val"
chmod 600 "$T/slack.val" "$T/hdr.val"
export PH_S PH_H AIRLOCK_PORT UPS_PORT T

{
	config_common "$AIRLOCK_PORT" sb
	cat <<YAML
limits: {body_bytes: 2048}
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
  - name: slack
    source: file:$T/slack.val
    hosts: ["api.test"]
    placeholder: "$PH_S"
    placeholder_in: [header, body]
  - name: hdr
    source: file:$T/hdr.val
    hosts: ["api.test"]
    placeholder: "$PH_H"
    placeholder_in: [header]
policies:
  - name: p
    rules:
      - {host: "*", ports: [$UPS_PORT]}
sandboxes:
  - {id: sb, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"

"$PYTHON" - <<'PY' || check_fail "body placeholder checks"
import gzip, json, os, subprocess, urllib.parse
import requests
import itlib, seclib
from seclib import Client

E = os.environ
ap = int(E["AIRLOCK_PORT"])
port = int(E["UPS_PORT"])
T = E["T"]
CA = T + "/state/ca/sb/ca.crt"
audit = T + "/audit.jsonl"
t = itlib.Checks()
PH, PH_H = E["PH_S"], E["PH_H"]
VAL = open(T + "/slack.val", "rb").read()
ups = seclib.Upstream(T + "/ups.jsonl")
base = "https://api.test:%d" % port
prox = {"https": "http://127.0.0.1:%d" % ap}
VJ = json.dumps(VAL.decode())[1:-1].encode()         # JSON-escaped
VF = urllib.parse.quote(VAL, safe="-_.~").encode()   # percent-encoded


def audit_of(rid):
    if not rid:
        return None
    return itlib.audit_wait(audit, lambda a: a.get("id") == rid, 10)


def check(m, want, what, framing):
    rec = ups.one(m)
    if not t.ok(rec is not None, what + ": reached the upstream"):
        return
    t.ok(rec.body == want, what + ": exact bytes upstream",
         "%r != %r" % (rec.body, want))
    if framing == "length":
        t.ok(rec.header("Content-Length") == str(len(want)) and
             rec.header("Transfer-Encoding") is None,
             what + ": Content-Length recomputed", rec.headers)
    else:
        t.ok(rec.header("Transfer-Encoding") == "chunked" and
             rec.header("Content-Length") is None,
             what + ": re-framed chunked", rec.headers)


# --- JSON body (requests json=), held: new Content-Length
r = requests.post(base + "/api/chat.postMessage", proxies=prox, verify=CA,
                  json={"token": PH, "text": "hi " + PH + "!"},
                  headers={"X-Mark": "json"}, timeout=15)
t.ok(r.status_code == 200, "json: 200", r.text)
check("json", b'{"token": "' + VJ + b'", "text": "hi ' + VJ + b'!"}',
      "json", "length")
a = audit_of(r.headers.get("X-Airlock-Request-Id"))
t.ok(a is not None and "slack@body" in (a.get("secrets_at") or []) and
     "slack" in (a.get("secrets") or []),
     "json: audit secrets_at names slack@body", repr(a))

# --- form body (requests data=: ':' goes as %3A)
r = requests.post(base + "/api/auth.test", proxies=prox, verify=CA,
                  data={"token": PH, "x": "1"},
                  headers={"X-Mark": "form"}, timeout=15)
t.ok(r.status_code == 200, "form: 200", r.text)
check("form", b"token=" + VF + b"&x=1", "form", "length")

# --- multipart (curl -F): the part's value as it is
mp = T + "/mp.out"
open(T + "/up.txt", "w").write("a file\n")
cp = subprocess.run(["curl", "-sS", "-o", mp, "-w", "%{http_code}",
                     "--proxy", "http://127.0.0.1:%d" % ap, "--cacert", CA,
                     "-H", "X-Mark: multipart", "-F", "token=" + PH,
                     "-F", "file=@" + T + "/up.txt",
                     base + "/api/files.upload"],
                    capture_output=True, check=False, timeout=30)
rec = ups.one("multipart")
if t.ok(rec is not None, "multipart: reached the upstream",
        repr((cp.stdout, cp.stderr, open(mp, "rb").read()[:300]))):
    t.ok(b"\r\n\r\n" + VAL + b"\r\n" in rec.body and PH.encode() not in
         rec.body, "multipart: the part holds the raw value", rec.body[:400])
    t.ok(rec.header("Content-Length") == str(len(rec.body)),
         "multipart: Content-Length recomputed", rec.headers)

# --- chunked, the placeholder split at every offset
body = ('{"token":"%s"}' % PH).encode()
want = b'{"token":"' + VJ + b'"}'
c = Client(ap, "https", "api.test", port, CA)
bad = []
for k in range(len(body) + 1):
    m = "split-%d" % k
    r = c.request("POST", "/s", ["X-Mark: " + m,
                                 "Content-Type: application/json"],
                  chunks=[x for x in (body[:k], body[k:]) if x])
    rec = ups.one(m)
    if r.status != 200 or rec is None or rec.body != want:
        bad.append((k, r.status, rec.body if rec else None))
c.close()
t.ok(not bad, "chunked, split at each of %d offsets: exact bytes" %
     (len(body) + 1), repr(bad[:3]))
rec = ups.one("split-5")
t.ok(rec is not None and rec.header("Transfer-Encoding") == "chunked",
     "chunked: goes chunked", repr(rec))

# --- over limits.body_bytes (curl, Content-Length): streamed, chunked
big = b"x" * 3000 + PH.encode() + b"y" * 3000
open(T + "/big.bin", "wb").write(big)
subprocess.run(["curl", "-sS", "-o", T + "/big.out", "--proxy",
                "http://127.0.0.1:%d" % ap, "--cacert", CA,
                "-H", "X-Mark: big", "-H", "Content-Type: text/plain",
                "--data-binary", "@" + T + "/big.bin", base + "/big"],
               check=False, timeout=30)
check("big", b"x" * 3000 + VAL + b"y" * 3000, "over body_bytes", "chunked")

# --- towards another host: 403, nothing of the body upstream
for what, hdrs, body in (
        ("json", ["Content-Type: application/json"],
         ('{"token":"%s"}' % PH).encode()),
        ("form", ["Content-Type: application/x-www-form-urlencoded"],
         ("token=" + urllib.parse.quote(PH, safe="")).encode())):
    m = "other-" + what
    c = Client(ap, "https", "other.test", port, CA)
    try:
        r = c.request("POST", "/o", ["X-Mark: " + m] + hdrs, body)
    except (itlib.Closed, OSError) as e:
        r = None
    t.error(r, 403, "secret_misuse", "other host, %s: 403 secret_misuse" % what)
    c.close()
    recs = ups.by_mark(m, 0.5)
    t.ok(all(x.partial and x.body == b"" for x in recs),
         "other host, %s: no body byte upstream" % what, repr(recs))

# --- towards another host, the placeholder split across chunks after
# 4 KiB of filler: 403, and no byte of it reached the upstream
for cut in (1, 5, 11):
    m = "other-split-%d" % cut
    body = b"f" * 4096 + PH.encode() + b"tail"
    k = 4096 + cut
    c = Client(ap, "https", "other.test", port, CA)
    try:
        r = c.request("POST", "/o", ["X-Mark: " + m],
                      chunks=[body[:2048], body[2048:k], body[k:]])
    except (itlib.Closed, OSError) as e:
        r = None
    t.error(r, 403, "secret_misuse", "other host, split at +%d: 403" % cut)
    c.close()
    recs = ups.by_mark(m, 0.5)
    t.ok(all(x.partial and b"airlock" not in x.raw for x in recs),
         "other host, split at +%d: no byte of the placeholder upstream" %
         cut, repr(recs)[:300])

# --- gzip body towards the bound host: 415
c = Client(ap, "https", "api.test", port, CA)
r = c.request("POST", "/z", ["X-Mark: gz", "Content-Encoding: gzip",
                             "Content-Type: application/json"],
              gzip.compress(('{"t":"%s"}' % PH).encode()))
t.error(r, 415, "encoded_body_refused", "gzip body: 415 encoded_body_refused")
t.ok(ups.by_mark("gz", 0.3) == [], "gzip body: nothing upstream")
c.close()

# --- placeholder_in without body: its placeholder in a body is refused,
# in a header it is replaced
c = Client(ap, "https", "api.test", port, CA)
r = c.request("POST", "/h", ["X-Mark: hdrbody"], ("k=" + PH_H).encode())
t.error(r, 403, "secret_misuse", "header-only secret in a body: 403")
c.close()
c = Client(ap, "https", "api.test", port, CA)
r = c.request("GET", "/h", ["X-Mark: hdr", "X-Key: " + PH_H])
rec = ups.one("hdr")
t.ok(rec is not None and rec.header("X-Key") ==
     open(T + "/hdr.val").read(), "header-only secret in a header: replaced",
     repr(rec))
a = audit_of(r.header("X-Airlock-Request-Id"))
t.ok(a is not None and a.get("secrets_at") == ["hdr@header"],
     "audit secrets_at = [hdr@header]", repr(a))
c.close()
t.done()
PY

sleep 0.3
stop_airlockd

"$PYTHON" - <<'PY' || check_fail "leak search"
import os
import itlib, seclib

T = os.environ["T"]
t = itlib.Checks()
vals = {"slack": open(T + "/slack.val", "rb").read(),
        "hdr": open(T + "/hdr.val", "rb").read()}
t.ok(os.path.getsize(T + "/audit.jsonl") > 0, "the audit has content")
found = seclib.leaks(T, vals)
t.ok(not found, "no value in any form in anything airlockd wrote",
     repr(found[:5]))
t.done()
PY
finish
