#!/usr/bin/env python3
"""fault_upstream.py: a misbehaving upstream for the fault suite
(tests/integration/335-fault-upstream.sh). Standard library only.

  fault_upstream.py -P PORTFILE [-C CERT -K KEY]

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE), plain HTTP
or, with -C/-K, TLS. Reads one request head (and a Content-Length body),
then acts by the request path:

  /ok             200, Content-Length 2, "ok" (keep-alive)
  /chunked-ok     200 chunked, two 100-byte chunks and the last chunk
  /stall-head     never answers (holds the connection until the peer
                  closes it)
  /stall-body     200, Content-Length 1000, 100 bytes, then silence
  /reset-head     RST (SO_LINGER 0) without a byte of answer
  /reset-body     200, Content-Length 100000, 1000 bytes, then RST
  /trunc-chunked  200 chunked, two 100-byte chunks, then FIN (no last
                  chunk)
  /short-cl       200, Content-Length 1000, 500 bytes, then FIN
  /garbage        a line that is not HTTP, then FIN

A stalled connection is held up to 60 s. Over TLS, FIN is a close
without close_notify (airlock allows dirty shutdowns upstream) and RST
resets the TCP socket under the session.
"""

import argparse
import socket
import ssl
import struct
import sys
import threading
import time

BODY = bytes((ord("a") + i % 26) for i in range(100000))


def rst(s):
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                   struct.pack("ii", 1, 0))
    raw.close()


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None, b""
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = 0
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    while len(rest) < n:
        d = s.recv(65536)
        if not d:
            return None, b""
        rest += d
    return head, rest[n:]


def hold(s):
    """Silence until the peer goes away (or 60 s)."""
    s.settimeout(60)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass


def serve(s):
    try:
        while True:
            head, _ = read_head(s)
            if head is None:
                return
            path = head.split(b" ")[1].split(b"?")[0].decode("latin-1")
            if path == "/ok":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                continue
            if path == "/chunked-ok":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
                          b"\r\n\r\n64\r\n" + BODY[:100] + b"\r\n64\r\n" +
                          BODY[100:200] + b"\r\n0\r\n\r\n")
                continue
            if path == "/stall-head":
                hold(s)
            elif path == "/stall-body":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
                          + BODY[:100])
                hold(s)
            elif path == "/reset-head":
                rst(s)
            elif path == "/reset-body":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
                          + BODY[:1000])
                time.sleep(0.2)
                rst(s)
            elif path == "/trunc-chunked":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked"
                          b"\r\n\r\n64\r\n" + BODY[:100] + b"\r\n64\r\n" +
                          BODY[100:200] + b"\r\n")
                time.sleep(0.2)
            elif path == "/short-cl":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
                          + BODY[:500])
                time.sleep(0.2)
            elif path == "/garbage":
                s.sendall(b"this is not HTTP\r\n\r\n")
            else:
                s.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0"
                          b"\r\n\r\n")
                continue
            return
    except OSError:
        pass
    finally:
        try:
            s.close()
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", required=True)
    ap.add_argument("-C")
    ap.add_argument("-K")
    a = ap.parse_args()
    ctx = None
    if a.C:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.C, a.K)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    with open(a.P + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    import os
    os.rename(a.P + ".tmp", a.P)
    while True:
        raw, _ = srv.accept()
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def run(raw=raw):
            s = raw
            if ctx is not None:
                try:
                    raw.settimeout(10)
                    s = ctx.wrap_socket(raw, server_side=True)
                    s.settimeout(None)
                except (OSError, ssl.SSLError):
                    raw.close()
                    return
            serve(s)
        threading.Thread(target=run, daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
