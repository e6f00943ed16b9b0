#!/bin/sh
# Strict parsing: ambiguous or malformed requests are answered with the
# gateway's JSON error (400, or 501/505 where SPEC says so), the connection
# is closed, and the upstream provably never saw them: each carries a marker
# that must not show up in the origin's log (heads are logged verbatim). The
# TE obfuscation gadgets from ../shared/testdata run when present.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T TESTDATA
{
	config_common "$AIRLOCK_PORT" local
	cat <<YAML
limits: {header_bytes: 16KiB, header_timeout: 5s}
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: local, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
failed=

"$PYTHON" - <<'PY'
import os, itlib
from itlib import Reader, read_response, connect, Closed
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
olog = os.environ["T"] + "/origin.log"
t = itlib.Checks()
A = b"api.test:%d" % op

def line(m, method=b"POST", ver=b"HTTP/1.1"):
    return b"%s http://%s/echo?m=%s %s\r\n" % (method, A, m, ver)

def smug(m):
    """A request only a desynchronised parser would see."""
    return b"GET /smuggled-%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (m, A)

H = b"Host: " + A + b"\r\n"
cases = [
 # name, bytes, allowed statuses, body-stage error?
 (b"cl-te", line(b"cl-te") + H + b"Content-Length: 5\r\n"
  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smug(b"cl-te"), {400}, 0),
 (b"te-cl", line(b"te-cl") + H + b"Transfer-Encoding: chunked\r\n"
  b"Content-Length: 50\r\n\r\n0\r\n\r\n" + smug(b"te-cl"), {400}, 0),
 (b"cl-dup-same", line(b"cl-dup-same") + H + b"Content-Length: 5\r\n"
  b"Content-Length: 5\r\n\r\nhello" + smug(b"cl-dup-same"), {400}, 0),
 (b"cl-dup-diff", line(b"cl-dup-diff") + H + b"Content-Length: 5\r\n"
  b"Content-Length: 0\r\n\r\nhello" + smug(b"cl-dup-diff"), {400}, 0),
 (b"cl-list", line(b"cl-list") + H + b"Content-Length: 5, 5\r\n\r\nhello"
  + smug(b"cl-list"), {400}, 0),
 (b"cl-plus", line(b"cl-plus") + H + b"Content-Length: +5\r\n\r\nhello"
  + smug(b"cl-plus"), {400}, 0),
 (b"cl-neg", line(b"cl-neg") + H + b"Content-Length: -1\r\n\r\n"
  + smug(b"cl-neg"), {400}, 0),
 (b"cl-hex", line(b"cl-hex") + H + b"Content-Length: 0x5\r\n\r\nhello"
  + smug(b"cl-hex"), {400}, 0),
 (b"cl-huge", line(b"cl-huge") + H +
  b"Content-Length: 99999999999999999999999999\r\n\r\n" + smug(b"cl-huge"),
  {400, 413}, 0),
 (b"chunk-size-bad", line(b"chunk-size-bad") + H +
  b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n" +
  smug(b"chunk-size-bad"), {400}, 1),
 (b"chunk-size-overflow", line(b"chunk-size-overflow") + H +
  b"Transfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n"
  + smug(b"chunk-size-overflow"), {400}, 1),
 (b"chunk-size-neg", line(b"chunk-size-neg") + H +
  b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n" +
  smug(b"chunk-size-neg"), {400}, 1),
 (b"chunk-no-crlf", line(b"chunk-no-crlf") + H +
  b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n" +
  smug(b"chunk-no-crlf"), {400}, 1),
 (b"chunk-bare-lf", line(b"chunk-bare-lf") + H +
  b"Transfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n" +
  smug(b"chunk-bare-lf"), {400}, 1),
 (b"obs-fold", line(b"obs-fold") + H + b"X-A: 1\r\n folded\r\n"
  b"Content-Length: 0\r\n\r\n" + smug(b"obs-fold"), {400}, 0),
 (b"obs-fold-te", line(b"obs-fold-te") + H + b"Transfer-Encoding:\r\n"
  b" chunked\r\n\r\n0\r\n\r\n" + smug(b"obs-fold-te"), {400}, 0),
 (b"bare-lf", line(b"bare-lf").replace(b"\r\n", b"\n") + b"Host: " + A +
  b"\nContent-Length: 0\n\n" + smug(b"bare-lf"), {400}, 0),
 (b"bare-lf-one", line(b"bare-lf-one") + H + b"X-A: 1\nContent-Length: 0"
  b"\r\n\r\n" + smug(b"bare-lf-one"), {400}, 0),
 (b"bare-cr", line(b"bare-cr") + H + b"X-A: 1\rX-B: 2\r\n\r\n" +
  smug(b"bare-cr"), {400}, 0),
 (b"cr-before-crlf", line(b"cr-before-crlf") + H + b"X-A: 1\r\r\n\r\n" +
  smug(b"cr-before-crlf"), {400}, 0),
 (b"nul-value", line(b"nul-value") + H + b"X-A: a\x00b\r\n\r\n" +
  smug(b"nul-value"), {400}, 0),
 (b"nul-name", line(b"nul-name") + H + b"X-\x00A: 1\r\n\r\n" +
  smug(b"nul-name"), {400}, 0),
 (b"ctl-value", line(b"ctl-value") + H + b"X-A: a\x01b\r\n\r\n" +
  smug(b"ctl-value"), {400}, 0),
 (b"crlf-target", b"GET http://" + A + b"/echo?m=crlf-target\r\n"
  b"X-Injected: 1 HTTP/1.1\r\n" + H + b"\r\n" + smug(b"crlf-target"),
  {400, 505}, 0),
 (b"space-colon", line(b"space-colon") + H + b"X-A : 1\r\n\r\n" +
  smug(b"space-colon"), {400}, 0),
 (b"space-colon-te", line(b"space-colon-te") + H +
  b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n" + smug(b"space-colon-te"),
  {400}, 0),
 (b"no-colon", line(b"no-colon") + H + b"X-Broken\r\n\r\n" +
  smug(b"no-colon"), {400}, 0),
 (b"bad-name-char", line(b"bad-name-char") + H + b"X(A): 1\r\n\r\n" +
  smug(b"bad-name-char"), {400}, 0),
 (b"two-spaces", b"GET  http://" + A + b"/echo?m=two-spaces HTTP/1.1\r\n" +
  H + b"\r\n" + smug(b"two-spaces"), {400}, 0),
 (b"dup-host", line(b"dup-host", b"GET") + H + b"Host: evil.test\r\n\r\n" +
  smug(b"dup-host"), {400}, 0),
 (b"te-chunked-identity", line(b"te-chunked-identity") + H +
  b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" +
  smug(b"te-chunked-identity"), {400, 501}, 0),
 (b"te-xchunked", line(b"te-xchunked") + H +
  b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + smug(b"te-xchunked"),
  {400, 501}, 0),
 (b"te-gzip-only", line(b"te-gzip-only") + H +
  b"Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n" + smug(b"te-gzip-only"),
  {400, 501}, 0),
 (b"te-two-fields", line(b"te-two-fields") + H +
  b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n"
  b"0\r\n\r\n" + smug(b"te-two-fields"), {400, 501}, 0),
 (b"te-chunked-twice", line(b"te-chunked-twice") + H +
  b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n" +
  smug(b"te-chunked-twice"), {400, 501}, 0),
 (b"te-http10", line(b"te-http10", ver=b"HTTP/1.0") + H +
  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smug(b"te-http10"),
  {400, 501}, 0),
 (b"http2", line(b"http2", b"GET", b"HTTP/2.0") + H + b"\r\n" +
  smug(b"http2"), {505}, 0),
 (b"http3", line(b"http3", b"GET", b"HTTP/3.0") + H + b"\r\n" +
  smug(b"http3"), {505}, 0),
 (b"http12", line(b"http12", b"GET", b"HTTP/1.2") + H + b"\r\n" +
  smug(b"http12"), {400, 505}, 0),
 (b"bad-version", line(b"bad-version", b"GET", b"HTXP/1.1") + H + b"\r\n" +
  smug(b"bad-version"), {400, 505}, 0),
 (b"big-header", line(b"big-header", b"GET") + H + b"X-Big: " +
  b"a" * 20000 + b"\r\n\r\n" + smug(b"big-header"), {431}, 0),
 (b"many-headers", line(b"many-headers", b"GET") + H +
  b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 90) for i in range(300)) +
  b"\r\n" + smug(b"many-headers"), {431}, 0),
 (b"long-uri", b"GET http://" + A + b"/echo?m=long-uri&p=" + b"c" * 9000 +
  b" HTTP/1.1\r\n" + H + b"\r\n" + smug(b"long-uri"), {414}, 0),
]
codes = {400: "bad_request", 413: "body_too_large", 414: "uri_too_long",
         431: "headers_too_large", 501: "not_implemented",
         505: "version_not_supported"}

for name, data, want, body_stage in cases:
    n = name.decode()
    s = connect(ap, 10)
    try:
        s.sendall(data)
    except OSError:
        pass
    rd = Reader(s)
    try:
        r = read_response(rd, "POST")
    except (Closed, OSError, ValueError) as e:
        r = None
    if r is not None and r.status in want:
        t.error(r, r.status, codes[r.status], "%s → %d" % (n, r.status))
    else:
        t.ok(False, "%s → %s" % (n, "/".join(map(str, sorted(want)))),
             repr(r))
    try:
        closed = rd.closed_after(3)
    except OSError:
        closed = True
    t.ok(closed, "%s: connection closed after the error" % n)
    s.close()

import time
time.sleep(0.3)
recs = itlib.origin_records(olog)
for name, data, want, body_stage in cases:
    n = name.decode()
    mk = b"m=" + name + b" "
    hits = [r for r in recs if mk in r]
    if body_stage:
        # the head may have been streamed before the bad chunk arrived,
        # but the upstream must never have received a complete request
        t.ok(all(b"\n--- error:" in r for r in hits),
             "%s: no complete request reached the upstream" % n,
             repr(hits[:1]))
    else:
        t.ok(not hits, "%s: never reached the upstream" % n, repr(hits[:1]))
    t.ok(not any(b"/smuggled-" + name + b" " in r for r in recs),
         "%s: smuggled request never reached the upstream" % n)

# A valid chunked request still works after all this.
r = itlib.roundtrip(ap, line(b"valid") + H + b"Transfer-Encoding: chunked"
                    b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
t.ok(r is not None and r.status == 200 and
     r.header("X-Body-Bytes") == "5", "valid chunked request passes", repr(r))
t.done()
PY
[ $? -eq 0 ] || failed="smuggling checks"

gadgets=$TESTDATA/http1/te-obfuscation-gadgets.jsonl
if [ ! -f "$gadgets" ]; then
	note "no $gadgets: TE gadget corpus skipped"
else
"$PYTHON" - "$gadgets" <<'PY' || failed="${failed:+$failed, }TE gadget checks"
import concurrent.futures, json, os, sys, time, itlib
from itlib import Reader, read_response, connect, Closed
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
olog = os.environ["T"] + "/origin.log"
A = b"api.test:%d" % op
gadgets = [json.loads(l)["gadget"].encode("latin-1")
           for l in open(sys.argv[1], encoding="utf-8") if l.strip()]

def one(i):
    g = gadgets[i]
    data = (b"POST http://%s/echo?g=%d HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n"
            b"5\r\nhello\r\n0\r\n\r\n"
            b"GET /smuggled-%d HTTP/1.1\r\nHost: %s\r\n\r\n"
            % (A, i, A, g, i, A))
    try:
        s = connect(ap, 10)
    except OSError as e:
        return i, "connect: %s" % e, None
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        rd = Reader(s)
        try:
            r = read_response(rd, "POST")
        except (Closed, OSError, ValueError) as e:
            return i, "no response (%s)" % e, None
    finally:
        s.close()
    if itlib.is_gateway_error(r) and r.status in (400, 501, 505, 431):
        return i, None, "rejected"
    if r.status != 200 or r.header("Server") != "airlock-origin":
        return i, "neither rejected nor forwarded: %r" % r, None
    # forwarded: the upstream must have seen one chunked message, "hello"
    head = r.body
    te, bad = [], []
    for ln in head.split(b"\r\n")[1:]:
        if not ln:
            continue
        k, sep, v = ln.partition(b":")
        squashed = bytes(c for c in ln.lower() if 0x61 <= c <= 0x7a)
        if k.lower() == b"transfer-encoding":
            te.append(v.strip(b" \t"))
        elif k.lower() == b"content-length" or \
                b"transferencoding" in squashed or b"chunked" in squashed:
            bad.append(ln)
    if te != [b"chunked"] or bad or r.header("X-Body-Bytes") != "5":
        return i, ("forwarded with other framing: TE %r, suspicious %r, "
                   "body %r bytes" % (te, bad, r.header("X-Body-Bytes"))), None
    return i, None, "forwarded"

t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(max_workers=16) as ex:
    results = list(ex.map(one, range(len(gadgets))))
time.sleep(0.3)
recs = itlib.origin_records(olog)
smuggled = [r for r in recs if b"/smuggled-" in r]
rejected = sum(1 for _, _, k in results if k == "rejected")
forwarded = sum(1 for _, _, k in results if k == "forwarded")
fails = [(i, why) for i, why, _ in results if why]
# a rejected gadget must not have reached the upstream either
seen = set()
for r in recs:
    j = r.find(b"/echo?g=")
    if j >= 0:
        seen.add(int(r[j + 8:].split(b" ", 1)[0]))
leaked = [i for i, why, k in results if k == "rejected" and i in seen]
print("# %d gadgets in %.1fs: %d rejected, %d forwarded as chunked, "
      "%d bad, %d rejected-but-forwarded, %d smuggled"
      % (len(gadgets), time.time() - t0, rejected, forwarded, len(fails),
         len(leaked), len(smuggled)))
for i, why in fails[:25]:
    print("not ok - gadget %d %r: %s" % (i, gadgets[i], why))
for i in leaked[:10]:
    print("not ok - gadget %d %r rejected but reached the upstream"
          % (i, gadgets[i]))
for r in smuggled[:10]:
    print("not ok - smuggled request reached the upstream: %r" % r[:200])
if fails or leaked or smuggled:
    sys.exit(1)
print("ok - all %d TE gadgets rejected or framed as chunked" % len(gadgets))
PY
fi
stop_airlockd
[ -z "${failed:-}" ] || fail "$failed"
