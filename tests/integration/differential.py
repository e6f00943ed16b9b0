"""Differential framing check for 355-differential.sh.

For every request of the corpus (generated tricky framings, the
http_request fuzz seeds, the TE obfuscation gadgets of ../shared when
present), three views are compared:

  * airlock's own parser (tests/harness/httpparse runs src/http/ over the
    exact bytes) says what each message of the connection is;
  * a real airlockd relays the bytes to a raw upstream on loopback;
  * that upstream records every byte of every connection and parses them
    with the strict RFC 9112 parser below, written for this test.

Every message airlock's parser refuses must be answered with a 4xx/5xx and
never arrive complete upstream; every message it accepts is either
refused by the gateway (and arrives nowhere) or arrives as exactly one
message on its own upstream connection, same method and target, with the
body airlock's parser reported and no byte left over. A request pipelined
after each case must arrive intact or not at all.

usage: differential.py HTTPPARSE SCRATCH_DIR [GADGETS.jsonl]
environment: AIRLOCK_PORT, UP_PORT, FUZZ_CORPUS (a directory)
"""
import concurrent.futures, json, os, socket, subprocess, sys
import threading, time

import itlib
from itlib import Reader, read_response, Closed

# ---------------------------------------------------------------------
# An independent strict HTTP/1.1 request parser (RFC 9112, RFC 9110).

TCHAR = frozenset(b"!#$%&'*+-.^_`|~0123456789"
                  b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
HEXDIG = frozenset(b"0123456789abcdefABCDEF")
# field-value bytes: VCHAR, obs-text, SP, HTAB
FVCHAR = frozenset([9, 32] + list(range(0x21, 0x7f)) + list(range(0x80, 0x100)))


class Bad(Exception):
    pass


class Incomplete(Exception):
    pass


def _line(buf, pos):
    """The line at <pos> without its CRLF, and where the next begins. A
    bare CR or LF anywhere is malformed."""
    i = buf.find(b"\r\n", pos)
    if i < 0:
        seg = buf[pos:]
        if seg.endswith(b"\r"):
            seg = seg[:-1]
        if b"\n" in seg or b"\r" in seg:
            raise Bad("bare CR or LF")
        raise Incomplete("line not finished")
    seg = buf[pos:i]
    if b"\n" in seg or b"\r" in seg:
        raise Bad("bare CR or LF")
    return seg, i + 2


def _token(b):
    return len(b) > 0 and all(c in TCHAR for c in b)


def _ows_strip(v):
    return v.strip(b" \t")


def _fields(buf, pos, what):
    out = []
    while True:
        ln, pos = _line(buf, pos)
        if ln == b"":
            return out, pos
        if ln[:1] in (b" ", b"\t"):
            raise Bad("obs-fold in %s" % what)
        name, colon, value = ln.partition(b":")
        if not colon or not _token(name):
            raise Bad("bad field name %r in %s" % (name[:40], what))
        value = _ows_strip(value)
        if not all(c in FVCHAR for c in value):
            raise Bad("bad byte in field %r" % name[:40])
        out.append((name.lower(), value))


def _chunk_ext(ext):
    """chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token /
    quoted-string ) ] ); <ext> starts at the first ';' or is empty."""
    i = 0
    n = len(ext)

    def bws(j):
        while j < n and ext[j] in b" \t":
            j += 1
        return j
    while True:
        i = bws(i)
        if i == n:
            return
        if ext[i:i + 1] != b";":
            raise Bad("bad chunk extension %r" % ext[:40])
        i = bws(i + 1)
        j = i
        while j < n and ext[j] in TCHAR:
            j += 1
        if j == i:
            raise Bad("empty chunk extension name")
        i = bws(j)
        if ext[i:i + 1] == b"=":
            i = bws(i + 1)
            if ext[i:i + 1] == b'"':
                i += 1
                while True:
                    if i >= n:
                        raise Bad("unterminated quoted chunk extension")
                    c = ext[i]
                    if c == 0x22:
                        i += 1
                        break
                    if c == 0x5c:
                        i += 2
                        continue
                    if c not in FVCHAR:
                        raise Bad("bad byte in chunk extension")
                    i += 1
            else:
                j = i
                while j < n and ext[j] in TCHAR:
                    j += 1
                if j == i:
                    raise Bad("empty chunk extension value")
                i = j


def parse_request(buf, pos=0):
    """One request from <buf> at <pos>: (message dict, end offset).
    Raises Incomplete when the data stops inside it, Bad when it is not a
    strictly valid HTTP/1.1 request."""
    start = pos
    ln, pos = _line(buf, pos)
    parts = ln.split(b" ")
    if len(parts) != 3:
        raise Bad("request line %r" % ln[:80])
    method, target, version = parts
    if not _token(method):
        raise Bad("method %r" % method[:40])
    if not target or any(c <= 0x20 or c == 0x7f for c in target):
        raise Bad("target %r" % target[:80])
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise Bad("version %r" % version)
    fields, pos = _fields(buf, pos, "head")
    te, cl = [], []
    for name, value in fields:
        squashed = bytes(c for c in name if 0x61 <= c <= 0x7a)
        if name == b"transfer-encoding":
            te.append(value)
        elif name == b"content-length":
            cl.append(value)
        elif squashed in (b"transferencoding", b"contentlength"):
            raise Bad("framing look-alike field %r" % name)
    if te and cl:
        raise Bad("both Transfer-Encoding and Content-Length")
    if len(te) > 1 or len(cl) > 1:
        raise Bad("framing field repeated")
    body = b""
    framing = "none"
    trailers = []
    if te:
        if te[0].lower() != b"chunked":
            raise Bad("Transfer-Encoding %r" % te[0][:40])
        framing = "chunked"
        parts = []
        while True:
            ln, pos = _line(buf, pos)
            j = 0
            while j < len(ln) and ln[j] in HEXDIG:
                j += 1
            if j == 0 or j > 16:
                raise Bad("chunk size %r" % ln[:40])
            size = int(ln[:j], 16)
            _chunk_ext(ln[j:])
            if size == 0:
                trailers, pos = _fields(buf, pos, "trailer")
                break
            if len(buf) < pos + size + 2:
                raise Incomplete("chunk data")
            parts.append(buf[pos:pos + size])
            if buf[pos + size:pos + size + 2] != b"\r\n":
                raise Bad("chunk data not followed by CRLF")
            pos += size + 2
        body = b"".join(parts)
    elif cl:
        if not cl[0].isdigit() or len(cl[0]) > 18:
            raise Bad("Content-Length %r" % cl[0][:40])
        framing = "length"
        n = int(cl[0])
        if len(buf) < pos + n:
            raise Incomplete("body")
        body = buf[pos:pos + n]
        pos += n
    return {"method": method, "target": target, "version": version,
            "fields": fields, "trailers": trailers, "framing": framing,
            "body": body, "raw": buf[start:pos]}, pos


def head_target(buf):
    """The request line's target of whatever starts <buf>, or None."""
    i = buf.find(b"\r\n")
    if i < 0:
        return None
    p = buf[:i].split(b" ")
    return p[1] if len(p) == 3 else None


def strict_self_test():
    """The checker must itself be able to say no."""
    good = [b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
            b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;a=b;c=\"d\\\"\"\r\nabc\r\n0\r\nT: 1\r\n\r\n"]
    bad = [b"GET /a HTTP/1.1\nHost: x\r\n\r\n",
           b"GET /a HTTP/1.1\r\nHost: x\r\n y\r\n\r\n",
           b"GET /a HTTP/1.1\r\nX : 1\r\n\r\n",
           b"GET  /a HTTP/1.1\r\n\r\n",
           b"POST /a HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: "
           b"chunked\r\n\r\n0\r\n\r\n",
           b"POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1"
           b"\r\n\r\nx",
           b"POST /a HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
           b"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
           b"POST /a HTTP/1.1\r\nTransfer_Encoding: chunked\r\n\r\n",
           b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"3 x\r\nabc\r\n0\r\n\r\n",
           b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"3\r\nabcX\r\n0\r\n\r\n",
           b"GET /a HTTP/2.0\r\n\r\n"]
    for g in good:
        m, end = parse_request(g)
        assert end == len(g), g
    for b in bad:
        try:
            parse_request(b)
        except Bad:
            continue
        raise AssertionError("strict parser accepted %r" % b)
    try:
        parse_request(good[1][:-1])
        raise AssertionError("strict parser completed a cut message")
    except Incomplete:
        pass


# ---------------------------------------------------------------------
# The raw upstream: one record per connection, every byte.

class RawUpstream(itlib.RecordingUpstream):
    """itlib's recorder (every byte, one record per connection), with its
    own answers and a way to wait for the last connection to end."""

    def __init__(self, port):
        self.active = 0
        self.cv = threading.Condition()
        super().__init__(port)

    def _serve(self, c, rec):
        """Answer the first complete message (Connection: close), then
        keep reading until the gateway closes: anything more is recorded
        as what it is, a second message on the connection."""
        with self.cv:
            self.active += 1
        c.settimeout(10)
        answered = False
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                with self.lock:
                    rec += d
                if answered:
                    continue
                try:
                    with self.lock:
                        got = bytes(rec)
                    m, _ = parse_request(got)
                except Incomplete:
                    continue
                except Bad:
                    c.sendall(b"HTTP/1.1 400 Bad Request\r\nServer: diffup"
                              b"\r\nContent-Length: 0\r\nConnection: close"
                              b"\r\n\r\n")
                    break
                answered = True
                body = b"" if m["method"] == b"HEAD" else b"ok"
                c.sendall(b"HTTP/1.1 200 OK\r\nServer: diffup\r\n"
                          b"Content-Length: 2\r\nConnection: close\r\n"
                          b"\r\n" + body)
                # the gateway closes after a "close" answer; a short wait
                # catches bytes it would send on regardless
                c.settimeout(1.5)
        except OSError:
            pass
        finally:
            c.close()
            with self.cv:
                self.active -= 1
                self.cv.notify_all()

    def finish(self):
        """Every connection's bytes, once all have ended."""
        time.sleep(0.2)
        self.close()
        with self.cv:
            self.cv.wait_for(lambda: self.active == 0, 15)
        return self.received()


# ---------------------------------------------------------------------
# The corpus.

def build_cases(A, fuzz_dir, gadgets_path):
    """[(source, name, bytes)], the first request line of each naming
    http://A/c/<n> (filled in later)."""
    H = b"Host: " + A + b"\r\n"
    P = b"POST @T@ HTTP/1.1\r\n" + H
    G = b"GET @T@ HTTP/1.1\r\n" + H

    def sm(tag):
        return b"GET http://" + A + b"/s/" + tag + b" HTTP/1.1\r\n" + H + \
            b"\r\n"
    gen = [
        # refused by SPEC: ambiguous or malformed (050 and the unit suite)
        ("cl-te", P + b"Content-Length: 5\r\nTransfer-Encoding: chunked"
         b"\r\n\r\n0\r\n\r\n" + sm(b"cl-te")),
        ("te-cl", P + b"Transfer-Encoding: chunked\r\nContent-Length: 50"
         b"\r\n\r\n0\r\n\r\n" + sm(b"te-cl")),
        ("te-cl-0", P + b"Transfer-Encoding: chunked\r\nContent-Length: 0"
         b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        ("cl-dup-same", P + b"Content-Length: 5\r\nContent-Length: 5\r\n"
         b"\r\nhello" + sm(b"cl-dup-same")),
        ("cl-dup-diff", P + b"Content-Length: 5\r\nContent-Length: 0\r\n"
         b"\r\nhello" + sm(b"cl-dup-diff")),
        ("cl-list", P + b"Content-Length: 5, 5\r\n\r\nhello"),
        ("cl-plus", P + b"Content-Length: +5\r\n\r\nhello"),
        ("cl-neg", P + b"Content-Length: -1\r\n\r\n" + sm(b"cl-neg")),
        ("cl-hex", P + b"Content-Length: 0x5\r\n\r\nhello"),
        ("cl-space-inside", P + b"Content-Length: 1 0\r\n\r\nhelloworld"),
        ("cl-huge", P + b"Content-Length: 99999999999999999999999\r\n\r\n"),
        ("cl-empty", P + b"Content-Length: \r\n\r\n" + sm(b"cl-empty")),
        ("chunk-size-bad", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"zz\r\nhello\r\n0\r\n\r\n" + sm(b"chunk-size-bad")),
        ("chunk-size-overflow", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"10000000000000005\r\nhello\r\n0\r\n\r\n"),
        ("chunk-size-neg", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"-5\r\nhello\r\n0\r\n\r\n"),
        ("chunk-size-0x", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"0x5\r\nhello\r\n0\r\n\r\n"),
        ("chunk-size-space", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5 \r\nhello\r\n0\r\n\r\n"),
        ("chunk-size-lead-space", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b" 5\r\nhello\r\n0\r\n\r\n"),
        ("chunk-no-crlf", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhelloXX0\r\n\r\n" + sm(b"chunk-no-crlf")),
        ("chunk-short", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhell\r\n0\r\n\r\n" + sm(b"chunk-short")),
        ("chunk-bare-lf", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\nhello\n0\n\n" + sm(b"chunk-bare-lf")),
        ("chunk-data-bare-lf", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\n0\r\n\r\n"),
        ("chunk-ext-bare-cr", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5;a\rb\r\nhello\r\n0\r\n\r\n"),
        ("chunk-trailer-fold", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\nT: 1\r\n folded\r\n\r\n"),
        ("obs-fold", P + b"X-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n"),
        ("obs-fold-te", P + b"Transfer-Encoding:\r\n chunked\r\n\r\n"
         b"0\r\n\r\n" + sm(b"obs-fold-te")),
        ("bare-lf", (P + b"Content-Length: 0\r\n\r\n").replace(b"\r\n",
                                                               b"\n")),
        ("bare-lf-one", P + b"X-A: 1\nContent-Length: 0\r\n\r\n"),
        ("bare-lf-end", P + b"\nTransfer-Encoding: chunked\r\n\r\n"
         b"0\r\n\r\n" + sm(b"bare-lf-end")),
        ("bare-cr", P + b"X-A: 1\rX-B: 2\r\n\r\n"),
        ("cr-before-crlf", P + b"X-A: 1\r\r\n\r\n"),
        ("nul-value", P + b"X-A: a\x00b\r\n\r\n"),
        ("nul-name", P + b"X-\x00A: 1\r\n\r\n"),
        ("ctl-value", P + b"X-A: a\x01b\r\n\r\n"),
        ("del-value", G + b"X-A: a\x7fb\r\n\r\n"),
        ("space-colon", P + b"X-A : 1\r\n\r\n"),
        ("space-colon-te", P + b"Transfer-Encoding : chunked\r\n\r\n"
         b"0\r\n\r\n" + sm(b"space-colon-te")),
        ("space-colon-cl", P + b"Content-Length : 5\r\n\r\nhello"),
        ("no-colon", P + b"X-Broken\r\n\r\n"),
        ("empty-name", P + b": x\r\n\r\n"),
        ("bad-name-char", P + b"X(A): 1\r\n\r\n"),
        ("dup-host", G + b"Host: evil.test\r\n\r\n"),
        ("te-chunked-identity", P + b"Transfer-Encoding: chunked, identity"
         b"\r\n\r\n0\r\n\r\n"),
        ("te-gzip-chunked", P + b"Transfer-Encoding: gzip, chunked\r\n\r\n"
         b"0\r\n\r\n"),
        ("te-xchunked", P + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"
         + sm(b"te-xchunked")),
        ("te-gzip-only", P + b"Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n"),
        ("te-two-fields", P + b"Transfer-Encoding: chunked\r\n"
         b"Transfer-Encoding: identity\r\n\r\n0\r\n\r\n"),
        ("te-twice-same", P + b"Transfer-Encoding: chunked\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("te-chunked-twice", P + b"Transfer-Encoding: chunked, chunked"
         b"\r\n\r\n0\r\n\r\n"),
        ("te-http10", P.replace(b"HTTP/1.1", b"HTTP/1.0") +
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + sm(b"te-http10")),
        ("te-lookalike", P + b"Transfer_Encoding: chunked\r\n\r\n"
         b"0\r\n\r\n"),
        ("cl-lookalike", P + b"content_length: 5\r\n\r\nhello"),
        ("te-trailing-tab", P + b"Transfer-Encoding: chunked\t\r\n\r\n"
         b"5\r\nhello\r\n0\r\n\r\n"),
        ("te-trailing-sp", P + b"Transfer-Encoding: chunked \r\n\r\n"
         b"5\r\nhello\r\n0\r\n\r\n"),
        ("te-leading-tab", P + b"Transfer-Encoding:\tchunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\n\r\n"),
        ("te-vtab", P + b"Transfer-Encoding: \x0bchunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\n\r\n"),
        ("http2", G.replace(b"HTTP/1.1", b"HTTP/2.0") + b"\r\n"),
        ("http12", G.replace(b"HTTP/1.1", b"HTTP/1.2") + b"\r\n"),
        ("http09", b"GET @T@\r\n\r\n"),
        ("bad-version", G.replace(b"HTTP/1.1", b"HTXP/1.1") + b"\r\n"),
        ("lower-version", G.replace(b"HTTP/1.1", b"http/1.1") + b"\r\n"),
        ("two-spaces", b"GET  @T@ HTTP/1.1\r\n" + H + b"\r\n"),
        ("tab-in-line", b"GET\t@T@ HTTP/1.1\r\n" + H + b"\r\n"),
        ("bad-method", b"G@T @T@ HTTP/1.1\r\n" + H + b"\r\n"),
        ("crlf-target", b"GET @T@\r\nX-Injected: 1 HTTP/1.1\r\n" + H +
         b"\r\n"),
        ("big-header", G + b"X-Big: " + b"a" * 70000 + b"\r\n\r\n"),
        ("many-headers", G + b"".join(b"X-H%d: v\r\n" % i
                                      for i in range(200)) + b"\r\n"),
        ("long-uri", b"GET @T@?p=" + b"c" * 9000 + b" HTTP/1.1\r\n" + H +
         b"\r\n"),
        ("origin-form", b"GET /c/origin HTTP/1.1\r\n" + H + b"\r\n"),
        ("trace", b"TRACE @T@ HTTP/1.1\r\n" + H + b"\r\n"),
        # strict framing, issue 15.6: the request line, Host, Connection,
        # chunk lines, CONNECT; refused by airlock's parser
        ("two-spaces-version", b"GET @T@  HTTP/1.1\r\n" + H + b"\r\n"),
        ("space-before-crlf", b"GET @T@ HTTP/1.1 \r\n" + H + b"\r\n"),
        ("space-before-method", b" GET @T@ HTTP/1.1\r\n" + H + b"\r\n"),
        ("tab-before-version", b"GET @T@\tHTTP/1.1\r\n" + H + b"\r\n"),
        ("empty-lines-3", b"\r\n\r\n\r\n" + G + b"\r\n"),
        ("host-userinfo", b"GET @T@ HTTP/1.1\r\nHost: u:p@" + A +
         b"\r\n\r\n"),
        ("connection-host", G + b"Connection: close, Host\r\n\r\n"),
        ("connection-ctype", P + b"Connection: Content-Type\r\n"
         b"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"),
        ("connection-te-late", P + b"Transfer-Encoding: chunked\r\n"
         b"Connection: keep-alive\r\nConnection: transfer-encoding\r\n"
         b"\r\n5\r\nhello\r\n0\r\n\r\n" + sm(b"connection-te-late")),
        ("chunk-ext-5k", P + b"Transfer-Encoding: chunked\r\n\r\n5;" +
         b"x" * 5000 + b"\r\nhello\r\n0\r\n\r\n" + sm(b"chunk-ext-5k")),
        ("chunk-zeros-5k", P + b"Transfer-Encoding: chunked\r\n\r\n" +
         b"0" * 5000 + b"5\r\nhello\r\n0\r\n\r\n"),
        ("chunk-last-ext-5k", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n0;" + b"y" * 5000 + b"\r\n\r\n"),
        ("connect-cl", b"CONNECT " + A + b" HTTP/1.1\r\n" + H +
         b"Content-Length: 5\r\n\r\nhello"),
        ("connect-te", b"CONNECT " + A + b" HTTP/1.1\r\n" + H +
         b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        # parsed, then refused by the gateway: paths that read two ways,
        # method overrides that name two methods
        ("enc-slash-dots", b"GET @T@/..%2Fx HTTP/1.1\r\n" + H + b"\r\n"),
        ("enc-slash-pop", b"GET @T@/a%2Fb/../x HTTP/1.1\r\n" + H +
         b"\r\n"),
        ("dot-params", b"GET @T@/..;/x HTTP/1.1\r\n" + H + b"\r\n"),
        ("dot-params-enc", b"GET @T@/.%2e%3b/x HTTP/1.1\r\n" + H +
         b"\r\n"),
        ("override-two", P + b"X-HTTP-Method-Override: DELETE\r\n"
         b"X-HTTP-Method: PUT\r\nContent-Length: 0\r\n\r\n"),
        # accepted: framed exactly once, the body airlock parsed
        ("get", G + b"\r\n"),
        ("get-no-host", b"GET @T@ HTTP/1.1\r\n\r\n"),
        ("get-http10", G.replace(b"HTTP/1.1", b"HTTP/1.0") + b"\r\n"),
        ("get-http10-ka", G.replace(b"HTTP/1.1", b"HTTP/1.0") +
         b"Connection: keep-alive\r\n\r\n"),
        ("get-close", G + b"Connection: close\r\n\r\n"),
        ("head", b"HEAD @T@ HTTP/1.1\r\n" + H + b"\r\n"),
        ("options", b"OPTIONS @T@ HTTP/1.1\r\n" + H + b"\r\n"),
        ("delete-cl", b"DELETE @T@ HTTP/1.1\r\n" + H +
         b"Content-Length: 4\r\n\r\ngone"),
        ("get-with-body", G + b"Content-Length: 5\r\n\r\nhello"),
        ("post-cl", P + b"Content-Length: 5\r\n\r\nhello"),
        ("post-cl0", P + b"Content-Length: 0\r\n\r\n"),
        ("post-cl-lead-zero", P + b"Content-Length: 005\r\n\r\nhello"),
        ("post-cl-ows", P + b"Content-Length:   5  \r\n\r\nhello"),
        ("post-no-framing", P + b"\r\n"),
        ("post-cl-big", P + b"Content-Length: 100000\r\n\r\n" +
         bytes(range(256)) * 390 + b"z" * 160),
        ("post-cl-crlf-body", P + b"Content-Length: 8\r\n\r\n\r\n\r\n"
         b"\r\n\r\n"),
        ("cl-long", P + b"Content-Length: 120\r\n\r\n" + sm(b"cl-long") +
         b"x" * (120 - len(sm(b"cl-long")))),
        ("cl-short", P + b"Content-Length: 0\r\n\r\n" + sm(b"cl-short")),
        ("cl-exact-smuggle", P + b"Content-Length: %d\r\n\r\n" %
         len(sm(b"x")) + sm(b"x")),
        ("chunked", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\n\r\n"),
        ("chunked-upper", P + b"Transfer-Encoding: CHUNKED\r\n\r\n"
         b"5\r\nhello\r\n0\r\n\r\n"),
        ("chunked-many", P + b"Transfer-Encoding: chunked\r\n\r\n" +
         b"".join(b"%x\r\n%s\r\n" % (i, b"q" * i) for i in range(1, 40))
         + b"0\r\n\r\n"),
        ("chunked-hex-upper", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"A\r\n0123456789\r\n0\r\n\r\n"),
        ("chunked-lead-zero", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"0005\r\nhello\r\n000\r\n\r\n"),
        ("chunked-ext", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5;name=value\r\nhello\r\n0;last\r\n\r\n"),
        ("chunked-ext-quoted", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5;n=\"a;b\\\"c\"\r\nhello\r\n0\r\n\r\n"),
        ("chunked-ext-smuggle", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5;x=\"\r\n0\r\n\r\nGET /s/ext HTTP/1.1\r\n\r\n\"\r\nhello\r\n"
         b"0\r\n\r\n"),
        ("chunked-trailers", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\nX-Trailer: 1\r\nX-Other: two\r\n\r\n"),
        ("chunked-trailer-cl", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n"),
        ("chunked-body-lookslike-end", P + b"Transfer-Encoding: chunked"
         b"\r\n\r\n11\r\n0\r\n\r\nGET /s/in HTT\r\n0\r\n\r\n"),
        ("chunked-empty", P + b"Transfer-Encoding: chunked\r\n\r\n"
         b"0\r\n\r\n"),
        ("chunked-big", P + b"Transfer-Encoding: chunked\r\n\r\n" +
         b"8000\r\n" + b"B" * 0x8000 + b"\r\n" + b"3\r\nend\r\n0\r\n\r\n"),
        ("expect", P + b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\n"
         b"hello"),
        ("connection-te", P + b"Connection: Transfer-Encoding\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        ("connection-cl", P + b"Connection: Content-Length\r\n"
         b"Content-Length: 5\r\n\r\nhello"),
        ("keep-alive-hdr", P + b"Keep-Alive: timeout=5\r\n"
         b"Content-Length: 5\r\n\r\nhello"),
        ("upgrade-h2c", G + b"Connection: Upgrade, HTTP2-Settings\r\n"
         b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"),
        ("pipeline-3", P + b"Content-Length: 5\r\n\r\nhello" +
         b"POST http://" + A + b"/p/2 HTTP/1.1\r\n" + H +
         b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
         b"GET http://" + A + b"/p/3 HTTP/1.1\r\n" + H + b"\r\n"),
        ("empty-lines-2", b"\r\n\r\n" + G + b"\r\n"),
        ("chunk-ext-4k", P + b"Transfer-Encoding: chunked\r\n\r\n5;" +
         b"x" * 4000 + b"\r\nhello\r\n0\r\n\r\n"),
        ("enc-slash", b"GET @T@/@scope%2fname HTTP/1.1\r\n" + H + b"\r\n"),
        ("enc-slash-upper", b"GET @T@/group%2Fproject/x HTTP/1.1\r\n" + H +
         b"\r\n"),
        ("override-one", P + b"X-HTTP-Method-Override: DELETE\r\n"
         b"Content-Length: 0\r\n\r\n"),
        ("x-original-url", G + b"X-Original-URL: /admin\r\n\r\n"),
        ("cut-head", G + b"X-Cut: 1\r\n"),
        ("cut-body", P + b"Content-Length: 10\r\n\r\nhello"),
        ("cut-chunk", P + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel"),
    ]
    cases = [("generated", n, d) for n, d in gen]

    # the http_request fuzz seeds (and whatever runs added): byte 0 and 1
    # are the target's split point and flags, the rest is the stream
    if fuzz_dir and os.path.isdir(fuzz_dir):
        for f in sorted(os.listdir(fuzz_dir)):
            with open(os.path.join(fuzz_dir, f), "rb") as fp:
                d = fp.read()[2:]
            if d:
                cases.append(("fuzz-seed", f, retarget(d)))

    if gadgets_path:
        with open(gadgets_path, encoding="utf-8") as fp:
            for i, l in enumerate(fp):
                if not l.strip():
                    continue
                g = json.loads(l)["gadget"]
                try:
                    g = g.encode("latin-1")
                except UnicodeEncodeError:
                    g = g.encode("utf-8", "surrogateescape")
                cases.append(("gadget", str(i), P + g + b"\r\n\r\n"
                              b"5\r\nhello\r\n0\r\n\r\n" +
                              sm(b"g%d" % i)))
    return cases


# Generated cases whose fate SPEC fixes (issues 14.10, 15.2, 15.6): the
# comparison above only checks that parser and gateway agree.
MUST = dict([(n, "refused") for n in (
    "two-spaces", "two-spaces-version", "space-before-crlf",
    "space-before-method", "tab-in-line", "tab-before-version",
    "empty-lines-3", "host-userinfo", "connection-host", "connection-te",
    "connection-cl", "connection-ctype", "connection-te-late",
    "chunk-ext-5k", "chunk-zeros-5k", "chunk-last-ext-5k", "connect-cl",
    "connect-te", "enc-slash-dots", "enc-slash-pop", "dot-params",
    "dot-params-enc", "override-two")] +
    [(n, "forwarded") for n in (
        "empty-lines-2", "chunk-ext-4k", "enc-slash", "enc-slash-upper",
        "override-one", "x-original-url", "chunked-ext")])


def retarget(d):
    """Point the first request line at @T@, whatever form it had."""
    i = d.find(b"\n")
    line = d if i < 0 else d[:i]
    p = line.split(b" ")
    if len(p) >= 3 and p[0] and p[1]:
        p[1] = b"@T@"
        return b" ".join(p) + (b"" if i < 0 else d[i:])
    return d


# ---------------------------------------------------------------------

def main():
    strict_self_test()
    httpparse, scratch = sys.argv[1], sys.argv[2]
    gadgets = sys.argv[3] if len(sys.argv) > 3 else None
    ap = itlib.env_int("AIRLOCK_PORT")
    upp = itlib.env_int("UP_PORT")
    A = b"api.test:%d" % upp
    raw = build_cases(A, os.environ.get("FUZZ_CORPUS"), gadgets)

    cases = []
    for n, (src, name, d) in enumerate(raw):
        d = d.replace(b"@T@", b"http://" + A + b"/c/%d" % n)
        follow = (b"GET http://" + A + b"/f/%d HTTP/1.1\r\nHost: " % n + A +
                  b"\r\n\r\n")
        if name.startswith("cut-"):
            follow = b""    # the connection ends inside the message
        cases.append({"n": n, "src": src, "name": name, "case": d,
                      "data": d + follow})
    os.makedirs(scratch, exist_ok=True)
    files = []
    for c in cases:
        fn = os.path.join(scratch, "%d.bin" % c["n"])
        with open(fn, "wb") as f:
            f.write(c["data"])
        files.append(fn)
    parsed = {}
    for k in range(0, len(files), 400):
        out = subprocess.run([httpparse, "-m", "65536"] + files[k:k + 400],
                             check=True, stdout=subprocess.PIPE).stdout
        for line in out.splitlines():
            j = json.loads(line)
            parsed[j["file"]] = j["msgs"]
    for c, fn in zip(cases, files):
        c["msgs"] = parsed[fn]
        for m in c["msgs"]:
            if "target_hex" in m:
                m["target"] = bytes.fromhex(m["target_hex"])
            if "body_hex" in m:
                m["body"] = bytes.fromhex(m["body_hex"])

    up = RawUpstream(upp)

    def answered(msgs):
        """How many answers airlock owes: every message up to one that
        ends the connection."""
        k = 0
        for m in msgs:
            if m["r"] == "incomplete":
                break
            k += 1
            if m["r"] != "done" or not m["keepalive"]:
                break
        return k

    def run(c):
        want = answered(c["msgs"])
        cut = c["msgs"] and c["msgs"][-1]["r"] == "incomplete"
        rs, err = [], None
        try:
            s = itlib.connect(ap, 10)
        except OSError as e:
            return c, rs, "connect: %s" % e
        try:
            try:
                s.sendall(c["data"])
            except OSError:
                pass
            rd = Reader(s)
            methods = [m.get("method", "GET") for m in c["msgs"]]
            try:
                while len(rs) < want:
                    rs.append(read_response(rd, methods[len(rs)]))
                    if rs[-1].status >= 400 and itlib.is_gateway_error(
                            rs[-1]) and rs[-1].header("Connection") == \
                            "close":
                        break
                if cut and len(rs) == want:
                    # the data ends inside a message: say so, collect
                    # what airlock makes of it
                    s.shutdown(socket.SHUT_WR)
                    try:
                        rs.append(read_response(rd, "GET"))
                    except (Closed, OSError, ValueError):
                        pass
            except (Closed, OSError, ValueError) as e:
                err = "%s" % e
        finally:
            s.close()
        return c, rs, err

    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as ex:
        results = list(ex.map(run, cases))
    t_send = time.time() - t0
    time.sleep(0.3)
    recs = up.finish()

    # every upstream connection: exactly one strict message, or (for a
    # message airlock's parser never completed) a cut one
    fails = []
    seen = {}          # target path -> [parsed upstream message]
    cut_targets = {}   # target path -> count of cut upstream records
    for r in recs:
        if not r:
            continue
        try:
            m, end = parse_request(r)
        except Incomplete:
            t = head_target(r)
            cut_targets[t] = cut_targets.get(t, 0) + 1
            continue
        except Bad as e:
            fails.append("upstream received a malformed request (%s): %r"
                         % (e, r[:300]))
            continue
        if end != len(r):
            fails.append("upstream connection carried more than one "
                         "message: %r | leftover %r" % (r[:end][:200],
                                                        r[end:][:200]))
        seen.setdefault(m["target"], []).append(m)

    stats = {}
    used = set()
    outcome = {}       # generated case name -> how its first message ended
    for c, rs, err in results:
        src = c["src"]
        st = stats.setdefault(src, {"cases": 0, "forwarded": 0,
                                    "refused-by-parser": 0,
                                    "refused-by-gateway": 0,
                                    "cut": 0, "followups": 0})
        st["cases"] += 1
        who = "%s %s" % (src, c["name"])
        msgs = c["msgs"]
        pfx = b"http://" + A
        for i, m in enumerate(msgs):
            first = i == 0
            tgt = m.get("target", b"")
            path = tgt[len(pfx):] if tgt.startswith(pfx) else None
            r = rs[i] if i < len(rs) else None
            if first and src == "generated":
                outcome[c["name"]] = "refused" if m["r"] == "error" or (
                    r is not None and itlib.is_gateway_error(r)) else \
                    "forwarded" if r is not None else "unanswered"
            if m["r"] == "error":
                if first:
                    st["refused-by-parser"] += 1
                if r is None or not (400 <= r.status <= 599) or \
                        not itlib.is_gateway_error(r):
                    fails.append("%s: message %d refused by airlock's "
                                 "parser (%d %s), answered %r" %
                                 (who, i, m["status"], m["reason"], r))
                continue
            if m["r"] == "incomplete":
                if first:
                    st["cut"] += 1
                continue
            # done or upgrade: accepted by the parser
            if r is None:
                if i < answered(msgs):
                    fails.append("%s: message %d (%s %r) got no answer "
                                 "(%s)" % (who, i, m["method"], tgt, err))
                break
            if itlib.is_gateway_error(r):
                if first:
                    st["refused-by-gateway"] += 1
                if path is not None and seen.get(path):
                    fails.append("%s: message %d refused with %d, but "
                                 "reached the upstream" %
                                 (who, i, r.status))
                    used.add(path)
                if r.header("Connection") == "close":
                    break
                continue
            if r.header("Server") != "diffup" or r.status != 200:
                fails.append("%s: message %d answered neither by the "
                             "gateway nor by the upstream: %r" %
                             (who, i, r))
                continue
            if first:
                st["forwarded"] += 1
            if path is not None and path.startswith(b"/f/"):
                st["followups"] += 1
            ups = seen.get(path, []) if path is not None else []
            if len(ups) != 1:
                fails.append("%s: message %d (%s %r) forwarded, upstream "
                             "has %d copies of it" % (who, i, m["method"],
                                                     tgt, len(ups)))
                continue
            used.add(path)
            u = ups[0]
            body = m.get("body", b"")
            if u["method"].decode("latin-1") != m["method"]:
                fails.append("%s: message %d method %s, upstream got %r" %
                             (who, i, m["method"], u["method"]))
            if u["body"] != body:
                fails.append("%s: message %d: airlock parsed a %d-byte "
                             "body %r, the upstream framed %d bytes %r" %
                             (who, i, len(body), body[:60], len(u["body"]),
                              u["body"][:60]))
            if m["r"] == "upgrade":
                break
    # nothing upstream that no answer accounts for
    for path, ms in seen.items():
        if path not in used:
            fails.append("upstream received %r (%d times), which no "
                         "forwarded message of airlock's parser explains" %
                         (path, len(ms)))
    for path, k in cut_targets.items():
        ok = False
        if path is not None and path.startswith(b"/c/"):
            n = int(path[3:].split(b"?")[0])
            msgs = cases[n]["msgs"]
            # the head went out before the body turned out bad or short
            ok = bool(msgs) and (msgs[0]["r"] == "incomplete" or
                                 (msgs[0]["r"] == "error" and
                                  msgs[0]["head_done"]))
        if not ok:
            fails.append("upstream received a cut message for %r, which "
                         "airlock's parser did not leave cut" % (path,))

    # what SPEC decides, whichever of parser and gateway applies it
    for name, want in list(MUST.items()):
        got = outcome.get(name)
        if got is None:
            fails.append("case %s missing from the generated set" % name)
        elif got != want:
            fails.append("case %s: %s, SPEC says %s" % (name, got, want))

    total = sum(s["cases"] for s in stats.values())
    print("# %d cases, %d upstream connections, sent in %.1fs" %
          (total, len(recs), t_send))
    for src, s in sorted(stats.items()):
        print("# %-10s %5d cases: %d forwarded as one message, %d refused "
              "by the parser, %d parsed but refused by the gateway, %d cut; "
              "%d pipelined follow-ups forwarded" %
              (src, s["cases"], s["forwarded"], s["refused-by-parser"],
               s["refused-by-gateway"], s["cut"], s["followups"]))
    for f in fails[:40]:
        print("not ok - %s" % f)
    if len(fails) > 40:
        print("not ok - ... %d more" % (len(fails) - 40))
    if fails:
        sys.exit(1)
    if stats.get("generated", {}).get("forwarded", 0) < 20 or \
            stats.get("generated", {}).get("refused-by-parser", 0) < 20:
        print("not ok - the generated set no longer exercises both "
              "outcomes: %r" % stats.get("generated"))
        sys.exit(1)
    print("ok - every request refused, or framed upstream exactly once "
          "with the body airlock parsed")


if __name__ == "__main__":
    main()
