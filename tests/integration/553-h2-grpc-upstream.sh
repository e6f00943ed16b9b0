#!/bin/sh
# gRPC end to end over upstream HTTP/2 (issue 19 points 2 and 3): python
# grpcio through CONNECT (grpc.http_proxy) to airlockd, which offers
# ALPN h2 to a real grpcio server on loopback TLS and multiplexes the
# calls over pooled HTTP/2 connections. Unary (grpc-timeout reaches the
# server), server streaming, client streaming and bidi pass with their
# trailers; the rule's secret arrives as metadata; non-OK statuses pass
# both as Trailers-Only and as trailers after DATA; a client that stops
# reading a 64 MiB server stream leaves airlockd's RSS bounded (no whole
# stream buffered: the server itself is held back by flow control).
. "$top_srcdir/tests/integration/lib.sh"

. "$top_srcdir/tests/integration/grpc-lib.sh"
grpc_gateway grpc-secret-553-value
ASAN=0
is_asan && ASAN=1
export AIRLOCK_PORT GRPC_PORT T AIRLOCK_PID ASAN

"$SYS_PYTHON" - <<'PY' || fail "gRPC over upstream h2"
import json, os, time, grpc, itlib
ap, gp = itlib.env_int("AIRLOCK_PORT"), itlib.env_int("GRPC_PORT")
T = os.environ["T"]
audit, glog = T + "/audit.jsonl", T + "/grpc.log"
ca = open(T + "/state/ca/a/ca.crt", "rb").read()
t = itlib.Checks()
ch = grpc.secure_channel("api.test:%d" % gp,
                         grpc.ssl_channel_credentials(root_certificates=ca),
                         options=[("grpc.http_proxy",
                                   "http://127.0.0.1:%d" % ap)])


def glines(m):
    return [json.loads(x) for x in open(glog) if '"m": "%s"' % m in x]


def rss():
    for line in open("/proc/%s/status" % os.environ["AIRLOCK_PID"]):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


unary = ch.unary_unary("/pkg.Svc/Unary")
r = unary(b"hi", timeout=20, metadata=(("x-trace", "553"),))
t.ok(r == b"u:hi", "unary through the gateway", r)
g = glines("Unary")[-1]
t.ok(g["md"].get("x-api-key") == "grpc-secret-553-value" and
     g["md"].get("x-trace") == "553", "... the rule's secret arrived as "
     "metadata, the call's own kept", g["md"].keys())
t.ok(g["remaining"] is not None and 0 < g["remaining"] <= 20,
     "... grpc-timeout reached the server", g["remaining"])
rec = itlib.audit_wait(audit, lambda a: a.get("path") == "/pkg.Svc/Unary")
t.ok(rec is not None and rec.get("decision") == "allow" and
     rec.get("http") == "2" and rec.get("status") == 200,
     "... audited (http 2, status 200)", rec)

ss = ch.unary_stream("/pkg.Svc/ServerStream")
got = list(ss(b"20:1000", timeout=20))
t.ok(len(got) == 20 and all(len(x) == 1000 for x in got),
     "server streaming: 20 messages", len(got))

cs = ch.stream_unary("/pkg.Svc/ClientStream")
r = cs(iter([b"a" * 100] * 50), timeout=20)
t.ok(r == b"50,5000", "client streaming: 50 messages counted", r)

bd = ch.stream_stream("/pkg.Svc/Bidi")
got = list(bd(iter([b"x%d" % i for i in range(30)]), timeout=20))
t.ok(got == [b"e:x%d" % i for i in range(30)], "bidi: 30 echoed in order",
     got[:3])

try:
    ch.unary_unary("/pkg.Svc/Fail")(b"", timeout=20)
    t.ok(False, "a Trailers-Only NOT_FOUND")
except grpc.RpcError as e:
    t.ok(e.code() == grpc.StatusCode.NOT_FOUND and e.details() == "nope 553",
         "a Trailers-Only non-OK status passes", (e.code(), e.details()))
got = []
try:
    for x in ch.unary_stream("/pkg.Svc/FailLate")(b"", timeout=20):
        got.append(x)
    t.ok(False, "DATA_LOSS in the trailers")
except grpc.RpcError as e:
    t.ok(got == [b"first"] and e.code() == grpc.StatusCode.DATA_LOSS and
         e.details() == "late 553", "a non-OK status in trailers after "
         "DATA passes", (got, e.code(), e.details()))

# the reflection guard covers the trailers too: a service that echoes the
# credential into grpc-message or trailing metadata gives it back redacted
got = []
try:
    call = ch.unary_stream("/pkg.Svc/EchoLate")(b"", timeout=20)
    for x in call:
        got.append(x)
    t.ok(False, "DATA_LOSS with the key echoed in the trailers")
except grpc.RpcError as e:
    tm = dict(e.trailing_metadata() or ())
    t.ok(got == [b"first"] and e.code() == grpc.StatusCode.DATA_LOSS and
         e.details().startswith("key ") and "x-echo" in tm,
         "trailers after DATA with an echoed credential pass", (got,
         e.code(), e.details(), tm))
    t.ok("grpc-secret-553-value" not in e.details() and
         "grpc-secret-553-value" not in repr(tm),
         "... the secret redacted in grpc-message and trailing metadata",
         (e.details(), tm))
echoed = glines("EchoLate")
t.ok(echoed and echoed[-1]["md"].get("x-api-key") ==
     "grpc-secret-553-value", "... the origin did have the secret to echo",
     echoed[-1:])

# many concurrent calls share pooled h2 connections
import concurrent.futures as cf
with cf.ThreadPoolExecutor(16) as ex:
    rs = list(ex.map(lambda i: unary(b"%d" % i, timeout=20), range(64)))
t.ok(rs == [b"u:%d" % i for i in range(64)], "64 concurrent unary calls",
     rs[:2])

# a slow reader: a 64 MiB stream, the client reads one message and stalls
base = rss()
call = ss(b"1024:65536", timeout=60)
it = iter(call)
first = next(it)
time.sleep(3)
stalled, high = rss(), 0
sent = max(x.get("sent", 0) for x in glines("ServerStream")
           if x.get("n") == 1024)
time.sleep(1)
stalled = max(stalled, rss())
n = 1 + sum(1 for _ in it)
limit = 24 * 1024
if os.environ["ASAN"] == "1":
    # ASan's allocator and quarantine grow RSS on their own (seen: 95 MiB
    # while 1 MiB moved): the flow-control check below still holds
    print("# ASan build: RSS grew by %d KiB, not checked" % (stalled - base))
else:
    t.ok(stalled - base < limit, "a client that stops reading a 64 MiB "
         "stream: airlockd's RSS grows by %d KiB (< %d)" %
         (stalled - base, limit))
t.ok(sent < 1024, "... the server is held back by flow control (sent %d "
     "of 1024 while the client stalled)" % sent)
t.ok(n == 1024 and len(first) == 65536, "... and then every message "
     "arrives", n)
ch.close()
t.done()
PY
stop_airlockd
finish
