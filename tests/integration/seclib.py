"""Helpers for the secrets integration scripts (tests/integration/18x-19x-
secrets-*.sh), on top of itlib and tlslib. Standard library and the openssl
CLI only.

  Client         one client connection through the proxy, plain HTTP
                 (absolute-form requests) or HTTPS (CONNECT, then TLS with
                 the sandbox's CA); keeps every byte it received
  Upstream       the request log of secret_upstream.py (JSON lines)
  sigv4_check    verifies a received request's AWS SigV4 signature,
                 recomputed here from the AWS specification
  mkleaf         a leaf certificate for several names, signed by the test
                 PKI's CA (tests/harness/mkpki.sh)

  python3 -m seclib mkleaf PKIDIR OUTPREFIX NAME...
  python3 -m seclib sigv4-selftest DIR   (AWS's sigv4 test suite)
"""

import base64
import calendar
import hashlib
import hmac
import json
import os
import posixpath
import re
import subprocess
import sys
import time
import urllib.parse

import itlib
import tlslib


# --------------------------------------------------------------- client

class RecReader(itlib.Reader):
    """itlib.Reader that keeps a copy of every byte received."""

    def __init__(self, sock):
        itlib.Reader.__init__(self, sock)
        self.raw = bytearray()

    def _fill(self):
        n = len(self.buf)
        ok = itlib.Reader._fill(self)
        if ok:
            self.raw += self.buf[n:]
        return ok


class Client:
    """One connection through the proxy on 127.0.0.1:<ap> to <host>:<port>.
    scheme "http": absolute-form requests on a plain connection; "https":
    CONNECT host:port, then TLS verified with <cafile>, origin-form inside.
    """

    def __init__(self, ap, scheme, host, port, cafile=None, auth=None,
                 timeout=15.0):
        self.scheme, self.host, self.port = scheme, host, port
        self.auth = auth
        self.authority = "%s:%d" % (host, port)
        if scheme == "https":
            sock, _ = tlslib.proxy_connect(ap, self.authority, auth, timeout)
            ctx = tlslib.context(cafile)
            self.sock = ctx.wrap_socket(sock, server_hostname=host)
        else:
            self.sock = itlib.connect(ap, timeout)
        self.rd = RecReader(self.sock)
        self.sent = bytearray()

    def raw_request(self, data):
        self.sent += data
        self.sock.sendall(data)

    def build(self, method, path, headers=(), body=b"", chunks=None):
        if self.scheme == "https":
            target = path
        else:
            target = "http://%s%s" % (self.authority, path)
        out = "%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target,
                                                  self.authority)
        out = out.encode("latin-1")
        if self.auth and self.scheme == "http":
            out += b"Proxy-Authorization: Basic " + base64.b64encode(
                self.auth.encode()) + b"\r\n"
        for h in headers:
            out += (h.encode("latin-1") if isinstance(h, str) else h) + \
                b"\r\n"
        if chunks is not None:
            out += b"Transfer-Encoding: chunked\r\n\r\n"
            for c in chunks:
                out += b"%x\r\n%s\r\n" % (len(c), c)
            return out + b"0\r\n\r\n"
        if body or method in ("POST", "PUT"):
            out += b"Content-Length: %d\r\n" % len(body)
        return out + b"\r\n" + body

    def request(self, method, path, headers=(), body=b"", chunks=None):
        """One request, its response (itlib.Response)."""
        self.raw_request(self.build(method, path, headers, body, chunks))
        return itlib.read_response(self.rd, method)

    def received(self):
        return bytes(self.rd.raw)

    def closed_after(self, wait=1.0):
        try:
            return self.rd.closed_after(wait)
        except OSError:
            return True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def once(ap, scheme, host, port, method, path, headers=(), body=b"",
         cafile=None, chunks=None):
    """(response, raw bytes received) of one request on a new connection."""
    c = Client(ap, scheme, host, port, cafile)
    try:
        r = c.request(method, path, headers, body, chunks)
        return r, c.received()
    finally:
        c.close()


# ------------------------------------------------------ upstream records

class Rec:
    """One request as secret_upstream.py received it."""

    def __init__(self, d):
        self.d = d
        self.seq = d["seq"]
        self.tls = d["tls"]
        self.sni = d.get("sni")
        self.partial = d.get("partial", False)
        self.head = d["head"].encode("latin-1")
        self.body = d["body"].encode("latin-1")
        self.raw = d["raw"].encode("latin-1")
        line = self.head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        self.method = parts[0] if parts else ""
        self.target = parts[1] if len(parts) > 1 else ""
        self.path, _, self.query = self.target.partition("?")
        self.headers = []
        for ln in self.head.split(b"\r\n")[1:]:
            if not ln:
                continue
            k, _, v = ln.partition(b":")
            self.headers.append((k.strip().decode("latin-1"),
                                 v.strip().decode("latin-1")))

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def header(self, name):
        v = self.header_all(name)
        return v[0] if len(v) == 1 else (None if not v else v)

    def params(self):
        """[(name, raw value)] of the query as received."""
        out = []
        for p in self.query.split("&"):
            if p:
                k, _, v = p.partition("=")
                out.append((k, v))
        return out

    def __repr__(self):
        return "<rec %d %r>" % (self.seq, self.raw[:600])


class Upstream:
    def __init__(self, path):
        self.path = path

    def records(self):
        out = []
        try:
            with open(self.path) as f:
                for line in f:
                    if line.strip():
                        out.append(Rec(json.loads(line)))
        except FileNotFoundError:
            pass
        return out

    def count(self):
        return len(self.records())

    def by_mark(self, mark, wait=0.0):
        """Records whose head carries "X-Mark: <mark>"."""
        end = time.time() + wait
        while True:
            rs = [r for r in self.records() if mark in r.header_all("X-Mark")]
            if rs or time.time() >= end:
                return rs
            time.sleep(0.05)

    def one(self, mark):
        rs = self.by_mark(mark, 2.0)
        return rs[0] if len(rs) == 1 else None

    def contains(self, needle):
        if isinstance(needle, str):
            needle = needle.encode("latin-1")
        return any(needle in r.raw for r in self.records())

    def raw_bytes(self):
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""


# ---------------------------------------------------------------- SigV4

def _enc(s, safe="-_.~"):
    if isinstance(s, str):
        s = s.encode("utf-8")
    return urllib.parse.quote(s, safe=safe)


def _dec(s):
    return urllib.parse.unquote_to_bytes(s)


def canonical_uri(path, service):
    """AWS: every service but S3 normalises the path (RFC 3986 dot
    segments, empty segments) and URI-encodes each segment of the path as
    sent once more (the "encode twice" rule); S3 takes the path as is,
    encoded exactly once."""
    if path == "":
        return "/"
    if service == "s3":
        return "/".join(_enc(_dec(s)) for s in path.split("/"))
    trailing = path.endswith("/") or path.endswith("/.") or \
        path.endswith("/..")
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    segs = [s for s in norm.split("/") if s]
    out = "/" + "/".join(_enc(s) for s in segs)
    if trailing and segs:
        out += "/"
    return out


def canonical_query(query):
    ps = []
    for p in query.split("&"):
        if not p:
            continue
        k, _, v = p.partition("=")
        ps.append((_enc(_dec(k)), _enc(_dec(v))))
    ps.sort()
    return "&".join("%s=%s" % kv for kv in ps)


def _trimall(v):
    return " ".join(v.split())


def signing_key(secret, date, region, service):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(),
                 hashlib.sha256).digest()
    for m in (region, service, "aws4_request"):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    return k


def sigv4_signature(method, path, query, headers, signed, payload_hash,
                    amz_date, region, service, secret):
    """(signature hex, canonical request, string to sign). headers: the
    request's [(name, value)] as received; signed: lowercase names."""
    lines = []
    for name in signed:
        vals = [_trimall(v) for k, v in headers if k.lower() == name]
        if not vals:
            raise ValueError("signed header %r not in the request" % name)
        lines.append("%s:%s\n" % (name, ",".join(vals)))
    creq = "\n".join([method, canonical_uri(path, service),
                      canonical_query(query), "".join(lines),
                      ";".join(signed), payload_hash])
    scope = "%s/%s/%s/aws4_request" % (amz_date[:8], region, service)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode("utf-8", "surrogateescape"))
                     .hexdigest()])
    sig = hmac.new(signing_key(secret, amz_date[:8], region, service),
                   sts.encode(), hashlib.sha256).hexdigest()
    return sig, creq, sts


AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/"
                     r"([^/]+)/([^/]+)/aws4_request, ?SignedHeaders=([^,\s]+),"
                     r" ?Signature=([0-9a-f]{64})$")


def sigv4_check(rec, akid, secret, region, service, token=None,
                body_signed=True, skew=300):
    """Problems (list of text, empty = valid) of the SigV4 signature of
    received request <rec> (Rec), recomputed from scratch."""
    probs = []
    auth = rec.header_all("Authorization")
    if len(auth) != 1:
        return ["%d Authorization headers: %r" % (len(auth), auth)]
    m = AUTH_RE.match(auth[0])
    if not m:
        return ["Authorization not AWS4-HMAC-SHA256 form: %r" % auth[0]]
    cak, cdate, creg, csvc, signed_s, sig = m.groups()
    signed = signed_s.split(";")
    if cak != akid:
        probs.append("access key id %r, want %r" % (cak, akid))
    if (creg, csvc) != (region, service):
        probs.append("scope %s/%s, want %s/%s" % (creg, csvc, region,
                                                  service))
    if signed != sorted(signed) or len(set(signed)) != len(signed):
        probs.append("SignedHeaders not sorted/unique: %r" % signed)
    want = ["host", "x-amz-content-sha256", "x-amz-date"]
    if token is not None:
        want.append("x-amz-security-token")
    for w in want:
        if w not in signed:
            probs.append("%s not signed (%r)" % (w, signed))
    if "authorization" in signed:
        probs.append("authorization is signed")
    dates = rec.header_all("X-Amz-Date")
    if len(dates) != 1 or not re.match(r"^\d{8}T\d{6}Z$", dates[0]):
        return probs + ["X-Amz-Date %r" % dates]
    amz_date = dates[0]
    if amz_date[:8] != cdate:
        probs.append("credential date %s != X-Amz-Date %s" % (cdate,
                                                              amz_date))
    t = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    if abs(t - time.time()) > skew:
        probs.append("X-Amz-Date %s is not now" % amz_date)
    ph = rec.header_all("X-Amz-Content-Sha256")
    if len(ph) != 1:
        return probs + ["X-Amz-Content-Sha256 %r" % ph]
    if body_signed:
        want_hash = hashlib.sha256(rec.body).hexdigest()
        if ph[0] != want_hash:
            probs.append("X-Amz-Content-Sha256 %s != sha256(body) %s"
                         % (ph[0], want_hash))
    elif ph[0] != "UNSIGNED-PAYLOAD":
        probs.append("X-Amz-Content-Sha256 %r, want UNSIGNED-PAYLOAD"
                     % ph[0])
    toks = rec.header_all("X-Amz-Security-Token")
    if token is None and toks:
        probs.append("X-Amz-Security-Token sent without a session token")
    if token is not None and toks != [token]:
        probs.append("X-Amz-Security-Token %r, want the session token"
                     % (toks,))
    try:
        mine, creq, _ = sigv4_signature(rec.method, rec.path, rec.query,
                                        rec.headers, signed, ph[0],
                                        amz_date, region, service, secret)
    except ValueError as e:
        return probs + [str(e)]
    if not hmac.compare_digest(mine, sig):
        probs.append("signature %s does not verify (recomputed %s over "
                     "canonical request %r)" % (sig, mine, creq))
    return probs


def sigv4_selftest(suite):
    """Check sigv4_signature() against AWS's test suite (the .req/.authz
    pairs); returns the names of the cases that do not match."""
    bad = []
    n = 0
    for root, dirs, files in os.walk(suite):
        for f in files:
            if not f.endswith(".req"):
                continue
            name = f[:-4]
            authz = os.path.join(root, name + ".authz")
            if not os.path.exists(authz):
                continue
            with open(os.path.join(root, f), "rb") as fh:
                req = fh.read()
            if b"\n " in req or b"\n\t" in req:
                continue        # folded header lines: not HTTP/1.1 today
            with open(authz) as fh:
                m = re.search(r"SignedHeaders=([^,]+), Signature=(\w+)",
                              fh.read())
            head, _, body = req.partition(b"\n\n")
            lines = head.decode("utf-8", "surrogateescape").split("\n")
            method, rest = lines[0].split(" ", 1)
            target = rest.rsplit(" ", 1)[0]
            path, _, query = target.partition("?")
            hdrs = []
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdrs.append((k, v))
            date = [v for k, v in hdrs if k.lower() == "x-amz-date"][0]
            sig, _, _ = sigv4_signature(
                method, path, query, hdrs, m.group(1).split(";"),
                hashlib.sha256(body).hexdigest(), date.strip(), "us-east-1",
                "service", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
            n += 1
            if sig != m.group(2):
                bad.append(name)
    return n, bad


# ----------------------------------------------------------------- misc

def encodings(value, username=None):
    """The forms of a secret value that must never reach the client: the
    value, its URL encoding, the Basic base64 of it (and of user:value)."""
    if isinstance(value, str):
        value = value.encode("latin-1")
    out = {value, _enc(value).encode(), base64.b64encode(value)}
    if username is not None:
        out.add(base64.b64encode(username.encode() + b":" + value))
    return sorted(out)


def value_forms(v):
    """A value as it could be written anywhere: raw, form- and
    URL-encoded, base64 (std and url, unpadded), JSON-escaped."""
    b = v if isinstance(v, bytes) else v.encode()
    return {"raw": b, "form": urllib.parse.quote_plus(b).encode(),
            "url": urllib.parse.quote(b, safe="").encode(),
            "base64": base64.b64encode(b).rstrip(b"="),
            "base64url": base64.urlsafe_b64encode(b).rstrip(b"="),
            "json": json.dumps(b.decode("latin-1"))[1:-1].encode(
                "latin-1").replace(b"/", b"\\/"),
            "json plain": json.dumps(b.decode("latin-1"))[1:-1].encode(
                "latin-1")}


def leaks(T, vals):
    """[(file, value name, form)] of every value of <vals> ({name: value})
    found in any form in what airlockd wrote under <T>: its log, output,
    audit and state directory."""
    files = [os.path.join(T, f) for f in ("airlockd.log", "airlockd.out",
                                          "audit.jsonl")]
    for root, _, names in os.walk(os.path.join(T, "state")):
        files += [os.path.join(root, f) for f in names]
    out = []
    for p in files:
        try:
            data = open(p, "rb").read()
        except OSError:
            continue
        for k, v in vals.items():
            out += [(os.path.relpath(p, T), k, fk)
                    for fk, fv in value_forms(v).items() if fv in data]
    return out


def mkleaf(pki, out, names):
    """<out>.crt/<out>.key: a leaf for <names>, signed by <pki>/ca.crt."""
    ext = out + ".ext"
    with open(ext, "w") as f:
        f.write("basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectAltName=%s\n" % ",".join("DNS:" + n for n in names))
    run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
    run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
        "ec_paramgen_curve:P-256", "-out", out + ".key")
    run("openssl", "req", "-new", "-key", out + ".key", "-subj",
        "/CN=" + names[0], "-out", out + ".csr")
    run("openssl", "x509", "-req", "-in", out + ".csr", "-CA",
        os.path.join(pki, "ca.crt"), "-CAkey", os.path.join(pki, "ca.key"),
        "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext,
        "-out", out + ".crt")
    os.chmod(out + ".key", 0o600)


def _main(argv):
    if len(argv) >= 4 and argv[1] == "mkleaf":
        mkleaf(argv[2], argv[3], argv[4:])
        return 0
    if len(argv) == 3 and argv[1] == "sigv4-selftest":
        n, bad = sigv4_selftest(argv[2])
        print("%d cases, %d mismatches %s" % (n, len(bad), " ".join(bad)))
        return 1 if bad or n == 0 else 0
    sys.stderr.write("usage: seclib mkleaf PKI OUT NAME... | "
                     "sigv4-selftest DIR\n")
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
