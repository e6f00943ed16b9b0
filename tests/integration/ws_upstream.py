#!/usr/bin/env python3
"""ws_upstream.py: a WebSocket echo server for the tunnel tests
(tests/integration/40x-ws-*.sh). Standard library only.

  ws_upstream.py -P PORTFILE [-l LOG] [-C CERT -K KEY]

Listens on 127.0.0.1 (ephemeral port, written to PORTFILE), plain or, with
-C/-K, TLS (wss). Answers any GET with Upgrade: websocket with 101, then
echoes every text and binary message, answers pings, and answers a close
frame with its own close frame and a clean close (TLS: close_notify, then
FIN). A text message can instead ask the server to end the connection:
  "close"            close frame (1000), wait for the client's, clean close
  "rst"              RST at once (no close frame, no close_notify)
  "fin"              FIN without a close frame (no close_notify)
  "flood N HOW"      N bytes of binary frames, then HOW (close|rst|fin) at
                     once, with the data still in flight
LOG gets one JSON line per connection end: {"conn", "tls", "end"} where end
is how it ended ("client-close-frame", "client-eof", "client-reset",
"server-close", "server-rst", "server-fin").
"""

import argparse
import json
import os
import socket
import ssl
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wslib  # noqa: E402

LOCK = threading.Lock()
SEQ = [0]


def log(args, rec):
    if not args.log:
        return
    with LOCK:
        with open(args.log, "a") as f:
            f.write(json.dumps(rec) + "\n")


def clean_close(sock):
    """close_notify (TLS), then FIN."""
    try:
        if isinstance(sock, ssl.SSLSocket):
            sock = sock.unwrap()
        sock.shutdown(socket.SHUT_WR)
    except (OSError, ValueError):
        pass
    sock.close()


def fin_close(sock):
    """FIN only: no close frame, no close_notify."""
    raw = socket.socket(fileno=os.dup(sock.fileno()))
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    raw.close()
    sock.close()


def rst_close(sock):
    if isinstance(sock, ssl.SSLSocket):
        raw = socket.socket(fileno=os.dup(sock.fileno()))
        wslib.abort(raw)
        sock.close()
    else:
        wslib.abort(sock)


def end(args, sock, how):
    {"close": clean_close, "rst": rst_close, "fin": fin_close}[how](sock)


def serve(args, ctx, c):
    with LOCK:
        SEQ[0] += 1
        seq = SEQ[0]
    rec = {"conn": seq, "tls": ctx is not None}
    try:
        c.settimeout(60)
        if ctx is not None:
            c = ctx.wrap_socket(c, server_side=True)
        head, rest = wslib.read_head(c)
        key = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"sec-websocket-key":
                key = value.strip()
        if key is None or b"websocket" not in head.lower():
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                      b"Connection: close\r\n\r\n")
            clean_close(c)
            return
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                  b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: " + wslib.accept_key(key) +
                  b"\r\n\r\n")
        ws = wslib.Conn(c, client=False, buf=rest)
        while True:
            try:
                op, data = ws.recv()
            except wslib.Closed as e:
                rec["end"] = "client-reset" if "reset" in str(e).lower() \
                    else "client-eof"
                c.close()
                return
            if op == wslib.OP_CLOSE:
                rec["end"] = "client-close-frame"
                try:
                    ws.send(data[:2], wslib.OP_CLOSE)
                except OSError:
                    pass
                clean_close(c)
                return
            if op == wslib.OP_PING:
                ws.send(data, wslib.OP_PONG)
                continue
            words = data.split() if op == wslib.OP_TEXT else []
            if words == [b"close"]:
                ws.send(struct.pack("!H", 1000), wslib.OP_CLOSE)
                rec["end"] = "server-close"
                try:
                    c.settimeout(5)
                    while ws.recv()[0] != wslib.OP_CLOSE:
                        pass
                except (wslib.Closed, OSError):
                    pass
                clean_close(c)
                return
            if words in ([b"rst"], [b"fin"]):
                rec["end"] = "server-" + words[0].decode()
                end(args, c, words[0].decode())
                return
            if len(words) == 3 and words[0] == b"flood":
                left = int(words[1])
                while left > 0:
                    n = min(left, 16384)
                    ws.send(b"f" * n)
                    left -= n
                how = words[2].decode()
                if how == "close":
                    ws.send(struct.pack("!H", 1000), wslib.OP_CLOSE)
                rec["end"] = "server-" + how
                end(args, c, how)
                return
            ws.send(data, op)
    except (OSError, ssl.SSLError, wslib.Closed, ValueError) as e:
        rec.setdefault("end", "error: %s" % e)
        try:
            c.close()
        except OSError:
            pass
    finally:
        log(args, rec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", dest="portfile", required=True)
    ap.add_argument("-l", dest="log")
    ap.add_argument("-C", dest="cert")
    ap.add_argument("-K", dest="key")
    args = ap.parse_args()
    ctx = None
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(512)
    tmp = args.portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(tmp, args.portfile)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(args, ctx, c),
                         daemon=True).start()


if __name__ == "__main__":
    main()
