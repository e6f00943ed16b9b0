"""Helpers for airlock's integration scripts (imported by the inline python
of tests/integration/*.sh; lib.sh puts this directory on PYTHONPATH).

Raw-socket HTTP/1.1 client that keeps every byte visible, checks for the
gateway's JSON error shape, audit and origin-log lookups, FNV-1a.
"""

import json
import os
import socket
import sys
import time

FNV_OFFSET = 14695981039346656037
FNV_PRIME = 1099511628211


def fnv1a(data, h=FNV_OFFSET):
    for b in data:
        h ^= b
        h = (h * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


class Response:
    def __init__(self):
        self.status = 0
        self.reason = ""
        self.version = ""
        self.headers = []
        self.body = b""
        self.raw_head = b""

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "<%d %r %r>" % (self.status, self.headers, self.body[:300])


class Closed(Exception):
    pass


class Reader:
    """Buffered reads over a socket, keeping what is left for the next
    response (pipelining)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        d = self.sock.recv(65536)
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def readline(self):
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                line, self.buf = self.buf[:i + 1], self.buf[i + 1:]
                return line
            if not self._fill():
                line, self.buf = self.buf, b""
                return line

    def read(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise Closed("connection closed with %d of %d body bytes"
                             % (len(self.buf), n))
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def read_all(self):
        while self._fill():
            pass
        d, self.buf = self.buf, b""
        return d

    def closed_after(self, wait=1.0):
        """True when the peer closed (or reset) the connection within
        <wait> seconds and sent nothing more."""
        if self.buf:
            return False
        old = self.sock.gettimeout()
        self.sock.settimeout(wait)
        try:
            d = self.sock.recv(1)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        finally:
            try:
                self.sock.settimeout(old)
            except OSError:
                pass
        if d:
            self.buf += d
            return False
        self.eof = True
        return True


def read_response(rd, method="GET", skip_1xx=True):
    """One response off Reader <rd>. Raises Closed when the connection ends
    before a status line."""
    while True:
        r = Response()
        line = rd.readline()
        if not line:
            raise Closed("connection closed before a response")
        head = line
        parts = line.rstrip(b"\r\n").split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise ValueError("bad status line %r" % line)
        r.version = parts[0].decode()
        r.status = int(parts[1])
        r.reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
        while True:
            line = rd.readline()
            if not line:
                raise Closed("connection closed inside a response head")
            head += line
            if line in (b"\r\n", b"\n"):
                break
            k, _, v = line.decode("latin-1").partition(":")
            r.headers.append((k.strip(), v.strip()))
        r.raw_head = head
        if 100 <= r.status < 200 and r.status != 101 and skip_1xx:
            continue
        break
    if method == "HEAD" or r.status in (101, 204, 304) or \
            100 <= r.status < 200 or (method == "CONNECT" and
                                      200 <= r.status < 300):
        return r
    te = r.header("Transfer-Encoding")
    cl = r.header("Content-Length")
    if te is not None and te.lower().endswith("chunked"):
        body = []
        while True:
            line = rd.readline()
            if not line:
                raise Closed("closed inside chunked body")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:
                    t = rd.readline()
                    if t in (b"\r\n", b"\n", b""):
                        break
                break
            body.append(rd.read(size))
            rd.read(2)
        r.body = b"".join(body)
    elif cl is not None:
        r.body = rd.read(int(cl))
    else:
        r.body = rd.read_all()
    return r


def connect(port, timeout=10.0, host="127.0.0.1"):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def exchange(port, data, nresp=1, timeout=10.0, methods=None,
             close_wait=None):
    """Send <data>, read up to <nresp> responses. Returns (responses,
    closed) where closed says whether the gateway closed the connection
    (only checked when close_wait is given). A connection that ends early
    gives fewer responses."""
    s = connect(port, timeout)
    out = []
    closed = None
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        rd = Reader(s)
        for i in range(nresp):
            m = methods[i] if methods else "GET"
            try:
                out.append(read_response(rd, m))
            except (Closed, ConnectionResetError):
                closed = True
                break
            except socket.timeout:
                break
        if close_wait is not None and closed is None:
            try:
                closed = rd.closed_after(close_wait)
            except OSError:
                closed = True
    finally:
        s.close()
    return out, closed


def roundtrip(port, data, timeout=10.0, method="GET"):
    """One request, one response (None when the gateway just closed)."""
    rs, _ = exchange(port, data, 1, timeout, [method])
    return rs[0] if rs else None


def error_code(j):
    """The gateway's error code in a JSON error body: SPEC's "error"
    string, or inside a provider's error shape on a metered rule (OpenAI
    error.code, Anthropic error.type, Gemini error.details[].reason);
    None when there is none."""
    e = j.get("error")
    if isinstance(e, str):
        return e
    if not isinstance(e, dict):
        return None
    if j.get("type") == "error" and isinstance(e.get("type"), str):
        return e["type"]
    if isinstance(e.get("status"), str):
        for d in e.get("details") or []:
            if isinstance(d, dict) and d.get("domain") == "airlock":
                return d.get("reason")
        return None
    return e.get("code") if isinstance(e.get("code"), str) else None


def check_error(r, status, code=None):
    """None when <r> is the gateway's JSON error with this status (and
    error code), else why not."""
    if r is None:
        return "no response (connection closed)"
    if r.status != status:
        return "status %d, want %d (body %r)" % (r.status, status,
                                                r.body[:200])
    try:
        j = r.json()
    except ValueError:
        return "body is not JSON: %r" % r.body[:200]
    if not isinstance(j, dict):
        return "JSON body is not an object: %r" % j
    for k in ("reason", "request_id"):
        if not isinstance(j.get(k), str):
            return "JSON member %s missing or not a string: %r" % (k, j)
    got = error_code(j)
    if got is None:
        return "JSON member error missing or of no known shape: %r" % j
    if code is not None and got != code:
        return "error %r, want %r" % (got, code)
    rid = r.header("X-Airlock-Request-Id")
    if rid is None:
        return "no X-Airlock-Request-Id header"
    if rid != j["request_id"]:
        return "X-Airlock-Request-Id %r != request_id %r" % (
            rid, j["request_id"])
    ct = r.header("Content-Type") or ""
    if "json" not in ct:
        return "Content-Type %r is not JSON" % ct
    return None


def is_gateway_error(r):
    """A response that came from the gateway itself (JSON error shape)."""
    return r is not None and r.status >= 400 and \
        check_error(r, r.status) is None


def audit_records(path):
    out = []
    try:
        with open(path, "rb") as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def audit_wait(path, pred, timeout=10.0):
    end = time.time() + timeout
    while True:
        for r in audit_records(path):
            if pred(r):
                return r
        if time.time() > end:
            return None
        time.sleep(0.05)


def origin_records(path):
    """The origin log as a list of records (bytes, one request each)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    recs = data.split(b"===\n")
    return [r for r in recs if r.strip()]


def origin_stats(proxy_port, host, origin_port, extra_headers=b""):
    """The origin's /stats through the proxy, as a dict."""
    r = roundtrip(proxy_port, b"GET http://%s:%d/stats HTTP/1.1\r\n"
                  b"Host: %s:%d\r\n%sConnection: close\r\n\r\n" % (
                      host.encode(), origin_port, host.encode(),
                      origin_port, extra_headers))
    if r is None or r.status != 200:
        raise RuntimeError("stats: %r" % r)
    return r.json()


class RecordingUpstream:
    """A one-port upstream that records every byte it receives (per
    connection) and answers each complete request (Content-Length or
    chunked body) with 200 and the raw request bytes as body."""

    def __init__(self, port=0):
        import threading
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", port))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import threading
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            rec = bytearray()
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self._serve, args=(c, rec),
                             daemon=True).start()

    @staticmethod
    def _complete(buf):
        i = buf.find(b"\r\n\r\n")
        if i < 0:
            return None
        head = bytes(buf[:i]).lower()
        rest = bytes(buf[i + 4:])
        if b"\r\ntransfer-encoding:" in head:
            j = rest.find(b"0\r\n\r\n")
            return None if j < 0 else i + 4 + j + 5
        for ln in head.split(b"\r\n"):
            if ln.startswith(b"content-length:"):
                n = int(ln.split(b":", 1)[1])
                return None if len(rest) < n else i + 4 + n
        return i + 4

    def _serve(self, c, rec):
        c.settimeout(30)
        buf = bytearray()
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                with self.lock:
                    rec += d
                buf += d
                n = self._complete(buf)
                if n is not None:
                    req, buf = bytes(buf[:n]), buf[n:]
                    c.sendall(b"HTTP/1.1 200 OK\r\nServer: recorder\r\n"
                              b"Content-Length: %d\r\n\r\n%s"
                              % (len(req), req))
        except OSError:
            pass
        c.close()

    def received(self):
        with self.lock:
            return [bytes(r) for r in self.conns]

    def close(self):
        self.srv.close()


def env_int(name):
    return int(os.environ[name])


def req(method, url, headers=(), body=b"", version="HTTP/1.1", host=None,
        auth=None):
    """Request bytes for the proxy: absolute-form target, Host from the
    URL's authority unless <host> is given ("" = no Host header)."""
    if isinstance(url, str):
        url = url.encode("latin-1")
    if host is None:
        rest = url.split(b"://", 1)[-1]
        host = rest.split(b"/", 1)[0].split(b"?", 1)[0]
    elif isinstance(host, str):
        host = host.encode("latin-1")
    out = b"%s %s %s\r\n" % (method.encode(), url, version.encode())
    if host:
        out += b"Host: " + host + b"\r\n"
    if auth is not None:
        import base64
        out += b"Proxy-Authorization: Basic " + base64.b64encode(
            auth.encode()) + b"\r\n"
    for h in headers:
        if isinstance(h, str):
            h = h.encode("latin-1")
        out += h + b"\r\n"
    if body and not any(h.lower().startswith((b"content-length:",
                                               b"transfer-encoding:"))
                        for h in [x if isinstance(x, bytes) else
                                  x.encode("latin-1") for x in headers]):
        out += b"Content-Length: %d\r\n" % len(body)
    return out + b"\r\n" + body


class Checks:
    """Collects check results so that one run reports every failure."""

    def __init__(self):
        self.failed = []
        self.n = 0

    def ok(self, cond, msg, detail=""):
        self.n += 1
        if cond:
            print("ok - " + msg)
        else:
            print("not ok - %s %s" % (msg, detail))
            self.failed.append(msg)
        sys.stdout.flush()
        return bool(cond)

    def error(self, r, status, code, msg):
        why = check_error(r, status, code)
        return self.ok(why is None, msg, why or "")

    def done(self):
        if self.failed:
            sys.stdout.flush()
            sys.stderr.write("%d of %d checks failed: %s\n"
                             % (len(self.failed), self.n,
                                "; ".join(self.failed)))
            sys.exit(1)
        sys.exit(0)


def _main(argv):
    if argv[1] == "audit-id":
        rid, path, secs = argv[2], argv[3], float(argv[4])
        r = audit_wait(path, lambda r: r.get("id") == rid, secs)
        if r is None:
            sys.stderr.write("no audit record with id %s in %s\n"
                             % (rid, path))
            return 1
        print(json.dumps(r))
        return 0
    if argv[1] == "fnv1a":
        h = FNV_OFFSET
        with open(argv[2], "rb") as f:
            while True:
                d = f.read(1 << 20)
                if not d:
                    break
                h = fnv1a(d, h)
        print(h)
        return 0
    sys.stderr.write("usage: itlib audit-id ID FILE SECS | fnv1a FILE\n")
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv))


def check(fn, failed=None):
    """Run one check of a script: "ok - DOC (time)" or "not ok - DOC: why",
    DOC being fn's docstring; a failure appends "; " and DOC up to its
    first ":" to the file <failed> (lib.sh's py_failed reads it). True if
    it passed."""
    what = fn.__doc__.strip()
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:
        print("not ok - %s: %r" % (what, e), flush=True)
        if failed is not None:
            with open(failed, "a") as f:
                f.write("; " + what.split(":")[0])
        return False
    print("ok - %s (%.1f s)" % (what, time.monotonic() - t0), flush=True)
    return True
