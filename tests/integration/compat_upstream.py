#!/usr/bin/env python3
"""compat_upstream.py: the recording upstream of the client compatibility
suite (tests/integration/45x-compat-*.sh). Standard library only.

  compat_upstream.py -P PORTFILE -l LOG [-C CERT -K KEY]

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE), plain HTTP
or, with -C/-K, TLS (ALPN http/1.1). Every event is appended to LOG as one
JSON line, flushed before the answer goes out:

  {"ev": "request", "conn", "tls", "sni", "alpn", "method", "target",
   "version", "head", "body"}          a request as received
  {"ev": "ws_open", "conn"}            101 sent for a WebSocket upgrade
  {"ev": "ws_msg", "conn", "op", "data", "masked"}   a data frame
  {"ev": "ws_close", "conn", "code", "reason", "masked", "by"}
                                       a close frame from the client; by =
                                       "client" (it began the close) or
                                       "reply" (it answered ours)
  {"ev": "ws_eof", "conn"}             the connection ended without a close
  {"ev": "eof", "conn"}                a plain HTTP connection ended

HTTP answers: a path beginning /ws with "Upgrade: websocket" → 101 and a
WebSocket echo server (RFC 6455). Client frames must be masked; data
frames are echoed unmasked. The text message "server-close" makes the
server send a close 1000 "bye" and wait for the client's reply;
"server-abort" makes it drop the connection with neither a close frame
nor TLS close_notify (logged as {"ev": "ws_abort"}). A close from the
client is answered with the same code and reason. Over TLS a WebSocket
connection that ends normally ends with close_notify, as real servers
send it. Any other request: 200, a JSON body {"method","target","conn"},
keep-alive. Request bodies are read by Content-Length only (the suite's
plain requests have none or a small one).
"""

import argparse
import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import sys
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Log:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, **rec):
        with self.lock:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()


class Stream:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def need(self, n):
        while len(self.buf) < n:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 65536:
                raise EOFError
            d = self.sock.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        i = self.buf.index(b"\r\n\r\n") + 4
        out, self.buf = self.buf[:i], self.buf[i:]
        return out


def headers_of(head):
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = (lines[0].split(" ") + ["", "", ""])[:3]
    hdrs = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    return method, target, version, hdrs


def frame(op, payload):
    n = len(payload)
    if n < 126:
        hdr = struct.pack("!BB", 0x80 | op, n)
    elif n < 65536:
        hdr = struct.pack("!BBH", 0x80 | op, 126, n)
    else:
        hdr = struct.pack("!BBQ", 0x80 | op, 127, n)
    return hdr + payload


def read_frame(st, log=None, cid=None):
    b0, b1 = st.need(2)
    op, masked, n = b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
    fin, rsv = bool(b0 & 0x80), (b0 >> 4) & 7
    if n == 126:
        n = struct.unpack("!H", st.need(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", st.need(8))[0]
    key = st.need(4) if masked else b""
    data = st.need(n)
    if masked:
        data = bytes(c ^ key[i % 4] for i, c in enumerate(data))
    if log is not None:
        # every frame as it came (the fragments of a message, 57x tests)
        log.write(ev="ws_frame", conn=cid, op=op, fin=fin, rsv=rsv,
                  masked=masked, len=n)
    if op == 0 or (op in (1, 2) and not fin):
        # a fragmented message: joined (control frames may come between)
        st.frag = getattr(st, "frag", None) or [op, b""]
        st.frag[1] += data
        if not fin:
            return None, masked, b""
        op, data = st.frag
        st.frag = None
    return op, masked, data


def websocket(st, log, cid):
    sent_close = False
    while True:
        try:
            op, masked, data = read_frame(st, log, cid)
        except (EOFError, OSError):
            log.write(ev="ws_eof", conn=cid)
            return
        if op is None:
            continue
        if op == 8:
            code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
            log.write(ev="ws_close", conn=cid, code=code,
                      reason=data[2:].decode("utf-8", "replace"),
                      masked=masked, by="reply" if sent_close else "client")
            if not sent_close:
                st.sock.sendall(frame(8, data))
            return
        if op in (1, 2):
            log.write(ev="ws_msg", conn=cid, op=op,
                      data=data.decode("utf-8", "replace"), masked=masked)
            if op == 1 and data == b"server-close":
                st.sock.sendall(frame(8, struct.pack("!H", 1000) + b"bye"))
                sent_close = True
            elif op == 1 and data == b"server-abort":
                log.write(ev="ws_abort", conn=cid)
                raise ConnectionAbortedError  # no close frame, no close_notify
            elif not sent_close:
                st.sock.sendall(frame(op, data))
        elif op == 9:
            st.sock.sendall(frame(10, data))


def serve(sock, log, cid, tls):
    sni = getattr(sock, "compat_sni", None)
    alpn = sock.selected_alpn_protocol() if tls else None
    st = Stream(sock)
    try:
        while True:
            head = st.head()
            method, target, version, hdrs = headers_of(head)
            n = int(hdrs.get("content-length", "0") or 0)
            body = st.need(n) if n else b""
            log.write(ev="request", conn=cid, tls=tls, sni=sni, alpn=alpn,
                      method=method, target=target, version=version,
                      head=head.decode("latin-1"),
                      body=body.decode("latin-1"))
            path = target.split("?", 1)[0]
            if "://" in path:
                path = "/" + path.split("://", 1)[1].partition("/")[2]
            if path.startswith("/ws") and \
                    hdrs.get("upgrade", "").lower() == "websocket":
                key = hdrs.get("sec-websocket-key", "").encode()
                acc = base64.b64encode(hashlib.sha1(key + GUID).digest())
                sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\n"
                             b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n")
                log.write(ev="ws_open", conn=cid)
                try:
                    websocket(st, log, cid)
                except ConnectionAbortedError:
                    sock.close()
                    return
                if tls:
                    try:
                        sock.settimeout(2)
                        sock = sock.unwrap()
                    except (ssl.SSLError, OSError):
                        pass
                return
            body = json.dumps({"method": method, "target": target,
                               "conn": cid}).encode()
            close = version == "HTTP/1.0" or \
                hdrs.get("connection", "").lower() == "close"
            sock.sendall(b"%s 200 OK\r\nServer: compat-upstream\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: %d\r\n%s\r\n%s" % (
                             b"HTTP/1.0" if version == "HTTP/1.0"
                             else b"HTTP/1.1", len(body),
                             b"Connection: close\r\n" if close else b"", body))
            if close:
                return
    except (EOFError, OSError, ValueError):
        log.write(ev="eof", conn=cid)
    finally:
        try:
            sock.close()
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", required=True)
    ap.add_argument("-l", required=True)
    ap.add_argument("-C")
    ap.add_argument("-K")
    a = ap.parse_args()
    log = Log(a.l)
    ctx = None
    if a.C:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.C, a.K)
        ctx.set_alpn_protocols(["http/1.1"])

        def on_sni(s, name, _c):
            s.compat_sni = name
        ctx.sni_callback = on_sni
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    tmp = a.P + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    os.rename(tmp, a.P)
    cid = 0
    while True:
        c, _ = srv.accept()
        cid += 1

        def run(c=c, cid=cid):
            c.settimeout(60)
            if ctx is not None:
                try:
                    c = ctx.wrap_socket(c, server_side=True)
                except (ssl.SSLError, OSError) as e:
                    sys.stderr.write("conn %d: TLS handshake: %s\n" % (cid, e))
                    c.close()
                    return
            serve(c, log, cid, ctx is not None)
        threading.Thread(target=run, daemon=True).start()


if __name__ == "__main__":
    main()
