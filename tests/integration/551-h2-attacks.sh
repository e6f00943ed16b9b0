#!/bin/sh
# The HTTP/2 attack classes (issue 19 point 4), each with real frames
# (python hyperframe/hpack) on an intercepted h2 session: rapid reset
# (CVE-2023-44487), a CONTINUATION flood (CVE-2024-28182), a header list
# over limits.header_bytes (431 on that stream, audited) and an HPACK bomb
# (the connection ends), PING and SETTINGS floods from a client that does
# not read, more streams than limits.h2_max_streams, stream IDs going
# backwards, connection-specific and invalid pseudo-header fields, a
# content-length that disagrees with DATA. After each the daemon still
# serves, nothing hostile reached the upstream, and its RSS stays small.
. "$top_srcdir/tests/integration/lib.sh"

SYS_PYTHON=${SYS_PYTHON:-/usr/bin/python3}
"$SYS_PYTHON" -c "import h2, hyperframe, hpack" 2>/dev/null ||
    hard_error "python3-h2 missing (scripts/install-deps.sh --test)"
sh "$top_srcdir/tests/harness/mkpki.sh" "$T/pki" >"$T/mkpki.log" 2>&1 ||
    hard_error "mkpki.sh: $(cat "$T/mkpki.log")"
start_origin origin -C "$T/pki/good.crt" -K "$T/pki/good.key"
AIRLOCK_PORT=$(free_port)
export AIRLOCK_PORT ORIGIN_PORT T
{
	config_common "$AIRLOCK_PORT" a
	cat <<YAML
limits: {h2_max_streams: 5, header_bytes: 8192}
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1"}
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$ORIGIN_PORT]}
sandboxes:
  - {id: a, policy: p}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
# ASan's quarantine holds freed memory: the RSS bounds are the release
# build's (checked there), loose under the sanitizers
RSS_SLACK=1
is_asan && RSS_SLACK=10
export AIRLOCK_PID RSS_SLACK

"$SYS_PYTHON" - <<'PY' || fail "h2 attacks"
import os, time, json, itlib, tlslib, h2lib
from hyperframe import frame as hf
ap, op = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("ORIGIN_PORT")
T = os.environ["T"]
audit, ca, olog = T + "/audit.jsonl", T + "/state/ca/a/ca.crt", T + "/origin.log"
pid = int(os.environ["AIRLOCK_PID"])
slack = int(os.environ["RSS_SLACK"])
tgt = "api.test:%d" % op
t = itlib.Checks()
PROTOCOL_ERROR, REFUSED, CALM, COMPRESSION = 1, 7, 11, 9


def rss_kb():
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def still_serves(what):
    c = h2lib.H2Conn(ap, tgt, ca)
    s = c.request("GET", "/json/12")
    c.wait([s])
    t.ok(c.streams[s].status == 200, what + ": the daemon still serves h2",
         c.streams[s])
    c.close()


def upstream_saw(marker):
    return [x for x in itlib.origin_records(olog) if marker in x]


# rapid reset: HEADERS then RST_STREAM, stream after stream
r = h2lib.Raw(ap, tgt, ca)
r.read(1)
burst = b""
for i in range(400):
    sid = 1 + 2 * i
    burst += r.headers(sid, r.req_headers(path="/delay/200?m=rr"))
    burst += hf.RstStreamFrame(sid, error_code=8).serialize()
r.send(burst)
r.read(5, until=lambda f: isinstance(f, hf.GoAwayFrame))
t.ok(r.goaway() is not None or r.closed, "rapid reset (400 streams opened "
     "and reset): GOAWAY", r.goaway())
r.close()
time.sleep(0.5)
t.ok(len(upstream_saw(b"m=rr")) < 150, "rapid reset: %d of 400 streams "
     "reached the upstream" % len(upstream_saw(b"m=rr")))
still_serves("after rapid reset")

# CONTINUATION flood: a header block that never ends
r = h2lib.Raw(ap, tgt, ca)
r.read(1)
data = r.headers(1, r.req_headers(), end_headers=False)
for i in range(200):
    c = hf.ContinuationFrame(1)
    c.data = r.enc.encode([("x-c%d" % i, "v" * 20)])
    data += c.serialize()
r.send(data)
r.read(5, until=lambda f: isinstance(f, hf.GoAwayFrame))
t.ok(r.goaway() is not None or r.closed, "CONTINUATION flood: the "
     "connection ends", r.goaway())
r.close()
still_serves("after a CONTINUATION flood")

# a header list over limits.header_bytes: 431 on that stream, audited
r = h2lib.Raw(ap, tgt, ca)
r.read(1)
big = [("x-big-%d" % i, "b" * 3000) for i in range(4)]
r.send(r.headers(1, r.req_headers(path="/echo?m=bigheads", extra=big)) +
       r.headers(3, r.req_headers(path="/json/7")))
r.read(5, until=lambda f: r.status(1) is not None and r.status(3) is not None)
t.ok(r.status(1) == 431 and r.status(3) == 200, "header list of 12 KB over "
     "header_bytes 8192: 431 on its stream, the next stream 200",
     (r.status(1), r.status(3), r.rst(1)))
rec = itlib.audit_wait(audit, lambda a: a.get("client") == r.client and
                       a.get("status") == 431)
t.ok(rec is not None and rec.get("http") == "2", "the 431 is audited", rec)
t.ok(not upstream_saw(b"m=bigheads"), "... never forwarded")
r.close()

# HPACK bomb: one 4 KB entry in the dynamic table, referenced 200 times
r = h2lib.Raw(ap, tgt, ca)
r.read(1)
block = r.enc.encode(r.req_headers(path="/echo?m=bomb") +
                     [("x-bomb", "z" * 4000)])
idx = 62        # the entry just added: the first dynamic index
block += bytes([0x80 | 0x3e]) * 200     # indexed header field 62
f = hf.HeadersFrame(1)
f.data = block
f.flags.add("END_STREAM")
f.flags.add("END_HEADERS")
r.send(f.serialize())
r.read(5, until=lambda f: isinstance(f, hf.GoAwayFrame) or
       isinstance(f, hf.RstStreamFrame) or r.status(1) is not None)
t.ok(r.goaway() is not None or r.closed or r.rst(1) is not None or
     r.status(1) == 431, "HPACK bomb (800 KB decoded from 5 KB): refused",
     (r.goaway(), r.rst(1), r.status(1)))
t.ok(not upstream_saw(b"m=bomb"), "... never forwarded")
r.close()
still_serves("after an HPACK bomb")

# PING and SETTINGS floods from a client that never reads
before = rss_kb()
for kind in ("PING", "SETTINGS"):
    r = h2lib.Raw(ap, tgt, ca)
    r.read(1)
    if kind == "PING":
        one = hf.PingFrame(0, opaque_data=b"12345678").serialize()
    else:
        one = hf.SettingsFrame(0, settings={4: 65535}).serialize()
    chunk = one * 2000
    sent = 0
    end = time.time() + 4
    while time.time() < end and r.send(chunk, 1):
        sent += len(chunk)
    r.read(3, until=lambda f: isinstance(f, hf.GoAwayFrame))
    t.ok(rss_kb() - before < 20000 * slack, "%s flood (%d KB sent, not read): "
         "RSS grew %d KB" % (kind, sent // 1024, rss_kb() - before))
    r.close()
still_serves("after PING and SETTINGS floods")

# more streams than limits.h2_max_streams (5) once our SETTINGS are
# acknowledged: nghttp2 makes it a connection error (RFC 9113 5.1.2 allows
# the stream error), and no more than 5 reach the upstream
r = h2lib.Raw(ap, tgt, ca)
r.read(1)
r.send(b"".join(r.headers(1 + 2 * i, r.req_headers(path="/delay/300?m=ms"))
                for i in range(8)))
r.read(5, until=lambda f: isinstance(f, hf.GoAwayFrame))
time.sleep(0.5)
t.ok(r.goaway() == PROTOCOL_ERROR and len(upstream_saw(b"m=ms")) <= 5,
     "8 streams at once with h2_max_streams 5: GOAWAY PROTOCOL_ERROR, "
     "%d upstream" % len(upstream_saw(b"m=ms")), r.goaway())
r.close()
# a polite client (python-h2 honours SETTINGS_MAX_CONCURRENT_STREAMS)
c = h2lib.H2Conn(ap, tgt, ca)
c.pump(0.5)
t.ok(c.remote_settings.get(3) == 5, "SETTINGS_MAX_CONCURRENT_STREAMS 5 "
     "advertised", c.remote_settings)
c.close()

# a stream ID going backwards: never answered nor forwarded (nghttp2 ignores
# a HEADERS it cannot tell from a late one on a closed stream)
r = h2lib.Raw(ap, tgt, ca)
r.read(1)
r.send(r.headers(5, r.req_headers(path="/json/3")) +
       r.headers(3, r.req_headers(path="/json/3?m=backwards")))
r.read(3, until=lambda f: r.status(3) is not None)
t.ok(r.status(5) == 200 and r.status(3) is None, "stream 3 after stream 5: "
     "stream 5 answered, stream 3 not", (r.status(5), r.status(3)))
t.ok(not upstream_saw(b"m=backwards"), "... stream 3 never forwarded")
r.close()


def one_bad(what, mk, want=PROTOCOL_ERROR):
    """<mk>(raw) frames for stream 1, then a good stream 3."""
    r = h2lib.Raw(ap, tgt, ca)
    r.read(1)
    r.send(mk(r) + r.headers(3, r.req_headers(path="/json/9")))
    r.read(5, until=lambda f: r.status(3) is not None and
           r.rst(1) is not None)
    t.ok(r.rst(1) == want and r.status(3) == 200 and r.goaway() is None,
         what + ": the stream reset, the next one on the connection 200",
         (r.rst(1), r.status(3), r.goaway()))
    r.close()


for extra in ([("connection", "keep-alive")], [("transfer-encoding", "chunked")],
              [("upgrade", "websocket")], [("keep-alive", "5")],
              [("te", "gzip")]):
    one_bad("connection-specific %s" % extra[0][0],
            lambda r: r.headers(1, r.req_headers(path="/echo?m=connspec",
                                                 extra=extra)))
one_bad("unknown pseudo-header :foo", lambda r: r.headers(1, [
    (":method", "GET"), (":scheme", "https"), (":authority", r.authority),
    (":path", "/echo?m=pseudo"), (":foo", "bar")]))
one_bad("no :path", lambda r: r.headers(1, [
    (":method", "GET"), (":scheme", "https"), (":authority", r.authority)]))


def cl(r, n, body, m):
    d = hf.DataFrame(1, data=body)
    d.flags.add("END_STREAM")
    return r.headers(1, r.req_headers("POST", "/upload?m=" + m,
                                      [("content-length", str(n))]),
                     end_stream=False) + d.serialize()


one_bad("content-length 10, 5 bytes of DATA", lambda r: cl(r, 10, b"12345",
                                                          "clshort"))
one_bad("content-length 3, 10 bytes of DATA", lambda r: cl(r, 3, b"0" * 10,
                                                          "cllong"))
t.ok(not upstream_saw(b"m=connspec") and not upstream_saw(b"m=pseudo"),
     "no stream with a connection-specific field or :foo forwarded")
time.sleep(0.5)
done = [x for x in itlib.origin_records(olog) if b"m=cl" in x and
        (b"body 5 bytes" in x or b"body 10 bytes" in x)]
t.ok(not done, "no body of the wrong length completed upstream", done)
t.ok(rss_kb() < 64 * 1024 * slack, "RSS at the end %d KB" % rss_kb())
t.done()
PY
stop_airlockd
finish
