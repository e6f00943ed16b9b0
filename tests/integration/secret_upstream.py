#!/usr/bin/env python3
r"""secret_upstream.py: the upstream of the secrets integration scripts
(tests/integration/18x-19x-secrets-*.sh). Standard library only.

  secret_upstream.py -P PORTFILE -l LOG [-C CERT -K KEY] [-c CASES]

Listens on 127.0.0.1 (an ephemeral port, written to PORTFILE), plain HTTP
or, with -C/-K, TLS. HTTP/1.1 with keep-alive; request bodies framed by
Content-Length or chunked.

Every request is appended to LOG as one JSON line, written and flushed
before the response goes out:
  {"seq", "conn", "tls", "sni", "head", "body", "raw"}
head: the request head as received (latin-1 text, CRLFs included), body:
the decoded body, raw: every byte of the request (head and body framing).
A connection that ends inside a request leaves a record with "partial":
true, so that anything at all that arrived is on file.

Answers: without an X-Test-Case header, 200 with a small JSON body. With
"X-Test-Case: NAME", the answer is the case NAME of the JSON file CASES
(re-read for every request), an object with
  status (200), reason ("OK"), headers ([[name, value], ...]),
  body (text, latin-1), framing ("length" | "chunked" | "eof" | "none"),
  chunks ([sizes...], cycled, for "chunked"; default one chunk),
  delay (seconds to sleep between chunks, each chunk its own send),
  close (true: Connection: close after this answer),
  wait (seconds to sleep before the answer),
  trailers ([[name, value], ...] after the last chunk),
  pre (text sent before the answer, e.g. a 103 Early Hints),
  raw (text sent instead of the answer, verbatim; then the connection
  closes unless close is false)
The reason, header names and values, the body, pre and raw may use {{raw}} (the request's raw bytes),
{{head}}, {{body}}, {{target}}, {{req:NAME}} (the request's header NAME,
"" if absent) and {{query:NAME}} (the raw value of the query parameter NAME
as received), {{stored:KEY}} (what an earlier case stored), each optionally
through filters: {{req:authorization|after:Bearer |pct2}}. Filters: after:T
(the text after the first T), pct / pctl (percent-encoded, RFC 3986
unreserved kept; upper / lower hex), plus (form encoding, '+' for space),
pct2 (percent-encoded twice), unpct (decoded once), jslash (JSON string,
PHP style "\/"), ju / jul (JSON "\u00XX" for every non-alphanumeric, upper /
lower hex), b64, b64url, slice:A:B (Python slice of the text).
A case may also have
  store (KEY: remember the expanded body, for a later {{stored:KEY}}),
  ranged (true: honour a Range: bytes=A-B header with a 206 and that
  slice of the expanded body).
"""

import argparse
import base64
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse


class Bad(Exception):
    pass


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.raw = bytearray()  # bytes of the current request

    def fill(self):
        d = self.sock.recv(65536)
        if not d:
            return False
        self.buf += d
        self.raw += d
        return True

    def take(self, n):
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def readline(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                return self.take(i + 1)
            if not self.fill():
                raise EOFError
            if len(self.buf) > 1 << 20:
                raise Bad("line too long")

    def read(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise EOFError
        return self.take(n)


class Server:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.seq = 0
        self.nconn = 0
        self.log = open(args.log, "a")
        self.ctx = None
        if args.cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(args.cert, args.key)
            self.ctx.sni_callback = self._sni
        self.sni = {}
        self.stored = {}
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", args.port))
        self.srv.listen(64)
        port = self.srv.getsockname()[1]
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)

    def _sni(self, sslsock, name, ctx):
        with self.lock:
            self.sni[id(sslsock)] = name
        return None

    def record(self, conn_id, tls, sni, head, body, raw, partial=False):
        with self.lock:
            self.seq += 1
            rec = {"seq": self.seq, "conn": conn_id, "tls": tls, "sni": sni,
                   "head": head.decode("latin-1"),
                   "body": body.decode("latin-1"),
                   "raw": bytes(raw).decode("latin-1")}
            if partial:
                rec["partial"] = True
            self.log.write(json.dumps(rec) + "\n")
            self.log.flush()
            return self.seq

    def serve_forever(self):
        while True:
            c, _ = self.srv.accept()
            with self.lock:
                self.nconn += 1
                cid = self.nconn
            threading.Thread(target=self.handle, args=(c, cid),
                             daemon=True).start()

    def handle(self, s, cid):
        s.settimeout(60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sni = None
        if self.ctx is not None:
            try:
                s = self.ctx.wrap_socket(s, server_side=True)
            except (ssl.SSLError, OSError):
                s.close()
                return
            with self.lock:
                sni = self.sni.pop(id(s), None)
        conn = Conn(s)
        try:
            while True:
                conn.raw = bytearray(conn.buf)
                try:
                    head, body = self.read_request(conn)
                except EOFError:
                    if conn.raw:
                        self.record(cid, self.ctx is not None, sni,
                                    bytes(conn.raw), b"", conn.raw, True)
                    break
                except Bad:
                    self.record(cid, self.ctx is not None, sni,
                                bytes(conn.raw), b"", conn.raw, True)
                    s.sendall(b"HTTP/1.1 400 Bad Request\r\n"
                              b"Content-Length: 0\r\nConnection: close"
                              b"\r\n\r\n")
                    break
                # the current request's bytes only (pipelined rest stays)
                raw = bytes(conn.raw[:len(conn.raw) - len(conn.buf)])
                seq = self.record(cid, self.ctx is not None, sni, head,
                                  body, raw)
                if not self.respond(s, seq, head, body, raw):
                    break
        except (OSError, ssl.SSLError):
            pass
        if isinstance(s, ssl.SSLSocket):
            # close_notify: a close-delimited body ends cleanly, not cut
            try:
                s.settimeout(2)
                s.unwrap()
            except (OSError, ssl.SSLError, ValueError):
                pass
        try:
            s.close()
        except OSError:
            pass

    @staticmethod
    def headers_of(head):
        out = []
        for ln in head.split(b"\r\n")[1:]:
            if not ln:
                continue
            k, _, v = ln.partition(b":")
            out.append((k.strip().decode("latin-1"),
                        v.strip().decode("latin-1")))
        return out

    def read_request(self, conn):
        head = b""
        while True:
            ln = conn.readline()
            if not head and ln in (b"\r\n", b"\n"):
                continue        # stray CRLF between requests
            head += ln
            if ln in (b"\r\n", b"\n"):
                break
            if len(head) > 1 << 20:
                raise Bad("head too long")
        hdrs = self.headers_of(head)
        te = [v for k, v in hdrs if k.lower() == "transfer-encoding"]
        cl = [v for k, v in hdrs if k.lower() == "content-length"]
        body = b""
        if te:
            if te[-1].lower() != "chunked":
                raise Bad("transfer-encoding")
            parts = []
            while True:
                ln = conn.readline()
                try:
                    n = int(ln.split(b";")[0].strip(), 16)
                except ValueError:
                    raise Bad("chunk size")
                if n == 0:
                    while conn.readline() not in (b"\r\n", b"\n"):
                        pass
                    break
                parts.append(conn.read(n))
                if conn.read(2) != b"\r\n":
                    raise Bad("chunk end")
            body = b"".join(parts)
        elif cl:
            body = conn.read(int(cl[0]))
        return head, body

    def load_cases(self):
        if not self.args.cases:
            return {}
        try:
            with open(self.args.cases) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    @staticmethod
    def filt(val, f):
        name, _, arg = f.partition(":")
        q = lambda v: urllib.parse.quote(v, safe="-_.~", encoding="latin-1")

        def ju(v, hx):
            return "".join(ch if ch.isalnum() and ord(ch) < 128 else
                           "\\u" + (hx % ord(ch)) for ch in v)
        if name == "after":
            return val.split(arg, 1)[1] if arg in val else val
        if name == "pct":
            return q(val)
        if name == "pctl":
            return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                          q(val))
        if name == "plus":
            return urllib.parse.quote_plus(val, safe="-_.~",
                                           encoding="latin-1")
        if name == "pct2":
            return q(q(val))
        if name == "unpct":
            return urllib.parse.unquote(val, encoding="latin-1")
        if name == "jslash":
            return json.dumps(val)[1:-1].replace("/", "\\/")
        if name == "ju":
            return ju(val, "%04X")
        if name == "jul":
            return ju(val, "%04x")
        if name in ("b64", "b64url"):
            enc = base64.b64encode if name == "b64" else \
                base64.urlsafe_b64encode
            return enc(val.encode("latin-1")).decode()
        if name == "slice":
            a, _, b = arg.partition(":")
            return val[int(a) if a else None:int(b) if b else None]
        return val

    def expand(self, text, head, body, raw):
        if isinstance(text, bytes):
            text = text.decode("latin-1")
        hdrs = Server.headers_of(head)
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        target = line.split(" ")[1] if " " in line else ""
        query = target.split("?", 1)[1] if "?" in target else ""

        def sub(m):
            what, *filters = m.group(1).split("|")
            val = value(what)
            if val is None:
                return m.group(0)
            for f in filters:
                val = Server.filt(val, f)
            return val

        def value(what):
            if what.startswith("stored:"):
                return self.stored.get(what[7:], "")
            if what == "raw":
                return raw.decode("latin-1")
            if what == "head":
                return head.decode("latin-1")
            if what == "body":
                return body.decode("latin-1")
            if what == "target":
                return target
            if what.startswith("req:"):
                name = what[4:].lower()
                for k, v in hdrs:
                    if k.lower() == name:
                        return v
                return ""
            if what.startswith("query:"):
                name = what[6:]
                for p in query.split("&"):
                    k, _, v = p.partition("=")
                    if k == name:
                        return v
                return ""
            return None

        return re.sub(r"\{\{([^}]*)\}\}", sub, text).encode("latin-1")

    def respond(self, s, seq, head, body, raw):
        hdrs = self.headers_of(head)
        reqclose = any(k.lower() == "connection" and "close" in v.lower()
                       for k, v in hdrs)
        case = None
        for k, v in hdrs:
            if k.lower() == "x-test-case":
                case = v
        if head.split(b" ", 1)[0] == b"HEAD":
            method_head = True
        else:
            method_head = False
        if case is None:
            c = {"body": json.dumps({"seq": seq}), "headers":
                 [["Content-Type", "application/json"]]}
        else:
            c = self.load_cases().get(case)
            if c is None:
                c = {"status": 404, "reason": "Not Found",
                     "body": json.dumps({"error": "no case %s" % case})}
        if c.get("wait"):
            time.sleep(float(c["wait"]))
        if c.get("raw") is not None:
            # verbatim (after expansion), e.g. a malformed head
            s.sendall(self.expand(c["raw"], head, body, raw))
            return not c.get("close", True)
        if c.get("pre") is not None:
            # e.g. interim 1xx responses
            s.sendall(self.expand(c["pre"], head, body, raw))
        status = int(c.get("status", 200))
        out = b"HTTP/1.1 %d %s\r\n" % (status, self.expand(
            c.get("reason", "OK"), head, body, raw))
        out += b"Server: secret-upstream\r\nX-Upstream-Seq: %d\r\n" % seq
        for k, v in c.get("headers", []):
            out += self.expand(k, head, body, raw) + b": " + \
                self.expand(v, head, body, raw) + b"\r\n"
        rbody = self.expand(c.get("body", ""), head, body, raw)
        if c.get("store"):
            with self.lock:
                self.stored[c["store"]] = rbody.decode("latin-1")
        rng = [v for k, v in hdrs if k.lower() == "range"]
        if c.get("ranged") and rng and rng[0].startswith("bytes="):
            a, _, b = rng[0][6:].partition("-")
            a, b = int(a), min(int(b or len(rbody) - 1), len(rbody) - 1)
            out = out.replace(b"HTTP/1.1 200 OK", b"HTTP/1.1 206 Partial "
                              b"Content", 1)
            out += b"Content-Range: bytes %d-%d/%d\r\n" % (a, b, len(rbody))
            rbody = rbody[a:b + 1]
        framing = c.get("framing", "length")
        close = bool(c.get("close")) or reqclose or framing == "eof"
        if framing == "length":
            out += b"Content-Length: %d\r\n" % len(rbody)
        elif framing == "chunked":
            out += b"Transfer-Encoding: chunked\r\n"
        if close:
            out += b"Connection: close\r\n"
        out += b"\r\n"
        if method_head or framing == "none":
            s.sendall(out)
            return not close
        if framing != "chunked":
            s.sendall(out + rbody)
            return not close
        sizes = c.get("chunks") or [max(1, len(rbody))]
        delay = float(c.get("delay", 0))
        s.sendall(out)
        i = k = 0
        while i < len(rbody):
            n = int(sizes[k % len(sizes)])
            k += 1
            piece = rbody[i:i + n]
            i += n
            s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            if delay:
                time.sleep(delay)
        tr = b""
        for k, v in c.get("trailers", []):
            tr += k.encode("latin-1") + b": " + \
                self.expand(v, head, body, raw) + b"\r\n"
        s.sendall(b"0\r\n" + tr + b"\r\n")
        return not close


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", "--port", type=int, default=0)
    ap.add_argument("-P", "--port-file", required=True)
    ap.add_argument("-l", "--log", required=True)
    ap.add_argument("-C", "--cert")
    ap.add_argument("-K", "--key")
    ap.add_argument("-c", "--cases")
    args = ap.parse_args()
    if bool(args.cert) != bool(args.key):
        ap.error("-C and -K go together")
    Server(args).serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
