#!/bin/sh
# Strict parsing: ambiguous or malformed requests are answered with the
# gateway's JSON error (400, or 501/505 where SPEC says so), the connection
# is closed, and the upstream provably never saw them: each carries a marker
# that must not show up in the origin's log (heads are logged verbatim). The
# TE obfuscation gadgets from ../shared/testdata run when present.
. "$top_srcdir/tests/integration/lib.sh"

start_origin
AIRLOCK_PORT=$(free_port)
REC_PORTS=
for i in 1 2 3 4 5 6; do
	REC_PORTS="$REC_PORTS $(free_port)"
done
export AIRLOCK_PORT ORIGIN_PORT T TESTDATA REC_PORTS
PORTLIST=$(echo $ORIGIN_PORT $REC_PORTS | sed 's/ /, /g')
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
      - {host: "api.test", ports: [$PORTLIST]}
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
 (b"bare-lf-end", line(b"bare-lf-end") + H + b"\nTransfer-Encoding: chunked"
  b"\r\n\r\n0\r\n\r\n" + smug(b"bare-lf-end"), {400}, 0),
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

# OWS around "chunked" (RFC 9110 5.5): either it is chunked (and relayed
# as such) or the request is refused before any of it goes upstream. Each
# case gets its own fresh upstream that records every byte it receives;
# sent in one piece, and with the body after a pause.
import time
ports = [int(p) for p in os.environ["REC_PORTS"].split()]
k = 0
for n0, te in ((b"te-trailing-tab", b"chunked\t"),
               (b"te-trailing-sp", b"chunked "),
               (b"te-leading-tab", b"\tchunked")):
    for pause in (0, 0.4):
        n = n0 + (b"-paused" if pause else b"")
        up = itlib.RecordingUpstream(ports[k])
        k += 1
        A2 = b"api.test:%d" % up.port
        head = (b"POST http://%s/echo?m=%s HTTP/1.1\r\nHost: %s\r\n"
                b"Transfer-Encoding: %s\r\n\r\n" % (A2, n, A2, te))
        body = b"5\r\nhello\r\n0\r\n\r\n"
        s = connect(ap, 10)
        if pause:
            s.sendall(head)
            time.sleep(pause)
            head = b""
        try:
            s.sendall(head + body)
        except OSError:
            pass
        rd = Reader(s)
        try:
            r = read_response(rd, "POST")
        except (Closed, OSError, ValueError):
            r = None
        s.close()
        time.sleep(0.2)
        got = up.received()
        up.close()
        if r is not None and r.status == 200:
            t.ok(r.body.endswith(b"\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 b"5\r\nhello\r\n0\r\n\r\n"),
                 "%s: relayed as chunked" % n.decode(), repr(r.body))
        else:
            t.ok(itlib.check_error(r, 400) is None or
                 itlib.check_error(r, 501) is None,
                 "%s: refused with 400/501" % n.decode(), repr(r))
            t.ok(not any(got), "%s: refused, so nothing may reach the "
                 "upstream" % n.decode(), repr(got))

# Two spaces in the request line: refused, or (RFC 9112 3 lets a
# recipient split on whitespace) relayed with a clean request line; never
# relayed as it came.
r = itlib.roundtrip(ap, b"GET  http://" + A + b"/echo?m=two-spaces HTTP/1.1"
                    b"\r\n" + H + b"\r\n")
if r is not None and r.status == 200:
    t.ok(r.body.startswith(b"GET /echo?m=two-spaces HTTP/1.1\r\n"),
         "two spaces in the request line: relayed normalised", repr(r.body))
else:
    t.error(r, 400, "bad_request", "two spaces in the request line → 400")

# A request hidden in a body: Content-Length decides, both ways. Longer
# than the data that follows: the "request" is body bytes; shorter: the
# rest is the client's next request, which (origin-form) is refused.
for n, cl in ((b"cl-long", 120), (b"cl-short", 0)):
    sm = smug(n)
    data = (line(n) + H + b"Content-Length: %d\r\n\r\n" % cl + sm +
            b"x" * max(0, cl - len(sm)))
    rs, _ = itlib.exchange(ap, data, 2 if cl == 0 else 1,
                           methods=["POST", "GET"], timeout=5)
    t.ok(rs and rs[0].status == 200 and
         rs[0].header("X-Body-Bytes") == str(cl),
         "%s: one request with a %d-byte body" % (n.decode(), cl), repr(rs))
    if cl == 0:
        t.ok(len(rs) == 2 and itlib.check_error(rs[1], 400) is None,
             "%s: the rest is refused as a request of its own" % n.decode(),
             repr(rs[1:]))
    time.sleep(0.1)
    recs = itlib.origin_records(olog)
    t.ok(not any(b"/smuggled-" + n + b" " in x for x in recs),
         "%s: smuggled request never reached the upstream" % n.decode())

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
    # Forwarded: the framing the upstream reads from the re-serialised head
    # must be the one airlock used. Either one chunked message carrying
    # "hello", or (the gadget was not a Transfer-Encoding field at all) no
    # framing field and an empty body. A field whose name only looks like
    # one (Transfer_Encoding: CGI/WSGI map it onto the same variable) must
    # not be relayed.
    head = r.body
    te, cl, lookalike = [], [], []
    for ln in head.split(b"\r\n")[1:]:
        if not ln:
            continue
        k, sep, v = ln.partition(b":")
        name = k.lower()
        squashed = bytes(c for c in name if 0x61 <= c <= 0x7a)
        if name == b"transfer-encoding":
            te.append(v.strip(b" \t"))
        elif name == b"content-length":
            cl.append(v.strip(b" \t"))
        elif squashed in (b"transferencoding", b"contentlength"):
            lookalike.append(ln)
    nbody = r.header("X-Body-Bytes")
    if lookalike:
        return i, "look-alike framing field relayed: %r" % lookalike, None
    if te == [b"chunked"] and not cl and nbody == "5":
        return i, None, "forwarded"
    if not te and not cl and nbody == "0":
        return i, None, "forwarded-unframed"
    return i, ("forwarded with other framing: TE %r, CL %r, upstream read "
               "%r body bytes" % (te, cl, nbody)), None

t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(max_workers=16) as ex:
    results = list(ex.map(one, range(len(gadgets))))
time.sleep(0.3)
recs = itlib.origin_records(olog)
smuggled = [r for r in recs if b"/smuggled-" in r]
rejected = sum(1 for _, _, k in results if k == "rejected")
forwarded = sum(1 for _, _, k in results if k == "forwarded")
unframed = sum(1 for _, _, k in results if k == "forwarded-unframed")
fails = [(i, why) for i, why, _ in results if why]
# a rejected gadget must not have reached the upstream either
seen = set()
for r in recs:
    j = r.find(b"/echo?g=")
    if j >= 0:
        seen.add(int(r[j + 8:].split(b" ", 1)[0]))
leaked = [i for i, why, k in results if k == "rejected" and i in seen]
print("# %d gadgets in %.1fs: %d rejected, %d forwarded as chunked, "
      "%d forwarded as not framing, %d bad, %d rejected after the head "
      "reached the upstream, %d smuggled"
      % (len(gadgets), time.time() - t0, rejected, forwarded, unframed,
         len(fails), len(leaked), len(smuggled)))
for i, why in fails[:25]:
    print("not ok - gadget %d %r: %s" % (i, gadgets[i], why))
for i in leaked[:10]:
    print("not ok - gadget %d %r rejected, but its head had been sent "
          "upstream" % (i, gadgets[i]))
for r in smuggled[:10]:
    print("not ok - smuggled request reached the upstream: %r" % r[:200])
if fails or leaked or smuggled:
    sys.exit(1)
print("ok - all %d TE gadgets rejected or framed consistently" % len(gadgets))
PY
fi
stop_airlockd
[ -z "${failed:-}" ] || fail "$failed"
