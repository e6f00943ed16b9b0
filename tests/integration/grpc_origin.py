#!/usr/bin/env python3
"""A real gRPC server (python grpcio, HTTP/2 over TLS) for the upstream h2
tests: generic handlers on bytes, no generated code.

  grpc_origin.py -P PORTFILE --cert C --key K -l LOG

Service pkg.Svc:
  Unary        b"u:" + request; logs the metadata and the time remaining
  ServerStream request b"N:SIZE": N messages of SIZE bytes; logs how many
               went out (the last line of the log: "sent N")
  ClientStream the number of messages and bytes received, b"n,bytes"
  Bidi         each message echoed back with b"e:"
  Fail         aborts NOT_FOUND "nope 553" before any message (Trailers-Only)
  FailLate     one message, then DATA_LOSS "late 553" in the trailers
  EchoLate     one message, then DATA_LOSS whose details and trailing
               metadata x-echo carry the x-api-key the call came with (a
               service that reflects a credential into its trailers)
"""
import argparse
import json
import sys
import threading
from concurrent import futures

import grpc

LOCK = threading.Lock()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", dest="portfile", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("-l", dest="log", required=True)
    a = ap.parse_args()
    logf = open(a.log, "a", buffering=1)

    def log(**kw):
        with LOCK:
            logf.write(json.dumps(kw) + "\n")

    def md(ctx):
        return {k: v for k, v in ctx.invocation_metadata()
                if isinstance(v, str)}

    def unary(req, ctx):
        log(m="Unary", md=md(ctx), remaining=ctx.time_remaining())
        return b"u:" + req

    def server_stream(req, ctx):
        n, size = (int(x) for x in req.split(b":"))
        log(m="ServerStream", md=md(ctx), n=n, size=size)
        chunk = b"s" * size
        for i in range(n):
            yield chunk
            if i % 64 == 0:
                log(m="ServerStream", n=n, sent=i + 1)
        log(m="ServerStream", n=n, sent=n)

    def client_stream(it, ctx):
        n = total = 0
        for x in it:
            n += 1
            total += len(x)
        log(m="ClientStream", md=md(ctx), n=n, total=total)
        return b"%d,%d" % (n, total)

    def bidi(it, ctx):
        log(m="Bidi", md=md(ctx))
        for x in it:
            yield b"e:" + x

    def fail(req, ctx):
        log(m="Fail", md=md(ctx))
        ctx.abort(grpc.StatusCode.NOT_FOUND, "nope 553")

    def fail_late(req, ctx):
        log(m="FailLate", md=md(ctx))
        yield b"first"
        ctx.set_code(grpc.StatusCode.DATA_LOSS)
        ctx.set_details("late 553")

    def echo_late(req, ctx):
        key = dict(ctx.invocation_metadata()).get("x-api-key", "")
        log(m="EchoLate", md=md(ctx))
        yield b"first"
        ctx.set_trailing_metadata((("x-echo", key),))
        ctx.set_code(grpc.StatusCode.DATA_LOSS)
        ctx.set_details("key " + key)

    h = grpc.method_handlers_generic_handler("pkg.Svc", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
        "FailLate": grpc.unary_stream_rpc_method_handler(fail_late),
        "EchoLate": grpc.unary_stream_rpc_method_handler(echo_late),
    })
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    srv.add_generic_rpc_handlers((h,))
    creds = grpc.ssl_server_credentials(
        [(open(a.key, "rb").read(), open(a.cert, "rb").read())])
    port = srv.add_secure_port("127.0.0.1:0", creds)
    srv.start()
    with open(a.portfile + ".tmp", "w") as f:
        f.write("%d\n" % port)
    import os
    os.rename(a.portfile + ".tmp", a.portfile)
    srv.wait_for_termination()


if __name__ == "__main__":
    sys.exit(main())
