#!/usr/bin/env python3
"""wsecho.py: a small plain-HTTP upstream for 405-connect-plain-http.sh.
Standard library only.

  wsecho.py PORTFILE LOG

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE). A request
for /ws with "Upgrade: websocket" gets 101 and a WebSocket echo (RFC 6455:
client frames must be masked, echoed unmasked; a close is answered with a
close). Any other request: 200, its request head as the body, keep-alive.
Each request head is appended to LOG (one JSON line: {"head": ...}).
"""

import base64
import hashlib
import json
import socket
import struct
import sys
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise EOFError
    return b


def ws_echo(conn, f):
    while True:
        b0, b1 = read_exact(f, 2)
        op, masked, n = b0 & 0x0F, b1 & 0x80, b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", read_exact(f, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", read_exact(f, 8))[0]
        if not masked:
            return      # a client frame must be masked: drop it
        key = read_exact(f, 4)
        data = bytes(c ^ key[i % 4] for i, c in enumerate(read_exact(f, n)))
        hdr = bytes([0x80 | op])
        if len(data) < 126:
            hdr += bytes([len(data)])
        elif len(data) < 65536:
            hdr += bytes([126]) + struct.pack("!H", len(data))
        else:
            hdr += bytes([127]) + struct.pack("!Q", len(data))
        conn.sendall(hdr + data)
        if op == 8:
            return


def serve(conn, log, lock):
    f = conn.makefile("rb")
    try:
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = f.readline()
                if not line:
                    return
                head += line
            with lock:
                with open(log, "a") as lf:
                    lf.write(json.dumps({"head": head.decode("latin-1")}) +
                             "\n")
            lines = head.decode("latin-1").split("\r\n")
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdrs[k.strip().lower()] = v.strip()
            path = lines[0].split(" ")[1]
            n = int(hdrs.get("content-length", "0"))
            if n:
                read_exact(f, n)
            if path.startswith("/ws") and \
                    hdrs.get("upgrade", "").lower() == "websocket":
                acc = base64.b64encode(hashlib.sha1(
                    hdrs["sec-websocket-key"].encode() + GUID).digest())
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                             b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n")
                ws_echo(conn, f)
                return
            body = head
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + body)
    except (EOFError, OSError, ValueError, IndexError, KeyError):
        pass
    finally:
        conn.close()


def main():
    portfile, log = sys.argv[1], sys.argv[2]
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    with open(portfile + ".tmp", "w") as pf:
        pf.write(str(ls.getsockname()[1]))
    import os
    os.rename(portfile + ".tmp", portfile)
    lock = threading.Lock()
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, log, lock),
                         daemon=True).start()


if __name__ == "__main__":
    main()
